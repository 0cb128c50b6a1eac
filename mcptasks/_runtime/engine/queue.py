"""The queue: tasks left in the store for whichever worker claims them.

`Claims` takes queued tasks for this engine (the claim loop, woken by changes and every
`claim_interval`; `claim_one` for an executor's worker), registers a run for each, reads the
journal a durable one replays from and launches it on the `LocalHost`. `QueuePlacement` is the
placement that leaves every new task queued (`--enqueue-only`); a body already started by input
rounds before its task cannot be queued, so it runs here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcptasks._authoring.results import error_result
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine.duties import guarded
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.host import LocalHost
from mcptasks._runtime.engine.records import RecordWriter, same_call
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.executor import Executor, HandedOver, HeldElsewhere, NotServedHere
from mcptasks._runtime.instances import gone_from_this_host
from mcptasks._runtime.limits import TooManyTasks
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import describe
from mcptasks._runtime.run import TaskRun
from mcptasks.errors import ToolError
from mcptasks.stores.base import StoreBase, TaskRecord
from mcptasks.wire import INTERNAL_ERROR

logger = logging.getLogger("mcptasks")

PARKED_STATUS = "parked"
"""What `run_one` returns for a task whose durable body waits for answers in the store
(`ledger.PARKED`): the executor waits for `Executor.resume` before it runs the task again."""


class Claims:
    """Claims queued tasks for this engine and launches their bodies on the `LocalHost`."""

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        instance_id: str,
        observer: EngineObserver | None,
        records: RecordWriter,
        runs: RunRegistry,
        ends: RunEnds,
        host: LocalHost,
    ) -> None:
        self.store = store
        self.config = config
        self.tools = tools
        self.instance_id = instance_id
        self.observer = observer
        self.records = records
        self.runs = runs
        self.ends = ends
        self.host = host
        self._wakeup: anyio.Event | None = None
        self._claiming = 0
        """Claims registering their records right now (recovery must not take one for an orphan)."""

    @property
    def claiming(self) -> bool:
        """Whether a claim is registering the records it took right now."""
        return self._claiming > 0

    def wake(self) -> None:
        """A task may have been queued: claim now instead of at the next `claim_interval`."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def claim_forever(self) -> None:
        """The claim loop."""
        while True:
            wakeup = self._wakeup = anyio.Event()
            await guarded(self.claim)
            with anyio.move_on_after(self.config.claim_interval):
                await wakeup.wait()

    async def claim(self) -> int:
        """Take queued tasks from the store and run them here; return how many were started."""
        if not self.host.taking_work:
            return 0
        limit = self.config.max_concurrent
        room = 256 if limit is None else limit - self.runs.busy()  # parked bodies hold no slot
        if room <= 0:
            return 0
        self._claiming += 1
        try:
            offers = self.store.offers()
            if offers is None:
                claimed = await self.store.claim(self.instance_id, room)
            else:  # only what this engine can run: the rest waits for a worker that knows its tool
                claimed = await offers.claim(self.instance_id, room, tools=tuple(self.tools))
            for record in claimed:
                self.take(record)
        finally:
            self._claiming -= 1
        for record in claimed:
            await self.launch(record)
        return len(claimed)

    async def run_one(self, task_id: str) -> str:
        """Claim the task and run its body here until it ends; return its final status (see
        `ExecutorHost.run_task`)."""
        if not self.host.taking_work:
            raise HandedOver(task_id, "this worker is shutting down")
        if self.records.keeps_end(task_id):
            raise HandedOver(task_id, "its end is not written yet: the store is unreachable")
        run = self.runs.get(task_id)
        if run is None:
            claimed = await self.claim_one(task_id)
            if isinstance(claimed, str):
                return claimed
            run = self.take(claimed)
            await self.launch(claimed)
        await run.ended.wait()
        if self.records.keeps_end(task_id):
            raise HandedOver(task_id, "its end is not written yet: the store is unreachable")
        current = await self.store.get(task_id)
        if current is None or current.terminal:
            return "gone" if current is None else current.status
        if current.runner == ledger.PARKED:
            return PARKED_STATUS
        raise HandedOver(task_id, "its run stopped before the task ended")

    async def claim_one(self, task_id: str) -> TaskRecord | str:
        """Claim one task for an executor's worker: its record (its run registered), or the
        status of a task that needs no run."""
        record = await self.store.get(task_id)
        if record is None or record.terminal:
            return "gone" if record is None else record.status
        if record.runner == ledger.PARKED:
            return PARKED_STATUS  # it waits for answers: nothing to run until they come
        if record.tool not in self.tools and self.store.offers() is not None:
            raise NotServedHere(task_id, record.tool)  # another worker may know it (a rolling deploy)
        if record.runner is not None:
            live = await self.store.live_runners()
            held = record.runner != self.instance_id and not gone_from_this_host(record.runner)
            if held and record.runner in live:
                raise HeldElsewhere(task_id, record.runner)
            await self.ends.orphaned(record)  # its runner is gone: re-queue it, or fail it
        self._claiming += 1  # recovery must not take the claimed record for an orphan
        try:
            claimed = await self.records.mutate(task_id, ledger.claimed_by(self.instance_id))
            if claimed is not None:
                self.take(claimed)
                return claimed
        finally:
            self._claiming -= 1
        current = await self.store.get(task_id)
        if current is None or current.terminal:
            return "gone" if current is None else current.status
        raise HeldElsewhere(task_id, current.runner or "another worker")

    def take(self, record: TaskRecord) -> TaskRun:
        """Register the run of a record claimed for this engine (before recovery can look)."""
        run = self.runs.get(record.task_id) or self.runs.add(
            TaskRun(
                self.host,
                record.task_id,
                record.expires_at,
                record.attempt,
                owner=record.owner,
                tool=record.tool,
            )
        )
        run.claimed(record)
        return run

    async def launch(self, record: TaskRecord) -> None:
        """Start the body of a claimed record, or end a task that cannot run (unknown tool,
        invalid arguments); a durable one whose journal is unreadable is released instead."""
        if self.observer is not None:
            self.observer.claimed(record)
        tool = self.tools.get(record.tool)
        if tool is None:
            self.runs.drop(record.task_id)
            message = f"No worker knows the task tool {record.tool!r}; the task cannot run."
            error = {"code": INTERNAL_ERROR, "message": message}
            await self.records.finish(record.task_id, Outcome("failed", error=error))
            return
        try:
            args = tool.validate_arguments(record.arguments)
        except ToolError as exc:
            self.runs.drop(record.task_id)
            await self.records.finish(record.task_id, Outcome("completed", result=error_result(str(exc))))
            return
        run = self.runs.get(record.task_id)
        assert run is not None
        if tool.durable and not await self._replay(run, tool):
            return
        self.host.launch(tool, args, run)

    async def _replay(self, run: TaskRun, tool: TaskTool) -> bool:
        """Read the journal a claimed durable run replays from; False when the store failed
        (the task is released for a later claim)."""
        try:
            entries = await self.config.store_retry.run(
                partial(self.store.read_journal, run.task_id),
                permanent=self.records.permanent_errors,
                what=f"reading the journal of task {run.task_id}",
            )
        except Exception as exc:
            logger.error(
                "could not read the journal of task %s (%s); releasing it", run.task_id, describe(exc)
            )
            self.runs.drop(run.task_id)
            release = partial(self.records.mutate, run.task_id, ledger.released_by(self.instance_id))
            with anyio.move_on_after(self.config.lease_ttl):
                await guarded(release)
            return False
        run.journal = self.records.journal_for(tool, run.task_id, run.owner, entries)
        run.replayed(tool.timeout_ms)
        return True


