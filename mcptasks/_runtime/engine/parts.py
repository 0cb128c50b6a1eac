"""`Parts`: the parts of one running engine, built with their collaborators and started in order.

`Parts.build` makes each part over the engine's store, config and tools, handing every part the
ones it uses by name, and makes the one choice of where new bodies run (the `Placement`).
`Parts.start` opens the store and starts the parts' duties in the engine's task group, in the
order shutdown relies on (the exit stack closes them in reverse).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from functools import partial
from typing import Any, NamedTuple

import anyio

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine.duties import every, guarded
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.host import LocalHost
from mcptasks._runtime.engine.immediate import ImmediateResults
from mcptasks._runtime.engine.liveness import Liveness
from mcptasks._runtime.engine.placement import Placement
from mcptasks._runtime.engine.queue import Claims, QueuedAdmission, QueuePlacement
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.engine.via_executor import ExecutorPlacement
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.watchdog import Watchdog
from mcptasks._runtime.webhooks.delivery import WebhookDelivery
from mcptasks._runtime.webhooks.events import EventOutbox
from mcptasks.stores.base import CHANGED_PREFIX, StoreBase, TaskRecord


async def _in_thread(call: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(call)


def webhooks_for(store: StoreBase, config: EngineConfig) -> WebhookDelivery | None:
    """The delivery of the configured webhooks (None: none configured)."""
    if not config.webhooks:
        return None
    delivery = WebhookDelivery(
        store, config.webhooks, config.webhook_secret, allow_private=config.webhook_allow_private,
        timeout=config.webhook_timeout, max_attempts=config.webhook_max_attempts,
        sweep_interval=config.webhook_sweep_interval,
    )  # fmt: skip
    return delivery


class Parts(NamedTuple):
    """The parts of one engine, each owning its share of the state."""

    records: RecordWriter
    runs: RunRegistry
    ends: RunEnds
    host: LocalHost
    immediate: ImmediateResults
    claims: Claims
    placement: Placement
    liveness: Liveness
    webhooks: WebhookDelivery | None = None
    """The delivery of task events to webhooks (None: none configured)."""

    @classmethod
    def build(
        cls,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        instance_id: str,
        observer: EngineObserver | None,
        on_stuck_shutdown: Callable[[list[str]], None] | None,
        executor: Executor | None,
    ) -> Parts:
        """Build the parts over `store`, and place new bodies on `executor`, here or the queue."""
        me = instance_id
        webhooks = webhooks_for(store, config)
        outbox = None if webhooks is None else EventOutbox(webhooks.stamp, webhooks.wrote)
        records = RecordWriter(store, config, tools, me, observer, outbox)  # every write carries its events
        runs = RunRegistry(config, on_stuck_shutdown)
        ends = RunEnds(store, config, tools, records, runs, observer)
        parks_in_store = config.park_waiting or executor is not None
        host = LocalHost(
            store, config, tools, me, observer, records, runs, ends, parks_in_store=parks_in_store
        )
        claims = Claims(store, config, tools, me, observer, records, runs, ends, host)
        admission = QueuedAdmission(store, config)
        placement: Placement
        if executor is not None:  # the one choice of where new bodies run
            placement = ExecutorPlacement(
                executor, works=config.run_tasks, store=store, config=config, instance_id=me,
                observer=observer, records=records, runs=runs, ends=ends, host=host, claims=claims,
                admission=admission,
            )  # fmt: skip
        elif config.run_tasks:
            placement = host
        else:
            placement = QueuePlacement(store, records, host, admission, observer)
        liveness = Liveness(store, config, tools, me, records, runs, ends, claims, placement)
        immediate = ImmediateResults(records, runs, host.start_soon)
        return cls(records, runs, ends, host, immediate, claims, placement, liveness, webhooks)

    async def start(
        self,
        stack: AsyncExitStack,
        config: EngineConfig,
        listen: Callable[..., Coroutine[Any, Any, None]],
        sweep: Callable[[], Awaitable[object]],
    ) -> None:
        """Open the store, renew the lease, start every duty (with the change `listen`er and the
        TTL `sweep`) and connect the placement."""
        liveness, host, runs, store = self.liveness, self.host, self.runs, self.records.store
        await store.open()
        stack.push_async_callback(store.close)
        await liveness.heartbeat()
        beats = liveness.heartbeat_thread()
        if beats is not None:
            beats.start()
            stack.push_async_callback(_in_thread, beats.stop)
        task_group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(task_group.cancel_scope.cancel)
        stack.push_async_callback(host.stop_runs)
        host.open(task_group)
        task_group.start_soon(runs.retention.run_forever)
        limits = config.limits
        if limits.blocking_threshold is not None:
            task_group.start_soon(Watchdog(limits.blocking_threshold).run)
        task_group.start_soon(every, limits.cancel_grace / 4, runs.report_ignored)
        if config.recover_orphans:  # a large backlog goes on in the background
            await task_group.start(liveness.recover_forever)
        await task_group.start(listen)
        if self.webhooks is not None:
            await task_group.start(self.webhooks.run)
        task_group.start_soon(every, config.sweep_interval, sweep)
        # The loop renews too: if the thread cannot reach the store, the lease still holds.
        task_group.start_soon(every, config.lease_ttl / 3, liveness.heartbeat)
        if beats is not None:
            task_group.start_soon(beats.tick_forever)  # shows the thread this loop still runs
        await self.placement.serve(stack, task_group)
        if self.placement.takes_queued:
            task_group.start_soon(self.claims.claim_forever)

    async def answer(self, task_id: str, responses: Mapping[str, Any], known: TaskRecord) -> None:
        """Record a client's answers (`RunEnds.answer`); a task they queued again from the store
        is handed to the placement (an executor runs it)."""
        unparked = await self.ends.answer(task_id, responses, known)
        if unparked is not None:
            await guarded(partial(self.placement.unparked, unparked))

    async def cancel(self, task_id: str, reason: str, known: TaskRecord) -> None:
        """Cancel the task (`RunEnds.cancel`); the placement releases what it holds for it."""
        if await self.ends.cancel(task_id, reason, known):
            await guarded(partial(self.placement.stop, task_id))

    def changed(self, task_id: str) -> None:
        """A change of `task_id` was announced: its run here re-reads it, else a claim may run
        (notifications are a fast path; the reaper and the claim loop poll meanwhile)."""
        if task_id.startswith(CHANGED_PREFIX):
            return  # a change announced for listen streams: nothing for runners to do
        run = self.runs.get(task_id)
        if run is None:
            self.claims.wake()
        else:
            self.host.start_soon(partial(guarded, partial(self.ends.refresh, run)))
