"""`mcptasks serve --reload`: serve in a child process and restart it when a file changes.

The parent watches the target's directory with `watchfiles`, the watcher uvicorn's own reload
uses (the operating system's file events, not polling; `pip install 'mcptasks[reload]'`), and
restarts the server once a burst of changes settles; `.venv`, `__pycache__`, hidden directories
and `node_modules` are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mcptasks.cli.errors import CliError
from mcptasks.cli.output import write

CHECK_MS = 500
"""How often, while no file changes, the supervisor looks whether the server exited."""

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


def watched(directory: Path) -> Callable[[Any, str], bool]:
    """The filter of the files under `directory` whose change restarts the server: the
    `WATCHED_SUFFIXES`, outside `SKIPPED_DIRECTORIES` and hidden directories."""

    def keep(change: Any, path: str) -> bool:
        if not path.endswith(WATCHED_SUFFIXES):
            return False
        try:
            folders = Path(path).relative_to(directory).parts[:-1]
        except ValueError:
            return False
        return not any(name in SKIPPED_DIRECTORIES or name.startswith(".") for name in folders)

    return keep


def _changes(directory: Path, stop: threading.Event) -> Iterator[set[tuple[Any, str]]]:
    """`watchfiles.watch` of `directory`: each settled burst of changes (an empty set every
    `CHECK_MS` without one), until `stop` is set; `CliError` when watchfiles is missing."""
    try:
        from watchfiles import watch
    except ImportError:
        raise CliError(
            "--reload needs the 'watchfiles' package, which is not installed: pip install 'mcptasks[reload]'"
        ) from None
    return watch(
        directory,
        watch_filter=watched(directory),
        stop_event=stop,
        rust_timeout=CHECK_MS,
        yield_on_timeout=True,
    )


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
    stop = threading.Event()
    changes = _changes(directory, stop)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    write(sys.stderr, f"mcptasks: watching {directory} for changes (--reload)\n")
    child = subprocess.Popen(command)
    reported = False
    try:
        for changed in changes:
            if not changed:
                if child.poll() is not None and not reported:  # a syntax error, say
                    reported = True
                    write(
                        sys.stderr,
                        f"mcptasks: the server exited (status {child.returncode}); a change restarts it\n",
                    )
                continue
            reported = False
            write(
                sys.stderr, f"mcptasks: {min(path for _, path in changed)} changed; restarting the server\n"
            )
            _stop(child)
            child = subprocess.Popen(command)
    except KeyboardInterrupt:
        _stop(child)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    _stop(child)
    return 0
