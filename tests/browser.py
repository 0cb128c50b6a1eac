"""Headless Chromium (the Debian `chromium` package) for looking at pages as a person would.

Two ways to use it, no extra packages: one-shot runs (`dump_dom`, `screenshot`: the page as it is
after its scripts ran), and a `Browser` driven over the DevTools protocol
(`--remote-debugging-pipe`: commands in on file descriptor 3, answers out on 4, NUL-separated
JSON) for pages a test clicks through. A `Browser` is blocking; call it from a worker thread
(`anyio.to_thread.run_sync`) in async tests.

`bash .ci/install-chromium` installs it where it is missing. Every run gets a new, empty profile
and stays off the network apart from the URL it is given.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--allow-file-access-from-files",
    "--disable-dev-shm-usage",
)
TIMEOUT = 120.0


def find_chromium() -> str | None:
    """The Chromium executable on PATH, or None."""
    for name in NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def chromium_or_reason() -> tuple[str | None, str]:
    """(executable, '') when Chromium is installed, else (None, how to install it)."""
    found = find_chromium()
    if found is None:
        return None, "Chromium is not installed (bash .ci/install-chromium, or apt-get install chromium)"
    return found, ""


def _run(url: str, *args: str, width: int, height: int, budget_ms: int) -> subprocess.CompletedProcess[str]:
    executable = find_chromium()
    if executable is None:
        raise RuntimeError(chromium_or_reason()[1])
    with tempfile.TemporaryDirectory(prefix="mcptasks-chromium-") as profile:
        completed = subprocess.run(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--virtual-time-budget={budget_ms}",
                *args,
                url,
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    if completed.returncode != 0:
        raise RuntimeError(f"chromium exited with {completed.returncode}: {completed.stderr[-2000:]}")
    return completed


def dump_dom(url: str, *, width: int = 1280, height: int = 900, budget_ms: int = 10_000) -> str:
    """The page's DOM after its scripts ran (for up to `budget_ms` of virtual time), as HTML."""
    return _run(url, "--dump-dom", width=width, height=height, budget_ms=budget_ms).stdout


def screenshot(
    url: str, path: Path, *, width: int = 1280, height: int = 2000, budget_ms: int = 10_000
) -> Path:
    """Save a PNG of the page's first `height` pixels at `width` to `path`."""
    _run(url, f"--screenshot={path}", width=width, height=height, budget_ms=budget_ms)
    if not path.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {path}")
    return path


def chromium_or_skip() -> str:
    """The Chromium executable, or skip the test with the way to install it."""
    import pytest

    found, reason = chromium_or_reason()
    if found is None:
        pytest.skip(reason)
    return found


class BrowserError(RuntimeError):
    """The browser reported an error, or a page expression threw."""


class Browser:
    """One headless Chromium with one page (tab)."""

    def __init__(
        self, executable: str, *, width: int = 1280, height: int = 900, timeout: float = 60.0
    ) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="mcptasks-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the protocol's fixed descriptors
            commands = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4
            answers = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self._process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable")
        self.call("Runtime.enable")

    # -- protocol --------------------------------------------------------------------------------

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe (did it crash?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read_message()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A DevTools command on the page's session."""
        return self._send(method, params, self._session)

    # -- page helpers ----------------------------------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float | None = None) -> Any:
        """Evaluate `expression` until it is truthy (bounded by a generous timeout); its value."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression!r} (last value {value!r})")
            time.sleep(0.05)  # polling a condition in the page, not synchronising on time

    def open(self, url: str) -> None:
        """Navigate and wait for the document to finish loading."""
        self.call("Page.navigate", {"url": url})
        self.wait_until(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    def screenshot(self, path: str) -> None:
        """Save a PNG of the page's full height."""
        import base64

        height = int(self.evaluate("document.documentElement.scrollHeight"))
        width = int(self.evaluate("document.documentElement.clientWidth"))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        with contextlib.suppress(BrowserError, OSError):
            self._send("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)
