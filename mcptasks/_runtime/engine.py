"""`TaskEngine`: creates tasks durably, runs their bodies, and applies every transition.

The engine owns one anyio task group for its lifetime (`async with engine:`); every task body runs
inside it, never on the request that created it. All state goes through the store with
compare-and-set writes, so concurrent polls, updates and cancels cannot lose or reorder a change.

This module is the facade: creation (`start`, idempotency, admission), `settled`, inline runs,
the client operations (`get`, `update`, `cancel`), the change listener, the TTL sweep,
configuration and the lifecycle. The rest is in the parts `TaskEngine` is assembled from:
`hosting` (the in-process run host: running and settling bodies, parking), `leases` (heartbeat
and recovery), `claiming` (the queue), `executing` (the executor seam), `deferred` (immediate
results and deferred first writes), on the shared state of `engine_state`.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mcptasks._authoring.context import BodyChannel, TaskContext
from mcptasks._authoring.threaded import OwnerThreads
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.claiming import Claiming
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.config import PollLimit as PollLimit
from mcptasks._runtime.deferred import IMMEDIATE_TURNS as IMMEDIATE_TURNS
from mcptasks._runtime.deferred import IMMEDIATE_WRITE_WAIT as IMMEDIATE_WRITE_WAIT
from mcptasks._runtime.deferred import DeferredWrites
from mcptasks._runtime.driver import InlineChannel, Outcome, run_body
from mcptasks._runtime.engine_state import Unsettled as Unsettled
from mcptasks._runtime.engine_state import _close_body
from mcptasks._runtime.executing import ExecutorSeam
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.feed import follow
from mcptasks._runtime.hosting import BODY_TASK_NAME as BODY_TASK_NAME
from mcptasks._runtime.hosting import RunHosting, _log_cancel_from_elsewhere
from mcptasks._runtime.instances import new_instance_id
from mcptasks._runtime.journal import OwnerJournals
from mcptasks._runtime.leases import Leases
from mcptasks._runtime.limits import TooManyTasks
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.polling import PollMarks, advertised_interval_ms
from mcptasks._runtime.request_params import checked_answers
from mcptasks._runtime.retention import Retention
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.wakeups import Wakeups
from mcptasks._runtime.watchdog import Watchdog
from mcptasks.errors import ProtocolError, TaskNotFound
from mcptasks.stores.base import CHANGED_PREFIX, CountsActive, TaskRecord, TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.wire import INVALID_PARAMS

logger = logging.getLogger("mcptasks")


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


class TaskEngine(Claiming, RunHosting, Leases, ExecutorSeam, DeferredWrites):
    """Runs task bodies and applies task transitions over a `TaskStore`.

    Use it as an async context manager: entering opens the store, announces this instance with a
    heartbeat, fails (or re-queues) the tasks of instances that are gone, and starts the task
    group with its background duties (change listener, heartbeat, orphan reaper, TTL sweeper,
    the claim loop that runs queued tasks, and one coroutine each that keeps the records of
    running bodies from expiring and that wakes bodies waiting for input to re-read their
    record). With an executor (`EngineConfig.executor`) the engine runs no body of its own: it
    connects the executor and submits every new task to it, and with `run_tasks` it also works
    for it in place of the claim loop. Leaving stops every body running here (recording `failed`
    for each, or handing durable ones over) and closes the store.

    - `store`: a `TaskStore` or a store URL (`memory://`, `sqlite:///tasks.db`, `redis://...`,
      `postgresql://...`).
    - `config`: an `EngineConfig` (leases, intervals, poll limiting, `Limits`, `StoreRetry`,
      heartbeats, ...); the engine's settings are read-only attributes mirroring its fields.
    - `tools`: task tools to run when claimed from the queue or re-run after a crash.
    """

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
        self._owner_journals = OwnerJournals()
        """The journal bytes of each owner's durable runs here (`Limits.max_journal_bytes_per_owner`)."""
        self.tools: dict[str, TaskTool] = {}
        for tool in tools:
            self.register(tool)
        self._runs: dict[str, TaskRun] = {}
        self._retention = Retention(self.hosts)
        """Keeps the records of running bodies from expiring (`ttl` is retention)."""
        self._wakeups = Wakeups()
        """Wakes bodies waiting for input to re-read their record (`input_poll_interval`)."""
        self._active_by_owner: dict[str, int] = {}
        self._uncounted = False
        """Whether the warning that the store cannot count an owner's active tasks was logged."""
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
        self.executor: Executor | None = None
        """Where bodies run when not here (`EngineConfig.executor`), while the engine runs."""

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
            await self._heartbeat()
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
            await self._start_running(stack, task_group)
        except BaseException:
            self._task_group = self._spawn_group = None
            self.executor = None
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
                self.executor = None

    # -- creating ------------------------------------------------------------------------------

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
        elsewhere = self.executor is not None  # an executor's workers run every body
        run_here = not elsewhere and (self.run_tasks or prepared is not None)
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
        if not run_here:
            await self._check_queued_room(owner)
        else:
            self._check_room(owner)
            run = self._add_run(TaskRun(self, record.task_id, record.expires_at, owner=owner, tool=tool.name))
            run.journal = self._journal(tool, record.task_id, owner)
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
        if elsewhere:
            await self._hand_to_executor(tool, record, prepared)
        elif run is None:
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

    async def _check_queued_room(self, owner: str) -> None:
        """Refuse a create over `Limits.max_active_per_owner` for a body that runs elsewhere
        (`--enqueue-only`, an executor): the owner's active tasks are counted in the store,
        queued or running wherever they are (`CountsActive`). Creates of one owner in flight at
        the same moment each count before the others are stored: the bound may be passed by as
        many (a lock across replicas would cost every create a round trip more)."""
        per_owner = self.limits.active_share
        if per_owner is None:
            return
        store = self.store
        if not isinstance(store, CountsActive):
            if not self._uncounted:
                self._uncounted = True
                logger.warning(
                    "the task store %r cannot count an owner's active tasks (count_active): "
                    "Limits.max_active_per_owner is not enforced for tasks run by workers",
                    store,
                )
            return
        if await store.count_active(owner) >= per_owner:
            raise TooManyTasks("owner", per_owner, max(1, round(self.limits.retry_after * 1000)))

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
        """Record answers for outstanding keys; other keys are ignored. Terminal tasks: no-op.

        -32602 and nothing recorded when an answer cannot be stored (`checked_answers`)."""
        checked_answers(responses)
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

        await self._cancel(task_id, reason, current)

    async def _cancel(self, task_id: str, reason: str, known: TaskRecord | None) -> bool:
        cancelled = await self._mutate(task_id, ledger.cancelled(reason), known=known)
        if cancelled is None:
            return False
        log_task("cancelled", cancelled)
        run = self._runs.get(task_id)
        if run is not None:
            run.cancel_logged = True
            run.stop()
        await self.store.publish(task_id)
        if self.executor is not None:
            await self._guarded(partial(self.executor.stop, task_id))
        return True

    async def _notify(self, task_id: str) -> None:
        run = self._runs.get(task_id)
        if run is not None:
            run.poke()
        await self.store.publish(task_id)

    # -- change feed and housekeeping ----------------------------------------------------------

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
