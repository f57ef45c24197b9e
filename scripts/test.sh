#!/usr/bin/env bash
# The single test command (README, .ci/run): Rust unit + integration tests, then the real-SDK
# bots (python-telegram-bot, aiogram, telegraf): the echo bots and the interactive-dialog bots
# (keyboard menu, inline mode, reactions/forward/copy), the stock-style conversation bots (reply
# keyboards, deep links, edits, who added the bot; each SDK's stock webhook server), the gallery
# bots (albums, animations, caption edits, inline buttons and cached files, a photo into a group,
# commands with a leading slash), the web chat in headless chromium, and the file bots (download with each SDK's
# helper, upload, send back by file_id), polling and webhook, against a live
# platform-server + bot-gateway. Each runner runs its SDKs in parallel. Between the two,
# `scripts/release --check` builds and verifies the release archives and the container image.
# After the Rust tests, every benchmark runs once at a tiny size (`scripts/bench --smoke`).
# Everything builds in release only, into a target dir outside the checkout so a fresh clone
# (CI) reuses a warm build.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/bot-gateway/target}"
# Checkouts share that dir, and the programs the tests spawn ($CARGO_TARGET_DIR/release) are
# the last build's: a run holds the dir's lock, so another checkout's run waits rather than
# relinking them under this one. (build.rs reruns when anything under proto/ changes.)
mkdir -p "$CARGO_TARGET_DIR"
if command -v flock >/dev/null; then
    exec 9>"$CARGO_TARGET_DIR/.test-run.lock"
    flock -n 9 || {
        echo "test.sh: another test run is using $CARGO_TARGET_DIR; waiting for it (a CARGO_TARGET_DIR of its own runs beside it)" >&2
        flock 9
    }
fi

# The pinned venv first: tests/operations.rs runs the real Prometheus parser
# (prometheus_client) from it over /metrics, and must not skip that check here.
bash scripts/sdk-setup.sh
export BOTGW_REQUIRE_PROMETHEUS_PARSER=1
# One build of one profile: `cargo test` also builds the three programs (the integration
# tests need them) into $CARGO_TARGET_DIR/release, where the SDK runners find them.
cargo test --release
# Every benchmark once at a tiny size, from the examples that build just made: a bench that
# panics or prints nothing fails here (its figures are not checked: timing is never a test).
bash scripts/bench --smoke
# The release archives from that same build, checked: checksums, the debug symbols, the image's
# contents, and a message end to end through the gateway chrooted into the image's root
# filesystem; the launchd plist, systemd unit, compose file and release workflow (as root: CI).
bash scripts/release --check
export BIN_DIR="${BIN_DIR:-$CARGO_TARGET_DIR/release}"
python3 tests/sdk/run_sdk_tests.py
python3 tests/sdk/run_webhook_tests.py
python3 tests/sdk/run_dialog_tests.py
python3 tests/sdk/run_media_tests.py
python3 tests/sdk/run_group_tests.py
python3 tests/sdk/run_channel_tests.py
python3 tests/sdk/run_conversation_tests.py
python3 tests/sdk/run_gallery_tests.py
python3 tests/sdk/run_web_tests.py
