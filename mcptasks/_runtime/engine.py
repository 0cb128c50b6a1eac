"""`TaskEngine`: creates tasks durably, runs their bodies, and applies every transition.

The engine owns one anyio task group for its lifetime (`async with engine:`); every task body runs
inside it, never on the request that created it. All state goes through the store with
compare-and-set writes, so concurrent polls, updates and cancels cannot lose or reorder a change.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import AsyncExitStack
from contextvars import copy_context
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mcptasks._authoring.capabilities import gated
from mcptasks._authoring.context import BodyChannel, TaskContext
from mcptasks._authoring.results import error_result
from mcptasks._authoring.threaded import OwnerThreads, ThreadShare
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.config import PollLimit as PollLimit
from mcptasks._runtime.driver import (
    STOPPED,
    InlineChannel,
    Interrupt,
    OpenQuestion,
    Outcome,
    Parked,
    Pending,
    absorb_stray_cancel,
    body_run,
    cancelled_here,
    outcome_of_abort,
    outcome_of_error,
    outcome_of_value,
    run_body,
)
from mcptasks._runtime.feed import follow
from mcptasks._runtime.heartbeat import HeartbeatThread, heartbeat_thread
from mcptasks._runtime.instances import gone_from_this_host, new_instance_id
from mcptasks._runtime.journal import Journal
from mcptasks._runtime.limits import Limits, TooManyTasks
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver, follows_runs
from mcptasks._runtime.outages import STORE_REJECTED, StoreRetry, describe, is_permanent, permanent_errors
from mcptasks._runtime.polling import PollMarks, advertised_interval_ms
from mcptasks._runtime.recovery import abandoned, in_batches, lost_outcome, requeue
from mcptasks._runtime.retention import Retention
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.wakeups import Wakeup, Wakeups
from mcptasks._runtime.watchdog import Watchdog
from mcptasks.errors import ProtocolError, TaskNotFound, ToolError
from mcptasks.stores.base import (
    CHANGED_PREFIX,
    KeepsJournal,
    TaskExists,
    TaskRecord,
    TaskStore,
)
from mcptasks.stores.url import store_from_url
from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS

IMMEDIATE_TURNS = 6
"""How many scheduler turns a just-started body gets to end for an immediate result."""

IMMEDIATE_WRITE_WAIT = 5.0
"""How long (seconds) an immediate result waits for the store to record the body's end."""

BODY_TASK_NAME = "mcptasks task body"
"""The name of every body's anyio task (without one, anyio builds a new string per task)."""

T = TypeVar("T")

logger = logging.getLogger("mcptasks")


async def _close_body(body: Any) -> None:
    if isinstance(body, AsyncGenerator):
        await body.aclose()


_ONCE = StoreRetry(budget=0)
"""One attempt, no retry (the reaper tries kept ends again at its next round)."""

_AT_SHUTDOWN = StoreRetry(budget=5.0, maximum=1.0)
"""How long a body that ends while the engine shuts down waits for a failing store."""


def _refused(outcome: Outcome, exc: BaseException) -> Outcome:
    """The failure recorded instead of an end the store refused for good."""
    message = f"The task ended ({outcome.status}), but its end could not be recorded ({describe(exc)})."
    return Outcome(
        "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": STORE_REJECTED}}
    )


_HALTED = Outcome("failed", error={"code": INTERNAL_ERROR, "message": "The task ended while its body ran."})


