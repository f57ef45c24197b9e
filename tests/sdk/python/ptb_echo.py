"""Echo bot written with python-telegram-bot 22.8, long polling against a bot-gateway.

Environment:
  BOT_TOKEN     the bot token
  BOT_API_BASE  the gateway's Bot API listener, e.g. http://127.0.0.1:8081

Replies to a text message with "echo: <text>" and to /start with GREETING. /start only reaches
the greeting through CommandHandler, which needs a bot_command entity at offset 0, so the
command path of the gateway is exercised too.
"""

import logging
import os

from telegram import Update
from telegram.ext import (
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

GREETING = "Hello! I am the ptb echo bot. Send me any text and I will echo it."


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=GREETING)


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    text = update.effective_message.text
    await context.bot.send_message(chat_id=update.effective_chat.id, text=f"echo: {text}")


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request URL at INFO, and the URL contains the bot token.
    logging.getLogger("httpx").setLevel(logging.WARNING)

    token = os.environ["BOT_TOKEN"]
    base = os.environ["BOT_API_BASE"].rstrip("/")
    app = (
        ApplicationBuilder()
        .token(token)
        # PTB appends the token verbatim: "<base>/bot" + token + "/" + method (SDK-COMPAT §1).
        .base_url(f"{base}/bot")
        .base_file_url(f"{base}/file/bot")
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    app.run_polling()


if __name__ == "__main__":
    main()
