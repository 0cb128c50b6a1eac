"""`mcptasks serve --reload`: serve in a child process and restart it when a file changes.

The parent polls the modification times of the files under the target's directory (no watcher
library needed); `.venv`, `__pycache__`, hidden directories and `node_modules` are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

POLL_SECONDS = 0.5
"""How often the files are checked."""

WATCHED_SUFFIXES = (".py", ".toml", ".json", ".yaml", ".yml", ".env")
SKIPPED_DIRECTORIES = {".venv", "venv", "__pycache__", "node_modules", "site-packages"}


def watched_directory(location: str) -> Path:
    """The directory to watch for a target's location (`path/to/file.py` or `package.module`)."""
    if location.endswith(".py") or os.sep in location or "/" in location:
        return Path(location).resolve().parent
    try:
        spec = importlib.util.find_spec(location.partition(".")[0])
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
        origin = Path(spec.origin).resolve()
        return origin.parent.parent if origin.name == "__init__.py" else origin.parent
    return Path.cwd()


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Modification time and size of each watched file under `directory` (the size too: writes
    within one tick of the file system's clock leave the modification time as it was)."""
    found: dict[str, tuple[int, int]] = {}
    for root, directories, files in os.walk(directory):
        directories[:] = [d for d in directories if d not in SKIPPED_DIRECTORIES and not d.startswith(".")]
        for name in files:
            if name.endswith(WATCHED_SUFFIXES):
                path = os.path.join(root, name)
                try:
                    status = os.stat(path)
                except OSError:
                    continue
                found[path] = (status.st_mtime_ns, status.st_size)
    return found


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> str | None:
    for path in sorted(before.keys() | after.keys()):
        if before.get(path) != after.get(path):
            return path
    return None


def _settled(directory: Path, seen: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The files once two looks in a row agree: an editor or a copy still writing is waited for,
    so the server does not start on a half-written file."""
    while True:
        time.sleep(POLL_SECONDS)
        now = snapshot(directory)
        if now == seen:
            return now
        seen = now


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def supervise(arguments: Sequence[str], directory: Path) -> int:
    """Run `mcptasks ARGUMENTS` (a `serve` without `--reload`) and restart it whenever a file under
    `directory` changes, until SIGINT (exit 130) or SIGTERM (exit 0)."""
    command = [sys.executable, "-m", "mcptasks", *arguments]
    terminated: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: terminated.append(signum))
    print(f"mcptasks: watching {directory} for changes (--reload)", file=sys.stderr, flush=True)
    files = snapshot(directory)
    child = subprocess.Popen(command)
    reported = False
    try:
        while not terminated:
            time.sleep(POLL_SECONDS)
            now = snapshot(directory)
            changed = _changed(files, now)
            if changed is None:
                if child.poll() is not None and not reported:  # a syntax error, say
                    reported = True
                    print(
                        f"mcptasks: the server exited (status {child.returncode}); a change restarts it",
                        file=sys.stderr,
                        flush=True,
                    )
                continue
            files, reported = _settled(directory, now), False
            print(f"mcptasks: {changed} changed; restarting the server", file=sys.stderr, flush=True)
            _stop(child)
            child = subprocess.Popen(command)
    except KeyboardInterrupt:
        _stop(child)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    _stop(child)
    return 0
