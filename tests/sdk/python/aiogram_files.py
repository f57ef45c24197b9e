"""A file bot written with aiogram 3.29.1: /photo uploads photo.png (from the bot's working
directory, where the runner writes it) twice, once as an FSInputFile and once read into a
BufferedInputFile; for a received document it downloads the file with bot.download (getFile,
then the gateway's file URL) and replies with its size and SHA-256. Polling, or webhook mode
when WEBHOOK_PORT is set (the photos are uploaded by awaited calls, not as webhook replies).

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET (see
compat_bot).
"""

import hashlib
from pathlib import Path

from aiogram import Bot, Dispatcher, F
from aiogram.filters import Command
from aiogram.types import BufferedInputFile, FSInputFile, Message

from compat_bot import run_aiogram

PATH = "/aiogram-files"
PHOTO = Path("photo.png")

dp = Dispatcher()


@dp.message(Command("photo"))
async def photo(message: Message) -> None:
    await message.answer_photo(FSInputFile(PHOTO), caption="aiogram FSInputFile")
    await message.answer_photo(BufferedInputFile(PHOTO.read_bytes(), filename="buffered.png"), caption="aiogram BufferedInputFile")


@dp.message(F.document)
async def document(message: Message, bot: Bot) -> None:
    data = (await bot.download(message.document)).read()
    await message.answer(f"aiogram got {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    run_aiogram(dp, PATH)
