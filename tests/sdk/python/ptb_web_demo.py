"""The bot the web chat's browser test talks to, written with python-telegram-bot 22.8 as any
bot would be: an echo, a menu whose inline button edits it in place (and a link button), a
one-time reply keyboard, and a message it deletes. Long polling against a bot-gateway.

- /start: a greeting with a one-time reply keyboard (Red, Green).
- Red or Green: "You chose <colour>", and the keyboard is removed.
- /menu: "Menu, page 1" (bold "Menu") with buttons Next (callback page:2) and Docs (a link);
  a press answers the callback and edits the message to the page it names.
- /gone: "This goes away", deleted a moment later.
- /survey: a non-anonymous poll "Tea or coffee?"; a vote is answered "You voted for <option>".
- a photo: sent back by its file_id, captioned "your photo back".
- an inline query: two articles, "Say hi" and "Say bye"; a choice sends its text.
- any other text: "echo: <text>".

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).
"""

import asyncio

from telegram import InlineQueryResultArticle, InputTextMessageContent, InlineKeyboardButton, InlineKeyboardMarkup, KeyboardButton, ReplyKeyboardMarkup, ReplyKeyboardRemove, Update
from telegram.constants import ParseMode
from telegram.ext import CallbackQueryHandler, CommandHandler, ContextTypes, InlineQueryHandler, MessageHandler, PollAnswerHandler, filters

from compat_bot import run_ptb

COLOURS = ("Red", "Green")
DOCS_URL = "https://example.org/docs"


def menu(page: int) -> tuple[str, InlineKeyboardMarkup]:
    buttons = [[InlineKeyboardButton("Next ▶", callback_data=f"page:{page + 1}")], [InlineKeyboardButton("Docs", url=DOCS_URL)]]
    return f"<b>Menu</b>, page {page}", InlineKeyboardMarkup(buttons)


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    keyboard = ReplyKeyboardMarkup([[KeyboardButton(c) for c in COLOURS]], one_time_keyboard=True, resize_keyboard=True)
    await update.effective_message.reply_text("Hello! Pick a colour.", reply_markup=keyboard)


async def colour(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.effective_message.reply_text(f"You chose {update.effective_message.text}", reply_markup=ReplyKeyboardRemove())


async def show_menu(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    text, keyboard = menu(1)
    await update.effective_message.reply_text(text, parse_mode=ParseMode.HTML, reply_markup=keyboard)


async def press(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.callback_query
    page = int(query.data.split(":", 1)[1])
    await query.answer(f"Page {page}")
    text, keyboard = menu(page)
    await query.edit_message_text(text, parse_mode=ParseMode.HTML, reply_markup=keyboard)


async def gone(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    sent = await update.effective_message.reply_text("This goes away")
    await asyncio.sleep(0.5)
    await sent.delete()


async def poll(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    options = ["Tea", "Coffee"]
    sent = await context.bot.send_poll(update.effective_chat.id, "Tea or coffee?", options, is_anonymous=False)
    context.bot_data[sent.poll.id] = (update.effective_chat.id, options)


async def vote(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    answer = update.poll_answer
    chat_id, options = context.bot_data.get(answer.poll_id, (answer.user.id, []))
    chosen = ", ".join(options[i] for i in answer.option_ids if i < len(options)) or "nothing"
    await context.bot.send_message(chat_id, f"You voted for {chosen}")


async def photo_back(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.effective_message.reply_photo(update.effective_message.photo[-1].file_id, caption="your photo back")


async def inline(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    results = [
        InlineQueryResultArticle("hi", "Say hi", InputTextMessageContent(f"Hi! ({update.inline_query.query})"), description="a greeting"),
        InlineQueryResultArticle("bye", "Say bye", InputTextMessageContent("Bye!")),
    ]
    await update.inline_query.answer(results, cache_time=0)


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.effective_message.reply_text(f"echo: {update.effective_message.text}")


if __name__ == "__main__":

    def add_handlers(app) -> None:
        app.add_handler(CommandHandler("start", start))
        app.add_handler(CommandHandler("menu", show_menu))
        app.add_handler(CommandHandler("gone", gone))
        app.add_handler(CommandHandler("survey", poll))
        app.add_handler(PollAnswerHandler(vote))
        app.add_handler(InlineQueryHandler(inline))
        app.add_handler(MessageHandler(filters.PHOTO, photo_back))
        app.add_handler(CallbackQueryHandler(press, pattern=r"^page:\d+$"))
        app.add_handler(MessageHandler(filters.Text(list(COLOURS)), colour))
        app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))

    run_ptb(add_handlers, "/ptb-web-demo", allowed_updates=Update.ALL_TYPES)
