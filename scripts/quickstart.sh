#!/usr/bin/env bash
# Quickstart for a new user: builds the programs, then runs a local platform server and a bot
# gateway with one bot in ./.quickstart, registers a chat user, and prints how to connect an SDK
# bot and how to chat with it. Runs in the foreground; Ctrl-C stops the server and the gateway.
#
# Re-running reuses the same world (platform data, bot credentials in .quickstart/bot.json,
# gateway state, the user profile); `rm -rf .quickstart` starts over.
#
# `scripts/quickstart.sh --restart-gateway`, from another terminal while a quickstart runs,
# rebuilds the programs and restarts only the gateway (the platform, its data and the chat
# user's connection stay): after editing .quickstart/gateway.json or the gateway's code.
#
# Environment: BOT_USERNAME (default quickstart_bot), CARGO_TARGET_DIR (default
# ~/.cache/bot-gateway/target), BIN_DIR (use prebuilt binaries from there instead of building).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

BOT_USERNAME=${BOT_USERNAME:-quickstart_bot}
PLATFORM_ADDR=127.0.0.1:7001
COMPAT_ADDR=127.0.0.1:8081
EXT_ADDR=127.0.0.1:8082
QS=.quickstart
USER_NAME=alice
STARTUP_SECONDS=60

say() { printf 'quickstart: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if ! [[ $BOT_USERNAME =~ ^[A-Za-z0-9_]{3,32}$ ]]; then
    die "BOT_USERNAME must be 3 to 32 characters: Latin letters, digits and _ (got '$BOT_USERNAME')"
fi

restart_only=0
case "${1:-}" in
    "") ;;
    --restart-gateway) restart_only=1 ;;
    -h | --help)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown option ${1} (the one option is --restart-gateway)" ;;
esac

bash scripts/setup.sh
if [ -n "${BIN_DIR:-}" ]; then
    bin=$(cd "$BIN_DIR" && pwd)
else
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bot-gateway/target}"
    say "building release binaries (the first build compiles gRPC core and takes a while)"
    cargo build --release --bins --quiet
    bin=$CARGO_TARGET_DIR/release
fi

if [ $restart_only = 1 ]; then
    # The running quickstart restarts its gateway on SIGUSR1; this waits for the new one.
    qs_pid=$(cat "$QS/quickstart.pid" 2>/dev/null || true)
    [ -n "$qs_pid" ] && kill -0 "$qs_pid" 2>/dev/null || die "no quickstart is running here (start one with scripts/quickstart.sh)"
    old=$(cat "$QS/gateway.pid" 2>/dev/null || true)
    kill -USR1 "$qs_pid"
    for ((i = 0; i < 240; i++)); do
        new=$(cat "$QS/gateway.pid" 2>/dev/null || true)
        if [ -n "$new" ] && [ "$new" != "$old" ] && [ -f "$QS/gateway.ready" ]; then
            say "the gateway is restarted (pid $new); the platform kept running"
            exit 0
        fi
        kill -0 "$qs_pid" 2>/dev/null || die "the quickstart stopped while restarting the gateway; see $QS/gateway.log"
        sleep 0.25
    done
    die "the gateway did not come back within 60 s; see $QS/gateway.log"
fi
bash scripts/sdk-setup.sh

# Everything in .quickstart holds secrets or private state: files 0600, directories 0700.
umask 077
mkdir -p "$QS"
chmod 700 "$QS"

for addr in "$PLATFORM_ADDR" "$COMPAT_ADDR" "$EXT_ADDR"; do
    if ! python3 - "$addr" <<'EOF'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
# Like the servers themselves: only a live listener, not TIME_WAIT leftovers, blocks the port.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind((host, int(port)))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
    then
        die "$addr is already in use (is another quickstart running?); stop that process first"
    fi
done

