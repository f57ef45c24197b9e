#!/usr/bin/env python3
"""Runs the real-SDK echo bots against a live bot-gateway, one fresh world per SDK.

For each SDK (python-telegram-bot, aiogram, telegraf) this starts, in a temporary directory:
platform-server on an ephemeral loopback port, a bot created with `e2e-chat newbot` (its identity secret drawn by the client),
bot-gateway with a 0600 config on free loopback ports, a user registered with e2e-chat, and the
SDK's echo bot pointed at the gateway. The user sends "hello <sdk>" and "/start"; the test passes
when the user receives "echo: hello <sdk>" and the bot's greeting.

Standard library only; runs with the system python3. Binaries come from $BIN_DIR (default
$CARGO_TARGET_DIR/release, CARGO_TARGET_DIR defaulting to ~/.cache/bot-gateway/target); the SDKs
from tests/sdk/.venv and tests/sdk/node/node_modules (scripts/sdk-setup.sh installs both).

Usage: run_sdk_tests.py [-v] [SDK ...]      (SDK: ptb, aiogram, telegraf; default all)
Prints PASS/FAIL per SDK (with the tail of every process's stderr on failure), then exactly
"N passed, M failed"; exits 0 only if every selected SDK passed. The SDKs run in parallel, each
in its own world. Every process it starts is stopped when its world ends, also on failure, Ctrl-C
or SIGTERM.
"""

import argparse
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SDK_DIR = Path(__file__).resolve().parent
VENV_PYTHON = SDK_DIR / ".venv" / "bin" / "python"

# Each SDK bot: how to start it, its platform username, and the exact /start reply.
SDKS = {
    "ptb": {
        "argv": [str(VENV_PYTHON), str(SDK_DIR / "python" / "ptb_echo.py")],
        "username": "ptb_echo_bot",
        "name": "PTB Echo",
        "greeting": "Hello! I am the ptb echo bot. Send me any text and I will echo it.",
    },
    "aiogram": {
        "argv": [str(VENV_PYTHON), str(SDK_DIR / "python" / "aiogram_echo.py")],
        "username": "aiogram_echo_bot",
        "name": "aiogram Echo",
        "greeting": "Hello! I am the aiogram echo bot. Send me any text and I will echo it.",
    },
    "telegraf": {
        "argv": ["node", str(SDK_DIR / "node" / "telegraf_echo.js")],
        "username": "telegraf_echo_bot",
        "name": "telegraf Echo",
        "greeting": "Hello! I am the telegraf echo bot. Send me any text and I will echo it.",
    },
}

PROFILE_ID = "compat-v1-core-preview-4"
STARTUP_TIMEOUT = 60.0  # platform-server "listening on", gateway healthz "connected"
COMMAND_TIMEOUT = 60.0  # one create-bot / register / send invocation
REPLY_TIMEOUT = 60.0  # all expected replies received by the user
STOP_GRACE = 5.0  # SIGTERM -> SIGKILL
TAIL_LINES = 40

VERBOSE = False
T0 = time.monotonic()
# Every World not closed yet, so an interrupted parallel run can still stop all processes.
OPEN_WORLDS = set()
OPEN_WORLDS_LOCK = threading.Lock()


class StepFailed(Exception):
    """A step of one SDK scenario failed; the message says which and what was observed."""


def log(msg):
    if VERBOSE:
        print(f"  .. {time.monotonic() - T0:6.1f}s {msg}", flush=True)


def default_bin_dir():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "bot-gateway", "target"
    )
    return Path(os.environ.get("BIN_DIR") or os.path.join(target, "release"))


def free_loopback_ports(n):
    """Ports the kernel hands out for 127.0.0.1:0, held open together so they are distinct."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def child_env(extra=None):
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    env.update(extra or {})
    return env


def tail(path, n=TAIL_LINES):
    """The last n lines, preceded by any earlier panic / fatal-error line (and the two lines
    after it) that a long backtrace would otherwise push out of view."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return [f"<cannot read {path}: {e}>"]
    start = max(0, len(lines) - n)
    early = []
    for i, line in enumerate(lines[:start]):
        if "panicked at" in line or line.startswith("Error: "):
            early += lines[i : min(i + 3, start)] + ["..."]
    return early + lines[start:]


