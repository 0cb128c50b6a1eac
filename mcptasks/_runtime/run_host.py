"""`RunHost`: the small part of the engine a `TaskRun` may use.

A run writes its own record and waits for its own answers, but the store, the limits, the store
retry budget, wakeups, parking and the engine's task group belong to the engine it runs on. This
protocol names exactly those, so `mcptasks._runtime.run` depends on no engine module and a test
can run a body against a small fake host.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.wakeups import Wakeup
from mcptasks.stores.base import TaskRecord, TaskStore

Run = TypeVar("Run", contravariant=True)
"""The run type a host hosts (`TaskRun`; a parameter, so this module needs no import of it)."""


class RunHost(Protocol[Run]):
    """What a run (`TaskRun`) needs from the host it runs on."""

    @property
    def instance_id(self) -> str:
        """The id this engine runs tasks under (`TaskRecord.runner`)."""

    @property
    def store(self) -> TaskStore:
        """The task store."""

    @property
    def config(self) -> EngineConfig:
        """The engine's configuration (limits, store retries, the input poll interval)."""

    @property
    def permanent_errors(self) -> tuple[type[BaseException], ...]:
        """The store errors that retrying cannot cure (every other one is retried)."""

    @property
    def stopping(self) -> bool:
        """Whether the engine is shutting down (every body is asked to stop)."""

    def hosts(self, run: Run) -> bool:
        """Whether `run` is still the engine's run of its task."""

    def wake_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` at `when` (`anyio.current_time()` clock)."""

    def forget_wakeup(self, wakeup: Wakeup) -> None:
        """Forget a wake-up from `wake_at` (the wait ended sooner)."""

    def parks(self, run: Run) -> bool:
        """Whether `run`'s body may wait for answers without its task now (`ask_or_park`)."""

    def resume(self, run: Run) -> None:
        """Resume `run`'s parked body in a new task (nothing when it is not parked)."""

    def start_soon(self, job: Callable[[], Coroutine[Any, Any, object]]) -> bool:
        """Start `job` in the engine's task group; False when the engine is not running."""

    async def write_record(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None], *, known: TaskRecord | None
    ) -> TaskRecord | None:
        """Apply `change` to the record with compare-and-set (None: the task ended or is gone)."""
