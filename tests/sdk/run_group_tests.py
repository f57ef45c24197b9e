#!/usr/bin/env python3
"""Runs the group SDK bots against a live bot-gateway: groups over MLS, long polling.

Each SDK has one small real group bot, in a fresh world (platform-server, a bot with the
`groups` capability, bot-gateway, users registered with e2e-chat, as in run_dialog_tests.py).
Alice creates a group with `e2e-chat group create` and adds the bot, which joins by itself;
the runner asserts what the members see with `e2e-chat listen`:

- ptb (python/ptb_group.py): ChatMemberHandler sees the bot's own my_chat_member (left →
  member) and says "hello <title>" in the group; `/count@<bot>` reaches CommandHandler (PTB
  checks the mention against getMe) and is answered "count: 2" from getChatMemberCount, as a
  reply with an "again" button; `e2e-chat group press` on it is answered "counted again"
  (a callback_query of the group message; the bot edits it). Then Alice adds Bob, and the
  service message (new_chat_members) makes the bot reply "Welcome, Bob!" to it.
- aiogram (python/aiogram_group.py): `/rules@<bot>` is answered; then Alice adds Bob, and the
  bot's chat_member update (Bob: left → member) makes it greet "welcome Bob".

Polling only: the webhook path of updates is the same for every update kind and is covered by
run_webhook_tests.py. SDKs run in parallel (each world has its own bot). Standard library only;
reuses the helpers of run_sdk_tests.py and run_dialog_tests.py.

Usage: run_group_tests.py [-v] [--keep] [SDK ...]   (SDK: ptb, aiogram; default all)
Prints PASS/FAIL per SDK, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import sys
from pathlib import Path

# Importing the sibling runners must not leave a __pycache__ in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_dialog_tests as dialog  # noqa: E402  (User, check, run_mode)
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import from_bot  # noqa: E402

SDK_DIR = base.SDK_DIR


def in_group(m, title):
    return m.get("event") == "group_message" and (m.get("group") or {}).get("title") == title


def bot_says(user, title, text):
    """A predicate: the bot's group message `text` in the group `title`."""
    return lambda m: in_group(m, title) and from_bot(m, user.bot) and m.get("text") == text


def create_group_with_bot(user, title):
    created = user.cli("group", "create", title)
    check(len(created.get("group_id", "")) == 64, "group create should print the 64-hex group id", created)
    added = user.cli("group", "add", title, f"@{user.bot}")
    check((added.get("user") or {}).get("is_bot") is True, "group add should name the bot", added)
    return created["group_id"]


def register(user, username, name):
    """Another user of the same platform, with a profile of its own."""
    profile = str(user.world.dir / username)
    user.world.run(
        f"e2e-chat-register-{username}",
        [user.e2e, "--server", user.world.platform_url, "--profile", profile, "register", username, "--name", name],
        watch=user.WATCH,
    )
    return dialog.User(user.world, user.e2e, profile, username, user.bot)


def ptb_group(user):
    """The bot greets the group it joined (my_chat_member), then answers /count@bot."""
    title = "PTB fans"
    create_group_with_bot(user, title)
    user.expect(("the bot's hello in the group", bot_says(user, title, f"hello {title}")))
    sent = user.cli("group", "send", title, f"/count@{user.bot}")
    answer = user.expect(("count: 2", bot_says(user, title, "count: 2")))["count: 2"]
    check(answer.get("reply_to_message_id") == sent.get("message_id"), "the count should reply to the command", answer)
    check(answer.get("keyboard") == [[dialog.button("again", "again")]], "the count should carry an 'again' button", answer)
    pressed = user.cli("group", "press", title, str(answer["message_id"]), "again", "--timeout", str(dialog.PRESS_TIMEOUT),
                       timeout=dialog.PRESS_TIMEOUT + 30)
    check(pressed.get("event") == "callback_answer" and pressed.get("text") == "counted again",
          "the press in the group should be answered 'counted again'", pressed)
    bob = register(user, f"bob_{user.username}", "Bob")
    user.cli("group", "add", title, f"@{bob.username}")
    welcome = user.expect(("the welcome to Bob", bot_says(user, title, "Welcome, Bob!")))["the welcome to Bob"]
    check(isinstance(welcome.get("reply_to_message_id"), int), "the welcome should reply to the join's service message", welcome)


def aiogram_group(user):
    """A member joining is greeted from chat_member; /rules@bot is answered."""
    title = "Aiogram fans"
    create_group_with_bot(user, title)
    joined = "the bot joined"
    user.expect((joined, lambda m: m.get("event") == "group_membership" and (m.get("user") or {}).get("username") == user.bot
                 and m.get("new_role") == "member"))
    # The answer also shows the bot is polling with its allowed_updates (aiogram lists the
    # kinds its handlers use): only then is Bob added.
    user.cli("group", "send", title, f"/rules@{user.bot}")
    user.expect(("the rules", bot_says(user, title, "rules: be kind")))
    bob = register(user, f"bob_{user.username}", "Bob")
    user.cli("group", "add", title, f"@{bob.username}")
    user.expect(("the bot's welcome to Bob", bot_says(user, title, "welcome Bob")))


SDKS = {
    "ptb": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_group.py")],
        "username": "ptb_group_bot",
        "name": "PTB Group",
        "capabilities": "dm,groups",
        "scenario": ptb_group,
    },
    "aiogram": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_group.py")],
        "username": "aiogram_group_bot",
        "name": "aiogram Group",
        "capabilities": "dm,groups",
        "scenario": aiogram_group,
    },
}


def run_sdk(sdk, bin_dir, keep):
    return dialog.run_mode(sdk, "polling", bin_dir, keep, sdks=SDKS, kind="group")


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="group ", jobs=len(SDKS), known=SDKS)


if __name__ == "__main__":
    sys.exit(main())
