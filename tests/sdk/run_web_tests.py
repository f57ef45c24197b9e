#!/usr/bin/env python3
"""Runs the web chat (`e2e-chat web`) in headless chromium against a live platform-server and
bot-gateway, with a stock python-telegram-bot bot (python/ptb_web_demo.py) on the other end.

The local server first meets hostile requests: no session cookie, a wrong token, a foreign Host
(DNS rebinding), a foreign Origin, a change without Origin: each is refused with its status, and
every answer carries a strict Content-Security-Policy. Then a person's visit, in Debian's
chromium driven over WebDriver (chromedriver): the address e2e-chat printed opens the chat; a
text brings the echo; an inline button edits the menu in place, and a link button shows its
target; the one-time reply keyboard sends its button and goes; a peer's message with <script>
and <img onerror> is shown as text and runs nothing; a photo picked in the page comes back
from the bot and shows inline, as does ours; two files picked at once go as an album, drawn
as one grid; a vote in the bot's poll reaches it and shows as ours; our contact card is drawn as a card; the "who is this" panel
shows the Bot ID and marks it verified; "@bot query" lists the inline results and choosing one
sends it; while the platform is away the page says so and a line typed meanwhile waits, then
goes when it is back; a deleted message is struck through; a group made beside the page is
switched to, the bot answers a command there, and the panel lists its members and devices;
after `e2e-chat web` restarts, the open page reconnects by itself, shows the dialog's earlier
messages and goes on, and the group opened again shows its history with its senders named. A screenshot of
the chat is kept in test-artifacts/web-chat.png and checked not to be blank.

Usage: run_web_tests.py [-v] [--keep]   Prints PASS/FAIL, then exactly "N passed, M failed".
"""

import http.client
import os
import shutil
import signal
import struct
import sys
import zlib
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_media_tests as media_tests  # noqa: E402  (png)
import run_sdk_tests as base  # noqa: E402  (the shared world and process helpers)
from run_dialog_tests import check  # noqa: E402
from run_sdk_tests import StepFailed, log  # noqa: E402
from webdriver import ENTER, Browser, WebDriverError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR", ROOT / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
GROUP = "Web group"
# Our own messages' pictures, by natural width (0: not loaded yet).
OWN_IMAGES = "return [...document.querySelectorAll('#messages li.message.own .media img')].map((i) => (i.complete ? i.naturalWidth : 0))"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'

SPEC = {
    "argv": [str(base.VENV_PYTHON), str(base.SDK_DIR / "python" / "ptb_web_demo.py")],
    "username": "ptb_web_bot",
    "name": "PTB Web Demo",
    "path": "/ptb-web-demo",
    "capabilities": "dm,groups",
}


def web_url(world, name, proc):
    """The address `e2e-chat web` printed: http://127.0.0.1:PORT/?token=..."""
    line = base.bound_address(world, name, proc, "open http://")
    return "http://" + line


