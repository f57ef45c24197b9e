#!/usr/bin/env python3
"""Creates a bot in a dialog with the platform's management bot (@BotManager), its identity secret
drawn on this machine, and writes its gateway config entry.

    scripts/newbot.py --e2e-chat PATH --profile DIR --username NAME --name "Display Name" \
        [--capabilities default] --out bot.json

Runs `e2e-chat newbot`, which sends /newbot and answers the three questions; the bot's identity
secret is drawn by e2e-chat and only its public key (the Bot ID) and a proof of it reach the
platform. Writes the credentials (token, Bot ID, recovery secret, numeric id, username, display
name) to --out as a 0600 JSON file in the shape of a gateway config's bots[] entry, and prints
the Bot ID and its short form. Exits non-zero, with the management bot's answer, if any step is
refused (say the username is taken).
"""
import argparse
import json
import subprocess
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--e2e-chat", required=True)
    p.add_argument("--profile", required=True)
    p.add_argument("--username", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--capabilities", default="default")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    username = a.username[1:] if a.username.startswith("@") else a.username
    command = [a.e2e_chat, "--profile", a.profile, "newbot", username, "--name", a.name,
               "--capabilities", a.capabilities, "--out", a.out, "--force"]
    print(f"> e2e-chat newbot {username} (the identity secret is drawn here, never sent)", file=sys.stderr)
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"newbot: {out.stderr.strip()}")
    created = json.loads(out.stdout.splitlines()[0])
    print(f"< @{username} created: Bot ID {created['bot_id_hex']}", file=sys.stderr)
    print(f"< Bot ID short form (read it aloud to compare): {created['short_form']}", file=sys.stderr)
    print(f"newbot: credentials of @{username} written to {a.out} (mode 0600)", file=sys.stderr)


if __name__ == "__main__":
    main()
