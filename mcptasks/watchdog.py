"""Notice an `async def` body that blocks the event loop, and say which one.

Every step of a body (from one `await` suspension to the next) runs through `watched`, which
marks the body as holding the loop's thread while it steps. A ticker task on the loop records
when the loop last got a turn; a watchdog thread wakes a few times per threshold and, when the
loop has not ticked for longer than the threshold while a body holds it, logs a warning naming
the tool and the task. The marker costs two dictionary writes per step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Generator
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

import anyio

logger = logging.getLogger("mcptasks")

T = TypeVar("T")

Label = tuple[str, "str | None"]
"""(tool name, task id or None for an inline run)."""

current_body: ContextVar[Label | None] = ContextVar("mcptasks_current_body", default=None)
"""The body the current anyio task runs (set in the body's own task)."""

_holding: dict[int, Label] = {}
"""Loop thread id -> the body stepping on it right now."""


class watched(Generic[T]):
    """Await `awaitable`, marking the current body as holding the loop while it runs."""

    __slots__ = ("_awaitable",)

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable

    def __await__(self) -> Generator[Any, Any, T]:
        label = current_body.get()
        iterator = self._awaitable.__await__()
        if label is None:
            return (yield from iterator)
        thread = threading.get_ident()
        send: Any = None
        error: BaseException | None = None
        while True:
            _holding[thread] = label
            try:
                suspended = iterator.send(send) if error is None else iterator.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                _holding.pop(thread, None)
            try:
                send, error = (yield suspended), None
            except BaseException as exc:  # delivered to the awaitable, as a plain await would
                send, error = None, exc


class Watchdog:
    """Warns when the event loop is held by one body for longer than `threshold` seconds."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._tick = time.monotonic()
        self._loop_thread = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def run(self) -> None:
        """The ticker: run it in the engine's task group; it starts the thread and stops it when cancelled."""
        self._loop_thread = threading.get_ident()
        self._tick = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="mcptasks-watchdog", daemon=True)
        self._thread.start()
        try:
            while True:
                self._tick = time.monotonic()
                await anyio.sleep(self.threshold / 4)
        finally:
            self._stop.set()

    def _watch(self) -> None:
        warned = -1.0
        while not self._stop.wait(self.threshold / 4):
            tick = self._tick
            stalled = time.monotonic() - tick
            holder = _holding.get(self._loop_thread)
            if stalled > self.threshold and holder is not None and tick != warned:
                warned = tick
                tool, task_id = holder
                where = f"task {task_id}" if task_id else "an inline call"
                logger.warning(
                    "task tool %r (%s) has blocked the event loop for %.1f s; every other request and "
                    "task waits meanwhile. Make it a 'def' body (it then runs in a worker thread) or "
                    "move the blocking call into 'await anyio.to_thread.run_sync(...)'.",
                    tool,
                    where,
                    stalled,
                )
