"""Headless Chromium (the Debian `chromium` package) for looking at pages as a person would.

`bash .ci/install-chromium` installs it where it is missing. Every run gets a new, empty profile
and stays off the network apart from the URL it is given.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

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