def request(host_port, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection(*host_port.split(":"), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def hostile_requests(url):
    """Every way in without the page's own session and origin is refused."""
    host = url.split("/")[2]
    token = url.split("token=", 1)[1]
    cookie = f"e2e_chat_{host.split(':')[1]}={token}"
    status, headers, _ = request(host, "GET", "/api/view")
    check(status == 401, "a request without the session cookie should get 401", status)
    csp = headers.get("Content-Security-Policy", "")
    check("script-src 'self'" in csp and "unsafe" not in csp and "default-src 'none'" in csp, "every answer carries a strict CSP", csp)
    check(headers.get("X-Content-Type-Options") == "nosniff", "answers carry nosniff", headers)
    status, _, _ = request(host, "GET", "/?token=" + "0" * 64)
    check(status == 401, "a wrong token should get 401", status)
    status, headers, _ = request(host, "GET", "/?token=" + token)
    set_cookie = headers.get("Set-Cookie", "")
    check(status == 303 and "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie, "the token becomes a strict cookie", headers)
    status, _, _ = request(host, "GET", "/api/view?after=0", {"Cookie": cookie, "Host": "evil.example:" + host.split(":")[1]})
    check(status == 421, "a foreign Host (DNS rebinding) should be refused with 421", status)
    status, _, _ = request(host, "GET", "/", {"Cookie": cookie, "Origin": "http://evil.example"})
    check(status == 403, "a foreign Origin should be refused with 403", status)
    line = '{"text": "from elsewhere"}'
    status, _, _ = request(host, "POST", "/api/line", {"Cookie": cookie, "Origin": "http://evil.example", "Content-Type": "application/json"}, line)
    check(status == 403, "a post from a foreign Origin should be refused with 403", status)
    status, _, _ = request(host, "POST", "/api/line", {"Cookie": cookie, "Content-Type": "application/json"}, line)
    check(status == 403, "a post without Origin should be refused with 403", status)
    status, _, _ = request(host, "GET", "/api/view?after=0", {"Cookie": cookie})
    check(status == 200, "the session cookie opens the view", status)


def message_with(browser, text, peer=True):
    """The newest message of the open conversation whose text is `text`, as {id, classes, text}."""
    side = "peer" if peer else "own"
    return browser.script(
        """const [want, side] = arguments;
        const found = [...document.querySelectorAll('#messages li.message.' + side)]
          .filter((li) => li.querySelector('.body') && li.querySelector('.body').textContent === want);
        const li = found[found.length - 1];
        return li ? { id: li.dataset.id || null, classes: li.className, marks: li.querySelector('.marks').textContent } : null;""",
        text,
        side,
    )


def say(browser, text):
    box = browser.find("#input")[0]
    browser.type(box, text + ENTER)


def expect_message(browser, text, peer=True, timeout=60):
    return browser.wait(f"the message {text!r}", lambda: message_with(browser, text, peer), timeout=timeout)


def not_blank(png):
    """Whether a PNG shows something: its pixel bytes take many values (a blank page: a few)."""
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat))) > 32


def platform_outage(world, browser, bin_dir):
    """The platform goes away and comes back on its address: the page says so, and a line
    typed meanwhile waits in the outbox and goes once it is back."""
    platform = next(proc for name, proc, _ in world.procs if name == "platform-server")
    platform.send_signal(signal.SIGTERM)
    platform.wait(timeout=30)
    browser.wait(
        "the outage banner",
        lambda: browser.script("const b = document.getElementById('banner'); return !b.hidden && b.textContent.includes('Connection to the platform lost')"),
        timeout=60,
    )
    say(browser, "while away")
    waiting = browser.wait("the waiting mark", lambda: "waiting for the platform" in (message_with(browser, "while away", peer=False) or {}).get("marks", ""))
    check(waiting, "a line typed during the outage waits", waiting)
    addr = world.platform_url[len("http://") :]
    again = world.spawn(
        "platform-server-2",
        [str(bin_dir / "platform-server"), "--listen", addr, "--data-dir", str(world.dir / "platform")],
        pipe_stdout=True,
    )
    base.bound_address(world, "platform-server-2", again, "listening on ")
    browser.wait("the outage banner to go", lambda: browser.script("return document.getElementById('banner').hidden"), timeout=60)
    expect_message(browser, "echo: while away", timeout=90)
    sent = message_with(browser, "while away", peer=False)
    check("✓" in sent["marks"], "the waiting line is sent once the platform is back", sent)


