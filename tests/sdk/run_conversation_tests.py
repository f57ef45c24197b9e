#!/usr/bin/env python3
"""Runs stock-style conversation bots against a live bot-gateway, polling and webhook.

Each SDK has one bot written the way its users write them (python/ptb_conversation.py,
python/aiogram_conversation.py, node/telegraf_conversation.js): every update type asked for
(each SDK's "all types" list, with names newer than the gateway), a deep-link /start, a
one-time reply keyboard, a ForceReply question, ReplyKeyboardRemove, an edited message, and the
bot added to a group (my_chat_member, whose `from` must be the user who added it), and a
non-anonymous poll the user votes in (poll_answer). In webhook
mode each uses its SDK's stock webhook server, which checks X-Telegram-Bot-Api-Secret-Token: the
gateway's config names that header in `webhook_secret_token_headers`, so no bot code changes.

A user drives each bot with e2e-chat (start, reply-button, send --reply-to, edit, group) and
the runner asserts what the user sees. SDKs run in parallel (each world has its own bot); the
two modes of one SDK one after the other. Standard library only; reuses the helpers of the
other runners.

Usage: run_conversation_tests.py [-v] [--keep] [SDK ...]   (SDK: ptb, aiogram, telegraf)
Prints PASS/FAIL per SDK and mode, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import sys
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_dialog_tests as dialog  # noqa: E402  (User, check, run_mode)
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import from_bot  # noqa: E402

SDK_DIR = base.SDK_DIR
# What a stock webhook handler checks; the gateway sends the secret under it too.
STOCK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def said(user, text):
    return lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == text


def conversation(user):
    # A deep link: /start PAYLOAD, and the bot's one-time reply keyboard.
    started = user.cli("start", f"@{user.bot}", "ref42")
    check(started.get("text") == "/start ref42", "start should send /start ref42", started)
    ask = "Hi! You came from ref42. Cats or dogs?"
    question = user.expect((ask, said(user, ask)))[ask]
    want = {"rows": [[{"text": "Cats", "request": "text"}, {"text": "Dogs", "request": "text"}]], "one_time": True,
            "placeholder": "Cats or dogs?"}
    check(question.get("reply_keyboard") == want, f"the question should carry the reply keyboard {want}", question)

    # Button 2 sends "Dogs"; the keyboard was one-time, so it is gone.
    used = user.cli("reply-button", f"@{user.bot}", "2")
    check(used.get("button") == "Dogs" and used.get("sent") == "text", "reply-button 2 should send Dogs", used)
    ask = "Dogs it is. What is your name?"
    name_q = user.expect((ask, said(user, ask)))[ask]
    check(name_q.get("force_reply") == {"placeholder": "Your name"}, "the name question should force a reply", name_q)
    out, status = user.world.run("e2e-chat-reply-button-again", [user.e2e, "--profile", user.profile, "reply-button",
                                                                   f"@{user.bot}", "1"], check=False, watch=user.WATCH)
    check(status == 1, "a used one-time keyboard should be gone (exit 1)", {"status": status, "stdout": out})

    # The answer replies to the question; the bot removes the keyboard.
    mine = user.send("Ann", reply_to=name_q["message_id"])
    done = "Nice to meet you, Ann!"
    thanks = user.expect((done, said(user, done)))[done]
    check(thanks.get("remove_keyboard") is True, "the last answer should remove the keyboard", thanks)

    # An edited message reaches the bot as edited_message.
    user.cli("edit", f"@{user.bot}", str(mine["message_id"]), "Anna")
    changed = "You changed your message to Anna"
    user.expect((changed, said(user, changed)))

    # A poll with a vote: the bot's poll_answer handler names the option.
    user.send("/poll")
    poll = user.expect(("the poll", lambda m: "event" not in m and from_bot(m, user.bot) and (m.get("poll") or {}).get("question") == "Best pet?"))["the poll"]
    options = [o.get("text") for o in poll["poll"].get("options") or []]
    check(options == ["Cats", "Dogs"] and poll["poll"].get("is_anonymous") is False, "the poll should offer Cats and Dogs, not anonymously", poll)
    user.cli("vote", f"@{user.bot}", str(poll["message_id"]), "2")
    voted = "You voted for Dogs"
    user.expect((voted, said(user, voted)))

    # Added to a group by the user: my_chat_member.from is that user.
    title = f"Pets of {user.username}"
    user.cli("group", "create", title)
    user.cli("group", "add", title, f"@{user.bot}")
    hello = f"Thanks for adding me, @{user.username}!"
    user.expect((hello, lambda m: m.get("event") == "group_message" and from_bot(m, user.bot) and m.get("text") == hello))


def spec(argv, username, name, path):
    return {
        "argv": argv,
        "username": username,
        "name": name,
        "path": path,
        "capabilities": "dm,groups",
        "config": {"webhook_secret_token_headers": ["X-Compat-Bot-Api-Secret-Token", STOCK_SECRET_HEADER]},
        "scenario": conversation,
    }


SDKS = {
    "ptb": spec([str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_conversation.py")], "ptb_talk_bot", "PTB Talk",
                "/ptb-conversation"),
    "aiogram": spec([str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_conversation.py")], "aiogram_talk_bot",
                    "aiogram Talk", "/aiogram-conversation"),
    "telegraf": spec(["node", str(SDK_DIR / "node" / "telegraf_conversation.js")], "telegraf_talk_bot", "telegraf Talk",
                     "/telegraf-conversation"),
}


def run_sdk(sdk, bin_dir, keep):
    return [dialog.run_mode(sdk, mode, bin_dir, keep, sdks=SDKS, kind="conversation") for mode in dialog.MODES]


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="conversation ", jobs=len(SDKS))


if __name__ == "__main__":
    sys.exit(main())
