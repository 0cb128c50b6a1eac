"""`EngineState`: what every part of `TaskEngine` shares.

`TaskEngine` is assembled from parts in their own modules (run hosting, leases, claiming, the
executor seam, deferred first writes); they all work on one engine's state. This base declares
that state (set in `TaskEngine.__init__`), the read-only settings mirroring `EngineConfig`, the
record writes every part makes (`_mutate`, `_finish`: compare-and-set through `ledger`), and the
guard background duties run under. Methods one part calls on another are declared here for the
type checker only; the parts define them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

import anyio
from anyio.abc import TaskGroup

from mcptasks._authoring.threaded import OwnerThreads
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig, PollLimit
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.journal import OwnerJournals
from mcptasks._runtime.limits import Limits
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import StoreRetry, permanent_errors
from mcptasks._runtime.polling import PollMarks
from mcptasks._runtime.retention import Retention
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.wakeups import Wakeups
from mcptasks.stores.base import TaskRecord, TaskStore

T = TypeVar("T")

logger = logging.getLogger("mcptasks")


async def _close_body(body: Any) -> None:
    if isinstance(body, AsyncGenerator):
        await body.aclose()


class Unsettled(NamedTuple):
    """The end of a run kept while the store was unreachable, written once it answers."""

    run: TaskRun
    outcome: Outcome


class _Setting(Generic[T]):
    """A read-only engine attribute mirroring the `EngineConfig` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, engine: EngineState, owner: type | None = None) -> T:
        value: T = getattr(engine.config, self.name)
        return value

    def __set__(self, engine: EngineState, value: T) -> None:
        raise AttributeError(
            f"TaskEngine.{self.name} is read-only: pass EngineConfig({self.name}=...) as config "
            "(or TaskEngine.configure before the engine starts)"
        )


class EngineState:
    """The state, settings and record writes shared by the parts of `TaskEngine`."""

    store: TaskStore
    config: EngineConfig
    instance_id: str
    tools: dict[str, TaskTool]
    observer: EngineObserver | None
    executor: Executor | None
    on_stuck_shutdown: Callable[[list[str]], None] | None
    _unsettled: dict[str, Unsettled]
    _epoch: str | None
    _vanished: set[str]
    _unstored: dict[str, TaskRecord]
    _storing: dict[str, anyio.Event]
    _unwritten: set[str]
    _unjournalled: set[str]
    _owner_journals: OwnerJournals
    _runs: dict[str, TaskRun]
    _retention: Retention
    _wakeups: Wakeups
    _active_by_owner: dict[str, int]
    _capabilities: dict[str, Any] | None
    _closing: bool
    _drained: anyio.Event | None
    _threads: OwnerThreads | None
    _polls: PollMarks
    _claim_wakeup: anyio.Event | None
    _claiming: int
    _task_group: TaskGroup | None
    _spawn_group: TaskGroup | None
    _exit_stack: AsyncExitStack | None

    run_tasks = _Setting[bool]()
    lease_ttl = _Setting[float]()
    max_concurrent = _Setting["int | None"]()
    claim_interval = _Setting[float]()
    no_worker_timeout = _Setting[float]()
    sweep_interval = _Setting[float]()
    input_poll_interval = _Setting[float]()
    poll_limit = _Setting[PollLimit]()
    poll_tolerance = _Setting[float]()
    recover_orphans = _Setting[bool]()
    limits = _Setting[Limits]()
    store_retry = _Setting[StoreRetry]()
    heartbeat_thread = _Setting[bool]()
    wedge_limit = _Setting[float]()

    @property
    def permanent_errors(self) -> tuple[type[BaseException], ...]:
        """The store errors that retrying cannot cure; every other store error is retried."""
        return permanent_errors(self.store)

    async def _every(self, interval: float, duty: Callable[[], Awaitable[object]]) -> None:
        while True:
            await anyio.sleep(interval)
            await self._guarded(duty)

    @staticmethod
    async def _guarded(duty: Callable[[], Awaitable[object]]) -> None:
        """Run a background duty; a failure (say, the store is briefly unreachable) is logged and
        the duty runs again next time instead of taking the engine down."""
        try:
            await duty()
        except Exception:
            logger.warning("mcptasks background duty %s failed; will retry", duty.__name__, exc_info=True)

    async def _finish(
        self,
        task_id: str,
        outcome: Outcome,
        *,
        only_runner: str | None = None,
        only_attempt: int | None = None,
        known: TaskRecord | None = None,
        status_message: str | None = None,
    ) -> TaskRecord | None:
        change = ledger.ended(
            outcome,
            ttl_ms=self._ttl_of,
            only_runner=only_runner,
            only_attempt=only_attempt,
            status_message=status_message,
        )
        finished = await self._mutate(task_id, change, known=known)
        if finished is not None and finished.terminal:
            log_task(outcome.status, finished)
        return finished

    def _ttl_of(self, record: TaskRecord) -> int | None:
        tool = self.tools.get(record.tool)
        return None if tool is None else tool.ttl_ms

    async def _mutate(
        self,
        task_id: str,
        change: Callable[[TaskRecord], TaskRecord | None],
        *,
        known: TaskRecord | None = None,
    ) -> TaskRecord | None:
        """`ledger.apply` (the first write of a record started with `defer` creates it)."""
        if task_id in self._unstored or task_id in self._storing:
            first = await self._store_deferred(task_id, change)
            if first is not None:
                return first
            known = None  # stored by another write meanwhile
        return await ledger.apply(
            self.store, task_id, change, known=known, push=self.config.push, observer=self.observer
        )

    if TYPE_CHECKING:  # defined by the parts (see the module docstring)

        async def _store_deferred(
            self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None] | None
        ) -> TaskRecord | None: ...

        async def _orphaned(self, record: TaskRecord, *, shutdown: bool = False) -> bool: ...

        async def _write_unsettled(self) -> None: ...

        async def _cancel(self, task_id: str, reason: str, known: TaskRecord | None) -> bool: ...

        async def _claim_forever(self) -> None: ...

        def _take(self, record: TaskRecord) -> TaskRun: ...

        async def _launch(self, task_group: TaskGroup, record: TaskRecord) -> None: ...
