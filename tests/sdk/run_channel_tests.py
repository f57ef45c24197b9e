#!/usr/bin/env python3
"""Runs the channel and administration SDK bots against a live bot-gateway.

Each SDK has one small real bot, in a fresh world (platform-server, a bot with the
`groups`/`channels` capabilities, bot-gateway, users registered with e2e-chat, as in
run_group_tests.py); the runner drives the users with e2e-chat and asserts what they see:

- aiogram (python/aiogram_admin.py): Alice makes the bot an administrator of a group (invite,
  restrict) and creates a link with join requests; Bob asks to join with `e2e-chat join`, the
  bot approves his request (chat_join_request) and Bob's device joins by itself; Bob writes,
  Alice answers his message with `/ban@<bot>`, and the bot bans him (banChatMember): Alice sees
  Bob banned and the bot's "banned …".
- telegraf (node/telegraf_channel.js): Alice creates a channel, adds the bot and gives it the
  post right; the bot posts "tick 1" .. "tick 3" on a schedule, each with a "Like" button;
  Alice presses one and the bot answers it.

Polling only. SDKs run in parallel (each world has its own bot). Standard library only.

Usage: run_channel_tests.py [-v] [--keep] [SDK ...]   (SDK: aiogram, telegraf; default all)
Prints PASS/FAIL per SDK, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import sys
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_dialog_tests as dialog  # noqa: E402
import run_group_tests as groups  # noqa: E402  (register, bot_says, in_group)
import run_sdk_tests as base  # noqa: E402
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import from_bot  # noqa: E402

SDK_DIR = base.SDK_DIR


def membership(username, role):
    return lambda m: (m.get("event") == "group_membership" and (m.get("user") or {}).get("username") == username
                      and m.get("new_role") == role)


def aiogram_admin(user):
    """Join requests approved by the bot; /ban as a reply bans the member."""
    title = "Admin club"
    user.cli("group", "create", title)
    user.cli("group", "add", title, f"@{user.bot}")
    user.expect(("the bot joined", membership(user.bot, "member")))
    user.cli("group", "promote", title, f"@{user.bot}", "invite,restrict")
    link = user.cli("group", "link", title, "--request")["invite_link"]
    bob = groups.register(user, f"bob_{user.username}", "Bob")
    asked = bob.cli("join", link)
    check(asked.get("status") == "requested", "Bob's join should wait for approval", asked)
    # The bot approves; Bob's device joins by its own commit when it reads its inbox.
    bob.expect(("Bob in the group", membership(bob.username, "member")))
    hi = bob.cli("group", "send", title, "hi all")
    user.expect(("Bob's hi", lambda m: groups.in_group(m, title) and m.get("text") == "hi all"))
    user.cli("group", "send", title, "--reply-to", str(hi["message_id"]), f"/ban@{user.bot}")
    found = user.expect(("Bob banned", membership(bob.username, "banned")),
                        ("the bot's word", groups.bot_says(user, title, "banned Bob")))
    check(found["Bob banned"]["actor"]["username"] == user.bot, "the bot should be the one who banned", found["Bob banned"])


def telegraf_channel(user):
    """Posts on a schedule with a button; a press is answered."""
    title = "Tick channel"
    user.cli("channel", "create", title)
    user.cli("group", "add", title, f"@{user.bot}")
    user.expect(("the bot subscribed", membership(user.bot, "member")))
    user.cli("group", "promote", title, f"@{user.bot}", "post")

    def post(n):
        return lambda m: (m.get("event") == "channel_post" and from_bot(m, user.bot) and m.get("text") == f"tick {n}")

    found = user.expect(*[(f"tick {n}", post(n)) for n in (1, 2, 3)])
    tick = found["tick 2"]
    check(tick.get("keyboard") == [[dialog.button("Like", "like:2")]], "each post should carry a Like button", tick)
    pressed = user.cli("group", "press", title, str(tick["message_id"]), "like:2", "--timeout", str(dialog.PRESS_TIMEOUT),
                       timeout=dialog.PRESS_TIMEOUT + 30)
    check(pressed.get("event") == "callback_answer" and pressed.get("text") == "liked tick 2",
          "the press should be answered 'liked tick 2'", pressed)


SDKS = {
    "aiogram": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_admin.py")],
        "username": "aiogram_admin_bot",
        "name": "aiogram Admin",
        "capabilities": "dm,groups",
        "scenario": aiogram_admin,
    },
    "telegraf": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_channel.js")],
        "username": "telegraf_channel_bot",
        "name": "telegraf Channel",
        "capabilities": "channels",
        "scenario": telegraf_channel,
    },
}


def run_sdk(sdk, bin_dir, keep):
    return dialog.run_mode(sdk, "polling", bin_dir, keep, sdks=SDKS, kind="channel")


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="channel ", jobs=len(SDKS), known=SDKS)


if __name__ == "__main__":
    sys.exit(main())
