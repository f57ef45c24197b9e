"""A conversation bot written as python-telegram-bot 22.8 bots commonly are: a ConversationHandler
with a one-time reply keyboard, a ForceReply question and ReplyKeyboardRemove at the end, a
deep-link /start, an edited-message handler and a my_chat_member handler, polling or serving
PTB's own webhook server with every update type (Update.ALL_TYPES). Nothing here knows about
the gateway but its base URL: in webhook mode PTB's built-in server checks the stock
X-Telegram-Bot-Api-Secret-Token header, which the gateway sends when its config names it
(`webhook_secret_token_headers`).

The dialog (tests/sdk/run_conversation_tests.py drives it):
  /start PAYLOAD  -> "Hi! You came from PAYLOAD. Cats or dogs?"  [Cats] [Dogs] (one-time)
  Dogs            -> "Dogs it is. What is your name?"             (ForceReply)
  Ann             -> "Nice to meet you, Ann!"                     (ReplyKeyboardRemove)
  (edit Ann to Anna) -> "You changed your message to Anna"
  /poll            -> a non-anonymous poll "Best pet?" (Cats, Dogs); a vote -> "You voted for Dogs"
  (add the bot to a group) -> in the group: "Thanks for adding me, @USER!"

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
"""

import logging
import os

from telegram import ChatMemberUpdated, ForceReply, ReplyKeyboardMarkup, ReplyKeyboardRemove, Update
from telegram.ext import (
    Application,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    ConversationHandler,
    MessageHandler,
    PollAnswerHandler,
    filters,
)

PET, NAME = range(2)


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> int:
    came_from = " ".join(context.args) or "nowhere"
    keyboard = ReplyKeyboardMarkup(
        [["Cats", "Dogs"]], one_time_keyboard=True, resize_keyboard=True, input_field_placeholder="Cats or dogs?"
    )
    await update.message.reply_text(f"Hi! You came from {came_from}. Cats or dogs?", reply_markup=keyboard)
    return PET


async def pet(update: Update, context: ContextTypes.DEFAULT_TYPE) -> int:
    context.user_data["pet"] = update.message.text
    await update.message.reply_text(
        f"{update.message.text} it is. What is your name?", reply_markup=ForceReply(input_field_placeholder="Your name")
    )
    return NAME


async def name(update: Update, context: ContextTypes.DEFAULT_TYPE) -> int:
    await update.message.reply_text(f"Nice to meet you, {update.message.text}!", reply_markup=ReplyKeyboardRemove())
    return ConversationHandler.END


async def cancel(update: Update, context: ContextTypes.DEFAULT_TYPE) -> int:
    await update.message.reply_text("Bye!", reply_markup=ReplyKeyboardRemove())
    return ConversationHandler.END


async def edited(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.edited_message.reply_text(f"You changed your message to {update.edited_message.text}")


async def poll(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    message = await update.message.reply_poll("Best pet?", ["Cats", "Dogs"], is_anonymous=False)
    context.bot_data[message.poll.id] = ["Cats", "Dogs"]


async def poll_answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    answer = update.poll_answer
    options = context.bot_data.get(answer.poll_id, [])
    chosen = ", ".join(options[i] for i in answer.option_ids) or "nothing"
    await context.bot.send_message(answer.user.id, f"You voted for {chosen}")


async def my_membership(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    change: ChatMemberUpdated = update.my_chat_member
    if change.chat.type in ("group", "supergroup") and change.new_chat_member.status == "member":
        await context.bot.send_message(change.chat.id, f"Thanks for adding me, @{change.from_user.username}!")


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # request URLs hold the token
    base = os.environ["BOT_API_BASE"].rstrip("/")
    app = Application.builder().token(os.environ["BOT_TOKEN"]).base_url(f"{base}/bot").base_file_url(f"{base}/file/bot").build()
    app.add_handler(
        ConversationHandler(
            entry_points=[CommandHandler("start", start)],
            states={
                PET: [MessageHandler(filters.UpdateType.MESSAGE & filters.Regex("^(Cats|Dogs)$"), pet)],
                NAME: [MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, name)],
            },
            fallbacks=[CommandHandler("cancel", cancel)],
        )
    )
    app.add_handler(CommandHandler("poll", poll))
    app.add_handler(PollAnswerHandler(poll_answer))
    app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, edited))
    app.add_handler(ChatMemberHandler(my_membership, ChatMemberHandler.MY_CHAT_MEMBER))
    port = os.environ.get("WEBHOOK_PORT")
    if not port:
        app.run_polling(allowed_updates=Update.ALL_TYPES)
        return
    # PTB's own webhook server; plain http is accepted for loopback.
    app.run_webhook(
        listen="127.0.0.1",
        port=int(port),
        url_path="ptb-conversation",
        secret_token=os.environ["WEBHOOK_SECRET"],
        webhook_url=f"http://127.0.0.1:{port}/ptb-conversation",
        allowed_updates=Update.ALL_TYPES,
    )


if __name__ == "__main__":
    main()
