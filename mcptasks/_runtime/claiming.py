"""`Claiming`: taking queued tasks from the store and starting their bodies here.

With `run_tasks` (and no executor) the engine claims queued records (`claim`, woken by changes
and every `claim_interval`), registers a run for each (`_take`) and starts its body (`_launch`);
a durable body first reads the journal it replays from (`_journal`, `_replay`).
"""

from __future__ import annotations

import logging
from functools import partial

import anyio
from anyio.abc import TaskGroup

from mcptasks._authoring.results import error_result
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.hosting import BODY_TASK_NAME, RunHosting
from mcptasks._runtime.journal import Journal
from mcptasks._runtime.outages import describe
from mcptasks._runtime.run import TaskRun
from mcptasks.errors import ToolError
from mcptasks.stores.base import KeepsJournal, TaskRecord, keeps_offers
from mcptasks.wire import INTERNAL_ERROR

logger = logging.getLogger("mcptasks")


class Claiming(RunHosting):
    """The part of `TaskEngine` that claims queued tasks and starts their bodies (as runs of the
    in-process run host it extends)."""

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
            offers = keeps_offers(self.store)
            if offers is None:
                claimed = await self.store.claim(self.instance_id, room)
            else:  # only what this engine can run: the rest waits for a worker that knows its tool
                claimed = await offers.claim(self.instance_id, room, tools=tuple(self.tools))
            for record in claimed:
                self._take(record)
        finally:
            self._claiming -= 1
        for record in claimed:
            await self._launch(task_group, record)
        return len(claimed)

    def _take(self, record: TaskRecord) -> TaskRun:
        """Register the run of a record claimed for this engine (before recovery can look)."""
        run = self._runs.get(record.task_id) or self._add_run(
            TaskRun(
                self, record.task_id, record.expires_at, record.attempt, owner=record.owner, tool=record.tool
            )
        )
        run.record = record
        run.saved = record.checkpoint
        return run

    async def _launch(self, task_group: TaskGroup, record: TaskRecord) -> None:
        """Start the body of a claimed record, or end a task that cannot run (unknown tool,
        invalid arguments); a durable one whose journal is unreadable is released instead."""
        if self.observer is not None:
            self.observer.claimed(record)
        tool = self.tools.get(record.tool)
        if tool is None:
            self._drop_run(record.task_id)
            message = f"No worker knows the task tool {record.tool!r}; the task cannot run."
            await self._finish(
                record.task_id, Outcome("failed", error={"code": INTERNAL_ERROR, "message": message})
            )
            return
        try:
            args = tool.validate_arguments(record.arguments)
        except ToolError as exc:
            self._drop_run(record.task_id)
            await self._finish(record.task_id, Outcome("completed", result=error_result(str(exc))))
            return
        run = self._runs[record.task_id]
        if tool.durable and not await self._replay(run, tool):
            return
        task_group.start_soon(self._execute, tool, args, run, record.owner, None, name=BODY_TASK_NAME)

    def _journal(
        self, tool: TaskTool, task_id: str, owner: str, entries: list[str] | None = None
    ) -> Journal | None:
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
        return Journal(
            store, task_id, tool.name, self.limits, entries, owner=owner, owners=self._owner_journals
        )

    async def _replay(self, run: TaskRun, tool: TaskTool) -> bool:
        """Read the journal a claimed durable run replays from; False when the store failed
        (the task is released for a later claim)."""
        store = self.store
        if not isinstance(store, KeepsJournal):
            run.journal = self._journal(tool, run.task_id, run.owner)
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
        run.journal = self._journal(tool, run.task_id, run.owner, entries)
        return True
