"""A media and inline bot written as aiogram 3.29 bots commonly are: an album built with
MediaGroupBuilder, an animation whose caption it then edits, inline results with a callback
button and a cached photo plus a results button, a photo into a group that adds it, and commands
set with a leading slash. Polling, or aiogram's stock SimpleRequestHandler webhook.

The dialog is the one of ptb_gallery.py (tests/sdk/run_gallery_tests.py drives it).

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
"""

import asyncio
import base64
import logging
import os

from aiohttp import web
from aiogram import Bot, Dispatcher, F, Router
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.enums import UpdateType
from aiogram.filters import Command, CommandObject, CommandStart
from aiogram.types import (
    BotCommand,
    BufferedInputFile,
    CallbackQuery,
    ChatMemberUpdated,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InlineQuery,
    InlineQueryResultArticle,
    InlineQueryResultCachedPhoto,
    InlineQueryResultsButton,
    InputTextMessageContent,
    Message,
)
from aiogram.utils.media_group import MediaGroupBuilder
from aiogram.webhook.aiohttp_server import SimpleRequestHandler, setup_application

router = Router()
ALL_TYPES = [t.value for t in UpdateType]
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
# The file_id of the album's first photo, offered again as a cached inline result.
remembered = {}


@router.message(CommandStart())
async def start(message: Message, command: CommandObject) -> None:
    await message.answer(f"Hi! You came from {command.args or 'nowhere'}.")


@router.message(Command("album"))
async def album(message: Message) -> None:
    builder = MediaGroupBuilder()
    builder.add_photo(media=BufferedInputFile(PNG, "first.png"), caption="first")
    builder.add_photo(media=BufferedInputFile(PNG + b"\0", "second.png"), caption="second")
    sent = await message.answer_media_group(builder.build())
    remembered["photo"] = sent[0].photo[-1].file_id
    groups = {m.media_group_id for m in sent}
    one = len(groups) == 1 and None not in groups
    await message.answer(f"Album sent: {len(sent)} messages in {'one group' if one else 'several groups'}")


@router.message(Command("gif"))
async def gif(message: Message) -> None:
    sent = await message.answer_animation(BufferedInputFile(GIF, "hello.gif"), caption="a gif")
    await sent.edit_caption(caption="a gif, edited")
    # A button added to the animation afterwards, and the user's command tidied away.
    await sent.edit_reply_markup(reply_markup=InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text="Another", callback_data="gif:again")]]))
    await message.delete()


@router.message(Command("url"))
async def by_url(message: Message, command: CommandObject) -> None:
    # A photo by URL, as stock bots send them: the gateway fetches it (media_from_urls).
    await message.answer_photo(command.args, caption="by URL")


@router.inline_query()
async def inline(query: InlineQuery) -> None:
    results = [
        InlineQueryResultArticle(
            id="art",
            title="Press me",
            input_message_content=InputTextMessageContent(message_text="Inline with a button"),
            reply_markup=InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text="Press", callback_data="inline-press")]]),
        )
    ]
    if "photo" in remembered:
        results.append(InlineQueryResultCachedPhoto(id="pic", photo_file_id=remembered["photo"], caption="cached photo"))
    button = InlineQueryResultsButton(text="Open the bot", start_parameter="from-inline")
    await query.answer(results, cache_time=0, button=button)


@router.callback_query(F.data == "inline-press")
async def pressed(callback: CallbackQuery) -> None:
    await callback.answer("Pressed!")


@router.message(F.photo, F.via_bot)
async def photo_via_me(message: Message) -> None:
    await message.answer("Got a photo via me")


@router.my_chat_member()
async def my_membership(change: ChatMemberUpdated, bot: Bot) -> None:
    if change.chat.type in ("group", "supergroup") and change.new_chat_member.status == "member":
        await bot.send_photo(change.chat.id, BufferedInputFile(PNG, "hello.png"), caption="Hello group")


async def set_commands(bot: Bot) -> None:
    await bot.set_my_commands([BotCommand(command="/album", description="Send an album"),
                               BotCommand(command="/gif", description="Send an animation")])


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["BOT_API_BASE"].rstrip("/")))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)
    dp = Dispatcher()
    dp.include_router(router)
    dp.startup.register(set_commands)
    port = os.environ.get("WEBHOOK_PORT")
    if not port:
        asyncio.run(dp.start_polling(bot, allowed_updates=ALL_TYPES))
        return
    secret = os.environ["WEBHOOK_SECRET"]
    url = f"http://127.0.0.1:{port}/aiogram-gallery"

    async def on_startup(bot: Bot) -> None:
        await bot.set_webhook(url, secret_token=secret, allowed_updates=ALL_TYPES)

    dp.startup.register(on_startup)
    app = web.Application()
    SimpleRequestHandler(dispatcher=dp, bot=bot, secret_token=secret).register(app, path="/aiogram-gallery")
    setup_application(app, dp, bot=bot)
    web.run_app(app, host="127.0.0.1", port=int(port), print=None)


if __name__ == "__main__":
    main()
