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
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, nullcontext
from typing import Any, Literal, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mcptasks._authoring.capabilities import gated
from mcptasks._authoring.context import BodyChannel, TaskContext
from mcptasks._authoring.results import error_result
from mcptasks._authoring.tool import TaskTool
from mcptasks._authoring.values import InvalidValue
from mcptasks._authoring.yields import InputRequest, InvalidAnswer
from mcptasks._runtime.driver import (
    STOPPED,
    InlineChannel,
    Outcome,
    Pending,
    absorb_stray_cancel,
    cancelled_here,
    outcome_of_abort,
    run_body,
    settle_body,
    wire_requests,
)
from mcptasks._runtime.heartbeat import HeartbeatThread
from mcptasks._runtime.instances import gone_from_this_host, new_instance_id
from mcptasks._runtime.limits import Limits, TooManyTasks
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import StoreRetry, describe, gave_up, outage_errors
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.watchdog import Watchdog, current_body
from mcptasks.errors import PollTooFast, ProtocolError, TaskNotFound, ToolError
from mcptasks.stores.base import CHANGED_PREFIX, TaskRecord, TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS

PollLimit = Literal["off", "delay", "reject"]
T = TypeVar("T")

logger = logging.getLogger("mcptasks")

WORKER_LOST_MESSAGE = "The server running this task restarted or stopped responding; its work was lost."
SHUTDOWN_MESSAGE = "The server shut down while this task was running."


async def _close_body(body: Any) -> None:
    if isinstance(body, AsyncGenerator):
        await body.aclose()


def _retained(record: TaskRecord, ttl_ms: int) -> TaskRecord | None:
    """`record` kept until one `ttl_ms` from now, when that is later than its expiry (else None)."""
    if record.ttl_ms is None:
        return None
    wanted = math.ceil((time.time() - record.created_at) * 1000) + ttl_ms
    return record.evolve(ttl_ms=wanted) if wanted > record.ttl_ms else None


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


RECOVERY_BATCH = 128
"""How many orphans recovery handles at once (and before an engine starting up returns)."""

MAX_INVALID_ANSWERS = 3
"""How many invalid answers to one question a task accepts before it fails with -32602."""


def _error_response(raw: Any) -> ProtocolError | None:
    """A JSON-RPC error object sent as an answer (the client refused the request), as an error."""
    if (
        isinstance(raw, dict)
        and isinstance(raw.get("code"), int)
        and isinstance(raw.get("message"), str)
        and set(raw) <= {"code", "message", "data"}
    ):
        return ProtocolError(int(raw["code"]), str(raw["message"]), raw.get("data"))
    return None


