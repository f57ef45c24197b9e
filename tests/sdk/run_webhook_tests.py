#!/usr/bin/env python3
"""Runs the real-SDK echo bots in webhook mode against a live bot-gateway, one world per SDK.

For each SDK (python-telegram-bot, aiogram, telegraf) this starts, in a temporary directory, the
same world as run_sdk_tests.py (platform-server, a bot, bot-gateway, a user registered with
e2e-chat) and the SDK's webhook echo bot, which listens on 127.0.0.1 and registers a plain-http
loopback URL with a secret_token. The test then checks, in order:

1. getWebhookInfo reports the bot's URL, max_connections 1 and no custom certificate, and
   /healthz reports mode "webhook";
2. the bot checks X-Compat-Bot-Api-Secret-Token: a POST without it, or with only the standard
   X-Telegram-Bot-Api-Secret-Token header, is refused with a 4xx;
3. the user sends "hello <sdk>" and "/start" and receives "echo: hello <sdk>" and the greeting
   (aiogram's echo travels back in a multipart webhook reply, telegraf's sendChatAction in a
   JSON webhook reply; the chat action reaches the user as an event, not a reply);
4. the queue drains: pending_update_count reaches 0.

The "-stock" cases (aiogram-stock, telegraf-stock) run each SDK's stock webhook handler, which
checks the standard X-Telegram-Bot-Api-Secret-Token, with no hook in the bot: the gateway's
config names that header in webhook_secret_token_headers, so step 2 is the other way round
(a POST with only the spec's header is refused) and the rest is the same. (PTB's stock handler
needs python-telegram-bot[webhooks], which the pinned requirements do not install.)

It reuses the process and world helpers of run_sdk_tests.py and runs the SDKs in parallel.
Standard library only.

Usage: run_webhook_tests.py [-v] [--keep] [SDK ...]
       (SDK: ptb, aiogram, telegraf, aiogram-stock, telegraf-stock; default all)
Prints PASS/FAIL per SDK, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import json
import secrets
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# Importing the sibling runner must not leave a __pycache__ in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_sdk_tests import StepFailed, log  # noqa: E402

SDK_DIR = base.SDK_DIR

SDKS = {
    "ptb": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_webhook.py")],
        "username": "ptb_webhook_bot",
        "name": "PTB Webhook",
        "path": "/ptb-webhook",
        "greeting": "Hello! I am the ptb webhook bot. Send me any text and I will echo it.",
    },
    "aiogram": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_webhook.py")],
        "username": "aiogram_webhook_bot",
        "name": "aiogram Webhook",
        "path": "/aiogram-webhook",
        "greeting": "Hello! I am the aiogram webhook bot. Send me any text and I will echo it.",
    },
    "telegraf": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_webhook.js")],
        "username": "telegraf_webhook_bot",
        "name": "telegraf Webhook",
        "path": "/telegraf-webhook",
        "greeting": "Hello! I am the telegraf webhook bot. Send me any text and I will echo it.",
    },
}

# The stock handlers check the standard header; the gateway sends the secret under it too.
STOCK_CONFIG = {"webhook_secret_token_headers": ["X-Compat-Bot-Api-Secret-Token", "X-Telegram-Bot-Api-Secret-Token"]}
SDKS.update({
    "aiogram-stock": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_webhook_stock.py")],
        "username": "aiogram_stock_bot",
        "name": "aiogram Stock",
        "path": "/aiogram-stock-webhook",
        "greeting": "Hello! I am the aiogram stock webhook bot. Send me any text and I will echo it.",
        "config": STOCK_CONFIG,
        "stock": True,
    },
    "telegraf-stock": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_webhook_stock.js")],
        "username": "telegraf_stock_bot",
        "name": "telegraf Stock",
        "path": "/telegraf-stock-webhook",
        "greeting": "Hello! I am the telegraf stock webhook bot. Send me any text and I will echo it.",
        "config": STOCK_CONFIG,
        "stock": True,
    },
})

WEBHOOK_TIMEOUT = 60.0  # the bot has started and registered its webhook; the queue drained


def api(api_base, token, method, params=None):
    """Calls a Bot API method with a JSON body; returns (HTTP status, parsed body)."""
    req = urllib.request.Request(
        f"{api_base}/bot{token}/{method}",
        data=json.dumps(params or {}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def health(api_base):
    with urllib.request.urlopen(f"{api_base}/healthz", timeout=10) as resp:
        return json.loads(resp.read())


def wait_webhook_info(world, api_base, token, what, done):
    """Polls getWebhookInfo until done(result) holds (bounded); returns the result."""
    deadline = time.monotonic() + WEBHOOK_TIMEOUT
    info = None
    while time.monotonic() < deadline:
        world.check_alive("bot-gateway", "platform-server", "sdk-bot")
        status, body = api(api_base, token, "getWebhookInfo")
        if status != 200 or not body.get("ok"):
            raise StepFailed(f"getWebhookInfo answered {status}: {body}")
        info = body["result"]
        if done(info):
            log(f"getWebhookInfo: {json.dumps(info)}")
            return info
        time.sleep(0.25)
    raise StepFailed(f"{what} within {WEBHOOK_TIMEOUT:.0f} s; last getWebhookInfo: {json.dumps(info)}")


def post_without_compat_secret(url, headers):
    """POSTs a syntactically valid Update to the bot's webhook; returns the HTTP status."""
    update = {"update_id": 1, "message": {"message_id": 1, "date": 1, "chat": {"id": 1, "type": "private"}, "text": "x"}}
    req = urllib.request.Request(
        url, data=json.dumps(update).encode(), headers={"Content-Type": "application/json", **headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_listening(world, port, hook_url):
    """Waits (bounded) until the bot's webhook port accepts connections: aiogram registers its
    URL in an on_startup hook, which aiohttp runs before it starts listening (the gateway retries
    a refused delivery; this test's own POSTs must not race the bot's start-up)."""
    deadline = time.monotonic() + WEBHOOK_TIMEOUT
    while time.monotonic() < deadline:
        world.check_alive("bot-gateway", "platform-server", "sdk-bot")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise StepFailed(f"the bot registered {hook_url} but did not listen on it within {WEBHOOK_TIMEOUT:.0f} s")


def start_webhook_bot(world, spec, bot, api_base):
    """Starts the SDK bot in webhook mode (a free loopback port, a fresh secret) and waits until
    it registered its URL and /healthz reports mode "webhook". Returns (getWebhookInfo result,
    hook URL, secret)."""
    (port,) = base.free_loopback_ports(1)
    secret = secrets.token_urlsafe(24)  # A-Z a-z 0-9 _ - only, as setWebhook requires
    hook_url = f"http://127.0.0.1:{port}{spec['path']}"
    world.spawn(
        "sdk-bot",
        spec["argv"],
        env={"BOT_TOKEN": bot["token"], "BOT_API_BASE": api_base, "WEBHOOK_PORT": str(port), "WEBHOOK_SECRET": secret},
    )
    info = wait_webhook_info(world, api_base, bot["token"], f"the bot did not register {hook_url}", lambda i: i.get("url") == hook_url)
    wait_listening(world, port, hook_url)
    mode = health(api_base)["bots"][0].get("mode")
    if mode != "webhook":
        raise StepFailed(f"/healthz reports mode {mode!r}, expected 'webhook'")
    return info, hook_url, secret


def run_sdk(sdk, bin_dir, keep):
    spec = SDKS[sdk]
    world = base.World(f"webhook-{sdk}", keep)

    def steps():
        bot, api_base, e2e, profile = base.start_bot_world(world, bin_dir, spec, f"alice_wh_{sdk.replace('-', '_')}")
        info, hook_url, secret = start_webhook_bot(world, spec, bot, api_base)
        if info.get("max_connections") != 1 or info.get("has_custom_certificate") is not False:
            raise StepFailed(f"getWebhookInfo should report max_connections 1 and no certificate: {json.dumps(info)}")

        # The header the bot does not check must not be enough (a stock handler checks the
        # standard one, the others the spec's).
        other = "X-Compat-Bot-Api-Secret-Token" if spec.get("stock") else "X-Telegram-Bot-Api-Secret-Token"
        for headers in ({}, {other: secret}):
            status = post_without_compat_secret(hook_url, headers)
            if not 400 <= status < 500:
                raise StepFailed(f"the bot accepted a webhook POST with headers {sorted(headers)} (status {status})")
            log(f"webhook POST without the header it checks ({sorted(headers)}): {status}")

        hello = f"hello {sdk}"
        for i, text in enumerate((hello, "/start"), 1):
            out, _ = world.run(
                f"e2e-chat-send-{i}",
                [e2e, "--profile", profile, "send", f"@{bot['username']}", text],
                watch=("platform-server", "bot-gateway", "sdk-bot"),
            )
            log(f"sent {text!r}: {out.strip()[:300]}")
        base.collect_replies(world, e2e, profile, bot["username"], [f"echo: {hello}", spec["greeting"]])
        info = wait_webhook_info(
            world, api_base, bot["token"], "the queue did not drain", lambda i: i.get("pending_update_count") == 0
        )
        if "last_error_message" in info:
            log(f"note: last webhook error {info['last_error_message']!r}")

    return base.run_in_world(f"webhook {sdk}", world, steps)


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="webhook ", jobs=3, known=list(SDKS))


if __name__ == "__main__":
    sys.exit(main())
