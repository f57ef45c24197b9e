#!/usr/bin/env python3
"""Runs stock-style media and inline bots against a live bot-gateway, polling and webhook.

Each SDK has one bot written the way its users write them (python/ptb_gallery.py,
python/aiogram_gallery.py, node/telegraf_gallery.js): commands set with a leading slash, an
album (sendMediaGroup), an animation with a caption edit and a markup edit, the user's command
deleted by the bot, a photo by URL (fetched by the gateway from a local web server), an inline answer with a callback button,
a cached photo and a results button, and a photo into a group that adds it. In webhook mode each
uses its SDK's stock webhook server.

A user drives each bot with e2e-chat (commands, send, listen, inline, choose, press, group) and
the runner asserts what the user sees. SDKs run in parallel (each world has its own bot); the
two modes of one SDK one after the other. Standard library only; reuses the helpers of the
other runners.

Usage: run_gallery_tests.py [-v] [--keep] [SDK ...]   (SDK: ptb, aiogram, telegraf)
Prints PASS/FAIL per SDK and mode, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import http.server
import json
import sys
import threading
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_dialog_tests as dialog  # noqa: E402  (User, check, run_mode)
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import from_bot  # noqa: E402

SDK_DIR = base.SDK_DIR
STOCK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


# The picture a local web server serves for /url: a 1×1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da6364f8cf"
    "500f00038601805a347d6b0000000049454e44ae426082"
)


class PictureServer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = PNG if self.path == "/pic.png" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def picture_url():
    """The URL of the picture, served on loopback for the whole run (a daemon thread)."""
    if not hasattr(picture_url, "server"):
        picture_url.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PictureServer)
        threading.Thread(target=picture_url.server.serve_forever, name="picture-server", daemon=True).start()
    return f"http://127.0.0.1:{picture_url.server.server_address[1]}/pic.png"


def said(user, text):
    return lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == text


def media_of(m, kind):
    return (m.get("media") or {}).get("kind") == kind


def commands(user):
    """`e2e-chat commands @bot`: the bot line, then one JSON line per command."""
    out, _ = user.world.run(f"e2e-chat-commands-{user.world.seq}", [user.e2e, "--profile", user.profile, "commands", f"@{user.bot}"],
                            watch=user.WATCH)
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def gallery(user):
    bot = user.bot
    # Commands set at start-up with a leading slash are stored without it. The bot sets them
    # before it polls; a /start answered proves it is up.
    user.send("/start")
    user.expect(("the greeting", said(user, "Hi! You came from nowhere.")))
    names = [line.get("command") for line in commands(user) if "command" in line]
    check(names == ["album", "gif"], "the bot's commands should be album and gif, without the slash", names)

    # An album: two photos with their own captions and one media_group_id, which the SDK read.
    user.send("/album")
    found = user.expect(
        ("photo first", lambda m: "event" not in m and from_bot(m, bot) and media_of(m, "photo") and m.get("caption") == "first"),
        ("photo second", lambda m: "event" not in m and from_bot(m, bot) and media_of(m, "photo") and m.get("caption") == "second"),
        ("the album summary", said(user, "Album sent: 2 messages in one group")),
    )
    first, second = found["photo first"], found["photo second"]
    check(first.get("media_group_id") and first.get("media_group_id") == second.get("media_group_id"),
          "the two photos should share one media_group_id", [first, second])

    # An animation, then its caption edited, a button added to it (a markup edit on a file
    # message), and the user's /gif deleted by the bot (tidying a private chat).
    command = user.send("/gif")
    another = [[dialog.button("Another", "gif:again")]]
    found = user.expect(
        ("the animation", lambda m: "event" not in m and from_bot(m, bot) and media_of(m, "animation") and m.get("caption") == "a gif"),
        ("the caption edit", lambda m: m.get("event") == "edited" and m.get("text") == "a gif, edited" and not m.get("keyboard")),
        ("the markup edit", lambda m: m.get("event") == "edited" and m.get("keyboard") == another),
        ("the /gif deleted", lambda m: m.get("event") == "deleted" and m.get("message_id") == command.get("message_id")),
    )
    check(found["the caption edit"].get("message_id") == found["the animation"].get("message_id"),
          "the caption edit should change the animation's message", found)
    check(found["the markup edit"].get("message_id") == found["the animation"].get("message_id"),
          "the markup edit should change the animation's message", found)

    # A photo by URL (the gateway's media_from_urls, loopback allowed for the test): the
    # gateway fetches it, and the user gets exactly the picture the server served.
    user.send(f"/url {picture_url()}")
    found = user.expect(("the photo by URL", lambda m: "event" not in m and from_bot(m, bot) and media_of(m, "photo")
                         and m.get("caption") == "by URL"))
    got = user.download(found["the photo by URL"]["message_id"], user.world.dir / "by-url.png")
    check(got == PNG, "the photo by URL should be the served picture", len(got))

    # Inline: an article with a button, the album's photo as a cached result, and the button
    # above the results.
    results = user.inline("pics")
    by_id = {r.get("id"): r for r in results.get("results") or []}
    check(sorted(by_id) == ["art", "pic"], "the bot answers with the results art and pic", results)
    check(results.get("button", {}).get("text") == "Open the bot", "the results should carry the button 'Open the bot'", results)
    chosen = user.choose(results["session_id"], "art")
    answer = user.press(chosen["message_id"], "inline-press")
    check(answer.get("event") == "callback_answer" and answer.get("text") == "Pressed!", "the press should be answered 'Pressed!'", answer)
    # The cached photo, chosen from a new query (a session ends with its choice).
    results = user.inline("again")
    user.choose(results["session_id"], "pic")
    user.expect(("the bot's thanks for the photo", said(user, "Got a photo via me")))

    # The results button opens the bot's dialog with /start from-inline.
    started = user.cli("start", f"@{bot}", "from-inline")
    check(started.get("text") == "/start from-inline", "start should send /start from-inline", started)
    user.expect(("the greeting from inline", said(user, "Hi! You came from from-inline.")))

    # Added to a group, the bot sends a photo into it.
    title = f"Gallery of {user.username}"
    user.cli("group", "create", title)
    user.cli("group", "add", title, f"@{bot}")
    user.expect(("the photo in the group", lambda m: m.get("event") == "group_message" and from_bot(m, bot) and media_of(m, "photo")
                 and m.get("caption") == "Hello group"))


def spec(argv, username, name, path):
    return {
        "argv": argv,
        "username": username,
        "name": name,
        "path": path,
        "capabilities": "dm,groups",
        "config": {
            "webhook_secret_token_headers": ["X-Compat-Bot-Api-Secret-Token", STOCK_SECRET_HEADER],
            "media_from_urls": {"enabled": True, "allow_hosts": ["127.0.0.1"]},
        },
        "scenario": gallery,
    }


SDKS = {
    "ptb": spec([str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_gallery.py")], "ptb_gallery_bot", "PTB Gallery", "/ptb-gallery"),
    "aiogram": spec([str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_gallery.py")], "aiogram_gallery_bot", "aiogram Gallery",
                    "/aiogram-gallery"),
    "telegraf": spec(["node", str(SDK_DIR / "node" / "telegraf_gallery.js")], "telegraf_gallery_bot", "telegraf Gallery",
                     "/telegraf-gallery"),
}


def run_sdk(sdk, bin_dir, keep):
    return [dialog.run_mode(sdk, mode, bin_dir, keep, sdks=SDKS, kind="gallery") for mode in dialog.MODES]


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="gallery ", jobs=len(SDKS))


if __name__ == "__main__":
    sys.exit(main())