class World:
    """One temporary directory and every process started in it; close() stops them all."""

    def __init__(self, sdk, keep):
        self.sdk = sdk
        self.keep = keep
        self.dir = Path(tempfile.mkdtemp(prefix=f"sdk-{sdk}-"))
        self.procs = []  # (name, Popen, stderr file object)
        self.stderr_files = []  # every stderr we captured, in start order
        self.threads = []
        self.seq = 0  # numbers the short commands, so each keeps its own stderr file
        with OPEN_WORLDS_LOCK:
            OPEN_WORLDS.add(self)

    def stderr_path(self, name):
        path = self.dir / f"{name}.stderr"
        self.stderr_files.append((name, path))
        return path

    def spawn(self, name, argv, env=None, pipe_stdout=False):
        """Starts a long-running process in its own session (so a terminal Ctrl-C reaches only
        us, and we stop it in order) with stderr (and stdout unless piped) captured to a file."""
        err = open(self.stderr_path(name), "wb")
        log(f"start {name}: {' '.join(argv)}")
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipe_stdout else err,
                stderr=err,
                env=child_env(env),
                cwd=self.dir,
                start_new_session=True,
            )
        except OSError as e:
            err.close()
            raise StepFailed(f"cannot start {name} ({argv[0]}): {e}") from e
        self.procs.append((name, proc, err))
        return proc

    def run(self, name, argv, timeout=COMMAND_TIMEOUT, env=None, check=True, watch=()):
        """Runs a short command to completion and returns (stdout, exit status); stderr goes to
        a file. With check, a non-zero status is a failure. While it runs, the long-running
        processes named in watch must stay alive (fail fast instead of waiting out timeout)."""
        log(f"run {name}: {' '.join(argv)}")
        with open(self.stderr_path(name), "wb") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=child_env(env),
                    cwd=self.dir,
                    start_new_session=True,
                )
            except OSError as e:
                raise StepFailed(f"cannot start {name} ({argv[0]}): {e}") from e
            self.procs.append((name, proc, None))
            deadline = time.monotonic() + timeout
            while True:
                try:
                    # Retrying communicate() after a timeout loses no output (subprocess docs).
                    out, _ = proc.communicate(timeout=0.5 if watch else timeout)
                    break
                except subprocess.TimeoutExpired:
                    try:
                        self.check_alive(*watch)
                    except StepFailed as e:
                        stop(proc)
                        raise StepFailed(f"{e} (while {name} was running)") from None
                    if time.monotonic() > deadline:
                        stop(proc)
                        out, _ = proc.communicate()
                        raise StepFailed(
                            f"{name} did not finish within {timeout:.0f} s;"
                            f" stdout: {out.decode(errors='replace')[-2000:]!r}"
                        )
        text = out.decode("utf-8", "replace")
        if check and proc.returncode != 0:
            raise StepFailed(f"{name} exited with status {proc.returncode}; stdout: {text[-2000:]!r}")
        return text, proc.returncode

    def check_alive(self, *names):
        for name, proc, _ in self.procs:
            if name in names and proc.poll() is not None:
                raise StepFailed(f"{name} exited early with status {proc.returncode}")

    def close(self, remove=True):
        with OPEN_WORLDS_LOCK:
            OPEN_WORLDS.discard(self)
        for name, proc, err in reversed(self.procs):
            if proc.poll() is None:
                began = time.monotonic()
                killed = stop(proc)
                log(f"stopped {name} in {time.monotonic() - began:.1f} s" + (" (SIGKILL)" if killed else ""))
            if err is not None:
                err.close()
        for t in self.threads:
            t.join(timeout=STOP_GRACE)
        if remove:
            self.remove()

    def remove(self):
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def report(self):
        """The tail of every captured stderr, as lines to print."""
        out = []
        for name, path in self.stderr_files:
            lines = tail(path)
            if not lines:
                out.append(f"  --- {name} stderr: empty ---")
                continue
            out.append(f"  --- {name} stderr (last {len(lines)} lines) ---")
            out += [f"  | {line}" for line in lines]
        if self.keep:
            out.append(f"  (kept {self.dir})")
        return out


def stop(proc):
    """SIGTERM to the process group we created, SIGKILL after STOP_GRACE; reaps the process.
    Returns whether SIGKILL was needed."""
    if proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=STOP_GRACE)
        return False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return True


def start_platform(world, bin_dir):
    """platform-server on 127.0.0.1:0; returns its http:// endpoint from the "listening on" line."""
    data = world.dir / "platform"
    data.mkdir(mode=0o700)
    proc = world.spawn(
        "platform-server",
        [str(bin_dir / "platform-server"), "--listen", "127.0.0.1:0", "--data-dir", str(data)],
        pipe_stdout=True,
    )
    addr = bound_address(world, "platform-server", proc, "listening on ")
    return f"http://{addr}", data


