"""Echo bot written with python-telegram-bot 22.8, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

Replies to a text message with "echo: <text>" and to /start with GREETING. /start only reaches
the greeting through CommandHandler, which needs a bot_command entity at offset 0, so the
command path of the gateway is exercised too.
"""

from telegram import Update
from telegram.ext import CommandHandler, ContextTypes, MessageHandler, filters

from compat_bot import run_ptb

GREETING = "Hello! I am the ptb echo bot. Send me any text and I will echo it."


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=GREETING)


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    text = update.effective_message.text
    await context.bot.send_message(chat_id=update.effective_chat.id, text=f"echo: {text}")


if __name__ == "__main__":
    def add_handlers(app) -> None:
        app.add_handler(CommandHandler("start", start))
        app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))

    # As bots are commonly written: every update type PTB knows, some newer than the gateway
    # (managed_bot, guest_message); the gateway takes the list and delivers what it produces.
    run_ptb(add_handlers, "/ptb-echo", allowed_updates=Update.ALL_TYPES)
