"""A conversation bot written as aiogram 3.29 bots commonly are: a Router with an FSM, a one-time
reply keyboard, a ForceReply question and ReplyKeyboardRemove at the end, a deep-link
CommandStart, an edited_message handler and a my_chat_member handler; polling with every update
type, or aiogram's stock SimpleRequestHandler webhook (it checks X-Telegram-Bot-Api-Secret-Token,
which the gateway sends when its config names it in `webhook_secret_token_headers`).

The dialog is the one of ptb_conversation.py (tests/sdk/run_conversation_tests.py drives it).

Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET.
"""

import asyncio
import logging
import os

from aiohttp import web
from aiogram import Bot, Dispatcher, F, Router
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.enums import UpdateType
from aiogram.filters import Command, CommandObject, CommandStart
from aiogram.fsm.context import FSMContext
from aiogram.fsm.state import State, StatesGroup
from aiogram.types import ChatMemberUpdated, ForceReply, KeyboardButton, Message, PollAnswer, ReplyKeyboardMarkup, ReplyKeyboardRemove
from aiogram.webhook.aiohttp_server import SimpleRequestHandler, setup_application

router = Router()
# Every update type aiogram knows, as bots pass them when they want everything.
ALL_TYPES = [t.value for t in UpdateType]


class Form(StatesGroup):
    pet = State()
    name = State()


@router.message(CommandStart())
async def start(message: Message, command: CommandObject, state: FSMContext) -> None:
    await state.set_state(Form.pet)
    keyboard = ReplyKeyboardMarkup(
        keyboard=[[KeyboardButton(text="Cats"), KeyboardButton(text="Dogs")]],
        one_time_keyboard=True,
        resize_keyboard=True,
        input_field_placeholder="Cats or dogs?",
    )
    await message.answer(f"Hi! You came from {command.args or 'nowhere'}. Cats or dogs?", reply_markup=keyboard)


@router.message(Form.pet, F.text.in_({"Cats", "Dogs"}))
async def pet(message: Message, state: FSMContext) -> None:
    await state.update_data(pet=message.text)
    await state.set_state(Form.name)
    await message.answer(f"{message.text} it is. What is your name?", reply_markup=ForceReply(input_field_placeholder="Your name"))


@router.message(Form.name, F.text)
async def name(message: Message, state: FSMContext) -> None:
    await state.clear()
    await message.answer(f"Nice to meet you, {message.text}!", reply_markup=ReplyKeyboardRemove())


@router.edited_message(F.text)
async def edited(message: Message) -> None:
    await message.reply(f"You changed your message to {message.text}")


# The options of each poll this bot sent, by poll id.
POLLS: dict = {}


@router.message(Command("poll"))
async def poll(message: Message) -> None:
    sent = await message.answer_poll("Best pet?", options=["Cats", "Dogs"], is_anonymous=False)
    POLLS[sent.poll.id] = ["Cats", "Dogs"]


@router.poll_answer()
async def poll_answer(answer: PollAnswer, bot: Bot) -> None:
    options = POLLS.get(answer.poll_id, [])
    chosen = ", ".join(options[i] for i in answer.option_ids) or "nothing"
    await bot.send_message(answer.user.id, f"You voted for {chosen}")


@router.my_chat_member()
async def my_membership(change: ChatMemberUpdated, bot: Bot) -> None:
    if change.chat.type in ("group", "supergroup") and change.new_chat_member.status == "member":
        await bot.send_message(change.chat.id, f"Thanks for adding me, @{change.from_user.username}!")


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["BOT_API_BASE"].rstrip("/")))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)
    dp = Dispatcher()
    dp.include_router(router)
    port = os.environ.get("WEBHOOK_PORT")
    if not port:
        asyncio.run(dp.start_polling(bot, allowed_updates=ALL_TYPES))
        return
    secret = os.environ["WEBHOOK_SECRET"]
    url = f"http://127.0.0.1:{port}/aiogram-conversation"

    async def on_startup(bot: Bot) -> None:
        await bot.set_webhook(url, secret_token=secret, allowed_updates=ALL_TYPES)

    dp.startup.register(on_startup)
    app = web.Application()
    SimpleRequestHandler(dispatcher=dp, bot=bot, secret_token=secret).register(app, path="/aiogram-conversation")
    setup_application(app, dp, bot=bot)
    web.run_app(app, host="127.0.0.1", port=int(port), print=None)


if __name__ == "__main__":
    main()