class QueuedAdmission:
    """Admission of a new task whose body runs elsewhere: `Limits.max_active_per_owner` counted
    in the store, queued or running wherever they are (`StoreBase.count_active`)."""

    def __init__(self, store: StoreBase, config: EngineConfig) -> None:
        self.store = store
        self.config = config

    async def check(self, owner: str) -> None:
        """Refuse a create over the owner's share. Creates of one owner in flight at the same
        moment each count before the others are stored: the bound may be passed by as many (a
        lock across replicas would cost every create a round trip more)."""
        limits = self.config.limits
        per_owner = limits.active_share
        if per_owner is None:
            return
        if await self.store.count_active(owner) >= per_owner:
            raise TooManyTasks("owner", per_owner, max(1, round(limits.retry_after * 1000)))

    async def create(
        self, record: TaskRecord, records: RecordWriter, observer: EngineObserver | None
    ) -> TaskRecord | None:
        """Admit and store a new queued `record`: None when stored, else the live record that
        holds its idempotency key."""
        await self.check(record.owner)
        if observer is not None:
            observer.creating(record)
        return await records.create(record)


class QueuePlacement:
    """The placement that leaves new tasks queued in the store for workers (`--enqueue-only`)."""

    executor: Executor | None = None
    takes_queued = False

    def __init__(
        self,
        store: StoreBase,
        records: RecordWriter,
        host: LocalHost,
        admission: QueuedAdmission,
        observer: EngineObserver | None,
    ) -> None:
        self.store = store
        self.records = records
        self.host = host
        self.admission = admission
        self.observer = observer

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        """Queued (None), except a body started by input rounds: it runs here."""
        return None if prepared is None else self.host.runner_for(prepared)

    async def place(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        record: TaskRecord,
        prepared: StartedBody | None,
        *,
        defer: bool,
    ) -> TaskRecord:
        """Store the new record queued and announce it to the workers."""
        if prepared is not None:
            return await self.host.place(tool, args, record, prepared, defer=defer)
        held = await self.admission.create(record, self.records, self.observer)
        if held is not None:
            return same_call(held, record)
        await self.store.publish(record.task_id)
        return record

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        """Nothing to start: workers claim from the store."""

    async def unparked(self, record: TaskRecord) -> None:
        """Nothing to do: the store's change announcement wakes the claim loops."""

    async def stop(self, task_id: str) -> None:
        """Nothing to release: a worker's run sees its record end."""

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Nothing to reconcile: the store is the queue."""
        return 0
