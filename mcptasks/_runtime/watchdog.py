"""Notice an `async def` body that blocks the event loop, and say which one.

Every step of a body (from one `await` suspension to the next) runs through `watched`, which
records which body is stepping on the loop's thread and since when. A watchdog thread wakes a few
times per threshold and, when one step has held the loop for longer than the threshold, logs a
warning naming the tool and the task (once per step). A busy loop whose steps are all short is
not reported. The bookkeeping is two dictionary writes and a clock read per step.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Generator
from contextvars import ContextVar
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import anyio

logger = logging.getLogger("mcptasks")

T = TypeVar("T")


class Label(Protocol):
    """What names a body for the watchdog (a task's run is its own label)."""

    @property
    def tool(self) -> str:
        """The tool's name."""

    @property
    def task_id(self) -> str | None:
        """The task's id; None for an inline run."""

    def waits(self) -> None:
        """The body suspended on real work: on asyncio, a future (I/O, a sleep, a thread, another
        task), where a bare checkpoint yields nothing. Never called on trio."""


class BodyLabel(NamedTuple):
    """A `Label` for a body run without a task run of its own (inline, input rounds)."""

    tool: str
    task_id: str | None

    def waits(self) -> None:
        """Nothing to note for such a body."""


current_body: ContextVar[Label | None] = ContextVar("mcptasks_current_body", default=None)
"""The body the current anyio task runs (set in the body's own task)."""

_holding: dict[int, tuple[Label, float]] = {}
"""Loop thread id -> the body stepping on it right now, and when the step began."""


class watched(Generic[T]):
    """Await `awaitable`, marking a body (`label`, default `current_body`) as holding the loop
    while it runs."""

    __slots__ = ("_awaitable", "_label")

    def __init__(self, awaitable: Awaitable[T], label: Label | None = None) -> None:
        self._awaitable = awaitable
        self._label = label

    def __await__(self) -> Generator[Any, Any, T]:
        label = self._label or current_body.get()
        iterator = self._awaitable.__await__()
        if label is None:
            return iterator
        return _Stepping(iterator, label)


class _Stepping(Generator[Any, Any, T]):
    """Steps `iterator` (an awaitable's), marking `label` as holding the loop during each step.

    An object rather than a generator: a body suspended in it holds two slots, not a frame.
    """

    __slots__ = ("_iterator", "_label")

    def __init__(self, iterator: Generator[Any, Any, T], label: Label) -> None:
        self._iterator = iterator
        self._label = label

    def send(self, value: Any) -> Any:
        """One step: resume the awaitable with `value` (its result raises `StopIteration`)."""
        thread = threading.get_ident()
        _holding[thread] = (self._label, time.monotonic())
        try:
            suspended_on = self._iterator.send(value)
        finally:
            _holding.pop(thread, None)
        if isinstance(suspended_on, asyncio.Future):
            self._label.waits()
        return suspended_on

    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        """One step: deliver an exception to the awaitable, as a plain await would."""
        thread = threading.get_ident()
        _holding[thread] = (self._label, time.monotonic())
        try:
            if val is None and tb is None:
                suspended_on = self._iterator.throw(typ)
            else:
                suspended_on = self._iterator.throw(typ, val, tb)  # pragma: no cover - the legacy form
        finally:
            _holding.pop(thread, None)
        if isinstance(suspended_on, asyncio.Future):
            self._label.waits()
        return suspended_on

    def close(self) -> None:
        """Close the awaitable (its awaiter was closed)."""
        self._iterator.close()


class Watchdog:
    """Warns when one step of a body holds the event loop for longer than `threshold` seconds."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._loop_thread = 0
        self._stop = threading.Event()

    async def run(self) -> None:
        """Run it in the engine's task group: it watches from a thread until cancelled."""
        self._loop_thread = threading.get_ident()
        self._stop.clear()
        threading.Thread(target=self._watch, name="mcptasks-watchdog", daemon=True).start()
        try:
            await anyio.sleep_forever()
        finally:
            self._stop.set()

    def _watch(self) -> None:
        warned = 0.0
        while not self._stop.wait(self.threshold / 4):
            holder = _holding.get(self._loop_thread)
            if holder is None:
                continue
            label, began = holder
            tool, task_id = label.tool, label.task_id
            held = time.monotonic() - began
            if held > self.threshold and began != warned:
                warned = began
                where = f"task {task_id}" if task_id else "an inline call"
                logger.warning(
                    "task tool %r (%s) has blocked the event loop for %.1f s; every other request and "
                    "task waits meanwhile. Make it a 'def' body (it then runs in a worker thread) or "
                    "move the blocking call into 'await anyio.to_thread.run_sync(...)'.",
                    tool,
                    where,
                    held,
                )
