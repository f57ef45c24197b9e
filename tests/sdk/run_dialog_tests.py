#!/usr/bin/env python3
"""Runs the interactive-dialog SDK bots against a live bot-gateway, polling and webhook.

Each SDK has one small real bot, run twice (long polling, then webhook) in a fresh world each
time (platform-server, a bot, bot-gateway, a user registered with e2e-chat, as in
run_sdk_tests.py). A user drives it with e2e-chat and the runner asserts what the user sees:

- aiogram (python/aiogram_menu.py): /start brings a menu with a keyboard; each press brings the
  callback answer's notification text and an `edited` event with the new text and buttons.
  /quiz brings a reply keyboard whose button asks for a quiz (request_poll); the user makes one
  with `reply-button`, and the bot describes the poll it received (message.poll). /fancy brings
  MarkdownV2 from aiogram's decoration helpers, whose "\r" the gateway ignores.
- ptb (python/ptb_inline.py): `inline` brings the bot's article results; `choose` sends the
  chosen result, and the bot's HTML reply (bold and italic entities) replies to that message
  (which the bot can only know from the message with via_bot).
- telegraf (node/telegraf_features.js): a text brings a `typing` chat action, the bot's 👍
  reaction on it, a forwarded copy (forward_origin: the user) and a plain copy, and a reply with
  a button; a press is answered (a webhook reply in webhook mode); the user's reaction to the
  reply reaches the bot (message_reaction) and is answered by a reply to that message.

SDKs run in parallel (each world has its own bot); the two modes of one SDK one after the
other. Standard library only; reuses the helpers of run_sdk_tests.py and run_webhook_tests.py.

Usage: run_dialog_tests.py [-v] [--keep] [SDK ...]   (SDK: ptb, aiogram, telegraf; default all)
Prints PASS/FAIL per SDK and mode, then exactly "N passed, M failed"; exits 0 only if all passed.
"""

import json
import sys
from pathlib import Path

# Importing the sibling runners must not leave a __pycache__ in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
import run_webhook_tests as webhook  # noqa: E402  (starting a webhook bot)
from run_sdk_tests import StepFailed, from_bot, log  # noqa: E402

SDK_DIR = base.SDK_DIR
MODES = ("polling", "webhook")
PRESS_TIMEOUT = 60  # seconds e2e-chat press waits for the callback answer
INLINE_TIMEOUT = 60  # seconds e2e-chat inline waits for the results


class User:
    """One user driving one bot through e2e-chat; every call is bounded and fails fast if the
    platform, the gateway or the bot exits."""

    WATCH = ("platform-server", "bot-gateway", "sdk-bot")

    def __init__(self, world, e2e, profile, username, bot):
        self.world, self.e2e, self.profile, self.username, self.bot = world, e2e, profile, username, bot

    def cli(self, what, *args, timeout=base.COMMAND_TIMEOUT):
        self.world.seq += 1
        out, _ = self.world.run(
            f"e2e-chat-{what}-{self.world.seq}", [self.e2e, "--profile", self.profile, what, *args], timeout=timeout, watch=self.WATCH
        )
        result = base.parse_json_line(out, f"e2e-chat {what}")
        log(f"{what} {' '.join(args)}: {json.dumps(result, ensure_ascii=False)[:300]}")
        return result

    def send(self, text, reply_to=None):
        opts = ["--reply-to", str(reply_to)] if reply_to else []
        return self.cli("send", f"@{self.bot}", *opts, text)

    def press(self, message_id, data):
        return self.cli("press", f"@{self.bot}", str(message_id), data, "--timeout", str(PRESS_TIMEOUT), timeout=PRESS_TIMEOUT + 30)

    def react(self, message_id, emoji):
        return self.cli("react", f"@{self.bot}", str(message_id), emoji)

    def inline(self, query):
        usage, _ = self.world.run("e2e-chat-help", [self.e2e, "--help"], check=False)
        if "inline @" not in usage:
            raise StepFailed("this e2e-chat has no `inline` command yet (the client's inline mode is not in this tree)")
        return self.cli("inline", f"@{self.bot}", "--timeout", str(INLINE_TIMEOUT), query, timeout=INLINE_TIMEOUT + 30)

    def choose(self, session_id, result_id):
        return self.cli("choose", f"@{self.bot}", str(session_id), result_id)

    def send_file(self, path, kind=None, caption=None):
        opts = (["--as", kind] if kind else []) + (["--caption", caption] if caption else [])
        return self.cli("send-file", f"@{self.bot}", str(path), *opts)

    def download(self, message_id, out_path):
        """Downloads the file of a received message; returns the bytes written."""
        result = self.cli("download", f"@{self.bot}", str(message_id), str(out_path))
        data = Path(out_path).read_bytes()
        check(result.get("size") == len(data), f"download should print the size it wrote ({len(data)})", result)
        return data

    def expect(self, *wants):
        """Listens until each (description, predicate) matched; returns the matches by description."""
        found, _ = base.listen_until(self.world, self.e2e, self.profile, list(wants), watch=self.WATCH)
        return found


