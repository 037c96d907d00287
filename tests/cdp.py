"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (stdlib only).

Chromium reads commands on its fd 3 and writes replies/events on fd 4, one JSON message
per NUL-terminated frame: no websocket, no port, no network. Used by the ledger.html
browser test, and as a script to take the README's screenshot:

    uv run python -m tests.cdp LEDGER_DIR/ledger.html docs/ledger.png [--size 1280x720] [--hash 'run=<id>']
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]


# Set by .ci/run while it installs Chromium in the background: a file that appears holding "ok"
# (or why not) when apt-get ends. The tests start meanwhile; the browser test waits for it.
PENDING_ENV = "CLAIMGRID_CHROMIUM_PENDING"
INSTALL_WAIT_S = 480.0  # apt-get update + install from a slow mirror, inside the grid lane's 600 s test timeout


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def install_pending() -> bool:
    return bool(os.environ.get(PENDING_ENV))


def wait_for_install() -> str | None:
    """The reason Chromium is not there to use, after waiting for an install in progress
    (``PENDING_ENV``); None when it is."""
    marker = os.environ.get(PENDING_ENV)
    if marker:
        deadline = time.monotonic() + INSTALL_WAIT_S
        while not os.path.exists(marker):
            if time.monotonic() > deadline:
                return f"the Chromium install did not end within {INSTALL_WAIT_S:.0f} s"
            time.sleep(0.5)
        status = Path(marker).read_text().strip()
        if status != "ok":
            return f"the Chromium install failed: {status}"
    return None if chromium_path() else "chromium is not installed"


class Browser:
    """One headless Chromium with one page; ``evaluate`` runs JavaScript in it. Uncaught
    JavaScript exceptions of the page are collected in ``errors``."""

    def __init__(self, width: int = 1280, height: int = 720):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed")
        self.profile = tempfile.mkdtemp(prefix="cdp-profile-")
        # Keep our pipe ends above 4 so placing the child's ends on fds 3 and 4 clobbers nothing.
        high = lambda fd: (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10), os.close(fd))[0]
        to_chrome_r, self._w = map(high, os.pipe())
        self._r, from_chrome_w = map(high, os.pipe())

        def fds():  # runs in the child: its fd 3 reads our commands, fd 4 writes its replies
            os.dup2(to_chrome_r, 3)  # dup2 clears close-on-exec: both survive the exec
            os.dup2(from_chrome_w, 4)

        # close_fds=False: subprocess would otherwise close 3 and 4 after preexec_fn; every
        # other descriptor of ours is close-on-exec (Python's default), so nothing else leaks.
        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=fds,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.errors: list[str] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.resize(width, height)
        self.call("Runtime.enable", session=True)

    def resize(self, width: int, height: int) -> None:
        """The page's viewport (CSS pixels, scale 1)."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, session: bool = False, timeout: float = 30, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                frame, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(frame)
                if reply.get("method") == "Runtime.exceptionThrown":
                    details = reply["params"]["exceptionDetails"]
                    self.errors.append(f"{details.get('text')} {details.get('exception', {}).get('description')}")
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {method} within {timeout} s")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the debugging pipe")
                self._buf += chunk

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(
                f"JavaScript error: {res['exceptionDetails'].get('text')} "
                f"{res['exceptionDetails'].get('exception', {}).get('description')}"
            )
        return res["result"].get("value")

    def open(self, path: Path, fragment: str = "", timeout: float = 30) -> None:
        """Load ``path`` (a file: URL, ``#fragment`` appended when given) and wait for it."""
        self.call(
            "Page.navigate", session=True, url=Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        )
        deadline = time.monotonic() + timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not finish loading")
            time.sleep(0.05)

    def screenshot(self, out: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        Path(out).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def set_filter(browser: Browser, column: str, value: str) -> None:
    browser.evaluate(f"""(() => {{ const s = document.getElementById({json.dumps("f-" + column)});
        s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()""")


def search(browser: Browser, text: str) -> None:
    """Type ``text`` into the search box and wait past its debounce."""
    browser.evaluate(f"""(async () => {{ const q = document.getElementById('q');
        q.value = {json.dumps(text)}; q.dispatchEvent(new Event('input'));
        await new Promise(r => setTimeout(r, 400)); }})()""")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("html", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--size", default="1280x720", help="WIDTHxHEIGHT")
    ap.add_argument("--hash", default="", help="the view to open, e.g. 'run=<id>&model=obedient'")
    ap.add_argument("--scroll", type=int, default=0, help="scroll the reading pane down by this many pixels")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    with Browser(width, height) as b:
        b.open(args.html, args.hash)
        if args.scroll:
            b.evaluate(f"document.getElementById('detail').scrollTop = {args.scroll}")
        time.sleep(0.3)
        b.screenshot(args.png)
    print(args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
