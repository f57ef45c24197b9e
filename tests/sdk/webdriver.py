"""A minimal W3C WebDriver client (standard library only) for Debian's chromedriver driving
headless chromium: what the web chat's browser test needs and nothing more. Every wait is
bounded; a failure raises WebDriverError with what the driver said."""

import base64
import json
import subprocess
import time
import urllib.error
import urllib.request

ENTER = "\ue007"
# Chromium's own connections (updates, sync, Google's hosts) fail on a closed network, many at a
# time; these flags keep it to the page (see the machine notes on headless chromium).
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1100,800",
]


class WebDriverError(Exception):
    pass


class Browser:
    """A chromedriver process on `port` and one session of headless chromium."""

    def __init__(self, chromedriver, chromium, port, user_data_dir, log_path):
        self.base = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([chromedriver, f"--port={port}"], stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        self.session = None
        deadline = time.monotonic() + 30
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise WebDriverError("chromedriver did not become ready within 30 s")
            time.sleep(0.1)
        options = {"binary": chromium, "args": CHROMIUM_ARGS + [f"--user-data-dir={user_data_dir}"]}
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}}
        self.session = self._call("POST", "/session", caps, timeout=60)["sessionId"]

    def _call(self, method, path, body=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        rq = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(rq, timeout=timeout) as r:
                return json.load(r).get("value")
        except urllib.error.HTTPError as e:
            raise WebDriverError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None

    def _s(self, method, path, body=None, timeout=30):
        return self._call(method, f"/session/{self.session}{path}", body, timeout)

    def go(self, url):
        self._s("POST", "/url", {"url": url}, timeout=60)

    def script(self, source, *args):
        """Runs `source` (a function body; `arguments` holds args) in the page; its return value."""
        return self._s("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find(self, css):
        """The elements matching `css` (WebDriver element references)."""
        return self._s("POST", "/elements", {"using": "css selector", "value": css})

    def click(self, element):
        self._s("POST", f"/element/{element_id(element)}/click", {})

    def type(self, element, text):
        self._s("POST", f"/element/{element_id(element)}/value", {"text": text})

    def text(self, element):
        return self._s("GET", f"/element/{element_id(element)}/text")

    def wait(self, what, predicate, timeout=30):
        """Polls predicate() (bounded) until it returns something truthy, and returns that."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
            except WebDriverError as e:
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.2)
        raise WebDriverError(f"timed out waiting for {what} (last: {last!r})")

    def screenshot(self, path):
        png = base64.b64decode(self._s("GET", "/screenshot"))
        with open(path, "wb") as f:
            f.write(png)
        return png

    def close(self):
        try:
            if self.session:
                self._s("DELETE", "", timeout=10)
        except (OSError, WebDriverError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def element_id(element):
    return next(iter(element.values()))