def check(cond, what, obj):
    if not cond:
        raise StepFailed(f"{what}; got {json.dumps(obj, ensure_ascii=False)}")


def button(text, data):
    return {"text": text, "callback_data": data}


def has_entity(obj, kind, offset, length):
    return any(
        e.get("type") == kind and e.get("offset") == offset and e.get("length") == length for e in obj.get("entities") or []
    )


# --- scenarios ----------------------------------------------------------------------------------


def aiogram_menu(user):
    """/start, then two presses, each answered and editing the menu in place."""
    user.send("/start")
    menu = user.expect(
        ("the menu with a Next button", lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == "Menu — page 1 of 3")
    )["the menu with a Next button"]
    check(menu.get("keyboard") == [[button("Next ▶", "page:2")]], "the menu should carry one Next ▶ button (page:2)", menu)
    check(has_entity(menu, "bold", 0, 4), "the menu's HTML <b>Menu</b> should be a bold entity", menu)
    menu_id = menu["message_id"]

    pages = {
        2: [[button("◀ Back", "page:1"), button("Next ▶", "page:3")]],
        3: [[button("◀ Back", "page:2")]],
    }
    for page, keyboard in pages.items():
        answer = user.press(menu_id, f"page:{page}")
        check(answer.get("event") == "callback_answer", "press should print the callback answer", answer)
        check(answer.get("text") == f"Showing page {page}" and answer.get("show_alert") is False,
              f"the press should be answered with the notification 'Showing page {page}'", answer)
        text = f"Menu — page {page} of 3"
        what = f"the menu edited to page {page}"
        edited = user.expect(
            (what, lambda m: m.get("event") == "edited" and m.get("message_id") == menu_id and m.get("text") == text)
        )[what]
        check(edited.get("keyboard") == keyboard, f"page {page} should show the buttons {keyboard}", edited)
        check(has_entity(edited, "bold", 0, 4), "the edited menu keeps its bold entity", edited)

    # The markdown decoration's "\r" between italic and underline is ignored, and the blanks
    # at the end trimmed: nothing shifts the entities.
    user.send("/fancy")
    fancy = user.expect(("the fancy words", lambda m: "event" not in m and from_bot(m, user.bot) and "fancy" in (m.get("text") or "")))
    fancy = fancy["the fancy words"]
    check(fancy.get("text") == "fancy words", "the \\r and the trailing blanks should be gone", fancy)
    check(has_entity(fancy, "italic", 0, 5) and has_entity(fancy, "underline", 0, 5) and has_entity(fancy, "bold", 6, 5),
          "italic and underline on 'fancy', bold on 'words'", fancy)

    # A poll button: the user's client makes the quiz it asks for, and the bot reads it.
    user.send("/quiz")
    asked = user.expect(("the quiz button", lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == "Make me a quiz"))
    rows = (asked["the quiz button"].get("reply_keyboard") or {}).get("rows")
    check(rows == [[{"text": "Make a quiz", "request": "poll", "poll_type": "quiz"}]], "the keyboard should ask for a quiz", rows)
    used = user.cli("reply-button", f"@{user.bot}", "1", "Capital of France?", "Paris", "Rome", "--quiz", "1")
    check(used.get("sent") == "poll", "reply-button should send a poll", used)
    described = "Got your quiz “Capital of France?”: 2 options, answer Paris"
    user.expect(("the bot's reading of the quiz", lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == described))


def ptb_inline(user):
    """inline → the article results; choose → the bot's formatted reply to the chosen message."""
    query = "hello inline"
    results = user.inline(query)
    check(results.get("event") == "inline_results" and results.get("session_id"), "inline should print the results", results)
    by_id = {r.get("id"): r for r in results.get("results") or []}
    check(sorted(by_id) == ["bold", "italic"], "the bot answers with the results 'bold' and 'italic'", results)
    check(by_id["bold"].get("title") == "Bold", "result 'bold' is titled Bold", results)
    # The article's message text is HTML; the user sees it parsed (no tags).
    if "text" in by_id["bold"]:
        check(by_id["bold"]["text"] == query, "the result's message text is the parsed HTML", results)

    chosen = user.choose(results["session_id"], "bold")
    chosen_id = chosen.get("message_id")
    check(isinstance(chosen_id, int) and chosen_id > 0, "choose should print the sent message's id", chosen)

    text = f"You chose Bold for {query}"
    reply = user.expect(("the bot's reply to the choice", lambda m: "event" not in m and from_bot(m, user.bot) and m.get("text") == text))[
        "the bot's reply to the choice"
    ]
    # The bot knows the chosen message only from the `message` update with via_bot.
    check(reply.get("reply_to_message_id") == chosen_id, f"the reply should reply to the chosen message {chosen_id}", reply)
    check(has_entity(reply, "bold", len("You chose "), len("Bold")), "'Bold' should be a bold entity (HTML)", reply)
    check(has_entity(reply, "italic", len("You chose Bold for "), len(query)), "the query should be an italic entity (HTML)", reply)