def visit(world, browser, url, web, e2e, profile, bot, bin_dir):
    for old in ("web-chat.png", "web-chat-failure.png", "web-group.png"):
        (ARTIFACTS / old).unlink(missing_ok=True)
    browser.go(url)
    browser.wait("the page to open the dialog", lambda: browser.script("return document.getElementById('title').textContent") == f"@{bot}")

    say(browser, "hello web")
    expect_message(browser, "hello web", peer=False)
    expect_message(browser, "echo: hello web")
    sent = browser.wait("the sent mark", lambda: "✓" in message_with(browser, "hello web", peer=False)["marks"])
    check(sent, "our line turns sent", sent)
    heard = browser.script("return document.getElementById('announce').textContent")
    check(heard == "@ptb_web_bot: echo: hello web", "a screen reader hears the new message alone", heard)

    say(browser, "/menu")
    menu = expect_message(browser, "Menu, page 1")
    bold = browser.script("return [...document.querySelectorAll('#messages li.message.peer .body .b')].map((b) => b.textContent)")
    check("Menu" in bold, "the bot's <b>Menu</b> is shown bold", bold)
    link = browser.find(f'#messages li[data-id="{menu["id"]}"] button.url')
    check(len(link) == 1 and browser.script("return arguments[0].title", link[0]) == "https://example.org/docs", "the link button shows its target", link)
    browser.click(browser.find(f'#messages li[data-id="{menu["id"]}"] button.inline:not(.url)')[0])
    edited = expect_message(browser, "Menu, page 2")
    check(edited["id"] == menu["id"] and "(edited)" in edited["marks"], "the press edits the menu in place", edited)

    say(browser, "/start")
    expect_message(browser, "Hello! Pick a colour.")
    red = browser.wait("the reply keyboard", lambda: [b for b in browser.find("#reply-keyboard button") if browser.text(b) == "Red"])
    browser.click(red[0])
    expect_message(browser, "You chose Red")
    gone = browser.wait("the one-time keyboard to go", lambda: browser.script("return document.getElementById('reply-keyboard').hidden"))
    check(gone, "the one-time keyboard is gone", gone)

    say(browser, HOSTILE)
    expect_message(browser, "echo: " + HOSTILE)
    ran = browser.script("return [window.__pwned === undefined, document.querySelectorAll('#messages img, #messages script').length]")
    check(ran == [True, 0], "a peer's markup is shown as text and runs nothing", ran)

    # A photo picked in the page goes to the bot, which sends it back: shown inline.
    photo = world.dir / "square.png"
    photo.write_bytes(media_tests.png(48, 32, (200, 40, 90)))
    browser.type(browser.find("#file")[0], str(photo))
    mine = browser.wait("our photo to show inline", lambda: [w for w in browser.script(OWN_IMAGES)[-1:] if w])
    check(mine == [48], "the photo we sent is shown inline too, read back from the profile", mine)
    browser.script("document.querySelector('#messages li.message.own .media img').__marked = 1")
    back = expect_message(browser, "your photo back")
    shown = browser.wait(
        "the photo to show inline",
        lambda: browser.script(
            "const img = document.querySelector(`#messages li[data-id='${arguments[0]}'] .media img`); return img && img.complete && img.naturalWidth",
            back["id"],
        ),
    )
    check(shown == 48, "the photo the bot sent back is shown inline, decrypted", shown)

    # Two files picked at once go as an album: our two photos share one grid; the bot sends
    # each back.
    pair = [world.dir / "one.png", world.dir / "two.png"]
    pair[0].write_bytes(media_tests.png(40, 30, (30, 120, 200)))
    pair[1].write_bytes(media_tests.png(36, 30, (30, 200, 120)))
    browser.type(browser.find("#file")[0], "\n".join(str(p) for p in pair))
    grid = browser.wait("our album as a grid", lambda: browser.script(
        """const grids = [...document.querySelectorAll('#messages li.album-grid')];
        const imgs = grids.length ? [...grids[grids.length - 1].querySelectorAll('li.message.own .media img')] : [];
        return imgs.length === 2 && imgs.every((i) => i.complete && i.naturalWidth > 0) && imgs.map((i) => i.naturalWidth);"""))
    check(sorted(grid) == [36, 40], "the album we sent is drawn as one grid of its photos", grid)
    browser.wait("both photos back", lambda: browser.script(
        "return [...document.querySelectorAll('#messages li.message.peer .body')].filter((b) => b.textContent === 'your photo back').length") == 3)
    # A file's element outlives the drawings since (a player would stop if it were replaced).
    kept = browser.script("return document.querySelector('#messages li.message.own .media img').__marked === 1")
    check(kept, "our first photo's element is kept across drawings", kept)

    # (/poll is chat mode's own command, as in the terminal: the bot's is /survey.)
    say(browser, "/survey")
    browser.wait("the poll's options", lambda: browser.find('#messages .poll button.option[data-n="2"]'))
    browser.click(browser.find('#messages .poll button.option[data-n="2"]')[-1])
    expect_message(browser, "You voted for Coffee")
    chosen = browser.script("return [...document.querySelectorAll('#messages .poll button.option[aria-pressed=\"true\"]')].map((b) => b.dataset.n)")
    check(chosen == ["2"], "the poll shows our vote", chosen)
    # Our contact card goes as a message of ours, drawn as a card.
    say(browser, "/contact")
    card = browser.wait("our card", lambda: browser.script("const c = [...document.querySelectorAll('#messages li.message.own .contact .name')].pop(); return c && c.textContent"))
    check("Alice" in card, "our shared contact is drawn as a card", card)
    edits = browser.script("const li = [...document.querySelectorAll('#messages li.message.own')].pop(); return li.querySelectorAll('.actions button[aria-label^=\"Edit\"]').length")
    check(edits == 0, "a card of ours offers no edit (only texts are edited)", edits)

    # Inline mode from the input: the results are a list; choosing one sends it.
    say(browser, f"@{bot} tea")
    hi = browser.wait("the inline results", lambda: browser.find('#inline-results button.inline-result[data-id="hi"]'))
    browser.click(hi[0])
    browser.wait("the results to go", lambda: browser.script("return document.getElementById('inline-results').hidden"))
    chose = browser.wait("the choice's note", lambda: browser.script(
        "return [...document.querySelectorAll('#messages li.note')].some((li) => li.textContent.includes('you chose result hi'))"))
    check(chose, "the chosen result is sent", chose)

    # Who is this: the Bot ID's short form, and marking it verified.
    browser.click(browser.find("#who-button")[0])
    facts = browser.wait("the identity panel", lambda: browser.script("return document.getElementById('who').open && document.getElementById('who-facts').textContent"))
    check("Bot ID" in facts and "not yet" in facts, "the panel shows the Bot ID, not verified yet", facts)
    browser.click(browser.find("#who-verify")[0])
    browser.wait("the mark", lambda: "yes, on" in browser.script("return document.getElementById('who-facts').textContent"))
    browser.click(browser.find("#who-close")[0])
    about = browser.wait("the header to say verified", lambda: "verified ✓" in browser.script("return document.getElementById('about').textContent"))
    check(about, "the header says verified", about)

    say(browser, "/gone")
    struck = browser.wait("the deletion", lambda: "deleted" in expect_message(browser, "This goes away")["classes"])
    check(struck, "a deleted message is struck through", struck)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "web-chat.png"
    png = browser.screenshot(shot)
    log(f"screenshot: {shot}")
    check(not_blank(png), "the screenshot shows the chat", str(shot))

    in_a_group(world, browser, e2e, profile, bot)
    platform_outage(world, browser, bin_dir)

    # The server restarts on the same address: the open page reconnects by itself.
    web.send_signal(signal.SIGTERM)
    check(web.wait(timeout=30) == 0, "e2e-chat web stops on SIGTERM", web.returncode)
    browser.wait("the outage banner", lambda: browser.script("const b = document.getElementById('banner'); return !b.hidden && b.textContent.includes('not answering')"))
    listen = url.split("/")[2]
    again = world.spawn("e2e-chat-web-2", [e2e, "--profile", profile, "web", f"@{bot}", "--listen", listen], pipe_stdout=True)
    check(web_url(world, "e2e-chat-web-2", again) == url, "the token is kept across a restart", url)
    browser.wait("the banner to go", lambda: browser.script("return document.getElementById('banner').hidden"))
    # The new process shows what the profile remembers of the dialog.
    expect_message(browser, "echo: hello web")
    expect_message(browser, "hello web", peer=False)
    say(browser, "after the restart")
    expect_message(browser, "echo: after the restart")
    # A group opened again shows what the profile remembers of it, each sender named.
    say(browser, f"/switch {GROUP}")
    browser.wait("the group to open", lambda: browser.script("return document.getElementById('title').textContent") == GROUP)
    menu = expect_message(browser, "Menu, page 1")
    who = browser.script(f"return document.querySelector('#messages li[data-id=\"{menu['id']}\"] .from').textContent")
    check(who == f"@{bot}", "the group's history names the bot as the sender", who)
    expect_message(browser, f"/menu@{bot}", peer=False)


