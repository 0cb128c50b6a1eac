"""`RunRegistry`: the task runs hosted on this engine.

It owns the registry of runs (by task id, and how many each owner has), refuses a new run over
`Limits.max_active` / `max_active_per_owner`, keeps the records of running bodies from expiring
(`Retention`), stops every run at shutdown and warns about bodies that ignore their cancellation.

It also owns the set of runs answered with their immediate result while their end is still being
written (`answered_early`): that set must shrink exactly when a run leaves the registry, so the
registry is its one owner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.limits import TooManyTasks
from mcptasks._runtime.retention import Retention
from mcptasks._runtime.run import TaskRun

logger = logging.getLogger("mcptasks")


class RunRegistry:
    """The runs this engine hosts, their admission, retention and shutdown."""

    def __init__(self, config: EngineConfig, on_stuck_shutdown: Callable[[list[str]], None] | None) -> None:
        self.config = config
        self.on_stuck_shutdown = on_stuck_shutdown
        self._runs: dict[str, TaskRun] = {}
        self._active_by_owner: dict[str, int] = {}
        self._drained: anyio.Event | None = None
        self._answered_early: set[str] = set()
        self.retention = Retention(self.hosts)
        """Keeps the records of running bodies from expiring (`ttl` is retention)."""

    def __len__(self) -> int:
        return len(self._runs)

    def busy(self) -> int:
        """How many runs hold a body's task now (a body parked in memory, waiting for answers
        without its task, holds none)."""
        return sum(1 for run in self._runs.values() if run.parked is None)

    def get(self, task_id: str) -> TaskRun | None:
        """The run of `task_id` hosted here, if any."""
        return self._runs.get(task_id)

    def hosts(self, run: TaskRun) -> bool:
        """Whether `run` is still this engine's run of its task."""
        return self._runs.get(run.task_id) is run

    def snapshot(self) -> dict[str, TaskRun]:
        """A copy of the registry (to look at while runs come and go)."""
        return dict(self._runs)

    def check_room(self, owner: str) -> None:
        """Refuse a create over `Limits.max_active_per_owner` / `max_active` (nothing is created)."""
        limits = self.config.limits
        retry_ms = max(1, round(limits.retry_after * 1000))
        per_owner = limits.active_share  # checked first: it holds however many others run
        if per_owner is not None and self._active_by_owner.get(owner, 0) >= per_owner:
            raise TooManyTasks("owner", per_owner, retry_ms)
        if limits.max_active is not None and len(self._runs) >= limits.max_active:
            raise TooManyTasks("server", limits.max_active, retry_ms)

    def add(self, run: TaskRun) -> TaskRun:
        """Register `run` (its owner's count goes up)."""
        self._runs[run.task_id] = run
        self._active_by_owner[run.owner] = self._active_by_owner.get(run.owner, 0) + 1
        return run

    def drop(self, task_id: str) -> None:
        """Forget the run of `task_id`: it is over here (`TaskRun.ended` is set)."""
        run = self._runs.pop(task_id, None)
        if run is not None:
            self._answered_early.discard(task_id)
            run.end()
            self.retention.forget(run)
            left = self._active_by_owner[run.owner] - 1
            if left:
                self._active_by_owner[run.owner] = left
            else:
                del self._active_by_owner[run.owner]
            if not self._runs and self._drained is not None:
                self._drained.set()

    def answer_early(self, run: TaskRun) -> bool:
        """Count `run` as answered with its result before its end is written, when it is still
        hosted here and fewer than `Limits.max_unwritten_results` are; whether it was counted."""
        if self._runs.get(run.task_id) is not run:
            return False
        if len(self._answered_early) >= self.config.limits.max_unwritten_results:
            return False
        self._answered_early.add(run.task_id)
        return True

    async def stop_all(self) -> None:
        """At shutdown: stop every body and give them `cancel_grace` seconds to end."""
        for run in list(self._runs.values()):
            run.stop()
        drained = self._drained = anyio.Event()
        if not self._runs:
            drained.set()
        grace = self.config.limits.cancel_grace
        with anyio.move_on_after(grace):
            await drained.wait()
        if self._runs:
            stuck = sorted({f"{run.tool!r} (task {run.task_id})" for run in self._runs.values()})
            logger.error(
                "shutting down with task bodies that ignore cancellation after %.0f s: %s",
                grace,
                ", ".join(stuck),
            )
            if self.on_stuck_shutdown is not None:
                self.on_stuck_shutdown(stuck)

    async def report_ignored(self) -> None:
        """Warn (once each) about bodies still running `cancel_grace` seconds after being stopped."""
        now = time.monotonic()
        grace = self.config.limits.cancel_grace
        for run in list(self._runs.values()):
            if run.stopped_at is not None and now - run.stopped_at > grace:
                logger.warning(
                    "task tool %r (task %s) is still running %.0f s after it was cancelled: its body "
                    "ignores cancellation (it catches the cancellation exception or blocks in a thread)",
                    run.tool,
                    run.task_id,
                    now - run.stopped_at,
                )
                run.ignoring_reported()
