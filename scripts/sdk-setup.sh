#!/usr/bin/env bash
# Installs the pinned Bot API SDKs the SDK tests run against:
#   tests/sdk/.venv         python-telegram-bot + aiogram, exactly tests/sdk/requirements.txt
#   tests/sdk/node/node_modules   telegraf, exactly tests/sdk/node/package-lock.json (npm ci)
# Skips each part when it is already installed from the same pin file (a stamp holds the pin
# file's checksum), so repeated runs are quick, quiet and need no network.
set -euo pipefail
cd "$(dirname "$0")/../tests/sdk"

checksum() { sha256sum "$1" | cut -d' ' -f1; }

# --- Python SDKs ------------------------------------------------------------------------------
venv=.venv
req=requirements.txt
stamp=$venv/.sdk-setup-stamp
want=$(checksum "$req")
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c '' 2>/dev/null \
    || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "sdk-setup: installing Python SDKs into tests/sdk/$venv" >&2
    # A venv whose interpreter moved or vanished cannot be repaired in place.
    if [ -d "$venv" ] && ! "$venv/bin/python" -c '' 2>/dev/null; then
        rm -rf "$venv"
    fi
    [ -d "$venv" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req"
    # Fail here, not in a test, if the pins did not take.
    "$venv/bin/python" - <<'EOF'
from importlib.metadata import version
for name, pin in (("python-telegram-bot", "22.8"), ("aiogram", "3.29.1")):
    got = version(name)
    if got != pin:
        raise SystemExit(f"sdk-setup: {name} is {got}, expected {pin}")
EOF
    echo "$want" >"$stamp"
fi

# --- Node SDK ---------------------------------------------------------------------------------
cd node
lock=package-lock.json
stamp=node_modules/.sdk-setup-stamp
want=$(checksum "$lock")
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "sdk-setup: npm not found; run scripts/setup.sh first" >&2
        exit 1
    fi
    echo "sdk-setup: installing telegraf into tests/sdk/node/node_modules" >&2
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
    got=$(node -p 'require("./node_modules/telegraf/package.json").version')
    if [ "$got" != "4.16.3" ]; then
        echo "sdk-setup: telegraf is $got, expected 4.16.3" >&2
        exit 1
    fi
    echo "$want" >"$stamp"
fi
