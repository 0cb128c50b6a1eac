"""`Placement`: where the body of a new task runs. The engine's one seam for it.

The engine chooses one placement when it starts and never asks again:

- `LocalHost` (host.py): here, now, in the engine's task group (the default);
- `QueuePlacement` (queue.py): left queued in the store for the workers that claim it
  (`--enqueue-only`);
- `ExecutorPlacement` (via_executor.py): submitted to an `Executor` (Temporal, DBOS), whose
  workers run it here through `ExecutorHost.run_task`.

The protocol only; it imports nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol

from anyio.abc import TaskGroup

from mcptasks._authoring.tool import TaskTool
from mcptasks.stores.base import TaskRecord

if TYPE_CHECKING:
    from mcptasks._runtime.executor import Executor
    from mcptasks._runtime.mrtr import StartedBody


class Placement(Protocol):
    """Where new task bodies run, and what that needs while the engine runs."""

    @property
    def executor(self) -> Executor | None:
        """The executor bodies run on (None: they run on this engine's stores and workers)."""

    @property
    def takes_queued(self) -> bool:
        """Whether this engine claims queued tasks from the store and runs them here."""

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        """The runner a new record starts with (None: queued; this engine's id: it runs here)."""

    async def place(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        record: TaskRecord,
        prepared: StartedBody | None,
        *,
        defer: bool,
    ) -> TaskRecord:
        """Admit the new `record` (`TooManyTasks` over the limits: nothing is created), store it
        and start its body where this placement runs bodies; return the stored record (a live
        task's, when its idempotency key was held)."""

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        """Start what this placement needs while the engine runs (closed by `stack`)."""

    async def unparked(self, record: TaskRecord) -> None:
        """The answers a durable body parked in the store waited for came (`ledger.PARKED`): its
        task is queued again; run it (claim loops see the change without being told)."""

    async def stop(self, task_id: str) -> None:
        """The task ended here (cancelled): release what the placement holds for it."""

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Bring where bodies run in line with the store's active records; how many changed."""
