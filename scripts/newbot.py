#!/usr/bin/env python3
"""Creates a bot by talking to the platform's management bot (@BotManager) with e2e-chat.

    scripts/newbot.py --e2e-chat PATH --profile DIR --username NAME --name "Display Name" \
        [--capabilities default] --out bot.json

Sends /newbot and answers the three questions, printing the dialog to stderr, then writes the
credentials from the final reply (token, Bot ID, recovery secret, numeric id) to --out as a
0600 JSON file in the shape of a gateway config's bots[] entry. Exits non-zero, with the bot's
answer, if any step is refused (say the username is taken).
"""
import argparse
import json
import os
import subprocess
import sys

MANAGER = "@BotManager"


def run(chat, profile, *args):
    out = subprocess.run([chat, "--profile", profile, *args], capture_output=True, text=True, timeout=90)
    if out.returncode != 0:
        sys.exit(f"newbot: e2e-chat {args[0]} failed: {out.stderr.strip()}")
    return out.stdout


def ask(chat, profile, text):
    print(f"> {text}", file=sys.stderr)
    run(chat, profile, "send", MANAGER, "--", text)
    lines = run(chat, profile, "listen", "--count", "1", "--timeout", "60").splitlines()
    if not lines:
        sys.exit(f"newbot: {MANAGER} did not answer {text!r} within 60 s")
    reply = json.loads(lines[0])["text"]
    # The final reply carries the token and the recovery secret: show only its first line.
    shown = reply.splitlines()[0] if "Recovery secret:" in reply else reply
    print("< " + shown.replace("\n", "\n< "), file=sys.stderr)
    return reply


def field(reply, key):
    for line in reply.splitlines():
        if line.startswith(key + ": "):
            return line[len(key) + 2:].strip()
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--e2e-chat", required=True)
    p.add_argument("--profile", required=True)
    p.add_argument("--username", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--capabilities", default="default")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    chat, profile = a.e2e_chat, a.profile

    ask(chat, profile, "/newbot")
    for answer in (a.username, a.name):
        reply = ask(chat, profile, answer)
        if reply.startswith("Invalid"):
            ask(chat, profile, "/cancel")
            sys.exit(f"newbot: refused: {reply.splitlines()[0]}")
    done = ask(chat, profile, a.capabilities)
    token, bot_id, secret, numeric = (field(done, k) for k in ("Token", "Bot ID", "Recovery secret", "Numeric id"))
    if not (token and bot_id and secret and numeric):
        ask(chat, profile, "/cancel")
        sys.exit(f"newbot: unexpected final reply: {done.splitlines()[0] if done else ''}")
    bot = {
        "bot_id_hex": bot_id,
        "token": token,
        "identity_recovery_secret_hex": secret,
        "compat_user_id": int(numeric),
        # As the platform stores them: one leading '@' removed, the display name trimmed (the
        # gateway checks both against the platform at start).
        "username": a.username[1:] if a.username.startswith("@") else a.username,
        "first_name": a.name.strip(),
    }
    fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(bot, f, indent=2)
        f.write("\n")
    os.chmod(a.out, 0o600)
    print(f"newbot: credentials of @{bot['username']} written to {a.out} (mode 0600)", file=sys.stderr)


if __name__ == "__main__":
    main()
