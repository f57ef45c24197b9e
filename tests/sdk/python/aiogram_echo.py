"""Echo bot written with aiogram 3.29.1, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

Replies to a text message with "echo: <text>" and to /start with GREETING.
"""

from aiogram import Dispatcher, F
from aiogram.filters import CommandStart
from aiogram.types import Message

from compat_bot import run_aiogram

GREETING = "Hello! I am the aiogram echo bot. Send me any text and I will echo it."

dp = Dispatcher()


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(GREETING)


@dp.message(F.text)
async def echo(message: Message) -> None:
    await message.answer(f"echo: {message.text}")


if __name__ == "__main__":
    run_aiogram(dp, "/aiogram-echo")