def in_a_group(world, browser, e2e, profile, bot):
    """A group with the bot, made with the command line beside the open page: the page switches
    to it, the bot answers a command there, and the panel lists the members with their devices."""
    for step in (["group", "create", GROUP], ["group", "add", GROUP, f"@{bot}"]):
        world.seq += 1
        world.run(f"e2e-chat-{step[1]}-{world.seq}", [e2e, "--profile", profile, *step])
    say(browser, f"/switch {GROUP}")
    browser.wait("the group to open", lambda: browser.script("return document.getElementById('title').textContent") == GROUP)
    say(browser, f"/menu@{bot}")
    expect_message(browser, f"/menu@{bot}", peer=False)
    expect_message(browser, "Menu, page 1")
    browser.click(browser.find("#who-button")[0])
    facts = browser.wait("the members", lambda: browser.script("return document.getElementById('who').open && document.getElementById('who-facts').textContent"))
    check(f"@{bot} (bot)" in facts and "1 device" in facts and "owner" in facts, "the group's panel lists its members and their devices", facts)
    browser.click(browser.find("#who-close")[0])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    check(not_blank(browser.screenshot(ARTIFACTS / "web-group.png")), "the group's screenshot shows it", "web-group.png")
    say(browser, f"/switch @{bot}")
    browser.wait("the dialog to open again", lambda: browser.script("return document.getElementById('title').textContent") == f"@{bot}")


