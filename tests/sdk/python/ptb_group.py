"""Group bot written with python-telegram-bot 22.8, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

- ChatMemberHandler(MY_CHAT_MEMBER): when the bot is added to a group (left → member), it says
  "hello <chat title>" there.
- CommandHandler("count"): in a group the user writes /count@<botname>; PTB's CommandHandler
  accepts that only when it names this bot (it compares with getMe's username). The bot
  answers "count: N" with N from getChatMemberCount, replying to the command, with an
  "again" button; a member's press (CallbackQueryHandler) is answered "counted again" and the
  count is edited in place.
"""

from telegram import ChatMember, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import CallbackQueryHandler, ChatMemberHandler, CommandHandler, ContextTypes

from compat_bot import run_ptb


async def my_membership(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    change = update.my_chat_member
    if change.old_chat_member.status == ChatMember.LEFT and change.new_chat_member.status == ChatMember.MEMBER:
        await context.bot.send_message(chat_id=change.chat.id, text=f"hello {change.chat.title}")


async def count(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    chat = update.effective_chat
    n = await context.bot.get_chat_member_count(chat.id)
    again = InlineKeyboardMarkup([[InlineKeyboardButton("again", callback_data="again")]])
    await update.effective_message.reply_text(f"count: {n}", reply_markup=again)


async def again(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.callback_query
    n = await context.bot.get_chat_member_count(query.message.chat.id)
    await query.answer("counted again")
    await query.edit_message_text(f"count: {n} (again)")


if __name__ == "__main__":
    def add_handlers(app) -> None:
        app.add_handler(ChatMemberHandler(my_membership, ChatMemberHandler.MY_CHAT_MEMBER))
        app.add_handler(CommandHandler("count", count))
        app.add_handler(CallbackQueryHandler(again, pattern="^again$"))

    run_ptb(add_handlers, "/ptb-group", allowed_updates=["message", "my_chat_member", "callback_query"])
