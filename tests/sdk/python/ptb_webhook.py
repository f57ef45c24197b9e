"""Echo bot written with python-telegram-bot 22.8 in webhook mode against a bot-gateway.

compat_bot.run_ptb serves the webhook with PTB's documented "custom webhook" pattern: its own
small web server checks the gateway's X-Compat-Bot-Api-Secret-Token header (SDK-COMPAT §7) and
feeds the Application's update_queue; the bot calls set_webhook itself.

Environment: BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET (see compat_bot).

Replies to a text message with "echo: <text>" and to /start with GREETING.
"""

from telegram import Update
from telegram.ext import CommandHandler, ContextTypes, MessageHandler, filters

from compat_bot import run_ptb

GREETING = "Hello! I am the ptb webhook bot. Send me any text and I will echo it."
PATH = "/ptb-webhook"


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=GREETING)


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=f"echo: {update.effective_message.text}")


def add_handlers(app) -> None:
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))


if __name__ == "__main__":
    run_ptb(add_handlers, PATH)
