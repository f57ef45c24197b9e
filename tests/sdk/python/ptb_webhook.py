"""Echo bot written with python-telegram-bot 22.8 in webhook mode against a bot-gateway.

PTB's built-in webhook server (tornado) checks the hard-wired X-Telegram-Bot-Api-Secret-Token
header, so this bot uses PTB's documented "custom webhook" pattern (SDK-COMPAT §7, option 2): its
own small web server (aiohttp here) checks X-Compat-Bot-Api-Secret-Token and puts each update on
the Application's update_queue; the bot calls set_webhook itself.

Environment:
  BOT_TOKEN       the bot token
  BOT_API_BASE    the gateway's Bot API listener, e.g. http://127.0.0.1:8081
  WEBHOOK_PORT    port to listen on (127.0.0.1); the webhook URL is plain http (loopback)
  WEBHOOK_SECRET  the secret_token

Replies to a text message with "echo: <text>" and to /start with GREETING.
"""

import asyncio
import hmac
import logging
import os
import signal

from aiohttp import web
from telegram import Update
from telegram.ext import Application, CommandHandler, ContextTypes, MessageHandler, filters

GREETING = "Hello! I am the ptb webhook bot. Send me any text and I will echo it."
SECRET_HEADER = "X-Compat-Bot-Api-Secret-Token"
PATH = "/ptb-webhook"


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=GREETING)


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_message(chat_id=update.effective_chat.id, text=f"echo: {update.effective_message.text}")


async def main() -> None:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request URL at INFO, and the URL contains the bot token.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    token = os.environ["BOT_TOKEN"]
    base = os.environ["BOT_API_BASE"].rstrip("/")
    port = int(os.environ["WEBHOOK_PORT"])
    secret = os.environ["WEBHOOK_SECRET"]

    # updater(None): no polling Updater; updates come from our own web server.
    app = (
        Application.builder()
        .token(token)
        .base_url(f"{base}/bot")
        .base_file_url(f"{base}/file/bot")
        .updater(None)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))

    async def webhook(request: web.Request) -> web.Response:
        if not hmac.compare_digest(request.headers.get(SECRET_HEADER, ""), secret):
            return web.Response(status=403, text="wrong or missing secret token")
        # 2xx only once the update is queued; the gateway retries anything else.
        await app.update_queue.put(Update.de_json(await request.json(), app.bot))
        return web.Response()

    server = web.Application()
    server.router.add_post(PATH, webhook)
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
        await app.bot.set_webhook(url=f"http://127.0.0.1:{port}{PATH}", secret_token=secret, max_connections=40)
        logging.info("ptb_webhook: listening on 127.0.0.1:%d%s", port, PATH)
        await stop.wait()
        await runner.cleanup()
        await app.stop()


if __name__ == "__main__":
    asyncio.run(main())
