"""`Leases`: this engine's runner lease and the recovery of tasks whose runner is gone.

The engine renews its heartbeat (`_heartbeat`, and a `HeartbeatThread` when enabled), and every
`lease_ttl / 2` recovers (`recover`): it writes the ends kept while the store failed, notices a
store that lost its data (`_check_epoch`), fails or re-queues the tasks of runners that are gone
(`_orphaned`), and stops the runs here whose record ended elsewhere (`_stop_stale`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import anyio
from anyio.abc import TaskStatus

from mcptasks._runtime import ledger
from mcptasks._runtime.engine_state import EngineState
from mcptasks._runtime.heartbeat import HeartbeatThread, heartbeat_thread
from mcptasks._runtime.hosting import _log_cancel_from_elsewhere
from mcptasks._runtime.instances import gone_from_this_host
from mcptasks._runtime.ledger import Transition
from mcptasks._runtime.offers import heartbeat, no_worker_outcome, offered_tools, unserved
from mcptasks._runtime.recovery import abandoned, in_batches, lost_outcome, requeue
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks.stores.base import TaskRecord, keeps_offers

logger = logging.getLogger("mcptasks")


LOST_WITH_PROCESS = "its task store is not durable (memory): the task is lost when this process exits"
"""What the log says of a task re-queued at a graceful stop on a store that is not durable (memory)."""


class Leases(EngineState):
    """The part of `TaskEngine` that holds its runner lease and recovers orphaned tasks."""

    async def _heartbeat(self) -> None:
        await heartbeat(self.store, self.instance_id, self.lease_ttl, self._offered())

    def _offered(self) -> frozenset[str]:
        """The task tools this engine offers to run (none unless it runs bodies)."""
        return offered_tools(self.tools, runs_tasks=self.run_tasks)

    def _heartbeat_thread(self) -> HeartbeatThread | None:
        """A lease renewer on its own thread, when enabled and the store can make a `twin()`."""
        if not self.heartbeat_thread:
            return None
        return heartbeat_thread(self.store, self.instance_id, self.lease_ttl, self.wedge_limit, self._offered)

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
        if count:
            logger.info("mcptasks recovered %d task(s) whose server was lost", count)
        await self._stop_stale(running_before, {record.task_id: record for record in records})
        count += await self._fail_unserved(records)
        if self.executor is not None:
            # The executor logs each task it changes itself; one a lost worker left is counted
            # above already (its workflow is resumed here or by another replica's pass).
            count += await self.executor.reconcile(records, live)
        return count

    async def _fail_unserved(self, records: Sequence[TaskRecord]) -> int:
        """Fail the queued tasks no live worker has offered to run for `no_worker_timeout`
        (`offers.unserved`); how many. Nothing when the store keeps no offers."""
        offers = keeps_offers(self.store)
        if offers is None:
            return 0
        queued = [record for record in records if record.runner is None]
        if not queued:
            return 0
        bound = self.no_worker_timeout
        failed = 0
        for record in unserved(queued, await offers.runner_offers(), now=time.time(), bound=bound):
            ended = ledger.ended(no_worker_outcome(record, bound), ttl_ms=self._ttl_of)

            def still_queued(current: TaskRecord, ended: Transition = ended) -> TaskRecord | None:
                return ended(current) if current.runner is None else None

            finished = await self._mutate(record.task_id, still_queued)
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
            log_task(
                "requeued", requeued, note=None if self.store.durable or not shutdown else LOST_WITH_PROCESS
            )
        await self.store.publish(record.task_id)
        return True