def what_the_page_shows(browser):
    """The banner and the end of the conversation, for a failure's report; and a screenshot
    (test-artifacts/web-chat-failure.png)."""
    try:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.screenshot(ARTIFACTS / "web-chat-failure.png")
        return browser.script(
            "return 'banner: ' + document.getElementById('banner').textContent + ' | notice: ' + document.getElementById('notice').textContent + ' | messages: ' + [...document.querySelectorAll('#messages > li')].slice(-8).map((li) => li.innerText.slice(0, 200)).join(' / ')"
        )
    except WebDriverError as e:
        return f"(the page could not be read: {e})"


def scenario(world, bin_dir):
    bot, api_base, e2e, profile = base.start_bot_world(world, bin_dir, SPEC, "alice_web")
    world.spawn("sdk-bot", SPEC["argv"], env={"BOT_TOKEN": bot["token"], "BOT_API_BASE": api_base})
    web = world.spawn("e2e-chat-web", [e2e, "--profile", profile, "web", f"@{bot['username']}", "--listen", "127.0.0.1:0"], pipe_stdout=True)
    url = web_url(world, "e2e-chat-web", web)
    hostile_requests(url)
    port = base.free_loopback_ports(1)[0]
    browser = Browser(CHROMEDRIVER, CHROMIUM, port, str(world.dir / "chromium"), str(world.dir / "chromedriver.log"))
    try:
        visit(world, browser, url, web, e2e, profile, bot["username"], bin_dir)
    except WebDriverError as e:
        raise StepFailed(f"browser: {e}; the page showed: {what_the_page_shows(browser)}") from None
    finally:
        browser.close()


def run(sdk, bin_dir, keep):
    world = base.World("web-chat", keep)
    ok = base.run_in_world("web chat (chromium, ptb)", world, lambda: scenario(world, bin_dir))
    for name in ("web-chat.png", "web-chat-failure.png", "web-group.png"):
        if (ARTIFACTS / name).exists():
            print(f"screenshot kept: {ARTIFACTS / name}", flush=True)
    return ok


def main():
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            print(f"FAIL web chat: {program} not found (scripts/setup.sh installs chromium and chromium-driver)")
            print("0 passed, 1 failed")
            return 1
    return base.run_main(run, __doc__.split("\n\n")[0], label="web ", jobs=1, known=["ptb"])


if __name__ == "__main__":
    sys.exit(main())
