"""`EngineObserver`: what a `TaskEngine` tells an observer (telemetry) about its tasks.

The engine calls these hooks only when `engine.observer` is set, so an engine without one pays
nothing. Hooks must be quick and must not raise; `mcptasks.telemetry.Telemetry` implements them
with OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Protocol

from mcptasks.stores.base import TaskRecord, TaskStore

__all__ = ["EngineObserver", "ObserverChain", "add_observer", "follows_runs"]


class EngineObserver(Protocol):
    """Hooks a `TaskEngine` calls at creation, execution, transitions and client requests."""

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store the engine should use (say, one that times every operation); called when
        the engine starts. Must return `store` itself if it is already wrapped."""

    def creating(self, record: TaskRecord) -> None:
        """`record` is about to be stored: the place to remember the creating request's trace
        context on it (`record.trace`)."""

    def created(self, record: TaskRecord) -> None:
        """`record` was stored as a new task."""

    def executing(self, record: TaskRecord) -> AbstractContextManager[object]:
        """Entered around one run of the task's body in this process (`record` as claimed or
        created); the body runs inside it. The run's end is recorded after it exits, then
        `settled` is called."""

    def settled(self, task_id: str) -> None:
        """The end of a run of `task_id` in this process was recorded (or could not be)."""

    def changed(self, before: TaskRecord, after: TaskRecord) -> None:
        """A write replaced `before` with `after` (status, message, input requests, outcome)."""

    def claimed(self, record: TaskRecord) -> None:
        """This engine claimed the queued `record` (already assigned to it)."""

    def requested(self, method: str, record: TaskRecord) -> None:
        """A client's `tasks/get`, `tasks/update` or `tasks/cancel` for `record` was accepted."""


def follows_runs(observer: EngineObserver | None) -> bool:
    """Whether `observer` needs a body to keep its task while it waits for input (telemetry's
    span belongs to it); an observer that does not says so with `follows_runs = False`."""
    return observer is not None and bool(getattr(observer, "follows_runs", True))


class ObserverChain:
    """Several observers told in turn (telemetry and the metrics endpoint, say)."""

    def __init__(self, observers: list[EngineObserver]) -> None:
        self.observers = observers

    @property
    def follows_runs(self) -> bool:
        """Whether one of the observers follows runs (see `follows_runs`)."""
        return any(follows_runs(observer) for observer in self.observers)

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store wrapped by each observer in turn."""
        for observer in self.observers:
            store = observer.wrap_store(store)
        return store

    def creating(self, record: TaskRecord) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.creating(record)

    def created(self, record: TaskRecord) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.created(record)

    @contextmanager
    def executing(self, record: TaskRecord) -> Iterator[object]:
        """Every observer's context, the first one outermost."""
        with ExitStack() as stack:
            for observer in self.observers:
                stack.enter_context(observer.executing(record))
            yield None

    def settled(self, task_id: str) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.settled(task_id)

    def changed(self, before: TaskRecord, after: TaskRecord) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.changed(before, after)

    def claimed(self, record: TaskRecord) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.claimed(record)

    def requested(self, method: str, record: TaskRecord) -> None:
        """Told to each observer."""
        for observer in self.observers:
            observer.requested(method, record)


def add_observer(
    current: EngineObserver | None, new: EngineObserver, *, replaces: type | None = None
) -> EngineObserver:
    """The observer an engine should have once `new` joins `current`: `new` alone when there was
    none; else both, in a chain, dropping the ones of type `replaces` (an observer set again)."""
    found = (
        []
        if current is None
        else list(current.observers)
        if isinstance(current, ObserverChain)
        else [current]
    )
    kept = [observer for observer in found if replaces is None or not isinstance(observer, replaces)]
    return ObserverChain([*kept, new]) if kept else new
