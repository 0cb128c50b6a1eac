"""`Liveness`: this engine's runner lease, and the recovery of tasks whose runner is gone.

It renews the heartbeat (on the event loop, and on a `HeartbeatThread` when enabled), and every
`lease_ttl / 2` recovers (`recover`): it writes the ends kept while the store failed, notices a
store that lost its data (`_check_epoch`), fails or re-queues the tasks of runners that are gone,
stops the runs here whose record ended elsewhere (`_stop_stale`), fails queued tasks no worker
offers to run, answers questions whose deadline passed (`_answer_overdue`), and lets the placement
reconcile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import anyio
from anyio.abc import TaskStatus

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import answer_log, ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine.bodies import timeout_outcome
from mcptasks._runtime.engine.duties import every, guarded
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.placement import Placement
from mcptasks._runtime.engine.queue import Claims
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.heartbeat import HeartbeatThread, heartbeat_thread
from mcptasks._runtime.instances import gone_from_this_host
from mcptasks._runtime.offers import heartbeat, no_worker_outcome, offered_tools, unserved
from mcptasks._runtime.recovery import abandoned, in_batches
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks.stores.base import StoreBase, TaskRecord

logger = logging.getLogger("mcptasks")


class Liveness:
    """Holds this engine's runner lease and recovers orphaned tasks."""

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        instance_id: str,
        records: RecordWriter,
        runs: RunRegistry,
        ends: RunEnds,
        claims: Claims,
        placement: Placement,
    ) -> None:
        self.store = store
        self.config = config
        self.tools = tools
        self.instance_id = instance_id
        self.records = records
        self.runs = runs
        self.ends = ends
        self.claims = claims
        self.placement = placement
        self._epoch: str | None = None
        """The store's `epoch()` when last read (a change: the store lost its data)."""

    async def heartbeat(self) -> None:
        """Renew this engine's lease (and its tool offers)."""
        await heartbeat(self.store, self.instance_id, self.config.lease_ttl, self._offered())

    def _offered(self) -> frozenset[str]:
        """The task tools this engine offers to run (none unless it runs bodies)."""
        return offered_tools(self.tools, runs_tasks=self.config.run_tasks)

    def heartbeat_thread(self) -> HeartbeatThread | None:
        """A lease renewer on its own thread, when enabled and the store can make a `twin()`."""
        config = self.config
        if not config.heartbeat_thread:
            return None
        return heartbeat_thread(
            self.store, self.instance_id, config.lease_ttl, config.wedge_limit, self._offered
        )

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
        await self.records.write_unsettled()
        running_before = self.runs.snapshot()
        claiming = self.claims.claiming
        live = {runner for runner in await self.store.live_runners() if not gone_from_this_host(runner)}
        records = await self.store.list_active()

        def orphaned(record: TaskRecord) -> bool:
            task_id = record.task_id
            here = self.runs.get(task_id) is not None or self.records.keeps_end(task_id)
            return abandoned(
                record,
                instance_id=self.instance_id,
                live=live,
                here=here,
                claiming=claiming or self.claims.claiming,
            )

        orphans = [record for record in records if orphaned(record)]
        count = await in_batches(orphans, orphaned, self.ends.orphaned, first_batch_done)
        if count:
            logger.info("mcptasks recovered %d task(s) whose server was lost", count)
        await self._stop_stale(running_before, {record.task_id: record for record in records})
        count += await self._fail_unserved(records)
        count += await self._end_overdue_parked(records)
        await self._answer_overdue(records)
        # An executor logs each task it changes itself; one a lost worker left is counted above
        # already (its workflow is resumed here or by another replica's pass).
        count += await self.placement.reconcile(records, live)
        return count

    async def _end_overdue_parked(self, records: Sequence[TaskRecord]) -> int:
        """Fail the tasks whose durable body waits in the store (`ledger.PARKED`) past their
        tool's timeout, counted from the task's creation (no run holds a deadline while it
        waits); how many. Their placement is told (an executor's workflow ends)."""
        now = time.time()
        failed = 0
        for record in records:
            tool = self.tools.get(record.tool)
            if record.runner != ledger.PARKED or tool is None or tool.timeout_ms is None:
                continue
            if now < record.created_at + tool.timeout_ms / 1000:
                continue
            finished = await self.records.finish(
                record.task_id, timeout_outcome(tool), only_runner=ledger.PARKED
            )
            if finished is not None and finished.terminal:
                failed += 1
                await guarded(partial(self.placement.stop, record.task_id))
        return failed

    async def _fail_unserved(self, records: Sequence[TaskRecord]) -> int:
        """Fail the queued tasks no live worker has offered to run for `no_worker_timeout`
        (`offers.unserved`); how many. Nothing when the store keeps no offers."""
        offers = self.store.offers()
        if offers is None:
            return 0
        queued = [record for record in records if record.runner is None]
        if not queued:
            return 0
        bound = self.config.no_worker_timeout
        failed = 0
        for record in unserved(queued, await offers.runner_offers(), now=time.time(), bound=bound):
            ended = ledger.ended(no_worker_outcome(record, bound), ttl_ms=self.records.ttl_of)
            finished = await self.records.mutate(record.task_id, ledger.while_queued(ended))
            if finished is not None and finished.terminal:
                log_task("failed", finished)
                logger.warning(
                    "task %s failed: no live worker has offered its tool %r for %g s",
                    record.task_id,
                    record.tool,
                    bound,
                )
                failed += 1
        return failed

    async def _answer_overdue(self, records: Sequence[TaskRecord]) -> None:
        """Answer the questions whose deadline passed, as their authors chose, wherever their
        bodies wait (in memory on any replica, or parked in the store), and wake their runners."""
        now = time.time()
        for record in records:
            if record.status != "input_required" or not answer_log.overdue(record, now):
                continue
            accepted: dict[str, object] = {}
            written = await self.records.mutate(record.task_id, ledger.deadline_passed(now, accepted))
            if written is None or not accepted:
                continue
            run = self.runs.get(record.task_id)
            if run is not None:
                run.poke()
            await self.store.publish(record.task_id)
            if record.runner == ledger.PARKED and written.runner is None:
                await guarded(partial(self.placement.unparked, written))  # an executor runs it again now

    async def _check_epoch(self) -> None:
        """Notice a store that lost its data (a Redis restarted without persistence, a database
        restored from a backup): its `epoch()` changed since the last look.

        Says so once, in one error naming the store and the tasks of this engine it no longer
        holds; their bodies are stopped and their ends logged, not written into the new data.
        """
        found = await self.store.epoch()
        vanished = self.records.take_vanished()
        if found is None:
            return  # the store cannot tell (`StoreBase.epoch`'s default)
        previous, self._epoch = self._epoch, str(found)
        if previous is None or previous == self._epoch:
            return
        mine = [*self.runs.snapshot(), *self.records.kept_ends()]
        lost = [task_id for task_id in mine if await self.store.get(task_id) is None]
        gone = len(vanished.union(lost))  # with the runs that met their missing record first
        logger.error(
            "the task store %r came back empty (its data marker changed from %s to %s: it was "
            "restarted without persistence, flushed or restored from a backup): %d task(s) of this "
            "server are no longer in it; their bodies are stopped and their ends logged, not written",
            self.store,
            previous,
            self._epoch,
            gone,
        )
        for task_id in lost:
            kept = self.records.drop_kept_end(task_id)
            if kept is not None:
                logger.error(
                    "task %s is no longer in the task store; its end was not written: %s",
                    task_id,
                    kept.outcome.summary(),
                )
            run = self.runs.get(task_id)
            if run is not None:
                run.stop()

    async def _stop_stale(self, running: Mapping[str, TaskRun], active: Mapping[str, TaskRecord]) -> None:
        """Stop the runs whose record ended, vanished or was taken over (a missed notification)."""
        for task_id, run in running.items():
            if self.runs.get(task_id) is not run or self.records.unwritten(task_id):
                continue  # not ours any more, or not written yet (started with `defer`)
            current = active.get(task_id)
            if current is None:  # ended, or created after the snapshot: look again
                current = await self.store.get(task_id)
            if current is None or current.terminal or not run.owns(current):
                run.log_cancel_from_elsewhere(current)
                run.stop()

    async def recover_forever(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
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
        await every(self.config.lease_ttl / 2, self.recover)
