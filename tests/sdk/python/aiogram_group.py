"""Group bot written with aiogram 3.29.1, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

- Greets every member who joins a group, from `chat_member` updates (left → member):
  "welcome <first name>". aiogram asks for chat_member in allowed_updates because a handler
  uses it (resolve_used_update_types), as the Bot API requires.
- /rules@<botname> in a group (aiogram's Command filter checks the mention against getMe's
  username) answers "rules: be kind".
"""

from aiogram import Dispatcher
from aiogram.filters import JOIN_TRANSITION, ChatMemberUpdatedFilter, Command
from aiogram.types import ChatMemberUpdated, Message

from compat_bot import run_aiogram

dp = Dispatcher()


@dp.chat_member(ChatMemberUpdatedFilter(member_status_changed=JOIN_TRANSITION))
async def greet(event: ChatMemberUpdated) -> None:
    await event.bot.send_message(event.chat.id, f"welcome {event.new_chat_member.user.first_name}")


@dp.message(Command("rules"))
async def rules(message: Message) -> None:
    await message.answer("rules: be kind")


if __name__ == "__main__":
    run_aiogram(dp, "/aiogram-group")
