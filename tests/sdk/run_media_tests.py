#!/usr/bin/env python3
"""Runs the file SDK bots against a live bot-gateway, polling and webhook.

Each SDK has one small real file bot, run twice (long polling, then webhook) in a fresh world
each time, as run_dialog_tests.py does. A user sends files with `e2e-chat send-file`, and the
runner checks what `e2e-chat listen` shows and that `e2e-chat download` gives the exact bytes:

- every bot: a document carrying a plaintext marker → the bot downloads it with its SDK's own
  helper against the gateway's file URL ({base}/file/bot<token>/<file_path>) and replies with
  the right size and SHA-256; the marker is then in neither the platform's data directory nor
  the gateway's state_dir;
- ptb (python/ptb_files.py) and telegraf (node/telegraf_files.js) also send the document back
  by file_id: a document message from the bot whose download is byte for byte the user's file;
- aiogram (python/aiogram_files.py): /photo → two photos (FSInputFile, BufferedInputFile), both
  downloading as the PNG the runner wrote;
- telegraf: /voice → a voice uploaded from a Buffer, downloading as the runner's voice.ogg.

SDKs run in parallel (each world has its own bot); the two modes of one SDK one after the
other. Standard library only; reuses the helpers of run_sdk_tests.py and run_dialog_tests.py.

Usage: run_media_tests.py [-v] [--keep] [SDK ...]   (SDK: ptb, aiogram, telegraf; default all)
Prints PASS/FAIL per SDK and mode, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import hashlib
import os
import struct
import sys
import zlib
from pathlib import Path

# Importing the sibling runners must not leave a __pycache__ in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_dialog_tests as dialog  # noqa: E402  (User, check, run_mode)
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import from_bot  # noqa: E402

SDK_DIR = base.SDK_DIR
MARKER = b"PLAINTEXT-MARKER-sdk-media-7f3c"


def png(width, height, rgb):
    """A valid one-colour RGB PNG (standard library only)."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def write_photo(world):
    (world.dir / "photo.png").write_bytes(png(16, 8, (200, 40, 90)))


def write_voice(world):
    # Opaque to the gateway and the client: what matters is that the same bytes come back.
    (world.dir / "voice.ogg").write_bytes(b"OggS" + os.urandom(3000))


def file_message(user, kind, caption):
    """A (description, predicate) for a file message of `kind` from the bot with `caption`."""

    def matches(m):
        media = m.get("media") or {}
        return "event" not in m and from_bot(m, user.bot) and media.get("kind") == kind and m.get("caption") == caption

    return (f"a {kind} from the bot captioned {caption!r}", matches)


def bot_text(user, text):
    return (f"the bot's text {text!r}", lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == text)


def downloads_as(user, message, want, name):
    """Downloads the file of `message` and checks it is exactly `want`."""
    check(message["media"].get("size") == len(want), f"the {name} should announce size {len(want)}", message)
    data = user.download(message["message_id"], user.world.dir / f"download-{user.world.seq}-{name}")
    check(data == want, f"the downloaded {name} should be the same {len(want)} bytes (got {len(data)})", message)


def scan_for_marker(world):
    """The platform's data directory and the gateway's state_dir must never hold the plaintext."""
    for top in ("platform", "gateway-state"):
        for dirpath, _, names in os.walk(world.dir / top):
            for name in names:
                path = Path(dirpath) / name
                try:
                    found = MARKER in path.read_bytes()
                except OSError:
                    continue  # e.g. a SQLite journal removed meanwhile
                if found:
                    raise base.StepFailed(f"the plaintext marker of the document is stored in {path}")


def document_round_trip(user, sdk, sent_back):
    """send-file a document with a marker → the bot's reply names its size and SHA-256; when
    the bot sends it back by file_id, that file downloads as the same bytes. Neither the
    platform's data nor the gateway's state holds the marker afterwards."""
    data = b"".join([MARKER, b"\n", os.urandom(200_000), b"\n", MARKER, b"\n"])
    path = user.world.dir / f"report-{sdk}.txt"
    path.write_bytes(data)
    user.send_file(path, kind="document", caption="for the bot")
    wants = [bot_text(user, f"{sdk} got {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")]
    if sent_back:
        wants.append(file_message(user, "document", f"{sdk}: your file back"))
    found = user.expect(*wants)
    if sent_back:
        back = found[wants[1][0]]
        check(back["media"].get("file_name") == path.name, f"the file sent back by file_id keeps its name {path.name}", back)
        downloads_as(user, back, data, "document")
    scan_for_marker(user.world)


def ptb_files(user):
    document_round_trip(user, "ptb", sent_back=True)


def aiogram_files(user):
    document_round_trip(user, "aiogram", sent_back=False)
    user.send("/photo")
    wants = [file_message(user, "photo", f"aiogram {how}") for how in ("FSInputFile", "BufferedInputFile")]
    found = user.expect(*wants)
    photo = (user.world.dir / "photo.png").read_bytes()
    for what, _ in wants:
        downloads_as(user, found[what], photo, "photo")


def telegraf_files(user):
    document_round_trip(user, "telegraf", sent_back=True)
    user.send("/voice")
    want = file_message(user, "voice", "telegraf voice")
    voice = user.expect(want)[want[0]]
    downloads_as(user, voice, (user.world.dir / "voice.ogg").read_bytes(), "voice")


SDKS = {
    "ptb": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_files.py")],
        "username": "ptb_files_bot",
        "name": "PTB Files",
        "path": "/ptb-files",
        "scenario": ptb_files,
    },
    "aiogram": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_files.py")],
        "username": "aiogram_files_bot",
        "name": "aiogram Files",
        "path": "/aiogram-files",
        "prepare": write_photo,
        "scenario": aiogram_files,
    },
    "telegraf": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_files.js")],
        "username": "telegraf_files_bot",
        "name": "telegraf Files",
        "path": "/telegraf-files",
        "prepare": write_voice,
        "scenario": telegraf_files,
    },
}


def run_sdk(sdk, bin_dir, keep):
    return [dialog.run_mode(sdk, mode, bin_dir, keep, sdks=SDKS, kind="media") for mode in dialog.MODES]


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="media ", jobs=len(SDKS))


if __name__ == "__main__":
    sys.exit(main())
