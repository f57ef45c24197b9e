"""Echo bot written with aiogram 3.29.1 in webhook mode against a bot-gateway.

aiogram's SimpleRequestHandler reads the hard-wired X-Telegram-Bot-Api-Secret-Token header;
CompatRequestHandler overrides handle() to read X-Compat-Bot-Api-Secret-Token and keeps the rest
of the method (SDK-COMPAT §7). With handle_in_background=False a handler may return a method
call, which aiogram sends back as a multipart webhook reply; the echo uses that path, /start
the ordinary HTTP call.

Environment:
  BOT_TOKEN       the bot token
  BOT_API_BASE    the gateway's Bot API listener, e.g. http://127.0.0.1:8081
  WEBHOOK_PORT    port to listen on (127.0.0.1); the webhook URL is plain http (loopback)
  WEBHOOK_SECRET  the secret_token
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

GREETING = "Hello! I am the aiogram webhook bot. Send me any text and I will echo it."
SECRET_HEADER = "X-Compat-Bot-Api-Secret-Token"
PATH = "/aiogram-webhook"

dp = Dispatcher()


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(GREETING)


@dp.message(F.text)
async def echo(message: Message):
    # Returned, not awaited: sent back in the webhook answer (multipart webhook reply).
    return message.answer(f"echo: {message.text}")


class CompatRequestHandler(SimpleRequestHandler):
    """SimpleRequestHandler that checks the gateway's secret header."""

    async def handle(self, request: web.Request) -> web.Response:
        bot = await self.resolve_bot(request)
        if not self.verify_secret(request.headers.get(SECRET_HEADER, ""), bot):
            return web.Response(body="Unauthorized", status=401)
        if self.handle_in_background:
            return await self._handle_request_background(bot=bot, request=request)
        return await self._handle_request(bot=bot, request=request)


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    port = int(os.environ["WEBHOOK_PORT"])
    secret = os.environ["WEBHOOK_SECRET"]
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["BOT_API_BASE"]))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)

    async def on_startup(bot: Bot) -> None:
        # Plain http is accepted for loopback addresses.
        await bot.set_webhook(f"http://127.0.0.1:{port}{PATH}", secret_token=secret)
        logging.info("aiogram_webhook: listening on 127.0.0.1:%d%s", port, PATH)

    dp.startup.register(on_startup)
    app = web.Application()
    CompatRequestHandler(dispatcher=dp, bot=bot, secret_token=secret, handle_in_background=False).register(app, path=PATH)
    setup_application(app, dp, bot=bot)
    # run_app stops cleanly on SIGINT and SIGTERM.
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main()