def telegraf_features(user):
    """A text → chat action, the bot's reaction, a forward, a copy and a reply with a button;
    press → the answer; the user's reaction → the bot's reply to the reacted message."""
    text = "hello telegraf"
    sent = user.send(text)
    mine = sent["message_id"]

    def bot_text(m, want):
        return "event" not in m and from_bot(m, user.bot) and m.get("text") == want

    found = user.expect(
        ("a typing chat action", lambda m: m.get("event") == "chat_action" and m.get("action") == "typing"),
        ("the bot's 👍 on the user's message", lambda m: m.get("event") == "reaction" and m.get("message_id") == mine),
        ("the forwarded message", lambda m: bot_text(m, text) and m.get("forward_origin")),
        ("the copy", lambda m: bot_text(m, text) and not m.get("forward_origin")),
        ("the reply with a button", lambda m: bot_text(m, f"Got: {text}")),
    )
    reaction = found["the bot's 👍 on the user's message"]
    check(reaction.get("reactions") == [{"type": "emoji", "emoji": "👍"}], "the bot should react 👍", reaction)
    check(from_bot(reaction, user.bot), "the reaction should come from the bot", reaction)
    origin = found["the forwarded message"]["forward_origin"]
    check(origin.get("sender_username") == user.username and origin.get("sender_is_bot") is False,
          "the forward's origin should be the user", found["the forwarded message"])
    reply = found["the reply with a button"]
    check(reply.get("reply_to_message_id") == mine, "the bot's reply should reply to the user's text", reply)
    check(reply.get("keyboard") == [[button("Thanks", "thanks")]], "the reply should carry a Thanks button", reply)

    answer = user.press(reply["message_id"], "thanks")
    check(answer.get("text") == "You are welcome!", "the press should be answered 'You are welcome!'", answer)

    user.react(reply["message_id"], "🔥")
    what = "the bot's answer to the user's reaction"
    answered = user.expect((what, lambda m: bot_text(m, "You reacted 🔥")))[what]
    check(answered.get("reply_to_message_id") == reply["message_id"], "the answer should reply to the reacted message", answered)


SDKS = {
    "aiogram": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_menu.py")],
        "username": "aiogram_menu_bot",
        "name": "aiogram Menu",
        "path": "/aiogram-menu",
        "scenario": aiogram_menu,
    },
    "ptb": {
        "argv": [str(base.VENV_PYTHON), str(SDK_DIR / "python" / "ptb_inline.py")],
        "username": "ptb_inline_bot",
        "name": "PTB Inline",
        "path": "/ptb-inline",
        "scenario": ptb_inline,
    },
    "telegraf": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_features.js")],
        "username": "telegraf_features_bot",
        "name": "telegraf Features",
        "path": "/telegraf-features",
        "scenario": telegraf_features,
    },
}


def run_mode(sdk, mode, bin_dir, keep, sdks=SDKS, kind="dialog"):
    """One scenario of sdks[sdk] in one mode, in a fresh world. A spec's optional "prepare"
    (world) runs before the bot starts, e.g. to write files into the bot's working directory."""
    spec = sdks[sdk]
    world = base.World(f"{kind}-{mode}-{sdk}", keep)

    def steps():
        username = f"alice_{mode[0]}_{sdk}"
        bot, api_base, e2e, profile = base.start_bot_world(world, bin_dir, spec, username)
        if "prepare" in spec:
            spec["prepare"](world)
        if mode == "webhook":
            webhook.start_webhook_bot(world, spec, bot, api_base)
        else:
            world.spawn("sdk-bot", spec["argv"], env={"BOT_TOKEN": bot["token"], "BOT_API_BASE": api_base})
        spec["scenario"](User(world, e2e, profile, username, bot["username"]))

    return base.run_in_world(f"{sdk} {mode}", world, steps)


def run_sdk(sdk, bin_dir, keep):
    return [run_mode(sdk, mode, bin_dir, keep) for mode in MODES]


def main():
    return base.run_main(run_sdk, __doc__.split("\n\n")[0], label="dialog ", jobs=len(SDKS))


if __name__ == "__main__":
    sys.exit(main())
