"""A media and inline bot written as python-telegram-bot 22.8 bots commonly are: an album with
reply_media_group, an animation whose caption it then edits, inline results with a callback
button and a cached photo plus a results button, a photo into a group that adds it, and commands
set with a leading slash (as many bots write them). Polling, or PTB's own webhook server.
Nothing here knows about the gateway but its base URL.

The dialog (tests/sdk/run_gallery_tests.py drives it):
  (start-up)      -> setMyCommands /album, /gif
  /start PAYLOAD  -> "Hi! You came from PAYLOAD."
  /album          -> two photos, captions "first" and "second", one media_group_id;
                     then "Album sent: 2 messages in one group"
  /gif            -> an animation captioned "a gif", then its caption edited to "a gif, edited",
                     its markup edited to one button "Another" (gif:again), and the /gif deleted
  /url URL        -> the photo at URL, captioned "by URL" (sent by URL: the gateway fetches it)
  @bot anything   -> an article "Press me" ("Inline with a button", button Press: inline-press),
                     the album's first photo as a cached photo ("cached photo"), and the button
                     "Open the bot" (start parameter from-inline)
  Press           -> the answer "Pressed!"
  a photo sent via the bot -> "Got a photo via me"
  (added to a group) -> a photo into the group, captioned "Hello group"

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
"""

import base64
import logging
import os

from telegram import (
    BotCommand,
    ChatMemberUpdated,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InlineQueryResultArticle,
    InlineQueryResultCachedPhoto,
    InlineQueryResultsButton,
    InputMediaPhoto,
    InputTextMessageContent,
    Update,
)
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    InlineQueryHandler,
    MessageHandler,
    filters,
)

# A 1x1 PNG and a 1x1 GIF; the second photo differs by a trailing byte.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    came_from = " ".join(context.args) or "nowhere"
    await update.message.reply_text(f"Hi! You came from {came_from}.")


async def album(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    sent = await update.message.reply_media_group(
        [InputMediaPhoto(PNG, caption="first", filename="first.png"), InputMediaPhoto(PNG + b"\0", caption="second", filename="second.png")]
    )
    context.bot_data["photo"] = sent[0].photo[-1].file_id
    groups = {m.media_group_id for m in sent}
    one = len(groups) == 1 and None not in groups
    await update.message.reply_text(f"Album sent: {len(sent)} messages in {'one group' if one else 'several groups'}")


async def gif(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    sent = await update.message.reply_animation(GIF, caption="a gif", filename="hello.gif")
    await sent.edit_caption("a gif, edited")
    # A button added to the animation afterwards, and the user's command tidied away.
    await sent.edit_reply_markup(InlineKeyboardMarkup([[InlineKeyboardButton("Another", callback_data="gif:again")]]))
    await update.message.delete()


async def by_url(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    # A photo by URL, as stock bots send them: the gateway fetches it (media_from_urls).
    await update.message.reply_photo(context.args[0], caption="by URL")


async def inline(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    results = [
        InlineQueryResultArticle(
            id="art",
            title="Press me",
            input_message_content=InputTextMessageContent("Inline with a button"),
            reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton("Press", callback_data="inline-press")]]),
        )
    ]
    if "photo" in context.bot_data:
        results.append(InlineQueryResultCachedPhoto(id="pic", photo_file_id=context.bot_data["photo"], caption="cached photo"))
    button = InlineQueryResultsButton(text="Open the bot", start_parameter="from-inline")
    await update.inline_query.answer(results, cache_time=0, button=button)


async def pressed(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.callback_query.answer("Pressed!")


async def photo_via_me(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_text("Got a photo via me")


async def my_membership(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    change: ChatMemberUpdated = update.my_chat_member
    if change.chat.type in ("group", "supergroup") and change.new_chat_member.status == "member":
        await context.bot.send_photo(change.chat.id, PNG, caption="Hello group", filename="hello.png")


async def post_init(app: Application) -> None:
    await app.bot.set_my_commands([BotCommand("/album", "Send an album"), BotCommand("/gif", "Send an animation")])


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # request URLs hold the token
    base = os.environ["BOT_API_BASE"].rstrip("/")
    app = (
        Application.builder()
        .token(os.environ["BOT_TOKEN"])
        .base_url(f"{base}/bot")
        .base_file_url(f"{base}/file/bot")
        .post_init(post_init)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CommandHandler("album", album))
    app.add_handler(CommandHandler("gif", gif))
    app.add_handler(CommandHandler("url", by_url))
    app.add_handler(InlineQueryHandler(inline))
    app.add_handler(CallbackQueryHandler(pressed, pattern="^inline-press$"))
    app.add_handler(MessageHandler(filters.PHOTO & filters.VIA_BOT, photo_via_me))
    app.add_handler(ChatMemberHandler(my_membership, ChatMemberHandler.MY_CHAT_MEMBER))
    port = os.environ.get("WEBHOOK_PORT")
    if not port:
        app.run_polling(allowed_updates=Update.ALL_TYPES)
        return
    app.run_webhook(
        listen="127.0.0.1",
        port=int(port),
        url_path="ptb-gallery",
        secret_token=os.environ["WEBHOOK_SECRET"],
        webhook_url=f"http://127.0.0.1:{port}/ptb-gallery",
        allowed_updates=Update.ALL_TYPES,
    )


if __name__ == "__main__":
    main()
