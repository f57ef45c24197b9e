"""Admin bot written with aiogram 3.29.1, long polling against a bot-gateway.

Environment: BOT_TOKEN, BOT_API_BASE (see compat_bot).

- Approves every join request (`chat_join_request` → ChatJoinRequest.approve()).
- `/ban@<botname>` sent as a reply to a member's message bans that member
  (banChatMember) and says "banned <first name>"; without a reply it asks for one.
"""

from aiogram import Dispatcher
from aiogram.filters import Command
from aiogram.types import ChatJoinRequest, Message

from compat_bot import run_aiogram

dp = Dispatcher()


@dp.chat_join_request()
async def approve(request: ChatJoinRequest) -> None:
    await request.approve()


@dp.message(Command("ban"))
async def ban(message: Message) -> None:
    target = message.reply_to_message.from_user if message.reply_to_message else None
    if target is None:
        await message.answer("reply to a member's message with /ban")
        return
    await message.bot.ban_chat_member(message.chat.id, target.id)
    await message.answer(f"banned {target.first_name}")


if __name__ == "__main__":
    run_aiogram(dp, "/aiogram-admin")
