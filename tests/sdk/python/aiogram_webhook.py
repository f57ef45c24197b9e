"""Echo bot written with aiogram 3.29.1 in webhook mode against a bot-gateway.

compat_bot.run_aiogram serves the webhook with a request handler that checks the gateway's
X-Compat-Bot-Api-Secret-Token header (SDK-COMPAT §7) and handle_in_background=False, so a
handler may return a method call, which aiogram sends back as a multipart webhook reply; the
echo uses that path, /start the ordinary HTTP call.

Environment: BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET (see compat_bot).
"""

from aiogram import Dispatcher, F
from aiogram.filters import CommandStart
from aiogram.types import Message

from compat_bot import run_aiogram

GREETING = "Hello! I am the aiogram webhook bot. Send me any text and I will echo it."
PATH = "/aiogram-webhook"

dp = Dispatcher()


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(GREETING)


@dp.message(F.text)
async def echo(message: Message):
    # Returned, not awaited: sent back in the webhook answer (multipart webhook reply).
    return message.answer(f"echo: {message.text}")


if __name__ == "__main__":
    run_aiogram(dp, PATH)
