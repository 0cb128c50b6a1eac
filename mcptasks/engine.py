"""`TaskEngine`: creates tasks durably, runs their bodies, and applies every transition.

The engine owns one anyio task group for its lifetime (`async with engine:`); every task body runs
inside it, never on the request that created it. All state goes through the store with
compare-and-set writes, so concurrent polls, updates and cancels cannot lose or reorder a change.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mcptasks.context import BodyChannel, TaskContext
from mcptasks.driver import Outcome, Pending, run_body, wire_requests
from mcptasks.errors import PollTooFast, TaskNotFound, ToolError
from mcptasks.store.base import TaskRecord, TaskStore
from mcptasks.store.url import store_from_url
from mcptasks.tool import TaskTool
from mcptasks.wire import INTERNAL_ERROR
from mcptasks.yields import InputRequest, InvalidAnswer

PollLimit = Literal["off", "delay", "reject"]

WORKER_LOST_MESSAGE = "The server restarted while this task was running; its work was lost."
SHUTDOWN_MESSAGE = "The server shut down while this task was running."


def new_task_id() -> str:
    """A fresh task id: 256 random bits from `secrets`, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


class _TaskRun:
    """A body running on this engine; it is also the body's `BodyChannel`."""

    __slots__ = ("engine", "expires_at", "scope", "stop_outcome", "task_id", "wake")

    def __init__(self, engine: TaskEngine, task_id: str, expires_at: float | None) -> None:
        self.engine = engine
        self.task_id = task_id
        self.expires_at = expires_at
        self.scope: anyio.CancelScope | None = None
        self.wake: anyio.Event | None = None
        self.stop_outcome: Outcome | None = None

    def poke(self) -> None:
        """Wake the body if it waits for input."""
        if self.wake is not None:
            self.wake.set()

    def stop(self, outcome: Outcome | None = None) -> None:
        """Cancel the body at its next checkpoint; `outcome` is recorded unless already terminal."""
        if self.stop_outcome is None:
            self.stop_outcome = outcome
        if self.scope is not None:
            self.scope.cancel()

    async def _halt(self) -> None:
        # The record is terminal or gone: end the body through cancellation so `finally:` runs.
        self.stop()
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("task body continued after its task ended")  # pragma: no cover

    async def set_status(self, message: str) -> None:
        """Write `statusMessage` (skipped when unchanged)."""

        def change(record: TaskRecord) -> TaskRecord | None:
            return None if record.status_message == message else record.evolve(status_message=message)

        if await self.engine._mutate(self.task_id, change) is None:
            await self._halt()

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Issue the requests under fresh keys, wait until all are answered, parse the answers."""
        pending = list(requests)
        answers: list[Any] = [None] * len(pending)
        todo = list(range(len(pending)))
        while todo:
            keys = await self._issue({i: pending[i] for i in todo})
            received = await self._await_answers(keys)
            retry: list[int] = []
            for index, raw in received.items():
                try:
                    answers[index] = pending[index].parse(raw)
                except InvalidAnswer as exc:
                    pending[index] = pending[index].retry_with(str(exc))
                    retry.append(index)
            todo = retry
        return answers

    async def _issue(self, requests: dict[int, InputRequest]) -> dict[int, str]:
        """Add the requests to the record under fresh, never reused keys; return the keys."""
        keys: dict[int, str] = {}

        def issue(record: TaskRecord) -> TaskRecord:
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

        if await self.engine._mutate(self.task_id, issue) is None:
            await self._halt()
        return keys

    async def _await_answers(self, keys: dict[int, str]) -> dict[int, Any]:
        """Wait until every key has an answer, then take the answers out of the record."""
        store = self.engine.store
        while True:
            self.wake = anyio.Event()
            record = await store.get(self.task_id)
            if record is None or record.terminal:
                self.wake = None
                await self._halt()
                raise AssertionError("unreachable")  # pragma: no cover
            responses = record.input_responses
            received = {i: responses[key] for i, key in keys.items() if key in responses}
            if len(received) == len(keys):
                break
            with anyio.move_on_after(self.engine.input_poll_interval):
                await self.wake.wait()
        self.wake = None
        consumed = set(keys.values())

        def consume(record: TaskRecord) -> TaskRecord:
            left = {k: v for k, v in record.input_responses.items() if k not in consumed}
            return record.evolve(input_responses=left)

        await self.engine._mutate(self.task_id, consume)
        return received


class InlineChannel:
    """The channel of a body run inline: no task, so status is dropped and input is refused."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    @property
    def task_id(self) -> str | None:
        """Always None: an inline run has no task."""
        return None

    async def set_status(self, message: str) -> None:
        """Dropped: there is no task to carry a status message."""

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Refuse: input needs a task (or a multi-round-trip exchange)."""
        methods = ", ".join(sorted({r.method for r in requests}))
        raise ToolError(
            f"Tool {self.tool!r} needs input from the client ({methods}). Call it with the "
            "io.modelcontextprotocol/tasks extension declared in the request's client capabilities."
        )


class TaskEngine:
    """Runs task bodies and applies task transitions over a `TaskStore`.

    Use it as an async context manager: entering opens the store, recovers orphans of a durable
    store, and starts the task group, the change listener and the TTL sweeper; leaving stops every
    running body (recording `failed` for each) and closes the store.

    - `store`: a `TaskStore` or a store URL (`memory://`, `sqlite:///tasks.db`).
    - `poll_limit`: what a `tasks/get` arriving sooner than `poll_tolerance` x `pollIntervalMs`
      after the previous one for the same task gets: `"off"` (served), `"delay"` (served after a
      wait) or `"reject"` (error -32000 with `data.retryAfterMs`).
    - `adaptive_poll_max`: when set (seconds), the advertised `pollIntervalMs` grows with the task's
      age (a tenth of it) from the tool's interval up to this bound.
    """

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        instance_id: str | None = None,
        sweep_interval: float = 30.0,
        input_poll_interval: float = 5.0,
        poll_limit: PollLimit = "off",
        poll_tolerance: float = 0.5,
        adaptive_poll_max: float | None = None,
        recover_orphans: bool = True,
    ) -> None:
        if poll_limit not in ("off", "delay", "reject"):
            raise ValueError(f"poll_limit must be 'off', 'delay' or 'reject', got {poll_limit!r}")
        if not 0 < poll_tolerance <= 1:
            raise ValueError("poll_tolerance must be in (0, 1]")
        self.store: TaskStore = store_from_url(store) if isinstance(store, str) else store
        self.instance_id = instance_id or secrets.token_hex(8)
        self.sweep_interval = sweep_interval
        self.input_poll_interval = input_poll_interval
        self.poll_limit: PollLimit = poll_limit
        self.poll_tolerance = poll_tolerance
        self.adaptive_poll_max_ms = None if adaptive_poll_max is None else int(adaptive_poll_max * 1000)
        self.recover_orphans = recover_orphans
        self._runs: dict[str, _TaskRun] = {}
        self._last_poll: dict[str, float] = {}
        self._task_group: TaskGroup | None = None
        self._exit_stack: AsyncExitStack | None = None

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
        try:
            await self.store.open()
            stack.push_async_callback(self.store.close)
            if self.store.durable and self.recover_orphans:
                await self.recover()
            task_group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(task_group.cancel_scope.cancel)
            await task_group.start(self._listen)
            task_group.start_soon(self._sweep_forever)
        except BaseException:
            await stack.aclose()
            raise
        self._task_group = task_group
        self._exit_stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit_stack = self._exit_stack, None
        self._task_group = None
        if stack is not None:
            await stack.__aexit__(*exc_info)  # type: ignore[arg-type]

    async def recover(self) -> int:
        """Fail every active task no live runner owns (after a restart); return how many."""
        count = 0
        for record in await self.store.list_active():
            if record.runner == self.instance_id or record.task_id in self._runs:
                continue
            outcome = Outcome(
                "failed",
                error={
                    "code": INTERNAL_ERROR,
                    "message": WORKER_LOST_MESSAGE,
                    "data": {"reason": "worker_lost"},
                },
            )
            if await self._finish(record.task_id, outcome) is not None:
                count += 1
        return count

    # -- creating and running ------------------------------------------------------------------

    async def start(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        owner: str,
        validated: dict[str, Any] | None = None,
        prepared: tuple[Any, TaskContext, Pending | None] | None = None,
    ) -> TaskRecord:
        """Create a task for `tool` and start its body; return the stored record.

        The record is in the store before this returns. Invalid arguments raise
        `InvalidArguments` and create nothing. `prepared` hands over a body already started by
        synchronous input rounds (its context and the yield it stopped at).
        """
        task_group = self._task_group
        if task_group is None:
            raise RuntimeError("TaskEngine is not running: use 'async with engine:' first")
        args = validated if validated is not None else tool.validate_arguments(arguments)
        record = TaskRecord(
            task_id=new_task_id(),
            owner=owner,
            tool=tool.name,
            ttl_ms=tool.ttl_ms,
            poll_interval_ms=tool.poll_interval_ms,
            arguments=dict(arguments or {}),
            runner=self.instance_id,
        )
        run = _TaskRun(self, record.task_id, record.expires_at)
        self._runs[record.task_id] = run
        try:
            await self.store.create(record)
        except BaseException:
            del self._runs[record.task_id]
            raise
        task_group.start_soon(self._execute, tool, args, run, owner, prepared)
        return record

    async def _execute(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: _TaskRun,
        owner: str,
        prepared: tuple[Any, TaskContext, Pending | None] | None,
    ) -> None:
        outcome: Outcome | None = None
        try:
            with anyio.CancelScope() as scope:
                run.scope = scope
                if run.expires_at is not None:
                    ttl = run.expires_at - time.time()
                    margin = min(1.0, max(ttl, 0.0) * 0.05)
                    scope.deadline = anyio.current_time() + ttl - margin
                if prepared is None:
                    context = TaskContext(run, owner=owner, tool=tool.name)
                    body, pending = tool.open_body(args, context), None
                else:
                    body, context, pending = prepared
                    context._rebind(run)
                outcome = await run_body(body, run, tool.name, pending=pending)
            if scope.cancelled_caught:
                outcome = run.stop_outcome or self._ttl_outcome(tool)
        finally:
            with anyio.CancelScope(shield=True):
                if outcome is None:
                    outcome = Outcome("failed", error={"code": INTERNAL_ERROR, "message": SHUTDOWN_MESSAGE})
                await self._finish(run.task_id, outcome)
                self._runs.pop(run.task_id, None)

    @staticmethod
    def _ttl_outcome(tool: TaskTool) -> Outcome:
        message = f"The task exceeded its time-to-live ({tool.ttl_ms} ms) and was stopped."
        return Outcome(
            "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": "ttl"}}
        )

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
        return await run_body(tool.open_body(arguments, context), channel, tool.name)

    async def _finish(self, task_id: str, outcome: Outcome) -> TaskRecord | None:
        def change(record: TaskRecord) -> TaskRecord:
            return record.evolve(
                status=outcome.status,
                result=outcome.result,
                error=outcome.error,
                status_message=outcome.message if outcome.message is not None else record.status_message,
                input_requests={},
                input_responses={},
            )

        return await self._mutate(task_id, change)

    async def _mutate(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None]
    ) -> TaskRecord | None:
        """Apply `change` with compare-and-set, retrying on conflicts.

        Returns the stored record after the change (the unchanged one when `change` returns
        None), or None when the task is gone or already terminal.
        """
        while True:
            record = await self.store.get(task_id)
            if record is None or record.terminal:
                return None
            updated = change(record)
            if updated is None:
                return record
            if await self.store.replace(updated, expected_version=record.version):
                return updated

    # -- client operations ---------------------------------------------------------------------

    async def get(self, task_id: str, *, owner: str, throttle: bool = False) -> TaskRecord:
        """The task as `owner` may see it; `TaskNotFound` for unknown, expired or foreign ids.

        With `throttle`, the engine's `poll_limit` applies (this is a client poll).
        """
        record = await self.store.get(task_id, owner=owner)
        if record is None:
            raise TaskNotFound(task_id)
        if throttle and self.poll_limit != "off" and not record.terminal:
            await self._throttle(record)
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
        if await self.store.get(task_id, owner=owner) is None:
            raise TaskNotFound(task_id)

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

        if await self._mutate(task_id, change) is not None and changed:
            await self._notify(task_id)

    async def cancel(self, task_id: str, *, owner: str, reason: str = "Cancelled by the client.") -> None:
        """Cancel the task (status `cancelled` now; the body stops at its next checkpoint).

        Cancelling a terminal task changes nothing.
        """
        if await self.store.get(task_id, owner=owner) is None:
            raise TaskNotFound(task_id)

        def change(record: TaskRecord) -> TaskRecord:
            return record.evolve(
                status="cancelled", status_message=reason, input_requests={}, input_responses={}
            )

        if await self._mutate(task_id, change) is not None:
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
        async with self.store.subscribe() as changes:
            task_status.started()
            async for task_id in changes:
                run = self._runs.get(task_id)
                if run is not None and self._task_group is not None:
                    self._task_group.start_soon(self._refresh, run)

    async def _refresh(self, run: _TaskRun) -> None:
        record = await self.store.get(run.task_id)
        if record is None or record.terminal:
            run.stop()
        else:
            run.poke()

    async def _sweep_forever(self) -> None:
        while True:
            await anyio.sleep(self.sweep_interval)
            await self.sweep()

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
