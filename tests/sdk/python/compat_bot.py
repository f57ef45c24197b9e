"""What every Python SDK bot of tests/sdk shares: logging, the gateway's base URLs, and the two
ways of receiving updates (long polling, or a webhook that checks the gateway's secret header).

A bot runs in webhook mode when WEBHOOK_PORT is set, else it long-polls.

Environment:
  BOT_TOKEN       the bot token
  BOT_API_BASE    the gateway's Bot API listener, e.g. http://127.0.0.1:8081
  WEBHOOK_PORT    (webhook mode) port to listen on (127.0.0.1); the URL is plain http (loopback)
  WEBHOOK_SECRET  (webhook mode) the secret_token
  LOG_LEVEL       default INFO
"""

import asyncio
import hmac
import logging
import os
import signal

SECRET_HEADER = "X-Compat-Bot-Api-Secret-Token"


def setup_logging():
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx (PTB) logs every request URL at INFO, and the URL contains the bot token.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def api_base():
    return os.environ["BOT_API_BASE"].rstrip("/")


def webhook_settings(path):
    """(port, secret, url) in webhook mode, None when the bot should long-poll."""
    port = os.environ.get("WEBHOOK_PORT")
    if not port:
        return None
    return int(port), os.environ["WEBHOOK_SECRET"], f"http://127.0.0.1:{int(port)}{path}"


# --- aiogram ---------------------------------------------------------------------------------


def aiogram_bot():
    from aiogram import Bot
    from aiogram.client.session.aiohttp import AiohttpSession
    from aiogram.client.telegram import TelegramAPIServer

    # from_base gives "{base}/bot{token}/{method}" and "{base}/file/bot{token}/{path}".
    session = AiohttpSession(api=TelegramAPIServer.from_base(api_base()))
    return Bot(os.environ["BOT_TOKEN"], session=session)


def aiogram_request_handler():
    """aiogram's SimpleRequestHandler reads the hard-wired X-Telegram-Bot-Api-Secret-Token header;
    this subclass overrides handle() to read X-Compat-Bot-Api-Secret-Token and keeps the rest of
    the method (SDK-COMPAT §7)."""
    from aiohttp import web
    from aiogram.webhook.aiohttp_server import SimpleRequestHandler

    class CompatRequestHandler(SimpleRequestHandler):
        async def handle(self, request: web.Request) -> web.Response:
            bot = await self.resolve_bot(request)
            if not self.verify_secret(request.headers.get(SECRET_HEADER, ""), bot):
                return web.Response(body="Unauthorized", status=401)
            if self.handle_in_background:
                return await self._handle_request_background(bot=bot, request=request)
            return await self._handle_request(bot=bot, request=request)

    return CompatRequestHandler


def run_aiogram(dp, path):
    """Long-polls, or serves the webhook at `path`. In webhook mode handle_in_background=False,
    so a method call a handler returns travels back as a multipart webhook reply; in polling
    mode aiogram makes that call itself, so one handler serves both modes."""
    from aiohttp import web
    from aiogram.webhook.aiohttp_server import setup_application

    setup_logging()
    bot = aiogram_bot()
    hook = webhook_settings(path)
    # Only the update types the handlers use (e.g. callback_query for a menu).
    allowed = dp.resolve_used_update_types()
    if hook is None:

        async def poll():
            try:
                await dp.start_polling(bot, allowed_updates=allowed)
            finally:
                await bot.session.close()

        asyncio.run(poll())
        return
    port, secret, url = hook

    async def on_startup(bot) -> None:
        # Plain http is accepted for loopback addresses.
        await bot.set_webhook(url, secret_token=secret, allowed_updates=allowed)
        logging.info("aiogram: listening on %s", url)

    dp.startup.register(on_startup)
    app = web.Application()
    handler = aiogram_request_handler()
    handler(dispatcher=dp, bot=bot, secret_token=secret, handle_in_background=False).register(app, path=path)
    setup_application(app, dp, bot=bot)
    # run_app stops cleanly on SIGINT and SIGTERM.
    web.run_app(app, host="127.0.0.1", port=port, print=None)


# --- python-telegram-bot -----------------------------------------------------------------------


def ptb_builder():
    """An ApplicationBuilder pointed at the gateway."""
    from telegram.ext import Application

    base = api_base()
    # PTB appends the token verbatim: "<base>/bot" + token + "/" + method (SDK-COMPAT §1).
    return Application.builder().token(os.environ["BOT_TOKEN"]).base_url(f"{base}/bot").base_file_url(f"{base}/file/bot")


def run_ptb(add_handlers, path, allowed_updates=None):
    """Builds the Application, lets add_handlers(app) register its handlers, then long-polls or
    serves the webhook at `path`.

    PTB's built-in webhook server (tornado) checks the hard-wired X-Telegram-Bot-Api-Secret-Token
    header, so webhook mode uses PTB's documented "custom webhook" pattern (SDK-COMPAT §7, option
    2): a small aiohttp server checks X-Compat-Bot-Api-Secret-Token and puts each update on the
    Application's update_queue; the bot calls set_webhook itself."""
    setup_logging()
    hook = webhook_settings(path)
    if hook is None:
        app = ptb_builder().build()
        add_handlers(app)
        app.run_polling(allowed_updates=allowed_updates)
        return
    asyncio.run(_ptb_webhook(add_handlers, hook, allowed_updates))


async def _ptb_webhook(add_handlers, hook, allowed_updates):
    from aiohttp import web
    from telegram import Update

    port, secret, url = hook
    path = url[url.index("/", len("http://")) :]
    # updater(None): no polling Updater; updates come from our own web server.
    app = ptb_builder().updater(None).build()
    add_handlers(app)

    async def webhook(request: web.Request) -> web.Response:
        if not hmac.compare_digest(request.headers.get(SECRET_HEADER, ""), secret):
            return web.Response(status=403, text="wrong or missing secret token")
        # 2xx only once the update is queued; the gateway retries anything else.
        await app.update_queue.put(Update.de_json(await request.json(), app.bot))
        return web.Response()

    server = web.Application()
    server.router.add_post(path, webhook)
    runner = web.AppRunner(server)
    await runner.setup()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async with app:
        await app.start()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        # Plain http is accepted for loopback; max_connections 40 is what PTB's own server asks.
        await app.bot.set_webhook(url=url, secret_token=secret, max_connections=40, allowed_updates=allowed_updates)
        logging.info("ptb: listening on %s", url)
        await stop.wait()
        await runner.cleanup()
        await app.stop()
