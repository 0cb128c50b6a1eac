"""The progress of a followed task on stderr: a live spinner line on a terminal, timestamped lines otherwise."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from mcptasks.cli.output import erase_line, one_line, redraw_line, write
from mcptasks.cli.render import current_message, elapsed

if TYPE_CHECKING:
    from mcptasks.client import DetailedTask


class StatusLine:
    """Task progress on stderr: a redrawn line on a terminal, timestamped lines otherwise."""

    def __init__(self, stream: TextIO, *, live: bool) -> None:
        self.stream = stream
        self.live = live
        unicode = (getattr(stream, "encoding", None) or "").lower().replace("-", "").startswith("utf")
        self.frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if unicode else "|/-\\"
        self.dot = " · " if unicode else " - "
        self.ellipsis = "…" if unicode else "~"
        self.task: DetailedTask | None = None
        self.started = time.time()
        self.frame = 0
        self.paused = 0
        self.drawn = False
        self.asked: dict[str, Any] | None = None

    def show(self, task: DetailedTask) -> None:
        """A new task state."""
        changed = self.task is None or (task.status, task.status_message) != (
            self.task.status,
            self.task.status_message,
        )
        self.task = task
        created = task.created_at_epoch()
        if created is not None:
            self.started = min(created, time.time())
        if self.live:
            self.redraw()
        elif changed:
            stamp = time.strftime("%H:%M:%S")
            shown = current_message(task)
            message = f": {one_line(shown)}" if shown else ""
            write(self.stream, f"[{stamp}] {one_line(task.status)}{message}\n")
        elif task.status == "input_required" and task.input_requests != self.asked:
            stamp = time.strftime("%H:%M:%S")
            write(self.stream, f"[{stamp}] {task.status}\n")
        self.asked = task.input_requests

    def tick(self) -> None:
        """Advance the spinner."""
        self.frame += 1
        self.redraw()

    def redraw(self) -> None:
        """Draw the line again (live mode, not paused)."""
        if not self.live or self.paused or self.task is None:
            return
        task = self.task
        text = f"{self.frames[self.frame % len(self.frames)]} {elapsed(time.time() - self.started)} "
        text += one_line(task.status)
        shown = current_message(task)
        if shown:  # escaped before it is measured: the escapes take room on the line too
            text += self.dot + one_line(" ".join(shown.split()))
        width = shutil.get_terminal_size((80, 24)).columns
        if len(text) > width - 1:
            text = text[: max(1, width - 2)] + self.ellipsis
        redraw_line(self.stream, text)
        self.drawn = True

    def clear(self) -> None:
        """Erase the live line."""
        if self.live and self.drawn:
            erase_line(self.stream)
            self.drawn = False

    def note(self, text: str) -> None:
        """Print a line of its own (above the live line)."""
        self.clear()
        write(self.stream, text + "\n")
        self.redraw()

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Keep the line erased while prompting."""
        self.clear()
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1
            self.redraw()

    async def spin(self) -> None:
        """Redraw every 0.1 s (live mode) until cancelled."""
        if not self.live:
            return
        while True:
            await anyio.sleep(0.1)
            self.tick()