server_pid=
gateway_pid=
stop_pid() { # stop_pid PID: SIGTERM, then SIGKILL after 10 s
    local pid=$1 i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$gateway_pid$server_pid" ]; then
        say "stopping the gateway and the platform server"
    fi
    stop_pid "$gateway_pid"
    stop_pid "$server_pid"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# wait_until SECONDS PID WHAT COMMAND...: retries COMMAND until it succeeds, PID dies or time ends.
wait_until() {
    local seconds=$1 pid=$2 what=$3 i
    shift 3
    for ((i = 0; i < seconds * 4; i++)); do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || die "$what exited during start-up"
        sleep 0.25
    done
    die "$what not ready within $seconds s"
}
show_log_on_failure() { # show_log_on_failure FILE: prints the tail of FILE when the script fails
    # shellcheck disable=SC2064 # expand the file name now
    trap "status=\$?; if [ \$status -ne 0 ]; then say 'last lines of $1:'; tail -n 30 '$1' >&2 || true; fi; cleanup" EXIT
}

# --- platform server ----------------------------------------------------------------------------
had_platform=0
[ -d "$QS/platform" ] && had_platform=1
if [ -f "$QS/bot.json" ] && [ $had_platform = 0 ]; then
    die "$QS/bot.json exists but $QS/platform does not: the bot belongs to a deleted platform; rm -rf $QS to start over"
fi
mkdir -p "$QS/platform"
say "starting the platform server on $PLATFORM_ADDR (log: $QS/platform.log)"
"$bin/platform-server" --listen "$PLATFORM_ADDR" --data-dir "$QS/platform" >"$QS/platform.out" 2>"$QS/platform.log" &
server_pid=$!
show_log_on_failure "$QS/platform.log"
wait_until "$STARTUP_SECONDS" "$server_pid" "platform server" grep -q '^listening on ' "$QS/platform.out"

# --- chat user ----------------------------------------------------------------------------------
# alice.json (the register output) marks a completed registration.
if [ ! -s "$QS/$USER_NAME.json" ]; then
    rm -rf "${QS:?}/$USER_NAME"
    say "registering chat user $USER_NAME (profile: $QS/$USER_NAME)"
    if ! "$bin/e2e-chat" --server "http://$PLATFORM_ADDR" --profile "$QS/$USER_NAME" register "$USER_NAME" \
        --name "Alice" >"$QS/$USER_NAME.json.tmp" 2>"$QS/register.log"; then
        tail -n 30 "$QS/register.log" >&2
        die "registering chat user $USER_NAME failed"
    fi
    mv "$QS/$USER_NAME.json.tmp" "$QS/$USER_NAME.json"
fi
# --- bot, created in a dialog with @BotManager -------------------------------------------------
if [ -f "$QS/bot.json" ]; then
    existing=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["username"])' "$QS/bot.json")
    if [ "$existing" != "$BOT_USERNAME" ]; then
        say "reusing the existing bot @$existing from $QS/bot.json (BOT_USERNAME=$BOT_USERNAME ignored; rm -rf $QS to start over)"
    fi
else
    say "creating bot @$BOT_USERNAME by talking to @BotManager as $USER_NAME (dialog below)"
    python3 scripts/newbot.py --e2e-chat "$bin/e2e-chat" --profile "$QS/$USER_NAME" \
        --username "$BOT_USERNAME" --name "Quickstart Bot" --capabilities dm,groups,channels --out "$QS/bot.json.tmp" \
        || die "creating bot @$BOT_USERNAME failed"
    mv "$QS/bot.json.tmp" "$QS/bot.json"
fi
chmod 600 "$QS/bot.json"

# --- gateway ------------------------------------------------------------------------------------
# gateway.json is written once from bot.json; later runs keep it as it is (your edits, a new
# token, a `e2e-chat rekey --config .quickstart/gateway.json`).
python3 - "$QS/bot.json" "$QS/gateway.json" "$PLATFORM_ADDR" "$COMPAT_ADDR" "$EXT_ADDR" "$root/$QS/state" <<'EOF'
import json, os, sys
bot_path, out, platform, compat, ext, state = sys.argv[1:]
if os.path.exists(out):
    sys.exit(0)
