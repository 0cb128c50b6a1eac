"""`ExecutorSeam`: the engine's side of the executor seam (`mcptasks._runtime.executor`).

At start the engine connects its executor (`_start_running`; without one, with `run_tasks`, it
claims work itself); a new task is submitted to it (`_hand_to_executor`); its workers run bodies
here through `run_task` (`_claim_one` claims the record) and report a cancel or a loss through
`cancel_task` and `fail_task` (the `ExecutorHost` calls).
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from functools import partial

from anyio.abc import TaskGroup

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine_state import EngineState, _close_body
from mcptasks._runtime.executor import HandedOver, HeldElsewhere, NotServedHere, executor_from_url
from mcptasks._runtime.instances import gone_from_this_host
from mcptasks._runtime.journal import encoded
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.outages import describe
from mcptasks.stores.base import KeepsJournal, TaskRecord, keeps_offers
from mcptasks.wire import INTERNAL_ERROR

logger = logging.getLogger("mcptasks")


class ExecutorSeam(EngineState):
    """The part of `TaskEngine` an executor and its workers talk to (`ExecutorHost`)."""

    async def _start_running(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        """Connect the executor (and work for it, with `run_tasks`), or start the claim loop."""
        named = self.config.executor
        executor = self.executor = executor_from_url(named) if isinstance(named, str) else named
        if executor is not None:
            await stack.enter_async_context(executor.serving(self))
            if self.run_tasks:
                await stack.enter_async_context(executor.working(self))
        elif self.run_tasks:
            task_group.start_soon(self._claim_forever)

    async def _hand_to_executor(
        self, tool: TaskTool, record: TaskRecord, prepared: StartedBody | None
    ) -> None:
        """Submit a new task to the executor. A body started by input rounds cannot cross to a
        worker: it is closed, and a durable one's journal starts with what the rounds did (a
        worker's replay answers them); any other asks its questions again there. A submit that
        fails leaves the task queued, saying why; `reconcile` submits it again."""
        if prepared is not None:
            await _close_body(prepared.body)
            store = self.store
            if tool.durable and isinstance(store, KeepsJournal):
                for position, entry in enumerate(prepared.entries):
                    await store.append_journal(record.task_id, position, encoded(entry))
        executor = self.executor
        assert executor is not None
        try:
            await executor.submit(record)
        except Exception as exc:
            logger.warning(
                "could not start task %s on %s (%s); it stays queued and is submitted again",
                record.task_id,
                executor.name,
                describe(exc),
            )
            note = f"Waiting to start on {executor.name}: {describe(exc)}"

            def waiting(current: TaskRecord) -> TaskRecord | None:
                if current.terminal or current.runner is not None:
                    return None
                return current.evolve(status_message=note)

            await self._guarded(partial(self._mutate, record.task_id, waiting))
        await self.store.publish(record.task_id)

    async def run_task(self, task_id: str) -> str:
        """Claim the task and run its body here until it ends; return its final status (an
        executor's worker calls this: see `ExecutorHost.run_task`)."""
        task_group = self._task_group
        if task_group is None or self._closing:
            raise HandedOver(task_id, "this worker is shutting down")
        if task_id in self._unsettled:
            raise HandedOver(task_id, "its end is not written yet: the store is unreachable")
        run = self._runs.get(task_id)
        if run is None:
            claimed = await self._claim_one(task_id)
            if isinstance(claimed, str):
                return claimed
            run = self._take(claimed)
            await self._launch(task_group, claimed)
        await run.ended.wait()
        if task_id in self._unsettled:
            raise HandedOver(task_id, "its end is not written yet: the store is unreachable")
        current = await self.store.get(task_id)
        if current is None or current.terminal:
            return "gone" if current is None else current.status
        raise HandedOver(task_id, "its run stopped before the task ended")

    async def _claim_one(self, task_id: str) -> TaskRecord | str:
        """Claim one task for `run_task`: its record, or the status of a task that needs no run."""
        record = await self.store.get(task_id)
        if record is None or record.terminal:
            return "gone" if record is None else record.status
        if record.tool not in self.tools and keeps_offers(self.store) is not None:
            raise NotServedHere(task_id, record.tool)  # another worker may know it (a rolling deploy)
        if record.runner is not None:
            live = await self.store.live_runners()
            held = record.runner != self.instance_id and not gone_from_this_host(record.runner)
            if held and record.runner in live:
                raise HeldElsewhere(task_id, record.runner)
            await self._orphaned(record)  # its runner is gone: re-queue it, or fail it
        mine = self.instance_id

        def claimed_here(current: TaskRecord) -> TaskRecord | None:
            return current.evolve(runner=mine) if current.runner is None and not current.terminal else None

        self._claiming += 1  # recovery must not take the claimed record for an orphan
        try:
            claimed = await self._mutate(task_id, claimed_here)
            if claimed is not None:
                self._take(claimed)
                return claimed
        finally:
            self._claiming -= 1
        current = await self.store.get(task_id)
        if current is None or current.terminal:
            return "gone" if current is None else current.status
        raise HeldElsewhere(task_id, current.runner or "another worker")

    async def cancel_task(self, task_id: str, reason: str) -> bool:
        """Cancel the task whatever its owner (an executor's own tools cancelled its run)."""
        return await self._cancel(task_id, reason, None)

    async def fail_task(self, task_id: str, message: str, *, reason: str) -> bool:
        """Fail an active task with `message` (`data.reason`: `reason`)."""
        error = {"code": INTERNAL_ERROR, "message": message, "data": {"reason": reason}}
        ended = await self._finish(task_id, Outcome("failed", error=error))
        if ended is None or ended.status != "failed":
            return False
        run = self._runs.get(task_id)
        if run is not None:
            run.stop()
        await self.store.publish(task_id)
        return True
