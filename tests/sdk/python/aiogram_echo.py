"""Echo bot written with aiogram 3.29.1, long polling against a bot-gateway.

Environment:
  BOT_TOKEN     the bot token
  BOT_API_BASE  the gateway's Bot API listener, e.g. http://127.0.0.1:8081

Replies to a text message with "echo: <text>" and to /start with GREETING.
"""

import asyncio
import logging
import os

from aiogram import Bot, Dispatcher, F
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.filters import CommandStart
from aiogram.types import Message

GREETING = "Hello! I am the aiogram echo bot. Send me any text and I will echo it."

dp = Dispatcher()


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(GREETING)


@dp.message(F.text)
async def echo(message: Message) -> None:
    await message.answer(f"echo: {message.text}")


async def main() -> None:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # from_base gives "{base}/bot{token}/{method}" and "{base}/file/bot{token}/{path}".
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["BOT_API_BASE"]))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)
    try:
        await dp.start_polling(bot)
    finally:
        await bot.session.close()


if __name__ == "__main__":
    asyncio.run(main())