bot = json.load(open(bot_path))
keys = ("bot_id_hex", "token", "identity_recovery_secret_hex", "compat_user_id", "username", "first_name")
config = {
    "compatibility_profile_id": "compat-v1-core-preview-4",
    "bot_platform_endpoint": f"http://{platform}",
    "compat_listen_addr": compat,
    "extensions_listen_addr": ext,
    "state_dir": state,
    "bots": [{k: bot[k] for k in keys}],
}
tmp = out + ".tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o600)
os.replace(tmp, out)
EOF
bot_username=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bots"][0]["username"])' "$QS/gateway.json")
token=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bots"][0]["token"])' "$QS/gateway.json")

start_gateway() {
    rm -f "$QS/gateway.ready"
    say "starting the gateway on $COMPAT_ADDR and $EXT_ADDR (log: $QS/gateway.log)"
    "$bin/bot-gateway" serve "$QS/gateway.json" >>"$QS/gateway.log" 2>&1 &
    gateway_pid=$!
    echo "$gateway_pid" >"$QS/gateway.pid"
}
: >"$QS/gateway.log"
start_gateway
show_log_on_failure "$QS/gateway.log"
healthz_connected() {
    python3 - "http://$COMPAT_ADDR/healthz" <<'EOF'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        bots = json.load(r).get("bots") or []
except Exception:
    sys.exit(1)
sys.exit(0 if bots and all(b.get("connected") is True for b in bots) else 1)
EOF
}
wait_until "$STARTUP_SECONDS" "$gateway_pid" "gateway" healthz_connected
: >"$QS/gateway.ready"

trap cleanup EXIT
# `scripts/quickstart.sh --restart-gateway` (another terminal) sends SIGUSR1: the gateway
# alone is stopped and started again.
restarted=0
restart_gateway() {
    say "restarting the gateway"
    stop_pid "$gateway_pid"
    start_gateway
    wait_until "$STARTUP_SECONDS" "$gateway_pid" "gateway" healthz_connected
    : >"$QS/gateway.ready"
    say "the gateway is back"
    restarted=1
}
trap restart_gateway USR1
echo $$ >"$QS/quickstart.pid"

base="http://$COMPAT_ADDR"
cat <<EOF

================================================================================================
 The quickstart world is running (data in $root/$QS).

 Bot @$bot_username
   token:        $token
   Bot API URL:  $base   (keep the token secret; it is in $QS/bot.json)

 Point an SDK at the gateway:
   python-telegram-bot 22.8:
     ApplicationBuilder().token(TOKEN).base_url("$base/bot").base_file_url("$base/file/bot").build()
   aiogram 3.29.1:
     Bot(TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base("$base")))
   telegraf 4.16.3:
     new Telegraf(TOKEN, { telegram: { apiRoot: "$base/" } })

 Run the bundled echo bot (another terminal, in $root):
   BOT_TOKEN='$token' BOT_API_BASE=$base tests/sdk/.venv/bin/python tests/sdk/python/ptb_echo.py

 Chat with the bot as $USER_NAME (a third terminal, in $root):
   $bin/e2e-chat --profile $QS/$USER_NAME chat @$bot_username
 or in a browser (prints the address to open; --open opens it):
   $bin/e2e-chat --profile $QS/$USER_NAME web @$bot_username --open

 Logs: $QS/platform.log, $QS/gateway.log.   Press Ctrl-C to stop the server and the gateway.
 Restart only the gateway (after changing $QS/gateway.json or its code): scripts/quickstart.sh --restart-gateway
================================================================================================
EOF

# Foreground until Ctrl-C or until one of the two exits on its own (a restart of the
# gateway interrupts the wait and is not an exit).
while :; do
    status=0
    wait -n "$server_pid" "$gateway_pid" || status=$?
    if [ $restarted = 1 ]; then
        restarted=0
        continue
    fi
    break
done
if kill -0 "$server_pid" 2>/dev/null; then
    say "the gateway exited (status $status); last lines of $QS/gateway.log:"
    tail -n 30 "$QS/gateway.log" >&2 || true
else
    say "the platform server exited (status $status); last lines of $QS/platform.log:"
    tail -n 30 "$QS/platform.log" >&2 || true
fi
exit 1
