"""`EngineObserver`: what a `TaskEngine` tells an observer (telemetry) about its tasks.

The engine calls these hooks only when `engine.observer` is set, so an engine without one pays
nothing. Hooks must be quick and must not raise; `mcptasks.telemetry.Telemetry` implements them
with OpenTelemetry.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from mcptasks.stores.base import TaskRecord, TaskStore

__all__ = ["EngineObserver"]


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