class _TaskRun:
    """A body running on this engine; it is also the body's `BodyChannel`."""

    __slots__ = (
        "attempt",
        "engine",
        "expires_at",
        "final",
        "flushing",
        "keeper",
        "next_status_at",
        "owner",
        "pending_status",
        "record",
        "saved",
        "scope",
        "stop_outcome",
        "stopped_at",
        "task_id",
        "tool",
        "waiters",
    )

    def __init__(
        self,
        engine: TaskEngine,
        task_id: str,
        expires_at: float | None,
        attempt: int = 1,
        *,
        owner: str,
        tool: str,
    ) -> None:
        self.engine = engine
        self.task_id = task_id
        self.owner = owner
        self.tool = tool
        self.expires_at = expires_at
        self.attempt = attempt
        """Which run of the task this is (re-runs after a lost worker count up)."""
        self.record: TaskRecord | None = None
        """The newest copy of the record this run wrote or read (saves a read before a write)."""
        self.scope: anyio.CancelScope | None = None
        self.keeper: anyio.CancelScope | None = None
        """Cancelled when the body ends: stops pushing back the record's expiry."""
        self.waiters: list[anyio.Event] | None = None
        """One event per `ask` waiting for answers (a body may wait in several at once)."""
        self.stop_outcome: Outcome | None = None
        self.final: Outcome | None = None
        """The outcome recorded when the body ended."""
        self.saved: Any = None
        """The body's checkpoint (loaded from the record when a re-run starts)."""
        self.stopped_at: float | None = None
        """When the body was first asked to stop (for the ignored-cancellation warning)."""
        self.pending_status: str | None = None
        """A status yielded within `Limits.status_interval` of the last write, not written yet."""
        self.next_status_at = 0.0
        self.flushing = False

    @property
    def cancelled(self) -> bool:
        """Whether the body was asked to stop (cancel, TTL, shutdown); readable from any thread."""
        return self.stopped_at is not None or self.engine._closing

    def poke(self) -> None:
        """Wake the body if it waits for input."""
        for waiter in self.waiters or ():
            waiter.set()

    def stop(self, outcome: Outcome | None = None) -> None:
        """Cancel the body at its next checkpoint; `outcome` is recorded unless already terminal."""
        if self.stop_outcome is None:
            self.stop_outcome = outcome
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        if self.scope is not None:
            self.scope.cancel()

    def owns(self, record: TaskRecord) -> bool:
        """Whether `record` still belongs to this run (not re-run elsewhere after a stall)."""
        return record.runner == self.engine.instance_id and record.attempt == self.attempt

    async def _write(
        self, change: Callable[[TaskRecord], TaskRecord | None], what: str | None = None
    ) -> TaskRecord | None:
        """Apply a body's change to its record; None when the task ended or is no longer ours.

        With `what` (a description for messages), an unreachable store is retried within the
        engine's `store_retry` budget, then the task fails saying so; without, the error propagates.
        """
        owned = True

        status = self.pending_status

        def guarded(record: TaskRecord) -> TaskRecord | None:
            nonlocal owned
            owned = self.owns(record)
            if not owned:
                return None
            updated = change(record)
            if status is not None and status != record.status_message:
                updated = (updated or record).evolve(status_message=status)
            return updated

        engine = self.engine
        if what is None:
            written = await engine._mutate(self.task_id, guarded, known=self.record)
        else:
            written = await self._patiently(
                lambda: engine._mutate(self.task_id, guarded, known=self.record), what
            )
        if written is None or not owned:
            self.record = None
            return None
        if self.pending_status is status:
            self.pending_status = None
        self.record = written
        return written

    async def _patiently(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """`call()` retried while the store is unreachable (`store_retry`), then a task failure."""
        engine = self.engine
        try:
            return await engine.store_retry.run(
                call, errors=engine.outage_errors, what=f"{what} ({self.task_id})"
            )
        except engine.outage_errors as exc:
            raise gave_up(exc, engine.store_retry, what) from exc

    async def _halt(self) -> None:
        # The record is terminal or gone: end the body through cancellation so `finally:` runs.
        self.stop()
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("task body continued after its task ended")  # pragma: no cover

    async def set_status(self, message: str) -> None:
        """Write `statusMessage` (skipped when unchanged), at most once per `status_interval`.

        A status yielded sooner is kept and written when the interval ends (the last one wins).
        Always gives the event loop a turn, so a body yielding statuses in a loop cannot starve it.
        """
        await anyio.lowlevel.checkpoint()
        limits = self.engine.limits
        if len(message) > limits.max_status_length:
            message = message[: limits.max_status_length - 1] + "…"
        now = anyio.current_time()
        if now < self.next_status_at:
            self.pending_status = message
            if not self.flushing and self.engine._task_group is not None:
                self.flushing = True
                self.engine._task_group.start_soon(self._flush_status)
            return
        self.next_status_at = now + limits.status_interval
        self.pending_status = message
        try:
            written = await self._write(lambda record: None)
        except Exception:
            logger.warning("could not write the status of task %s", self.task_id, exc_info=True)
            return
        if written is None:
            await self._halt()

    async def _flush_status(self) -> None:
        """Write the coalesced status once its interval has passed (unless a write took it)."""
        try:
            await anyio.sleep_until(self.next_status_at)
            if (
                self.pending_status is None
                or self.final is not None
                or self.engine._runs.get(self.task_id) is not self
            ):
                return
            self.next_status_at = anyio.current_time() + self.engine.limits.status_interval
            if await self._write(lambda record: None) is None:
                self.stop()
        except Exception:
            logger.warning("could not write the status of task %s", self.task_id, exc_info=True)
        finally:
            self.flushing = False

    async def save(self, state: Any) -> None:
        """Write the body's checkpoint into its record (durable when this returns)."""
        if await self._write(lambda record: record.evolve(checkpoint=state), "saving a checkpoint") is None:
            await self._halt()
        self.saved = state

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Issue the requests under fresh keys, wait until all are answered, parse the answers."""
        pending = list(requests)
        limit = self.engine.limits.max_input_requests
        outstanding = len(self.record.input_requests) if self.record is not None else 0
        if outstanding + len(pending) > limit:
            raise InvalidValue(
                f"a task may have at most {limit} input requests outstanding; "
                f"{outstanding} are and {len(pending)} more were yielded"
            )
        answers: list[Any] = [None] * len(pending)
        rejected = [0] * len(pending)
        todo = list(range(len(pending)))
        while todo:
            keys = await self._issue({i: pending[i] for i in todo})
            received = await self._await_answers(keys)
            retry: list[int] = []
            for index, raw in received.items():
                refusal = _error_response(raw)
                if refusal is not None:
                    raise refusal
                try:
                    answers[index] = pending[index].parse(raw)
                except InvalidAnswer as exc:
                    rejected[index] += 1
                    if rejected[index] >= MAX_INVALID_ANSWERS:
                        raise ProtocolError(
                            INVALID_PARAMS,
                            f"The client answered {pending[index].method} with invalid content "
                            f"{MAX_INVALID_ANSWERS} times; last problem: {exc}",
                        ) from None
                    pending[index] = pending[index].retry_with(str(exc))
                    retry.append(index)
            todo = retry
        return answers

    async def _issue(self, requests: dict[int, InputRequest]) -> dict[int, str]:
        """Add the requests to the record under fresh, never reused keys; return the keys."""
        keys: dict[int, str] = {}

        def issue(record: TaskRecord) -> TaskRecord | None:
            if keys and all(k in record.input_requests or k in record.input_responses for k in keys.values()):
                return None  # an earlier try landed although its reply was lost (keys are never reused)
            counter = record.input_key_counter
            keys.clear()
            for index, request in requests.items():
                counter += 1
                keys[index] = f"{request.key or 'input'}-{counter}"
            issued = wire_requests(list(requests.values()), list(keys.values()))
            return record.evolve(
                input_requests={**record.input_requests, **issued},
                input_key_counter=counter,
                status="input_required",
            )

        written = await self._write(issue, "asking for input")
        if written is None:
            await self._halt()
        else:
            log_task("input_required", written)
        return keys

    async def _await_answers(self, keys: dict[int, str]) -> dict[int, Any]:
        """Wait until every key has an answer, then take the answers out of the record."""
        store = self.engine.store
        if self.waiters is None:
            self.waiters = []
        try:
            while True:
                wake = anyio.Event()
                self.waiters.append(wake)
                try:
                    record = await self._patiently(lambda: store.get(self.task_id), "waiting for input")
                    if record is None or record.terminal or not self.owns(record):
                        await self._halt()
                        raise AssertionError("unreachable")  # pragma: no cover
                    self.record = record
                    responses = record.input_responses
                    received = {i: responses[key] for i, key in keys.items() if key in responses}
                    if len(received) == len(keys):
                        break
                    with anyio.move_on_after(self.engine.input_poll_interval):
                        await wake.wait()
                finally:
                    self.waiters.remove(wake)
        finally:
            if not self.waiters:
                self.waiters = None
        consumed = set(keys.values())

        def consume(record: TaskRecord) -> TaskRecord:
            left = {k: v for k, v in record.input_responses.items() if k not in consumed}
            return record.evolve(input_responses=left)

        if await self._write(consume, "taking the answers") is None:
            await self._halt()
        return received


class TaskEngine:
    """Runs task bodies and applies task transitions over a `TaskStore`.

    Use it as an async context manager: entering opens the store, announces this instance with a
    heartbeat, fails (or re-queues) the tasks of instances that are gone, and starts the task
    group with its background duties (change listener, heartbeat, orphan reaper, TTL sweeper,
    and the claim loop that runs queued tasks). Leaving stops every body running here (recording
    `failed` for each) and closes the store.

    - `store`: a `TaskStore` or a store URL (`memory://`, `sqlite:///tasks.db`, `redis://...`,
      `postgresql://...`).
    - `run_tasks`: False makes a serving-only replica: tasks are created queued and dedicated
      workers (`mcptasks worker`) claim and run them. A body that already gathered input on the
      creating call still runs here.
    - `lease_ttl`: how long (seconds) an instance counts as alive after its last heartbeat; the
      tasks of an instance silent for longer are failed ("worker lost") or, for tools with
      `retry_on_crash`, re-run elsewhere. Heartbeats go out every third of it.
    - `max_concurrent`: the most claimed tasks this instance runs at once (None: no bound).
    - `poll_limit`: what a `tasks/get` arriving sooner than `poll_tolerance` x `pollIntervalMs`
      after the previous one for the same task gets: `"off"` (served), `"delay"` (served after a
      wait) or `"reject"` (error -32000 with `data.retryAfterMs`).
    - `adaptive_poll_max`: when set (seconds), the advertised `pollIntervalMs` grows with the task's
      age (a tenth of it) from the tool's interval up to this bound.
    - `limits`: a `Limits` (active tasks, result size, status length and rate, worker threads,
      the blocked-loop watchdog, the grace given to bodies that ignore cancellation).
    - `heartbeat_thread`: renew the lease from a thread of its own (stores with `twin()`: SQLite
      files, Redis, PostgreSQL), so a body blocking the event loop does not make peers fail this
      live instance's tasks; `wedge_limit` (seconds, default 300) bounds how long a blocked loop
      keeps the lease alive: after it, peers take the tasks over as from a lost worker.
    - `store_retry`: how long a running task's store calls (waiting for input, checkpoints, its
      end) are retried while the store is unreachable (`StoreRetry`, default 60 s with backoff).
    - `announce_changes`: publish every write of a record on the store's change feed (prefixed
      with `CHANGED_PREFIX`) so `notifications/tasks` listen streams on any instance see it.
    """

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        tools: Iterable[TaskTool] = (),
        instance_id: str | None = None,
        run_tasks: bool = True,
        lease_ttl: float = 15.0,
        max_concurrent: int | None = None,
        claim_interval: float = 1.0,
        sweep_interval: float = 30.0,
        input_poll_interval: float = 5.0,
        poll_limit: PollLimit = "off",
        poll_tolerance: float = 0.5,
        adaptive_poll_max: float | None = None,
        recover_orphans: bool = True,
        limits: Limits | None = None,
        store_retry: StoreRetry | None = None,
        heartbeat_thread: bool = True,
        wedge_limit: float = 300.0,
        announce_changes: bool = True,
    ) -> None:
        if poll_limit not in ("off", "delay", "reject"):
            raise ValueError(f"poll_limit must be 'off', 'delay' or 'reject', got {poll_limit!r}")
        if not 0 < poll_tolerance <= 1:
            raise ValueError("poll_tolerance must be in (0, 1]")
        if lease_ttl <= 0:
            raise ValueError("lease_ttl must be positive")
        if not wedge_limit >= 5.0:
            raise ValueError("wedge_limit must be at least 5 seconds")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError("max_concurrent must be a positive integer or None")
        self.store: TaskStore = store_from_url(store) if isinstance(store, str) else store
        self.instance_id = instance_id or new_instance_id()
        self.run_tasks = run_tasks
        self.lease_ttl = lease_ttl
        self.max_concurrent = max_concurrent
        self.claim_interval = claim_interval
        self.sweep_interval = sweep_interval
        self.input_poll_interval = input_poll_interval
        self.poll_limit: PollLimit = poll_limit
        self.poll_tolerance = poll_tolerance
        self.adaptive_poll_max_ms = None if adaptive_poll_max is None else int(adaptive_poll_max * 1000)
        self.recover_orphans = recover_orphans
        self.limits = limits if limits is not None else Limits()
        self.store_retry = store_retry if store_retry is not None else StoreRetry()
        self.heartbeat_thread = heartbeat_thread
        self.wedge_limit = wedge_limit
        self._unsettled: dict[str, tuple[_TaskRun, Outcome]] = {}
        """Ends of tasks that could not be recorded because the store stayed unreachable."""
        self.announce_changes = announce_changes
        self.tools: dict[str, TaskTool] = {}
        for tool in tools:
            self.register(tool)
        self._runs: dict[str, _TaskRun] = {}
        self._active_by_owner: dict[str, int] = {}
        self._closing = False
        self.on_stuck_shutdown: Callable[[list[str]], None] | None = None
        """Called at shutdown with the bodies still running `Limits.cancel_grace` after they
        were cancelled (`mcptasks serve` exits the process there instead of waiting forever)."""
        self._drained: anyio.Event | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._last_poll: dict[str, float] = {}
        self._claim_wakeup: anyio.Event | None = None
        self._claiming = 0
        self._task_group: TaskGroup | None = None
        self._spawn_group: TaskGroup | None = None
        """The task group, until it has closed (bodies ending during shutdown still settle)."""
        self._exit_stack: AsyncExitStack | None = None
        self.observer: EngineObserver | None = None
        """Told about creations, runs, transitions and client requests (telemetry); None: nobody."""

    @property
    def outage_errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions that mean the store is unreachable (not a bug, not a lost worker)."""
        return outage_errors(self.store)

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
            await self.store.heartbeat(self.instance_id, self.lease_ttl)
            self._closing = False
            self._limiter = anyio.CapacityLimiter(self.limits.threads)
            beats = self._heartbeat_thread()
            if beats is not None:
                beats.start()
                stack.push_async_callback(_in_thread, beats.stop)
            task_group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(task_group.cancel_scope.cancel)
            stack.push_async_callback(self._stop_runs)
            self._task_group = self._spawn_group = task_group
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
                task_group.start_soon(self._tick_forever, beats)
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
        make = getattr(self.store, "twin", None)
        if not self.heartbeat_thread or not callable(make) or make() is None:
            return None
        return HeartbeatThread(make, self.instance_id, self.lease_ttl, self.wedge_limit)

    @staticmethod
    async def _tick_forever(beats: HeartbeatThread) -> None:
        """Show the heartbeat thread that this event loop still runs."""
        while True:
            beats.tick()
            await anyio.sleep(1.0)

    async def recover(self, *, first_batch_done: Callable[[], None] | None = None) -> int:
        """Handle active tasks whose runner is gone; return how many were failed or re-queued.

        A task whose runner has no live heartbeat, or whose runner was a process on this machine
        that no longer exists (a server killed and restarted), is failed with a "worker lost"
        error, or put back in the queue when its tool has `retry_on_crash` and attempts are left.
        Orphans are handled `RECOVERY_BATCH` at a time; `first_batch_done` is called after the
        first batch, so a caller can serve while a large backlog is still being recovered. Bodies
        running here whose record became terminal or vanished (a missed notification) are stopped.
        """
        await self._write_unsettled()
        running_before = dict(self._runs)
        claiming = self._claiming
        live = {runner for runner in await self.store.live_runners() if not gone_from_this_host(runner)}
        records = await self.store.list_active()
        active = {record.task_id: record for record in records}

        def abandoned(record: TaskRecord) -> bool:
            if record.runner is None or record.task_id in self._runs or record.task_id in self._unsettled:
                return False
            if record.runner == self.instance_id:
                # Ours but not running here: left by an earlier life of this instance id, unless
                # a claim is registering it right now.
                return not (claiming or self._claiming)
            return record.runner not in live

        orphans = [record for record in records if abandoned(record)]
        count = 0
        for first in range(0, len(orphans), RECOVERY_BATCH):
            batch = [record for record in orphans[first : first + RECOVERY_BATCH] if abandoned(record)]
            count += await self._orphan_batch(batch)
            if first_batch_done is not None:
                first_batch_done()
                first_batch_done = None
        for task_id, run in running_before.items():
            if self._runs.get(task_id) is not run:
                continue
            current = active.get(task_id)
            if current is None:  # ended, or created after the snapshot: look again
                current = await self.store.get(task_id)
            if current is None or current.terminal or not run.owns(current):
                run.stop()
        if count:
            logger.info("mcptasks recovered %d task(s) whose server was lost", count)
        return count

    async def _orphan_batch(self, records: Sequence[TaskRecord]) -> int:
        """`_orphaned` for each record, concurrently (stores batch concurrent writes); the count."""
        done = 0

        async def one(record: TaskRecord) -> None:
            nonlocal done
            try:
                if await self._orphaned(record):
                    done += 1
            except Exception:
                logger.warning("could not recover task %s; will retry", record.task_id, exc_info=True)

        async with anyio.create_task_group() as group:
            for record in records:
                group.start_soon(one, record)
        return done

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
        tool = self.tools.get(record.tool)
        lost = record.runner
        if tool is not None and tool.retry_on_crash and record.attempt < tool.max_attempts:
            attempt = record.attempt + 1
            why = (
                "The server running this task shut down"
                if shutdown
                else "The worker running this task was lost"
            )
            message = f"{why}; restarting it (attempt {attempt} of {tool.max_attempts})."

            def requeue(current: TaskRecord) -> TaskRecord | None:
                if current.runner != lost:
                    return None
                return current.evolve(
                    runner=None,
                    attempt=attempt,
                    status="working",
                    status_message=message,
                    input_requests={},
                    input_responses={},
                )

            requeued = await self._mutate(record.task_id, requeue)
            if requeued is not None:
                if requeued.runner is None:
                    log_task("requeued", requeued)
                await self.store.publish(record.task_id)
                return True
            return False
        reason = "shutdown" if shutdown else "worker_lost"
        message = SHUTDOWN_MESSAGE if shutdown else WORKER_LOST_MESSAGE
        error: dict[str, Any] = {"code": INTERNAL_ERROR, "message": message, "data": {"reason": reason}}
        if record.attempt > 1:
            error["data"]["attempts"] = record.attempt
        outcome = Outcome("failed", error=error)
        return await self._finish(record.task_id, outcome, only_runner=lost) is not None

    # -- creating and running ------------------------------------------------------------------

    async def start(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        owner: str,
        validated: dict[str, Any] | None = None,
        prepared: tuple[Any, TaskContext, Pending | None] | None = None,
        idempotency_key: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
    ) -> TaskRecord:
        """Create a task for `tool` and start its body (or queue it); return the stored record.

        The record is in the store before this returns. Invalid arguments raise
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
            client_capabilities=None if client_capabilities is None else dict(client_capabilities),
        )
        run = None
        if run_here:
            self._check_room(owner)
            run = self._add_run(
                _TaskRun(self, record.task_id, record.expires_at, owner=owner, tool=tool.name)
            )
        if self.observer is not None:
            self.observer.creating(record)
        try:
            stored = await self.store.create(record)
        except BaseException:
            self._drop_run(record.task_id)
            raise
        if stored.task_id != record.task_id:
            self._drop_run(record.task_id)
            if prepared is not None:
                await _close_body(prepared[0])
            if stored.tool != record.tool or stored.arguments != record.arguments:
                raise ProtocolError(
                    INVALID_PARAMS,
                    "This idempotency key was already used for a different call (another tool or "
                    "other arguments); use a new key for a new call.",
                    {"taskId": stored.task_id} if stored.tool == record.tool else None,
                )
            return stored
        log_task("created", record)
        if self.observer is not None:
            self.observer.created(record)
        if run is None:
            await self.store.publish(record.task_id)
        else:
            run.record = record
            task_group.start_soon(self._execute, tool, args, run, owner, prepared)
        return record

    def _check_room(self, owner: str) -> None:
        """Refuse a create over `Limits.max_active_per_owner` / `max_active` (nothing is created)."""
        limits = self.limits
        retry_ms = max(1, round(limits.retry_after * 1000))
        if limits.max_active is not None and len(self._runs) >= limits.max_active:
            raise TooManyTasks("server", limits.max_active, retry_ms)
        per_owner = limits.max_active_per_owner
        if per_owner is not None and self._active_by_owner.get(owner, 0) >= per_owner:
            raise TooManyTasks("owner", per_owner, retry_ms)

    def _add_run(self, run: _TaskRun) -> _TaskRun:
        self._runs[run.task_id] = run
        self._active_by_owner[run.owner] = self._active_by_owner.get(run.owner, 0) + 1
        return run

    def _drop_run(self, task_id: str) -> None:
        run = self._runs.pop(task_id, None)
        if run is not None:
            if run.keeper is not None:
                run.keeper.cancel()
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

    async def settled(self, task_id: str, *, checkpoints: int = 6) -> Outcome | None:
        """Give a just-started body a few scheduler turns; its outcome if it already finished.

        This is no wall-clock wait: a body that suspends on real work (I/O, sleeps, input) is
        not waited for. It lets the protocol answer a task that finished at once with its result.
        """
        run = self._runs.get(task_id)
        for _ in range(checkpoints):
            if run is None or run.final is not None:
                break
            await anyio.lowlevel.checkpoint()
        return None if run is None else run.final

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
                    _TaskRun(
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
            task_group.start_soon(self._execute, tool, args, self._runs[record.task_id], record.owner, None)
        return len(claimed)

    async def _execute(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: _TaskRun,
        owner: str,
        prepared: tuple[Any, TaskContext, Pending | None] | None,
    ) -> None:
        observed = (
            nullcontext()
            if self.observer is None or run.record is None
            else self.observer.executing(run.record)
        )
        with observed:
            await self._run_and_settle(tool, args, run, owner, prepared)

    async def _run_and_settle(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: _TaskRun,
        owner: str,
        prepared: tuple[Any, TaskContext, Pending | None] | None,
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
                run.scope = scope
                if run.stopped_at is not None or self._closing:
                    scope.cancel()
                if tool.timeout_ms is not None:
                    scope.deadline = anyio.current_time() + tool.timeout_ms / 1000
                self._keep_while_running(run, tool)
                declared = run.record.client_capabilities if run.record is not None else None
                channel = gated(run, declared, tool.name)
                if prepared is None:
                    context = TaskContext(channel, owner=owner, tool=tool.name)
                    body, pending = tool.open_body(args, context, self._limiter), None
                else:
                    body, context, pending = prepared
                    carried = context.saved  # saved during the input rounds before the task
                    context._rebind(channel)
                    if carried is not None:
                        await run.save(carried)
                current_body.set((tool.name, run.task_id))
                end = await settle_body(body, channel, tool.name, pending, self.limits.max_result_bytes)
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

    async def _settle_shielded(self, run: _TaskRun, outcome: Outcome | None) -> None:
        try:
            if not self._closing:
                await self._settle(run, outcome)
                return
            with anyio.CancelScope(shield=True):  # the task group is being cancelled
                await self._settle(run, outcome, patient=False)
        finally:
            if self.observer is not None:
                self.observer.settled(run.task_id)

    async def _settle(self, run: _TaskRun, outcome: Outcome | None, *, patient: bool = True) -> None:
        """Record how a run ended and forget it (outcome None: the engine is shutting down).

        While the store is unreachable the end is retried (`store_retry`, when `patient`); if it
        stays unreachable, the outcome is kept and written by the reaper once the store answers.
        """
        try:
            if outcome is None:  # release the task (retry_on_crash) or fail it
                record = await self.store.get(run.task_id)
                if record is not None and run.owns(record):
                    await self._orphaned(record, shutdown=True)
            else:

                async def finish() -> TaskRecord | None:
                    return await self._finish(
                        run.task_id,
                        outcome,
                        only_runner=self.instance_id,
                        only_attempt=run.attempt,
                        known=run.record,
                        status_message=run.pending_status,
                    )

                if patient:
                    written = await self.store_retry.run(
                        finish, errors=self.outage_errors, what=f"recording the end of task {run.task_id}"
                    )
                else:
                    written = await finish()
                if written is not None:
                    run.final = outcome
        except self.outage_errors as exc:
            kept = outcome is not None and patient  # not at shutdown: nothing would write it
            if kept:
                self._unsettled[run.task_id] = (run, outcome)  # type: ignore[assignment]
            logger.error(
                "could not record the end of task %s: the task store is unreachable (%s); %s",
                run.task_id,
                describe(exc),
                "it is kept and written once the store answers" if kept else "it stays active",
            )
        except Exception:
            # The store failed the final write: the task stays active and, once this instance
            # is gone or restarted, the reaper fails (or re-runs) it.
            logger.exception("could not record the end of task %s", run.task_id)
        finally:
            self._drop_run(run.task_id)

    async def _write_unsettled(self) -> None:
        """Record the ends kept while the store was unreachable (raises while it still is)."""
        for task_id, (run, outcome) in list(self._unsettled.items()):
            written = await self._finish(
                task_id, outcome, only_runner=self.instance_id, only_attempt=run.attempt
            )
            del self._unsettled[task_id]
            if written is not None:
                run.final = outcome
                logger.info("recorded the end of task %s after the task store came back", task_id)

    def _stopped_outcome(self, run: _TaskRun, tool: TaskTool, scope: anyio.CancelScope) -> Outcome | None:
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

    def _keep_while_running(self, run: _TaskRun, tool: TaskTool) -> None:
        """Keep the record of a running body from expiring: `ttl` is retention, not a deadline."""
        if tool.ttl_ms is None or run.expires_at is None or self._task_group is None:
            return
        run.keeper = anyio.CancelScope()
        self._task_group.start_soon(self._keep_record, run, tool.ttl_ms, run.keeper)

    async def _keep_record(self, run: _TaskRun, ttl_ms: int, keeper: anyio.CancelScope) -> None:
        """Shortly before the record would expire, move its expiry to one `ttl` from now.

        Repeats until the body ends (`keeper` is cancelled then); `_finish` keeps a record that
        ended after its first expiry for one more `ttl` after its end.
        """
        ttl = ttl_ms / 1000
        margin = min(ttl / 2, 30.0)
        expires_at = run.expires_at
        with keeper:
            while expires_at is not None:
                await anyio.sleep(max(0.0, expires_at - margin - time.time()))
                try:
                    written = await run._write(lambda record: _retained(record, ttl_ms))
                except Exception:
                    logger.warning("could not extend the ttl of running task %s", run.task_id, exc_info=True)
                    await anyio.sleep(margin / 2)
                    continue
                expires_at = None if written is None else written.expires_at

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
        body = tool.open_body(arguments, context, self._limiter)
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
        def change(record: TaskRecord) -> TaskRecord | None:
            if only_runner is not None and record.runner != only_runner:
                return None
            if only_attempt is not None and record.attempt != only_attempt:
                return None
            tool = self.tools.get(record.tool)
            ttl_ms = None if tool is None else tool.ttl_ms
            if ttl_ms is not None and record.ttl_ms is not None and record.ttl_ms > ttl_ms:
                record = _retained(record, ttl_ms) or record  # it ran past its first expiry
            return record.evolve(
                status=outcome.status,
                result=outcome.result,
                error=outcome.error,
                status_message=outcome.message or status_message or record.status_message,
                input_requests={},
                input_responses={},
            )

        finished = await self._mutate(task_id, change, known=known)
        if finished is not None and finished.terminal:
            log_task(outcome.status, finished)
        return finished

    async def _mutate(
        self,
        task_id: str,
        change: Callable[[TaskRecord], TaskRecord | None],
        *,
        known: TaskRecord | None = None,
    ) -> TaskRecord | None:
        """Apply `change` with compare-and-set, retrying on conflicts.

        `known` is a copy the caller believes current (a runner's own last write): the first
        attempt uses it without reading the store, and a conflict falls back to reading.
        Returns the stored record after the change (the unchanged one when `change` returns
        None), or None when the task is gone or already terminal.
        """
        record = known
        while True:
            if record is None:
                record = await self.store.get(task_id)
            if record is None or record.terminal:
                return None
            updated = change(record)
            if updated is None:
                return record
            if await self.store.replace(updated, expected_version=record.version):
                if self.observer is not None:
                    self.observer.changed(record, updated)
                if self.announce_changes:
                    await self._announce(task_id)
                return updated
            record = None

    async def _announce(self, task_id: str) -> None:
        # Tells listen streams on every instance that the task changed; they re-read it. Losing
        # one is tolerated (streams re-read periodically), so a failure must not fail the write.
        try:
            await self.store.publish(CHANGED_PREFIX + task_id)
        except Exception:
            logger.debug("could not announce a change of task %s", task_id, exc_info=True)

    # -- client operations ---------------------------------------------------------------------

    async def get(self, task_id: str, *, owner: str, throttle: bool = False) -> TaskRecord:
        """The task as `owner` may see it; `TaskNotFound` for unknown, expired or foreign ids.

        With `throttle`, the engine's `poll_limit` applies (this is a client poll).
        """
        # A checkpoint even when the store answers without suspending (memory), so a client
        # polling in a loop in this process cannot starve the bodies it is waiting for.
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
        now = anyio.current_time()
        last = self._last_poll.get(record.task_id)
        minimum = self.poll_interval_ms(record) / 1000.0 * self.poll_tolerance
        if last is not None and now - last < minimum:
            wait = minimum - (now - last)
            if self.poll_limit == "reject":
                raise PollTooFast(record.task_id, math.ceil(wait * 1000))
            await anyio.sleep(wait)
        self._last_poll[record.task_id] = anyio.current_time()

    def poll_interval_ms(self, record: TaskRecord) -> int:
        """The `pollIntervalMs` to advertise for `record` now (adaptive when configured)."""
        base = record.poll_interval_ms or 1000
        if self.adaptive_poll_max_ms is None or record.terminal:
            return base
        age_ms = (time.time() - record.created_at) * 1000.0
        return int(min(self.adaptive_poll_max_ms, max(base, age_ms / 10.0)))

    async def update(self, task_id: str, responses: Mapping[str, Any], *, owner: str) -> None:
        """Record answers for outstanding keys; other keys are ignored. Terminal tasks: no-op."""
        current = await self.store.get(task_id, owner=owner)
        if current is None:
            raise TaskNotFound(task_id)
        if self.observer is not None:
            self.observer.requested("tasks/update", current)

        changed = False

        def change(record: TaskRecord) -> TaskRecord | None:
            nonlocal changed
            accepted = {k: v for k, v in responses.items() if k in record.input_requests}
            if not accepted:
                changed = False
                return None
            changed = True
            outstanding = {k: v for k, v in record.input_requests.items() if k not in accepted}
            return record.evolve(
                input_requests=outstanding,
                input_responses={**record.input_responses, **accepted},
                status="input_required" if outstanding else "working",
            )

        if await self._mutate(task_id, change, known=current) is not None and changed:
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

        def change(record: TaskRecord) -> TaskRecord:
            return record.evolve(
                status="cancelled", status_message=reason, input_requests={}, input_responses={}
            )

        cancelled = await self._mutate(task_id, change, known=current)
        if cancelled is not None:
            log_task("cancelled", cancelled)
            run = self._runs.get(task_id)
            if run is not None:
                run.stop()
            await self.store.publish(task_id)

    async def _notify(self, task_id: str) -> None:
        run = self._runs.get(task_id)
        if run is not None:
            run.poke()
        await self.store.publish(task_id)

    # -- background duties ---------------------------------------------------------------------

    async def _listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        delay = 0.1
        while True:
            try:
                async with self.store.subscribe() as changes:
                    if not started:
                        task_status.started()
                        started = True
                    delay = 0.1
                    async for task_id in changes:
                        self._changed(task_id)
            except Exception:
                if not started:
                    raise
                # Notifications are a fast path; the reaper and the claim loop poll meanwhile.
                logger.warning("mcptasks change subscription failed; resubscribing", exc_info=True)
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _changed(self, task_id: str) -> None:
        if task_id.startswith(CHANGED_PREFIX):
            return  # a change announced for listen streams: nothing for runners to do
        run = self._runs.get(task_id)
        if run is not None and self._task_group is not None:
            self._task_group.start_soon(self._guarded, lambda: self._refresh(run))
        elif run is None and self.run_tasks and self._claim_wakeup is not None:
            self._claim_wakeup.set()

    async def _refresh(self, run: _TaskRun) -> None:
        record = await self.store.get(run.task_id)
        if record is None or record.terminal or not run.owns(record):
            run.stop()
        else:
            run.poke()

    async def sweep(self, now: float | None = None) -> int:
        """Delete expired records and forget stale poll marks; return how many records went."""
        now = time.time() if now is None else now
        horizon = anyio.current_time() - 600.0
        for task_id in [t for t, seen in self._last_poll.items() if seen < horizon]:
            del self._last_poll[task_id]
        return await self.store.delete_expired(now)

    @property
    def active_runs(self) -> int:
        """How many bodies run on this engine right now."""
        return len(self._runs)
