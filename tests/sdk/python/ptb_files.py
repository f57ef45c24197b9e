"""A file bot written with python-telegram-bot 22.8: for a received document it downloads the
file with PTB's own helper (getFile, then File.download_to_memory from base_file_url), replies
with its size and SHA-256, and sends the same document back by file_id (no re-upload).
Polling, or webhook mode when WEBHOOK_PORT is set.

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET (see
compat_bot).
"""

import hashlib
import io

from telegram import Update
from telegram.ext import ContextTypes, MessageHandler, filters

from compat_bot import run_ptb

PATH = "/ptb-files"


async def document(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    doc = update.message.document
    buf = io.BytesIO()
    await (await context.bot.get_file(doc.file_id)).download_to_memory(buf)
    data = buf.getvalue()
    if len(data) != doc.file_size:
        await update.message.reply_text(f"size mismatch: file_size {doc.file_size}, downloaded {len(data)}")
        return
    await update.message.reply_text(f"ptb got {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    await update.message.reply_document(document=doc.file_id, caption="ptb: your file back")


def add_handlers(app) -> None:
    app.add_handler(MessageHandler(filters.Document.ALL, document))


if __name__ == "__main__":
    run_ptb(add_handlers, PATH, allowed_updates=["message"])
