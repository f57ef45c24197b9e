"""A menu bot written with aiogram 3.29.1: /start sends a three-page menu with an inline
keyboard; each press answers the callback with a notification and edits the menu message in
place (its text and its buttons change). /quiz shows a reply keyboard whose button asks the
user for a quiz (request_poll); the quiz the user makes comes back as a message with a poll,
which the bot describes. /fancy answers in MarkdownV2 built with aiogram's markdown decoration,
which separates italic from underline with "\r" (the Bot API ignores it). Polling, or webhook mode when WEBHOOK_PORT is set.

The press handler awaits the callback answer (an HTTP call) and returns the edit: in webhook
mode aiogram sends that edit back as a multipart webhook reply, in polling mode it makes the
call itself. Answering first is what a real bot does (the user's spinner stops at once).

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET (see
compat_bot).
"""

from aiogram import Dispatcher, F
from aiogram.filters import Command, CommandStart
from aiogram.types import (
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    KeyboardButton,
    KeyboardButtonPollType,
    Message,
    ReplyKeyboardMarkup,
    ReplyKeyboardRemove,
)

from aiogram.utils.text_decorations import markdown_decoration as md
from compat_bot import run_aiogram

PAGES = 3
PATH = "/aiogram-menu"

dp = Dispatcher()


def page_text(n: int) -> str:
    return f"<b>Menu</b> — page {n} of {PAGES}"


def page_keyboard(n: int) -> InlineKeyboardMarkup:
    row = []
    if n > 1:
        row.append(InlineKeyboardButton(text="◀ Back", callback_data=f"page:{n - 1}"))
    if n < PAGES:
        row.append(InlineKeyboardButton(text="Next ▶", callback_data=f"page:{n + 1}"))
    return InlineKeyboardMarkup(inline_keyboard=[row])


@dp.message(CommandStart())
async def start(message: Message) -> None:
    await message.answer(page_text(1), parse_mode="HTML", reply_markup=page_keyboard(1))


@dp.callback_query(F.data.startswith("page:"))
async def switch_page(callback: CallbackQuery):
    n = int(callback.data.split(":", 1)[1])
    if not 1 <= n <= PAGES:
        await callback.answer("No such page", show_alert=True)
        return None
    await callback.answer(f"Showing page {n}")
    return callback.message.edit_text(page_text(n), parse_mode="HTML", reply_markup=page_keyboard(n))


@dp.message(Command("quiz"))
async def ask_for_a_quiz(message: Message) -> None:
    button = KeyboardButton(text="Make a quiz", request_poll=KeyboardButtonPollType(type="quiz"))
    await message.answer("Make me a quiz", reply_markup=ReplyKeyboardMarkup(keyboard=[[button]], resize_keyboard=True))


@dp.message(Command("fancy"))
async def fancy(message: Message) -> None:
    await message.answer(md.italic(md.underline("fancy")) + " " + md.bold("words") + "  ", parse_mode="MarkdownV2")


@dp.message(F.poll)
async def describe_the_poll(message: Message) -> None:
    poll = message.poll
    answer = ", ".join(poll.options[i].text for i in poll.correct_option_ids or [])
    await message.answer(
        f"Got your {poll.type} “{poll.question}”: {len(poll.options)} options, answer {answer}",
        reply_markup=ReplyKeyboardRemove(),
    )


if __name__ == "__main__":
    run_aiogram(dp, PATH)