def bound_address(world, name, proc, prefix):
    """The address a process bound to port 0, from its stdout line `<prefix>ADDR` (bounded
    wait). Binding port 0 and reading it back never races: a port picked here and bound later
    can be taken meanwhile by any other process's connection."""
    first = queue.Queue(maxsize=1)

    def pump():
        # Keep draining stdout after the line so the process never blocks on a full pipe.
        with open(world.dir / f"{name}.stdout", "wb") as out:
            for raw in proc.stdout:
                out.write(raw)
                out.flush()
                line = raw.decode("utf-8", "replace").strip()
                if line.startswith(prefix) and first.empty():
                    first.put(line)

    t = threading.Thread(target=pump, name=f"{name}-stdout", daemon=True)
    t.start()
    world.threads.append(t)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        try:
            line = first.get(timeout=0.2)
            break
        except queue.Empty:
            world.check_alive(name)
            if time.monotonic() > deadline:
                raise StepFailed(f"{name} printed no '{prefix.strip()}' line within {STARTUP_TIMEOUT:.0f} s")
    log(f"{name} {line}")
    return line[len(prefix) :].strip()


def create_bot(world, bin_dir, spec, e2e, profile):
    """The bot of `spec`, made as the README makes one: the user of `profile` asks @BotManager
    with `e2e-chat newbot`, which draws the identity secret on this machine (the platform
    never has it) and writes the config entry."""
    entry = world.dir / f"bot-{spec['username']}.json"
    out, _ = world.run(
        "e2e-chat-newbot",
        [e2e, "--profile", profile, "newbot", spec["username"], "--name", spec["name"],
         "--capabilities", spec.get("capabilities", "default"), "--out", str(entry)],
        watch=("platform-server",),
    )
    created = parse_json_line(out, "e2e-chat newbot")
    bot = json.loads(entry.read_text())
    want = {"token", "bot_id_hex", "identity_recovery_secret_hex", "compat_user_id", "username", "first_name"}
    missing = sorted(want - bot.keys())
    if missing:
        raise StepFailed(f"e2e-chat newbot --out lacks {missing}; keys: {sorted(bot.keys())}")
    if created.get("bot_id_hex") != bot["bot_id_hex"]:
        raise StepFailed(f"e2e-chat newbot printed Bot ID {created.get('bot_id_hex')}, wrote {bot['bot_id_hex']}")
    return {k: bot[k] for k in sorted(want)}


def parse_json_line(out, what):
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError as e:
                raise StepFailed(f"{what} printed invalid JSON ({e}): {line[:500]!r}")
    raise StepFailed(f"{what} printed no JSON line; stdout: {out[-2000:]!r}")


def write_config(world, platform_url, bot, extra=None):
    """The gateway config of the world, with the optional fields of `extra` (e.g.
    webhook_secret_token_headers). Both listeners on port 0: the gateway says which ports it
    bound (`start_world` reads them)."""
    config = {
        "compatibility_profile_id": PROFILE_ID,
        "bot_platform_endpoint": platform_url,
        "compat_listen_addr": "127.0.0.1:0",
        "extensions_listen_addr": "127.0.0.1:0",
        "state_dir": str(world.dir / "gateway-state"),  # the gateway creates it 0700
        "bots": [bot],
        **(extra or {}),
    }
    path = world.dir / "gateway.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f, indent=2)
    return path


