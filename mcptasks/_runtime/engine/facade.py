"""`TaskEngine`: creates tasks durably, runs their bodies, and applies every transition.

The facade: entering the engine builds its parts (`Parts`: each owns its share of the state, given
its collaborators by name), chooses the one `Placement` of new bodies and starts them; client
operations route to the parts. Bodies run in the engine's task group, never on the request that
created them; every change goes through the store with compare-and-set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskStatus

from mcptasks._authoring.context import BodyChannel
from mcptasks._authoring.threaded import ThreadShare
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine.bodies import run_inline
from mcptasks._runtime.engine.creating import NewRecords
from mcptasks._runtime.engine.parts import Parts
from mcptasks._runtime.executor import Executor, executor_from_url
from mcptasks._runtime.feed import follow
from mcptasks._runtime.instances import new_instance_id
from mcptasks._runtime.limits import Limits
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import StoreRetry
from mcptasks._runtime.polling import PollMarks, advertised_interval_ms
from mcptasks._runtime.request_params import checked_answers
from mcptasks._runtime.webhooks.delivery import WebhookDelivery
from mcptasks.errors import TaskNotFound
from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.stores.foreign import adopt_store
from mcptasks.stores.url import store_from_url

_SETTINGS = frozenset(EngineConfig.__dataclass_fields__) - {"instance_id"}


class TaskEngine:
    """Runs task bodies and applies task transitions over a `TaskStore`.

    Use it as an async context manager: entering opens the store, announces this instance with a
    heartbeat, fails (or re-queues) the tasks of instances that are gone, and starts its duties
    (`Parts.start`). New bodies run here; with `run_tasks` off they stay queued for workers; with
    an executor (`EngineConfig.executor`) they are submitted to it. Leaving stops every body
    running here (recording `failed` for each, or handing durable ones over) and closes the store.

    - `store`: a `TaskStore` or a store URL (`memory://`, `sqlite:///tasks.db`, `redis://...`).
    - `config`: an `EngineConfig`; the engine reads its settings there (a few are attributes too).
    - `tools`: task tools to run when claimed from the queue or re-run after a crash."""

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
        self.tools: dict[str, TaskTool] = {tool.name: tool for tool in tools}
        self.observer: EngineObserver | None = None
        """Told about creations, runs, transitions and client requests (telemetry); None: nobody."""
        self.on_stuck_shutdown: Callable[[list[str]], None] | None = None
        """Called with the bodies still running `Limits.cancel_grace` after a shutdown cancelled them."""
        self._new = NewRecords()
        self._polls = PollMarks()
        self._exit_stack: AsyncExitStack | None = None
        self._build()

    def __setattr__(self, name: str, value: object) -> None:
        if name in _SETTINGS:
            raise AttributeError(
                f"TaskEngine.{name} is read-only: pass EngineConfig({name}=...) as config "
                "(or TaskEngine.configure before the engine starts)"
            )
        object.__setattr__(self, name, value)

    def _build(self, executor: Executor | None = None) -> None:
        store, me, stuck = adopt_store(self.store), self.instance_id, self.on_stuck_shutdown
        self._parts = Parts.build(store, self.config, self.tools, me, self.observer, stuck, executor)

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
        self.store = store  # the parts are built over it at `__aenter__`

    def register(self, tool: TaskTool) -> None:
        """Make `tool` runnable here when claimed from the queue or re-run after a crash."""
        self.tools[tool.name] = tool  # the parts share this dict

    @property
    def webhooks(self) -> WebhookDelivery | None:
        """The delivery of task events to webhooks (its endpoints and counters), or None."""
        return self._parts.webhooks

    @property
    def running(self) -> bool:
        """Whether the engine is inside its `async with` block."""
        return self._parts.host.taking_work

    async def __aenter__(self) -> TaskEngine:
        if self._exit_stack is not None:
            raise RuntimeError("TaskEngine is already running")
        stack = AsyncExitStack()
        await stack.__aenter__()
        if self.observer is not None:
            self.store = self.observer.wrap_store(self.store)
        try:
            named = self.config.executor
            self._build(executor_from_url(named) if isinstance(named, str) else named)
            await self._parts.start(stack, self.config, self._listen, self.sweep)
        except BaseException:
            self._parts.host.closed()
            await stack.aclose()
            raise
        self._exit_stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._exit_stack = self._exit_stack, None
        self._parts.host.leaving()
        if stack is not None:
            try:
                await stack.__aexit__(*exc_info)  # type: ignore[arg-type]
            finally:
                self._parts.host.closed()

    def start(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        owner: str,
        validated: dict[str, Any] | None = None,
        prepared: StartedBody | None = None,
        idempotency_key: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        related_task_ids: Sequence[str] = (),
        defer: bool = False,
    ) -> Coroutine[Any, Any, TaskRecord]:
        """Create a task for `tool` and start its body (or queue it); return the stored record.

        The record is in the store before this returns, except with `defer`: then a body run here
        (without `prepared` or `idempotency_key`) starts first, the caller calls `settled` next,
        and the body's first write or `settled` stores the record (a body that ends at once is
        stored once, already ended). Invalid arguments raise `InvalidArguments` and create nothing.
        `prepared`: a body already started by synchronous input rounds. An `idempotency_key` that
        `owner` used for a live task returns that task. `client_capabilities` (stored with the
        task) limits the body's input requests to them (None: no limit); `related_task_ids` are
        kept for the body (`TaskContext.related_tasks`), checked by the caller."""
        if not self._parts.host.taking_work:
            raise RuntimeError("TaskEngine is not running: use 'async with engine:' first")
        args = validated if validated is not None else tool.validate_arguments(arguments)
        self.tools[tool.name] = tool
        placement = self._parts.placement
        runner, key = placement.runner_for(prepared), idempotency_key
        record = self._new.make(tool, arguments, owner, runner, key, client_capabilities, related_task_ids)
        return placement.place(tool, args, record, prepared, defer=defer)  # no frame of its own

    def spawn(self, job: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `job` in the engine's task group: it outlives the request that started it and is
        cancelled when the engine stops. `RuntimeError` when the engine is not running."""
        if not self._parts.host.start_soon(job):
            raise RuntimeError("TaskEngine is not running: use 'async with engine:' first")

    def settled(self, task_id: str) -> Coroutine[Any, Any, Outcome | None]:
        """The outcome of a just-started body that ended at once, else None; call it right after
        `start` (see `ImmediateResults` for the rule, and for `defer`)."""
        return self._parts.immediate.settled(task_id)

    async def run_inline(
        self, tool: TaskTool, arguments: dict[str, Any], *, owner: str, channel: BodyChannel | None = None
    ) -> Outcome:
        """Run a body to completion in the caller's task, without a task record (a request that
        did not opt in to tasks). Without a `channel`, status yields are dropped and an input
        request ends the call with a tool error explaining why."""
        threads, limit = self._parts.host.threads, self.config.limits.max_result_bytes
        return await run_inline(tool, arguments, owner, channel, threads, limit)

    def threads_for(self, tool: TaskTool, owner: str) -> ThreadShare | None:
        """The worker threads a `def` body of `tool` runs in for `owner` (None: `tool` has no
        `def` body, or the engine is not running)."""
        return self._parts.host.threads_for(tool, owner)

    async def get(
        self, task_id: str, *, owner: str, throttle: bool = False, yield_first: bool = True
    ) -> TaskRecord:
        """The task as `owner` may see it; `TaskNotFound` for unknown, expired or foreign ids. With
        `throttle` (a client poll), the engine's `poll_limit` applies. It yields to other tasks first,
        even when the store answers at once (memory), so a client polling here in a loop cannot starve
        the bodies it waits for; a request read from a transport passes `yield_first=False`."""
        if yield_first:
            await anyio.lowlevel.checkpoint()
        record = await self.store.get(task_id, owner=owner)
        if record is None:
            raise TaskNotFound(task_id)
        if throttle:
            config = self.config
            if config.poll_limit != "off" and not record.terminal:
                minimum = self.poll_interval_ms(record) / 1000.0 * config.poll_tolerance
                await self._polls.throttle(record.task_id, minimum, config.poll_limit)
            if self.observer is not None:
                self.observer.requested("tasks/get", record)
        return record

    def poll_interval_ms(self, record: TaskRecord) -> int:
        """The `pollIntervalMs` to advertise for `record` now (adaptive when configured)."""
        limit = self.config.adaptive_poll_max
        return advertised_interval_ms(record, None if limit is None else int(limit * 1000))

    async def update(self, task_id: str, responses: Mapping[str, Any], *, owner: str) -> None:
        """Record answers for outstanding keys; other keys are ignored. Terminal tasks: no-op;
        -32602 and nothing recorded when an answer cannot be stored (`checked_answers`)."""
        checked_answers(responses)
        current = await self.store.get(task_id, owner=owner)
        if current is None:
            raise TaskNotFound(task_id)
        if self.observer is not None:
            self.observer.requested("tasks/update", current)
        await self._parts.answer(task_id, responses, current)

    async def cancel(self, task_id: str, *, owner: str, reason: str = "Cancelled by the client.") -> None:
        """Cancel the task (status `cancelled` now; the body stops at its next checkpoint); a
        terminal task does not change."""
        current = await self.store.get(task_id, owner=owner)
        if current is None:
            raise TaskNotFound(task_id)
        if self.observer is not None:
            self.observer.requested("tasks/cancel", current)
        await self._parts.cancel(task_id, reason, current)

    async def _listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await follow(self.store, self._parts.changed, what="change", task_status=task_status)

    async def claim(self) -> int:
        """Take queued tasks from the store and run them here; return how many were started."""
        return await self._parts.claims.claim()

    async def run_task(self, task_id: str) -> str:
        """Claim the task and run its body here until it ends; return its final status (what an
        executor's workers do: see `ExecutorHost.run_task`)."""
        return await self._parts.claims.run_one(task_id)

    async def recover(self, *, first_batch_done: Callable[[], None] | None = None) -> int:
        """Handle active tasks whose runner is gone; return how many were failed or re-queued
        (see `Liveness.recover`)."""
        return await self._parts.liveness.recover(first_batch_done=first_batch_done)

    async def sweep(self, now: float | None = None) -> int:
        """Delete expired records and forget stale poll marks; return how many records went."""
        now = time.time() if now is None else now
        self._polls.forget_stale()
        return await self.store.delete_expired(now)

    @property
    def active_runs(self) -> int:
        """How many bodies run on this engine right now."""
        return len(self._parts.runs)

    @property
    def executor(self) -> Executor | None:
        """Where bodies run when not here (`EngineConfig.executor`), while the engine runs."""
        return self._parts.placement.executor if self.running else None

    @property
    def run_tasks(self) -> bool:
        """Whether this engine runs task bodies (`EngineConfig.run_tasks`)."""
        return self.config.run_tasks

    @property
    def lease_ttl(self) -> float:
        """How long a runner counts as alive after its last heartbeat (`EngineConfig.lease_ttl`)."""
        return self.config.lease_ttl

    @property
    def limits(self) -> Limits:
        """The engine's limits (`EngineConfig.limits`)."""
        return self.config.limits

    @property
    def store_retry(self) -> StoreRetry:
        """How long store calls are retried while the store fails (`EngineConfig.store_retry`)."""
        return self.config.store_retry
