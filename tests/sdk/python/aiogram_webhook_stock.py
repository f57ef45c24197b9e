"""Echo bot written with aiogram 3.29.1 and its stock webhook handler, as README's snippet has it.

`SimpleRequestHandler` checks the standard X-Telegram-Bot-Api-Secret-Token header; the gateway
sends the secret under that name too because its config names it in
`webhook_secret_token_headers`. Nothing here knows about the gateway but the base URL: no hook,
no custom request handler (run_webhook_tests.py, "aiogram-stock").

Environment: BOT_TOKEN, BOT_API_BASE, WEBHOOK_PORT, WEBHOOK_SECRET.
"""

import logging
import os

from aiohttp import web
from aiogram import Bot, Dispatcher, F
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.filters import CommandStart
from aiogram.types import Message
from aiogram.webhook.aiohttp_server import SimpleRequestHandler, setup_application

TOKEN, BASE = os.environ["BOT_TOKEN"], os.environ["BOT_API_BASE"].rstrip("/")
PORT, SECRET = int(os.environ["WEBHOOK_PORT"]), os.environ["WEBHOOK_SECRET"]
GREETING = "Hello! I am the aiogram stock webhook bot. Send me any text and I will echo it."
PATH = "/aiogram-stock-webhook"

dp = Dispatcher()


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(GREETING)


@dp.message(F.text)
async def echo(message: Message) -> None:
    await message.answer(f"echo: {message.text}")


async def on_startup(bot: Bot) -> None:
    await bot.set_webhook(f"http://127.0.0.1:{PORT}{PATH}", secret_token=SECRET)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    bot = Bot(TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(BASE)))
    dp.startup.register(on_startup)
    app = web.Application()
    SimpleRequestHandler(dispatcher=dp, bot=bot, secret_token=SECRET).register(app, path=PATH)
    setup_application(app, dp, bot=bot)
    web.run_app(app, host="127.0.0.1", port=PORT, print=None)