def wait_healthz(world, base):
    """Polls GET <base>/healthz until a bot reports "connected": true (bounded)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    last = "no answer yet"
    while time.monotonic() < deadline:
        world.check_alive("bot-gateway", "platform-server")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
                body = resp.read().decode("utf-8", "replace")
                last = f"HTTP {resp.status}: {body[:500]}"
                if resp.status == 200:
                    health = json.loads(body)
                    bots = health.get("bots") if isinstance(health, dict) else None
                    if isinstance(bots, list) and bots and all(
                        isinstance(b, dict) and b.get("connected") is True for b in bots
                    ):
                        log(f"healthz: {body[:300]}")
                        return
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}: {e.read()[:500]!r}"
        except (OSError, ValueError) as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.25)
    raise StepFailed(f"gateway /healthz not connected within {STARTUP_TIMEOUT:.0f} s; last: {last}")


def listen_until(world, e2e, profile, wants, timeout=REPLY_TIMEOUT, watch=("bot-gateway", "platform-server", "sdk-bot")):
    """Runs `e2e-chat listen` rounds until, for each (description, predicate) in wants, some
    received object satisfied the predicate (bounded by timeout). Returns (found, received):
    the first match per description and every object received, in order. Raises StepFailed
    naming what is still missing."""
    found = {}
    received = []
    status = None
    deadline = time.monotonic() + timeout
    while len(found) < len(wants):
        left = int(deadline - time.monotonic())
        if left <= 0:
            break
        world.check_alive(*watch)
        world.seq += 1
        # The exit status after a timeout is not part of the CLI contract; judge by the output.
        out, status = world.run(
            f"e2e-chat-listen-{world.seq}",
            [e2e, "--profile", profile, "listen", "--timeout", str(left), "--count", str(len(wants) - len(found))],
            timeout=left + 30,
            check=False,
            watch=watch,
        )
        if status != 0:
            log(f"e2e-chat listen exited with status {status}")
        for line in out.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                raise StepFailed(f"e2e-chat listen printed a non-JSON line: {line[:500]!r}")
            received.append(obj)
            log(f"received: {line[:300]}")
            for what, matches in wants:
                if what not in found and matches(obj):
                    found[what] = obj
                    break
    missing = [what for what, _ in wants if what not in found]
    if missing:
        raise StepFailed(
            f"within {timeout:.0f} s the user did not receive {'; '.join(missing)}; received: "
            f"{json.dumps(received, ensure_ascii=False)[:3000]} (last e2e-chat listen exit status {status})"
        )
    return found, received


def from_bot(obj, bot_username):
    sender = obj.get("from") or {}
    return sender.get("is_bot") is True and sender.get("username") == bot_username


def collect_replies(world, e2e, profile, bot_username, expected):
    """Runs `e2e-chat listen` until every expected text arrived from the bot (bounded). Events
    (objects with an "event" field, e.g. a chat action) are not replies and are passed over."""

    def reply(text):
        def matches(obj):
            if "event" in obj or obj.get("text") != text:
                return False
            if not from_bot(obj, bot_username):
                raise StepFailed(
                    f"reply {text!r} came with from={obj.get('from')!r}; expected is_bot=true, username={bot_username!r}"
                )
            return True

        return (repr(text), matches)

    _, received = listen_until(world, e2e, profile, [reply(t) for t in expected])
    unexpected = [m.get("text") for m in received if "event" not in m and m.get("text") not in expected]
    if unexpected:
        raise StepFailed(f"the user received unexpected messages {unexpected!r} (e.g. /start echoed as text)")


def start_bot_world(world, bin_dir, spec, username):
    """The world every scenario starts from: platform-server, a user `username` registered with
    e2e-chat, the bot of `spec` (created by that user with e2e-chat newbot, as the README does),
    and bot-gateway connected to it. Returns (bot, api_base, e2e, profile)."""
    platform_url, _ = start_platform(world, bin_dir)
    world.platform_url = platform_url  # for more users (run_group_tests.py)
    e2e = str(bin_dir / "e2e-chat")
    profile = str(world.dir / "alice")
    world.run(
        "e2e-chat-register",
        [e2e, "--server", platform_url, "--profile", profile, "register", username, "--name", "Alice"],
        watch=("platform-server",),
    )
    bot = create_bot(world, bin_dir, spec, e2e, profile)
    config = write_config(world, platform_url, bot, spec.get("config"))
    proc = world.spawn("bot-gateway", [str(bin_dir / "bot-gateway"), "serve", str(config)], pipe_stdout=True)
    api_base = "http://" + bound_address(world, "bot-gateway", proc, "compat listening on ")
    wait_healthz(world, api_base)
    return bot, api_base, e2e, profile


def run_in_world(label, world, steps):
    """Runs `steps()` in `world` and prints "PASS <label> (<seconds>)" or "FAIL <label>: why".
    Everything started is stopped either way; a failure's directory is reported, then removed
    (unless --keep)."""
    started = time.monotonic()
    try:
        steps()
    except StepFailed as e:
        world.close(remove=False)
        # One print, so the report of a world run in parallel is not interleaved with others.
        print("\n".join([f"FAIL {label}: {e}"] + world.report()), flush=True)
        world.remove()
        return False
    except BaseException:
        # Ctrl-C, SIGTERM or a bug in this script: still stop everything we started.
        world.close()
        raise
    world.close()
    print(f"PASS {label} ({time.monotonic() - started:.1f} s)", flush=True)
    return True


def run_sdk(sdk, bin_dir, keep):
    spec = SDKS[sdk]
    world = World(sdk, keep)

    def steps():
        bot, api_base, e2e, profile = start_bot_world(world, bin_dir, spec, f"alice_{sdk}")
        world.spawn(
            "sdk-bot",
            spec["argv"],
            env={"BOT_TOKEN": bot["token"], "BOT_API_BASE": api_base},
        )
        hello = f"hello {sdk}"
        for i, text in enumerate((hello, "/start"), 1):
            out, _ = world.run(
                f"e2e-chat-send-{i}",
                [e2e, "--profile", profile, "send", f"@{bot['username']}", text],
                watch=("platform-server", "bot-gateway"),
            )
            sent = parse_json_line(out, f"e2e-chat send {text!r}")
            log(f"sent {text!r}: {json.dumps(sent)}")
        collect_replies(world, e2e, profile, bot["username"], [f"echo: {hello}", spec["greeting"]])

    return run_in_world(sdk, world, steps)


def preflight(bin_dir, sdks):
    problems = []
    for name in ("platform-server", "bot-gateway", "e2e-chat"):
        if not os.access(bin_dir / name, os.X_OK):
            problems.append(f"missing binary {bin_dir / name} (cargo build --release --bins, or set BIN_DIR)")
    if any(s.split("-")[0] in ("ptb", "aiogram") for s in sdks) and not VENV_PYTHON.exists():
        problems.append(f"missing {VENV_PYTHON} (run scripts/sdk-setup.sh)")
    if any(s.split("-")[0] == "telegraf" for s in sdks):
        if not (SDK_DIR / "node" / "node_modules" / "telegraf").is_dir():
            problems.append("missing tests/sdk/node/node_modules/telegraf (run scripts/sdk-setup.sh)")
        if shutil.which("node") is None:
            problems.append("node not found on PATH (run scripts/setup.sh)")
    return problems


def run_all(cases, jobs):
    """Runs the cases (callables returning a bool or a list of bools), at most `jobs` at a time;
    returns the flat list of results. Cases run in parallel must not share a bot or a world.
    If this thread is interrupted (Ctrl-C, SIGTERM), every world still open is closed before
    the exception goes on, so no process outlives the run."""
    if jobs <= 1:
        return [ok for case in cases for ok in as_list(case())]
    results = [None] * len(cases)
    slots = threading.BoundedSemaphore(jobs)

    def worker(i, case):
        try:
            results[i] = as_list(case())
        except BaseException as e:  # a bug in a scenario: report it as a failure, not a hang
            print(f"FAIL case {i + 1}: {type(e).__name__}: {e}", flush=True)
            results[i] = [False]
        finally:
            slots.release()

    threads = []
    try:
        for i, case in enumerate(cases):
            slots.acquire()
            t = threading.Thread(target=worker, args=(i, case), name=f"case-{i + 1}", daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
    except BaseException:
        with OPEN_WORLDS_LOCK:
            worlds = list(OPEN_WORLDS)
        for world in worlds:
            world.close()
        raise
    return [ok for r in results for ok in r]


def as_list(result):
    return result if isinstance(result, list) else [result]


def run_main(run_one, description, label="", jobs=1, known=None):
    """The command line shared by the SDK runners: pick SDKs (of `known`, default every SDK),
    preflight, run (up to `jobs` SDKs at a time), print the tally."""
    known = list(known or SDKS)
    global VERBOSE
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sdks", nargs="*", metavar="SDK", help=f"which SDKs to test ({', '.join(known)}); default all")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each step")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args()
    VERBOSE = args.verbose
    sdks = args.sdks or known
    unknown = [s for s in sdks if s not in known]
    if unknown:
        parser.error(f"unknown SDK {', '.join(unknown)}; choose from {', '.join(known)}")

    # SIGTERM (e.g. from CI) unwinds like Ctrl-C, so every started process gets stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    bin_dir = default_bin_dir()
    problems = preflight(bin_dir, sdks)
    if problems:
        for sdk in sdks:
            print(f"FAIL {label}{sdk}: " + "; ".join(problems), flush=True)
        print(f"0 passed, {len(sdks)} failed")
        return 1

    results = run_all([lambda sdk=sdk: run_one(sdk, bin_dir, args.keep) for sdk in sdks], jobs)
    passed = sum(1 for ok in results if ok)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main():
    return run_main(run_sdk, __doc__.split("\n\n")[0], jobs=len(SDKS))


if __name__ == "__main__":
    sys.exit(main())