async def _in_thread(call: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(call)


def new_task_id() -> str:
    """A fresh task id: 256 random bits from `secrets`, URL-safe (43 characters).

    Ids never start with "-", so they are safe as command-line arguments.
    """
    while True:
        task_id = secrets.token_urlsafe(32)
        if not task_id.startswith("-"):
            return task_id


class Unsettled(NamedTuple):
    """The end of a run kept while the store was unreachable, written once it answers."""

    run: TaskRun
    outcome: Outcome


class _Setting(Generic[T]):
    """A read-only engine attribute mirroring the `EngineConfig` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, engine: TaskEngine, owner: type | None = None) -> T:
        value: T = getattr(engine.config, self.name)
        return value

    def __set__(self, engine: TaskEngine, value: T) -> None:
        raise AttributeError(
            f"TaskEngine.{self.name} is read-only: pass EngineConfig({self.name}=...) as config "
            "(or TaskEngine.configure before the engine starts)"
        )


def _log_cancel_from_elsewhere(run: TaskRun, record: TaskRecord | None) -> None:
    """Log the cancel another process (an operator's `mcptasks admin cancel`, the dashboard, a
    replica answering `tasks/cancel`) wrote for a body this engine runs, when it learns of it;
    a cancel written here has stopped the run already and was logged then."""
    if record is not None and record.status == "cancelled" and not run.cancel_logged:
        run.cancel_logged = True
        log_task("cancelled", record)


class TaskEngine:
    """Runs task bodies and applies task transitions over a `TaskStore`.

    Use it as an async context manager: entering opens the store, announces this instance with a
    heartbeat, fails (or re-queues) the tasks of instances that are gone, and starts the task
    group with its background duties (change listener, heartbeat, orphan reaper, TTL sweeper,
    the claim loop that runs queued tasks, and one coroutine each that keeps the records of
    running bodies from expiring and that wakes bodies waiting for input to re-read their
    record). Leaving stops every body running here (recording `failed` for each) and closes the
    store.

    - `store`: a `TaskStore` or a store URL (`memory://`, `sqlite:///tasks.db`, `redis://...`,
      `postgresql://...`).
    - `config`: an `EngineConfig` (leases, intervals, poll limiting, `Limits`, `StoreRetry`,
      heartbeats, ...); the engine's settings are read-only attributes mirroring its fields.
    - `tools`: task tools to run when claimed from the queue or re-run after a crash.
    """

    run_tasks = _Setting[bool]()
    lease_ttl = _Setting[float]()
    max_concurrent = _Setting["int | None"]()
    claim_interval = _Setting[float]()
    sweep_interval = _Setting[float]()
    input_poll_interval = _Setting[float]()
    poll_limit = _Setting[PollLimit]()
    poll_tolerance = _Setting[float]()
    recover_orphans = _Setting[bool]()
    limits = _Setting[Limits]()
    store_retry = _Setting[StoreRetry]()
    heartbeat_thread = _Setting[bool]()
    wedge_limit = _Setting[float]()

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        config: EngineConfig | None = None,
        tools: Iterable[TaskTool] = (),
    ) -> None:
        self.store: TaskStore = store_from_url(store) if isinstance(store, str) else store
        self.config = config if config is not None else EngineConfig()
        self.instance_id = self.config.instance_id or new_instance_id()
        self._unsettled: dict[str, Unsettled] = {}
        """Ends of tasks that could not be recorded because the store kept failing."""
        self._epoch: str | None = None
        """The store's `epoch()` when last read (a change: the store lost its data)."""
        self._vanished: set[str] = set()
        """Runs that ended since the last `epoch()` read and found their record gone."""
        self._unstored: dict[str, TaskRecord] = {}
        """Records of runs started with `defer=True` and not written yet (the first write stores them)."""
        self._storing: dict[str, anyio.Event] = {}
        """Set when the first write of a deferred record is over (stored, or failed and put back)."""
        self._unwritten: set[str] = set()
        """Tasks answered with their immediate result while their end is still being recorded."""
        self._unjournalled: set[str] = set()
        """Durable tools already warned about: the store keeps no journal."""
        self.tools: dict[str, TaskTool] = {}
        for tool in tools:
            self.register(tool)
        self._runs: dict[str, TaskRun] = {}
        self._retention = Retention(self.hosts)
        """Keeps the records of running bodies from expiring (`ttl` is retention)."""
        self._wakeups = Wakeups()
        """Wakes bodies waiting for input to re-read their record (`input_poll_interval`)."""
        self._active_by_owner: dict[str, int] = {}
        self._capabilities: dict[str, Any] | None = None
        """The client capabilities of the last task created (see `_shared_capabilities`)."""
        self._closing = False
        self.on_stuck_shutdown: Callable[[list[str]], None] | None = None
        """Called at shutdown with the bodies still running `Limits.cancel_grace` after they
        were cancelled (`mcptasks serve` exits the process there instead of waiting forever)."""
        self._drained: anyio.Event | None = None
        self._threads: OwnerThreads | None = None
        """The worker threads of `def` bodies (`Limits.threads`, `threads_per_owner`)."""
        self._polls = PollMarks()
        self._claim_wakeup: anyio.Event | None = None
        self._claiming = 0
        self._task_group: TaskGroup | None = None
        self._spawn_group: TaskGroup | None = None
        """The task group, until it has closed (bodies ending during shutdown still settle)."""
        self._exit_stack: AsyncExitStack | None = None
        self.observer: EngineObserver | None = None
        """Told about creations, runs, transitions and client requests (telemetry); None: nobody."""

    @property
    def permanent_errors(self) -> tuple[type[BaseException], ...]:
        """The store errors that retrying cannot cure; every other store error is retried."""
        return permanent_errors(self.store)

    def configure(self, config: EngineConfig) -> None:
        """Replace the configuration before the engine starts (what `mcptasks serve` does)."""
        if self.running:
            raise RuntimeError("cannot reconfigure a running engine")
        self.config = config
        if config.instance_id is not None:
            self.instance_id = config.instance_id

    def use_store(self, store: TaskStore) -> None:
        """Replace the store before the engine starts."""
        if self.running:
            raise RuntimeError("cannot change the store of a running engine")
        self.store = store

    def register(self, tool: TaskTool) -> None:
        """Make `tool` runnable here when claimed from the queue or re-run after a crash."""
        self.tools[tool.name] = tool

    # -- what a run needs (`RunHost`) ------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether the engine is shutting down (every body is asked to stop)."""
        return self._closing

    def hosts(self, run: TaskRun) -> bool:
        """Whether `run` is still this engine's run of its task."""
        return self._runs.get(run.task_id) is run

    def wake_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` at `when` (`anyio.current_time()` clock): one duty times every waiting body."""
        return self._wakeups.set_at(when, action)

    def forget_wakeup(self, wakeup: Wakeup) -> None:
        """Forget a wake-up from `wake_at` (the wait ended sooner)."""
        self._wakeups.cancel(wakeup)

    def parks(self, run: TaskRun) -> bool:
        """Whether `run`'s body may wait for answers without its task: not while telemetry follows
        the run (its span belongs to the body's task), nor once it is stopping or out of time."""
        return (
            not follows_runs(self.observer)
            and not self._closing
            and run.stopped_at is None
            and (run.deadline is None or anyio.current_time() < run.deadline)
            and self._spawn_group is not None
        )

    def resume(self, run: TaskRun) -> None:
        """Resume `run`'s parked body in a new task, in the body's own context (nothing when it
        is not parked, or the engine has stopped)."""
        question = run.parked
        group = self._spawn_group
        if question is None or group is None or self._runs.get(run.task_id) is not run:
            return
        run.parked = None
        if isinstance(question.wakeup, Wakeup):
            self._wakeups.cancel(question.wakeup)
        assert question.context is not None
        start = partial(
            group.start_soon, self._run_and_settle, self.tools[run.tool], {}, run, run.owner, Parked(question)
        )
        question.context.run(start, name=BODY_TASK_NAME)

    def _park(self, run: TaskRun, question: OpenQuestion, channel: BodyChannel) -> None:
        """Keep a body that waits for answers without its task, until `resume` (an answer, a
        cancellation, its timeout, or the `input_poll_interval` re-read) gives it a new one."""
        question.context = copy_context()
        question.channel = channel
        run.parked = question
        run.scope = run.record = None  # the record is read again when the body resumes
        # `parks` allowed this just now: nothing stopped the run since (no await in between).
        wake_at = anyio.current_time() + self.input_poll_interval
        if run.deadline is not None:
            wake_at = min(wake_at, run.deadline)
        question.wakeup = self._wakeups.set_at(wake_at, run.poke)

    def start_soon(self, job: Callable[[], Coroutine[Any, Any, object]]) -> bool:
        """Start `job` in the engine's task group; False when the engine is not running."""
        if self._task_group is None:
            return False
        self._task_group.start_soon(job)
        return True

    async def write_record(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None], *, known: TaskRecord | None
    ) -> TaskRecord | None:
        """Apply `change` to the record with compare-and-set (None: the task ended or is gone)."""
        written = await self._mutate(task_id, change, known=known)
        run = self._runs.get(task_id)
        if written is None and run is not None and not run.cancel_logged:
            # A body's write found its task ended: perhaps cancelled by another process whose
            # announcement does not reach this one (SQLite), so log that cancel here.
            try:
                ended = await self.store.get(task_id)
            except Exception:  # only a log line depends on it; the body ends either way
                ended = None
            _log_cancel_from_elsewhere(run, ended)
        return written

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the engine is inside its `async with` block."""
        return self._task_group is not None

    async def __aenter__(self) -> TaskEngine:
        if self._exit_stack is not None:
            raise RuntimeError("TaskEngine is already running")
        stack = AsyncExitStack()
        await stack.__aenter__()
        if self.observer is not None:
            self.store = self.observer.wrap_store(self.store)
        try:
            await self.store.open()
            stack.push_async_callback(self.store.close)
            await self.store.heartbeat(self.instance_id, self.lease_ttl)
            self._closing = False
            self._threads = OwnerThreads(self.limits.threads, self.limits.thread_share)
            beats = self._heartbeat_thread()
            if beats is not None:
                beats.start()
                stack.push_async_callback(_in_thread, beats.stop)
            task_group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(task_group.cancel_scope.cancel)
            stack.push_async_callback(self._stop_runs)
            self._task_group = self._spawn_group = task_group
            task_group.start_soon(self._retention.run_forever)
            task_group.start_soon(self._wakeups.run_forever)
            if self.limits.blocking_threshold is not None:
                task_group.start_soon(Watchdog(self.limits.blocking_threshold).run)
            task_group.start_soon(self._every, self.limits.cancel_grace / 4, self._report_ignored)
            if self.recover_orphans:  # a large backlog goes on in the background
                await task_group.start(self._recover_forever)
            await task_group.start(self._listen)
            task_group.start_soon(self._every, self.sweep_interval, self.sweep)
            # The loop renews too: if the thread cannot reach the store, the lease still holds.
            task_group.start_soon(self._every, self.lease_ttl / 3, self._heartbeat)
            if beats is not None:
                task_group.start_soon(beats.tick_forever)  # shows the thread this loop still runs
            if self.run_tasks:
                task_group.start_soon(self._claim_forever)
        except BaseException:
            self._task_group = self._spawn_group = None
            await stack.aclose()
            raise
        self._exit_stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit_stack = self._exit_stack, None
        self._task_group = None
        if stack is not None:
            try:
                await stack.__aexit__(*exc_info)  # type: ignore[arg-type]
            finally:
                self._spawn_group = None

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

    async def _stop_runs(self) -> None:
        """At shutdown: stop every body and give them `cancel_grace` seconds to end."""
        self._closing = True
        for run in list(self._runs.values()):
            run.stop()
        drained = self._drained = anyio.Event()
        if not self._runs:
            drained.set()
        with anyio.move_on_after(self.limits.cancel_grace):
            await drained.wait()
        if self._runs:
            stuck = sorted({f"{run.tool!r} (task {run.task_id})" for run in self._runs.values()})
            logger.error(
                "shutting down with task bodies that ignore cancellation after %.0f s: %s",
                self.limits.cancel_grace,
                ", ".join(stuck),
            )
            if self.on_stuck_shutdown is not None:
                self.on_stuck_shutdown(stuck)

    async def _report_ignored(self) -> None:
        """Warn (once each) about bodies still running `cancel_grace` seconds after being stopped."""
        now = time.monotonic()
        for run in list(self._runs.values()):
            if run.stopped_at is not None and now - run.stopped_at > self.limits.cancel_grace:
                logger.warning(
                    "task tool %r (task %s) is still running %.0f s after it was cancelled: its body "
                    "ignores cancellation (it catches the cancellation exception or blocks in a thread)",
                    run.tool,
                    run.task_id,
                    now - run.stopped_at,
                )
                run.stopped_at = math.inf

    async def _heartbeat(self) -> None:
        await self.store.heartbeat(self.instance_id, self.lease_ttl)

    def _heartbeat_thread(self) -> HeartbeatThread | None:
        """A lease renewer on its own thread, when enabled and the store can make a `twin()`."""
        if not self.heartbeat_thread:
            return None
        return heartbeat_thread(self.store, self.instance_id, self.lease_ttl, self.wedge_limit)

    async def recover(self, *, first_batch_done: Callable[[], None] | None = None) -> int:
        """Handle active tasks whose runner is gone; return how many were failed or re-queued.

        A task whose runner has no live heartbeat, or whose runner was a process on this machine
        that no longer exists (a server killed and restarted), is failed with a "worker lost"
        error, or put back in the queue when its tool has `retry_on_crash` and attempts are left.
        Orphans are handled `RECOVERY_BATCH` at a time; `first_batch_done` is called after the
        first batch, so a caller can serve while a large backlog is still being recovered. Bodies
        running here whose record became terminal or vanished (a missed notification) are stopped.
        """
        await self._check_epoch()
        await self._write_unsettled()
        running_before = dict(self._runs)
        claiming = self._claiming
        live = {runner for runner in await self.store.live_runners() if not gone_from_this_host(runner)}
        records = await self.store.list_active()

        def orphaned(record: TaskRecord) -> bool:
            here = record.task_id in self._runs or record.task_id in self._unsettled
            return abandoned(
                record,
                instance_id=self.instance_id,
                live=live,
                here=here,
                claiming=bool(claiming or self._claiming),
            )

        orphans = [record for record in records if orphaned(record)]
        count = await in_batches(orphans, orphaned, self._orphaned, first_batch_done)
        await self._stop_stale(running_before, {record.task_id: record for record in records})
        if count:
            logger.info("mcptasks recovered %d task(s) whose server was lost", count)
        return count

    async def _check_epoch(self) -> None:
        """Notice a store that lost its data (a Redis restarted without persistence, a database
        restored from a backup): its `epoch()` changed since the last look.

        Says so once, in one error naming the store and the tasks of this engine it no longer
        holds; their bodies are stopped and their ends logged, not written into the new data.
        """
        read = getattr(self.store, "epoch", None)
        if read is None:
            return
        epoch = str(await read())
        previous, self._epoch = self._epoch, epoch
        vanished, self._vanished = self._vanished, set()
        if previous is None or previous == epoch:
            return
        mine = [*self._runs, *self._unsettled]
        lost = [task_id for task_id in mine if await self.store.get(task_id) is None]
        gone = len(vanished.union(lost))  # with the runs that met their missing record first
        logger.error(
            "the task store %r came back empty (its data marker changed from %s to %s: it was "
            "restarted without persistence, flushed or restored from a backup): %d task(s) of this "
            "server are no longer in it; their bodies are stopped and their ends logged, not written",
            self.store,
            previous,
            epoch,
            gone,
        )
        for task_id in lost:
            kept = self._unsettled.pop(task_id, None)
            if kept is not None:
                logger.error(
                    "task %s is no longer in the task store; its end was not written: %s",
                    task_id,
                    kept.outcome.summary(),
                )
            run = self._runs.get(task_id)
            if run is not None:
                run.stop()

    async def _stop_stale(self, running: Mapping[str, TaskRun], active: Mapping[str, TaskRecord]) -> None:
        """Stop the runs whose record ended, vanished or was taken over (a missed notification)."""
        for task_id, run in running.items():
            if self._runs.get(task_id) is not run or task_id in self._unstored or task_id in self._storing:
                continue  # not ours any more, or not written yet (started with `defer`)
            current = active.get(task_id)
            if current is None:  # ended, or created after the snapshot: look again
                current = await self.store.get(task_id)
            if current is None or current.terminal or not run.owns(current):
                _log_cancel_from_elsewhere(run, current)
                run.stop()

    async def _recover_forever(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Recover at once (returning to the starter after the first batch), then every lease/2."""
        announced = False

        def first_batch_done() -> None:
            nonlocal announced
            if not announced:
                announced = True
                task_status.started()

        try:
            await self.recover(first_batch_done=first_batch_done)
        except Exception:
            logger.warning("mcptasks orphan recovery failed; will retry", exc_info=True)
        first_batch_done()
        await self._every(self.lease_ttl / 2, self.recover)

    async def _orphaned(self, record: TaskRecord, *, shutdown: bool = False) -> bool:
        """Re-queue (retry_on_crash, attempts left) or fail a task whose runner is gone or stopping."""
        change = requeue(record, self.tools.get(record.tool), shutdown=shutdown)
        if change is None:
            outcome = lost_outcome(record, shutdown=shutdown)
            return await self._finish(record.task_id, outcome, only_runner=record.runner) is not None
        requeued = await self._mutate(record.task_id, change)
        if requeued is None:
            return False
        if requeued.runner is None:
            log_task("requeued", requeued)
        await self.store.publish(record.task_id)
        return True

    # -- creating and running ------------------------------------------------------------------

    async def start(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        owner: str,
        validated: dict[str, Any] | None = None,
        prepared: StartedBody | None = None,
        idempotency_key: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        defer: bool = False,
    ) -> TaskRecord:
        """Create a task for `tool` and start its body (or queue it); return the stored record.

        The record is in the store before this returns, except with `defer`: then a body run here
        (without `prepared` or `idempotency_key`) starts first, the caller must call `settled`
        next, and the record is written by the body's first write or by `settled`, whichever
        comes first; a body that ends at once is so stored once, already ended. Invalid arguments raise
        `InvalidArguments` and create nothing. `prepared` hands over a body already started by
        synchronous input rounds (its context and the yield it stopped at). With an
        `idempotency_key` that `owner` already used for a live task, that task is returned and
        nothing new runs. `client_capabilities` (stored with the task) limits the body's input
        requests to those capabilities (see `mcptasks._authoring.capabilities`); None does not limit them.
        """
        task_group = self._task_group
        if task_group is None:
            raise RuntimeError("TaskEngine is not running: use 'async with engine:' first")
        args = validated if validated is not None else tool.validate_arguments(arguments)
        self.register(tool)
        run_here = self.run_tasks or prepared is not None
        record = TaskRecord(
            task_id=new_task_id(),
            owner=owner,
            tool=tool.name,
            ttl_ms=tool.ttl_ms,
            poll_interval_ms=tool.poll_interval_ms,
            arguments=dict(arguments or {}),
            runner=self.instance_id if run_here else None,
            idempotency_key=idempotency_key,
            client_capabilities=self._shared_capabilities(client_capabilities),
        )
        run = None
        if run_here:
            self._check_room(owner)
            run = self._add_run(TaskRun(self, record.task_id, record.expires_at, owner=owner, tool=tool.name))
            run.journal = self._journal(tool, record.task_id)
        if self.observer is not None:
            self.observer.creating(record)
        if defer and run is not None and prepared is None and idempotency_key is None:
            return self._start_deferred(tool, args, run, record)
        try:
            stored = await self.store.create(record)
        except BaseException:
            self._drop_run(record.task_id)
            raise
        if stored.task_id != record.task_id:
            return await self._key_held(stored, record, prepared)
        log_task("created", record)
        if self.observer is not None:
            self.observer.created(record)
        if run is None:
            await self.store.publish(record.task_id)
        else:
            run.record = record
            task_group.start_soon(self._execute, tool, args, run, owner, prepared, name=BODY_TASK_NAME)
        return record

    async def _key_held(
        self, stored: TaskRecord, record: TaskRecord, prepared: StartedBody | None
    ) -> TaskRecord:
        """`start` found the idempotency key held by `stored`: drop the new run, return `stored`."""
        self._drop_run(record.task_id)
        if prepared is not None:
            await _close_body(prepared.body)
        if stored.tool != record.tool or stored.arguments != record.arguments:
            raise ProtocolError(
                INVALID_PARAMS,
                "This idempotency key was already used for a different call (another tool or "
                "other arguments); use a new key for a new call.",
                {"taskId": stored.task_id} if stored.tool == record.tool else None,
            )
        return stored

    def _start_deferred(
        self, tool: TaskTool, args: dict[str, Any], run: TaskRun, record: TaskRecord
    ) -> TaskRecord:
        """`start` with `defer`: the body runs before its record is written (see `_store_deferred`)."""
        assert self._task_group is not None
        self._unstored[record.task_id] = run.record = record
        self._task_group.start_soon(self._execute, tool, args, run, record.owner, None, name=BODY_TASK_NAME)
        return record

    def _shared_capabilities(self, declared: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """A copy of `declared` for a new record: the last task's copy when equal (clients send
        the same capabilities call after call, and records are values, so they can share it)."""
        if declared is None:
            return None
        last = self._capabilities
        if last is not None and last == declared:
            return last
        copy = self._capabilities = dict(declared)
        return copy

    def _check_room(self, owner: str) -> None:
        """Refuse a create over `Limits.max_active_per_owner` / `max_active` (nothing is created)."""
        limits = self.limits
        retry_ms = max(1, round(limits.retry_after * 1000))
        per_owner = limits.active_share  # checked first: it holds however many others run
        if per_owner is not None and self._active_by_owner.get(owner, 0) >= per_owner:
            raise TooManyTasks("owner", per_owner, retry_ms)
        if limits.max_active is not None and len(self._runs) >= limits.max_active:
            raise TooManyTasks("server", limits.max_active, retry_ms)

    def threads_for(self, tool: TaskTool, owner: str) -> ThreadShare | None:
        """The worker threads a `def` body of `tool` runs in for `owner` (None: `tool` has no
        `def` body, or the engine is not running)."""
        if self._threads is None or not tool.threaded:
            return None
        return self._threads.share(owner)

    def _add_run(self, run: TaskRun) -> TaskRun:
        self._runs[run.task_id] = run
        self._active_by_owner[run.owner] = self._active_by_owner.get(run.owner, 0) + 1
        return run

    def _drop_run(self, task_id: str) -> None:
        run = self._runs.pop(task_id, None)
        if run is not None:
            self._unwritten.discard(task_id)
            run.end()
            self._retention.forget(run)
            left = self._active_by_owner[run.owner] - 1
            if left:
                self._active_by_owner[run.owner] = left
            else:
                del self._active_by_owner[run.owner]
            if not self._runs and self._drained is not None:
                self._drained.set()

    def spawn(self, job: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `job` in the engine's task group: it outlives the request that started it and is
        cancelled when the engine stops. `RuntimeError` when the engine is not running."""
        task_group = self._task_group
        if task_group is None:
            raise RuntimeError("TaskEngine is not running: use 'async with engine:' first")
        task_group.start_soon(job)

    async def settled(self, task_id: str) -> Outcome | None:
        """The outcome of a just-started body that ended at once, else None (see `IMMEDIATE_TURNS`).

        Call it right after `start`. A body ends at once when it returns within `IMMEDIATE_TURNS`
        scheduler turns of starting without writing a checkpoint or asking a question; the
        statuses it yields meanwhile are held in memory, not written. So the rule is about the
        body alone and a tool gets the same answer on every store. Once such a body ended with a
        result, that is returned while its end is still being written (`_answers_unwritten`);
        otherwise (an error, or `Limits.max_unwritten_results` reached) this waits for the end
        to be recorded (at most `IMMEDIATE_WRITE_WAIT` seconds). A body that suspends on real
        work (I/O, sleeps) is not waited for: on asyncio it is seen to (`TaskRun.waits`) and the
        turns end there.
        After a `start` with `defer`, a None answer means the record is in the store by now (this
        writes it if nothing else did); if that write fails, the body is stopped and this raises.
        """
        try:
            final = await self._settled(task_id)
            if final is None:  # answered with the task: its record must be in the store first
                await self._store_deferred(task_id, None)
        except anyio.get_cancelled_exc_class():
            if task_id in self._unstored and self._task_group is not None:  # the caller went away
                self._task_group.start_soon(self._guarded, lambda: self._store_deferred(task_id, None))
            raise
        except BaseException:
            # The call fails as a failed create would have: nobody learns of the task, so its
            # body stops and no later write stores it.
            if self._unstored.pop(task_id, None) is not None and task_id in self._runs:
                self._runs[task_id].stop()
            raise
        return final

    async def _settled(self, task_id: str) -> Outcome | None:
        run = self._runs.get(task_id)
        if run is None or run.first_answer_taken:
            # a repeat of the call (an idempotency key that another call's run holds) gets the task
            return None
        run.first_answer_taken = True
        run.hold_statuses()
        try:
            for _ in range(IMMEDIATE_TURNS):
                if run.ending or run.yielded:
                    break
                await anyio.lowlevel.checkpoint()
        finally:
            run.release_statuses()
        if run.yielded or not run.ending:
            return None
        if self._answers_unwritten(run):
            self._unwritten.add(task_id)
            return run.outcome
        with anyio.move_on_after(IMMEDIATE_WRITE_WAIT):
            await run.ended.wait()
        return run.final

    def _answers_unwritten(self, run: TaskRun) -> bool:
        """Whether an immediate result is answered before its end is in the store.

        The answer does not name the task, so nobody waits for its record; a record whose write
        fails is kept and written once the store answers, as any task's end. Only an outcome the
        call is answered with (a result), and at most `Limits.max_unwritten_results` at once.
        """
        return (
            run.outcome is not None
            and run.outcome.result is not None
            and self._runs.get(run.task_id) is run
            and len(self._unwritten) < self.limits.max_unwritten_results
        )

    async def _store_deferred(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None] | None
    ) -> TaskRecord | None:
        """The first write of a record started with `defer`: create it with `change` applied.

        Returns the stored record, or None when the record was stored already (by another write,
        waited for here) or is not deferred: the caller then writes the usual way.
        """
        while True:
            record = self._unstored.pop(task_id, None)
            if record is not None:
                break
            storing = self._storing.get(task_id)
            if storing is None:
                return None
            await storing.wait()  # and look again: a failed first write puts the record back
        done = self._storing[task_id] = anyio.Event()
        try:
            first = (change(record) if change is not None else None) or record
            await self.store.create(first)
        except TaskExists:  # an earlier attempt was applied, its answer lost: it is stored
            return None
        except BaseException:
            self._unstored[task_id] = record  # the next write (or the reaper's) tries again
            raise
        finally:
            del self._storing[task_id]
            done.set()
        log_task("created", record)
        if self.observer is not None:
            self.observer.created(record)
            if first is not record:
                self.observer.changed(record, first)
        return first

    async def _claim_forever(self) -> None:
        while True:
            wakeup = self._claim_wakeup = anyio.Event()
            await self._guarded(self.claim)
            with anyio.move_on_after(self.claim_interval):
                await wakeup.wait()

    async def claim(self) -> int:
        """Take queued tasks from the store and run them here; return how many were started."""
        task_group = self._task_group
        if task_group is None or self._closing:
            return 0
        room = 256 if self.max_concurrent is None else self.max_concurrent - len(self._runs)
        if room <= 0:
            return 0
        self._claiming += 1
        try:
            claimed = await self.store.claim(self.instance_id, room)
            for record in claimed:
                run = self._runs.get(record.task_id) or self._add_run(
                    TaskRun(
                        self,
                        record.task_id,
                        record.expires_at,
                        record.attempt,
                        owner=record.owner,
                        tool=record.tool,
                    )
                )
                run.record = record
                run.saved = record.checkpoint
        finally:
            self._claiming -= 1
        for record in claimed:
            if self.observer is not None:
                self.observer.claimed(record)
            tool = self.tools.get(record.tool)
            if tool is None:
                self._drop_run(record.task_id)
                message = f"No worker knows the task tool {record.tool!r}; the task cannot run."
                await self._finish(
                    record.task_id, Outcome("failed", error={"code": INTERNAL_ERROR, "message": message})
                )
                continue
            try:
                args = tool.validate_arguments(record.arguments)
            except ToolError as exc:
                self._drop_run(record.task_id)
                await self._finish(record.task_id, Outcome("completed", result=error_result(str(exc))))
                continue
            run = self._runs[record.task_id]
            if tool.durable and not await self._replay(run, tool):
                continue
            task_group.start_soon(self._execute, tool, args, run, record.owner, None, name=BODY_TASK_NAME)
        return len(claimed)

    def _journal(self, tool: TaskTool, task_id: str, entries: list[str] | None = None) -> Journal | None:
        """A journal for a run of `tool` (None: it is not durable, or the store keeps none)."""
        if not tool.durable:
            return None
        store = self.store
        if not isinstance(store, KeepsJournal):
            if tool.name not in self._unjournalled:
                self._unjournalled.add(tool.name)
                logger.warning(
                    "task tool %r is durable, but the task store %r keeps no journal "
                    "(append_journal/read_journal): its body re-runs from the top when its run is lost",
                    tool.name,
                    store,
                )
            return None
        return Journal(store, task_id, tool.name, self.limits, entries)

    async def _replay(self, run: TaskRun, tool: TaskTool) -> bool:
        """Read the journal a claimed durable run replays from; False when the store failed
        (the task is released for a later claim)."""
        store = self.store
        if not isinstance(store, KeepsJournal):
            run.journal = self._journal(tool, run.task_id)
            return True
        try:
            entries = await self.store_retry.run(
                partial(store.read_journal, run.task_id),
                permanent=self.permanent_errors,
                what=f"reading the journal of task {run.task_id}",
            )
        except Exception as exc:
            logger.error(
                "could not read the journal of task %s (%s); releasing it", run.task_id, describe(exc)
            )
            self._drop_run(run.task_id)
            mine = self.instance_id

            def release(record: TaskRecord) -> TaskRecord | None:
                return record.evolve(runner=None) if record.runner == mine else None

            with anyio.move_on_after(self.lease_ttl):
                await self._guarded(partial(self._mutate, run.task_id, release))
            return False
        run.journal = self._journal(tool, run.task_id, entries)
        return True

    def _execute(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> Coroutine[Any, Any, None]:
        """The coroutine that runs one body and records its end (inside `EngineObserver.executing`
        when observed; without an observer, no frame of its own: a working task holds less)."""
        if self.observer is None or run.record is None:
            return self._run_and_settle(tool, args, run, owner, prepared)
        return self._observed(self.observer, run.record, tool, args, run, owner, prepared)

    async def _observed(
        self,
        observer: EngineObserver,
        record: TaskRecord,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> None:
        with observer.executing(record):
            await self._run_and_settle(tool, args, run, owner, prepared)

    async def _run_and_settle(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> None:
        """Run one body in this task, then record its outcome.

        Only the engine's own cancellation (stop, TTL, shutdown) decides an outcome here. The body
        may leave this task with its own cancellation requested (`current_task().cancel()` and no
        await after it): when that interrupts the record write, the write is done again in a
        fresh task (writes are compare-and-set and terminal states final, so a repeat is harmless).
        """
        outcome: Outcome | None = None
        try:
            with anyio.CancelScope() as scope:
                channel = self._begin(run, tool, scope, prepared if isinstance(prepared, Parked) else None)
                body, pending = await self._open_body(tool, args, run, channel, owner, prepared)
                del args, prepared  # the body holds what it needs; this frame lives as long as it
                # `settle_body`, without a frame of its own while the body runs
                end: Outcome | Interrupt
                try:
                    value = await body_run(body, channel, pending, run)
                    end = outcome_of_value(value, tool.name, self.limits.max_result_bytes)
                except Parked as parked:  # it waits for answers without this task
                    self._park(run, parked.question, channel)
                    return
                except BaseException as exc:
                    end = outcome_of_error(exc, tool.name)
                if run.journal is not None and isinstance(end, Outcome) and not scope.cancel_called:
                    diverged = run.journal.ended()
                    if diverged is not None:
                        end = Outcome("failed", error=diverged.to_error())
                outcome = end if isinstance(end, Outcome) else _HALTED
                await absorb_stray_cancel()
            if scope.cancel_called:
                outcome = self._stopped_outcome(run, tool, scope)
            elif outcome is STOPPED:  # cancelled from outside this run's scope: shutting down
                outcome = None
        except BaseException as exc:  # say, the body broke this task's cancel scope stack
            outcome = None if self._closing else outcome_of_abort(exc, tool.name)
        try:
            await self._settle_shielded(run, outcome)
        except anyio.get_cancelled_exc_class():
            if cancelled_here() or self._spawn_group is None:
                raise
            self._spawn_group.start_soon(self._settle_shielded, run, outcome)

    def _begin(
        self, run: TaskRun, tool: TaskTool, scope: anyio.CancelScope, resumed: Parked | None
    ) -> BodyChannel:
        """Put a run under `scope` (stop, timeout), keep its record (from its first start; a
        `resumed` body keeps its deadline and its channel too), and give its body's channel."""
        run.scope = scope
        if run.stopped_at is not None or self._closing:
            scope.cancel()
        if tool.timeout_ms is not None:
            if run.deadline is None:
                run.deadline = anyio.current_time() + tool.timeout_ms / 1000
            scope.deadline = run.deadline
        if resumed is not None and resumed.question.channel is not None:
            return resumed.question.channel
        self._keep_while_running(run, tool)
        declared = run.record.client_capabilities if run.record is not None else None
        return gated(run, declared, tool.name)

    async def _open_body(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        channel: BodyChannel,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> tuple[Any, Pending | None]:
        """The body to run and the yield it stopped at (a body handed over from input rounds, or
        one resumed at its question)."""
        if isinstance(prepared, Parked):
            return prepared.question.body, Pending(prepared)
        if run.journal is not None and self._threads is not None:
            run.threads = self._threads.share(owner)
        if prepared is None:
            context = TaskContext(channel, owner=owner, tool=tool.name)
            return tool.open_body(args, context, self.threads_for(tool, owner)), None
        body, context, pending, entries = prepared
        carried = context.saved  # saved during the input rounds before the task
        context._rebind(channel)
        if carried is not None:
            await run.save(carried)
        if entries:
            await run.carry(entries)
        return body, pending

    async def _settle_shielded(self, run: TaskRun, outcome: Outcome | None) -> None:
        run.ending = True
        run.outcome = outcome
        try:
            if not self._closing:
                await self._settle(run, outcome)
                return
            with anyio.CancelScope(shield=True):  # the task group is being cancelled
                await self._settle(run, outcome, patient=False)
        finally:
            if self.observer is not None:
                self.observer.settled(run.task_id)

    async def _settle(self, run: TaskRun, outcome: Outcome | None, *, patient: bool = True) -> None:
        """Record how a run ended and forget it (outcome None: the engine is shutting down).

        While the store fails, the end is retried (`store_retry`, when `patient`; a few seconds
        at shutdown); if it keeps failing, the outcome is kept and written by the reaper once the
        store answers (at shutdown it is logged in full instead).
        """
        try:
            if outcome is None:  # release the task (retry_on_crash) or fail it
                record = await self.store.get(run.task_id)
                if record is not None and run.owns(record):
                    await self._orphaned(record, shutdown=True)
            else:
                await self._record_end(
                    run, outcome, self.store_retry if patient else _AT_SHUTDOWN, keep=patient
                )
        except Exception as exc:
            logger.error(
                "could not release task %s at shutdown (%s); it stays active", run.task_id, describe(exc)
            )
        finally:
            self._drop_run(run.task_id)

    async def _record_end(
        self, run: TaskRun, outcome: Outcome, retry: StoreRetry, *, keep: bool, again: bool = False
    ) -> bool:
        """Write a run's end, retried on every store error but a permanent one; False when it
        could not be written yet (`keep`: it is kept in `_unsettled` for the reaper).

        An end the store refuses for good (a permanent error) is replaced by a failure that says
        so. `again`: a kept end, tried once more by the reaper (its first failure was logged).
        """
        task_id = run.task_id
        permanent = self.permanent_errors

        async def finish() -> TaskRecord | None:
            return await self._finish(
                task_id,
                outcome,
                only_runner=self.instance_id,
                only_attempt=run.attempt,
                known=None if again else run.record,
                status_message=run.pending_status,
            )

        try:
            written = await retry.run(
                finish, permanent=permanent, what=f"recording the end of task {task_id}"
            )
        except Exception as exc:
            if is_permanent(exc, permanent) and outcome.error_reason != STORE_REJECTED:
                logger.error(
                    "the task store refused the end of task %s (%s); recording a failure instead",
                    task_id,
                    describe(exc),
                    exc_info=exc,
                )
                return await self._record_end(run, _refused(outcome, exc), retry, keep=keep)
            if keep:
                self._unsettled[task_id] = Unsettled(run, outcome)
                if not again:
                    logger.error(
                        "could not record the end of task %s yet: the task store keeps failing (%s); "
                        "it is kept and written once the store answers",
                        task_id,
                        describe(exc),
                    )
            else:
                logger.error(
                    "could not record the end of task %s: the task store keeps failing (%s); its outcome: %s",
                    task_id,
                    describe(exc),
                    outcome.summary(),
                )
            return False
        await self._ended(run, outcome, written)
        return True

    async def _ended(self, run: TaskRun, outcome: Outcome, written: TaskRecord | None) -> None:
        """After an end write: note the final outcome, or say why the end was not written."""
        if written is not None and run.owns(written):
            run.final = outcome
            return
        if written is not None:
            logger.warning(
                "task %s was taken over by %s (attempt %d); this run's end (%s) is not written",
                run.task_id,
                written.runner,
                written.attempt,
                outcome.status,
            )
            return
        try:
            current = await self.store.get(run.task_id)
        except Exception:
            return  # ended, or vanished: nothing here to tell which
        if current is None:
            self._vanished.add(run.task_id)
            logger.error(
                "task %s is no longer in the task store; its end was not written: %s",
                run.task_id,
                outcome.summary(),
            )
        elif outcome is not _HALTED:
            logger.info(
                "task %s ended %s elsewhere before this run's end (%s) was written",
                run.task_id,
                current.status,
                outcome.status,
            )

    async def _write_unsettled(self) -> None:
        """Record the ends kept while the store failed (stops at the first that still fails)."""
        for task_id, (run, outcome) in list(self._unsettled.items()):
            del self._unsettled[task_id]
            if not await self._record_end(run, outcome, _ONCE, keep=True, again=True):
                return
            logger.info("recorded the end of task %s after the task store came back", task_id)

    def _stopped_outcome(self, run: TaskRun, tool: TaskTool, scope: anyio.CancelScope) -> Outcome | None:
        """The outcome of a body this engine cancelled (None: shutting down)."""
        if run.stop_outcome is not None:
            return run.stop_outcome
        if anyio.current_time() >= scope.deadline:
            return self._timeout_outcome(tool)
        if self._closing:
            return None
        return _HALTED  # stopped because the record ended or vanished: nothing left to write

    @staticmethod
    def _timeout_outcome(tool: TaskTool) -> Outcome:
        timeout_ms = tool.timeout_ms
        message = f"The task ran longer than its timeout ({timeout_ms} ms) and was stopped."
        data = {"reason": "timeout", "timeoutMs": timeout_ms}
        return Outcome("failed", error={"code": INTERNAL_ERROR, "message": message, "data": data})

    def _keep_while_running(self, run: TaskRun, tool: TaskTool) -> None:
        """Keep the record of a running body from expiring: `ttl` is retention, not a deadline."""
        if tool.ttl_ms is not None and self._task_group is not None:
            self._retention.keep(run, tool.ttl_ms)

    async def run_inline(
        self,
        tool: TaskTool,
        arguments: dict[str, Any],
        *,
        owner: str,
        channel: BodyChannel | None = None,
    ) -> Outcome:
        """Run a body to completion in the caller's task, without a task record.

        Used for requests that did not opt in to tasks. Without a `channel`, status yields are
        dropped and an input request ends the call with a tool error explaining why.
        """
        channel = channel if channel is not None else InlineChannel(tool.name)
        context = TaskContext(channel, owner=owner, tool=tool.name)
        body = tool.open_body(arguments, context, self.threads_for(tool, owner))
        return await run_body(body, channel, tool.name, max_result_bytes=self.limits.max_result_bytes)

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

    # -- client operations ---------------------------------------------------------------------

    async def get(
        self, task_id: str, *, owner: str, throttle: bool = False, yield_first: bool = True
    ) -> TaskRecord:
        """The task as `owner` may see it; `TaskNotFound` for unknown, expired or foreign ids.

        With `throttle`, the engine's `poll_limit` applies (this is a client poll). It yields to
        other tasks first, even when the store answers without suspending (memory), so a client
        polling in a loop in this process cannot starve the bodies it is waiting for; a request
        read from a transport (the event loop ran to read it) passes `yield_first=False`.
        """
        if yield_first:
            await anyio.lowlevel.checkpoint()
        record = await self.store.get(task_id, owner=owner)
        if record is None:
            raise TaskNotFound(task_id)
        if throttle and self.poll_limit != "off" and not record.terminal:
            await self._throttle(record)
        if throttle and self.observer is not None:
            self.observer.requested("tasks/get", record)
        return record

    async def _throttle(self, record: TaskRecord) -> None:
        minimum = self.poll_interval_ms(record) / 1000.0 * self.poll_tolerance
        await self._polls.throttle(record.task_id, minimum, self.poll_limit)

    def poll_interval_ms(self, record: TaskRecord) -> int:
        """The `pollIntervalMs` to advertise for `record` now (adaptive when configured)."""
        limit = self.config.adaptive_poll_max
        return advertised_interval_ms(record, None if limit is None else int(limit * 1000))

    async def update(self, task_id: str, responses: Mapping[str, Any], *, owner: str) -> None:
        """Record answers for outstanding keys; other keys are ignored. Terminal tasks: no-op."""
        current = await self.store.get(task_id, owner=owner)
        if current is None:
            raise TaskNotFound(task_id)
        if self.observer is not None:
            self.observer.requested("tasks/update", current)

        accepted: dict[str, Any] = {}
        if (
            await self._mutate(task_id, ledger.answered(responses, accepted), known=current) is not None
            and accepted
        ):
            await self._notify(task_id)

    async def cancel(self, task_id: str, *, owner: str, reason: str = "Cancelled by the client.") -> None:
        """Cancel the task (status `cancelled` now; the body stops at its next checkpoint).

        Cancelling a terminal task changes nothing.
        """
        current = await self.store.get(task_id, owner=owner)
        if current is None:
            raise TaskNotFound(task_id)
        if self.observer is not None:
            self.observer.requested("tasks/cancel", current)

        cancelled = await self._mutate(task_id, ledger.cancelled(reason), known=current)
        if cancelled is not None:
            log_task("cancelled", cancelled)
            run = self._runs.get(task_id)
            if run is not None:
                run.cancel_logged = True
                run.stop()
            await self.store.publish(task_id)

    async def _notify(self, task_id: str) -> None:
        run = self._runs.get(task_id)
        if run is not None:
            run.poke()
        await self.store.publish(task_id)

    # -- background duties ---------------------------------------------------------------------

    async def _listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # Notifications are a fast path; the reaper and the claim loop poll meanwhile.
        await follow(self.store, self._changed, what="change", task_status=task_status)

    def _changed(self, task_id: str) -> None:
        if task_id.startswith(CHANGED_PREFIX):
            return  # a change announced for listen streams: nothing for runners to do
        run = self._runs.get(task_id)
        if run is not None and self._task_group is not None:
            self._task_group.start_soon(self._guarded, lambda: self._refresh(run))
        elif run is None and self.run_tasks and self._claim_wakeup is not None:
            self._claim_wakeup.set()

    async def _refresh(self, run: TaskRun) -> None:
        record = await self.store.get(run.task_id)
        if record is None or record.terminal or not run.owns(record):
            _log_cancel_from_elsewhere(run, record)
            run.stop()
        else:
            run.poke()

    async def sweep(self, now: float | None = None) -> int:
        """Delete expired records and forget stale poll marks; return how many records went."""
        now = time.time() if now is None else now
        self._polls.forget_stale()
        return await self.store.delete_expired(now)

    @property
    def active_runs(self) -> int:
        """How many bodies run on this engine right now."""
        return len(self._runs)
