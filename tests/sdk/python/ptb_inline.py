"""An inline-mode bot written with python-telegram-bot 22.8: it answers inline queries with
article results whose message text is HTML-formatted (the query in bold, in italics), and when
the user chooses one, it sends a formatted message replying to the chosen message. Polling, or
webhook mode when WEBHOOK_PORT is set.

A chosen_inline_result carries no message id. The chosen message itself arrives first, as a
`message` update with via_bot set to this bot (the gateway queues it before the choice, and PTB
handles one update at a time), so the bot remembers its id per user and replies to it.

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET (see
compat_bot).
"""

import html

from telegram import InlineQueryResultArticle, InputTextMessageContent, ReplyParameters, Update
from telegram.constants import ParseMode
from telegram.ext import ChosenInlineResultHandler, ContextTypes, InlineQueryHandler, MessageHandler, filters

from compat_bot import run_ptb

PATH = "/ptb-inline"
# The result ids and how each formats the query.
STYLES = {"bold": ("Bold", "<b>{}</b>"), "italic": ("Italic", "<i>{}</i>")}
ALLOWED_UPDATES = ["message", "inline_query", "chosen_inline_result"]


async def inline_query(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.inline_query.query.strip() or "nothing"
    results = [
        InlineQueryResultArticle(
            id=result_id,
            title=title,
            description=f"Send “{query}” in {title.lower()}",
            input_message_content=InputTextMessageContent(template.format(html.escape(query)), parse_mode=ParseMode.HTML),
        )
        for result_id, (title, template) in STYLES.items()
    ]
    await update.inline_query.answer(results, cache_time=0)


async def via_me(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A message the user sent through one of our results: remember it for the choice."""
    context.bot_data.setdefault("chosen_message", {})[update.effective_user.id] = update.effective_message.message_id


async def chosen(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    choice = update.chosen_inline_result
    user = choice.from_user
    message_id = context.bot_data.get("chosen_message", {}).pop(user.id, None)
    reply = ReplyParameters(message_id=message_id, allow_sending_without_reply=True) if message_id else None
    await context.bot.send_message(
        chat_id=user.id,
        text=f"You chose <b>{html.escape(STYLES.get(choice.result_id, (choice.result_id,))[0])}</b> for <i>{html.escape(choice.query)}</i>",
        parse_mode=ParseMode.HTML,
        reply_parameters=reply,
    )


def add_handlers(app) -> None:
    app.add_handler(InlineQueryHandler(inline_query))
    app.add_handler(MessageHandler(filters.VIA_BOT, via_me))
    app.add_handler(ChosenInlineResultHandler(chosen))


if __name__ == "__main__":
    run_ptb(add_handlers, PATH, allowed_updates=ALLOWED_UPDATES)
