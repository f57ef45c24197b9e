"""Group bot written with python-telegram-bot 22.8, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

- ChatMemberHandler(MY_CHAT_MEMBER): when the bot is added to a group (left → member), it says
  "hello <chat title>" there.
- CommandHandler("count"): in a group the user writes /count@<botname>; PTB's CommandHandler
  accepts that only when it names this bot (it compares with getMe's username). The bot
  answers "count: N" with N from getChatMemberCount, replying to the command, with an
  "again" button; a member's press (CallbackQueryHandler) is answered "counted again" and the
  count is edited in place.
- MessageHandler(StatusUpdate.NEW_CHAT_MEMBERS): a member who joins is welcomed by a reply to
  the service message, "Welcome, <first name>!" (the bot's own join is not welcomed).
"""

from telegram import ChatMember, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import CallbackQueryHandler, ChatMemberHandler, CommandHandler, ContextTypes, MessageHandler, filters

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


async def welcome(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    for member in update.message.new_chat_members:
        if member.id != context.bot.id:
            await update.message.reply_text(f"Welcome, {member.first_name}!")


if __name__ == "__main__":
    def add_handlers(app) -> None:
        app.add_handler(ChatMemberHandler(my_membership, ChatMemberHandler.MY_CHAT_MEMBER))
        app.add_handler(CommandHandler("count", count))
        app.add_handler(CallbackQueryHandler(again, pattern="^again$"))
        app.add_handler(MessageHandler(filters.StatusUpdate.NEW_CHAT_MEMBERS, welcome))

    run_ptb(add_handlers, "/ptb-group", allowed_updates=["message", "my_chat_member", "callback_query"])
