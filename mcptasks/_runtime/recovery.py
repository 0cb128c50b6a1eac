"""Recovery: what becomes of active tasks whose runner is gone.

A task whose runner has no live heartbeat (or was a process on this machine that no longer
exists) is an orphan. It is put back in the queue when its tool has `retry_on_crash` and attempts
are left, and failed with a "worker lost" error otherwise. The engine applies these decisions;
this module only makes them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import anyio

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.ledger import PARKED, handed_over, requeued
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import INTERNAL_ERROR

logger = logging.getLogger("mcptasks")

WORKER_LOST_MESSAGE = "The server running this task restarted or stopped responding; its work was lost."
SHUTDOWN_MESSAGE = "The server shut down while this task was running."

RECOVERY_BATCH = 128
"""How many orphans recovery handles at once (and before an engine starting up returns)."""


def abandoned(
    record: TaskRecord, *, instance_id: str, live: Collection[str], here: bool, claiming: bool
) -> bool:
    """Whether `record` is an orphan: its runner is gone (`here`: it runs or settles on this engine).

    A record of this instance id that does not run here was left by an earlier life of the
    instance, unless a claim is registering it right now (`claiming`).
    """
    if record.runner is None or record.runner == PARKED or here:
        return False
    if record.runner == instance_id:
        return not claiming
    return record.runner not in live


def requeue(
    record: TaskRecord, tool: TaskTool | None, *, shutdown: bool
) -> Callable[[TaskRecord], TaskRecord | None] | None:
    """The change that puts `record` back in the queue, or None when it must fail instead.

    A durable body is handed over as it stands (its open questions stay open, under their keys;
    a graceful shutdown does not count as an attempt); any other is re-run from the start.
    """
    if tool is not None and tool.durable:
        return _hand_over(record, tool, shutdown=shutdown)
    if tool is None or not tool.retry_on_crash or record.attempt >= tool.max_attempts:
        return None
    lost = record.runner
    attempt = record.attempt + 1
    why = "The server running this task shut down" if shutdown else "The worker running this task was lost"
    message = f"{why}; restarting it (attempt {attempt} of {tool.max_attempts})."

    return requeued(lost, attempt, message)


def _hand_over(
    record: TaskRecord, tool: TaskTool, *, shutdown: bool
) -> Callable[[TaskRecord], TaskRecord | None] | None:
    """`requeue` for a durable body: it resumes from its journal wherever it is claimed next."""
    if not shutdown and record.attempt >= tool.max_attempts:
        return None
    lost = record.runner
    attempt = record.attempt if shutdown else record.attempt + 1

    return handed_over(lost, attempt)


def lost_outcome(record: TaskRecord, *, shutdown: bool) -> Outcome:
    """The failure recorded for an orphan that is not re-run."""
    reason = "shutdown" if shutdown else "worker_lost"
    message = SHUTDOWN_MESSAGE if shutdown else WORKER_LOST_MESSAGE
    error: dict[str, Any] = {"code": INTERNAL_ERROR, "message": message, "data": {"reason": reason}}
    if record.attempt > 1:
        error["data"]["attempts"] = record.attempt
    return Outcome("failed", error=error)


async def in_batches(
    orphans: Sequence[TaskRecord],
    still_orphaned: Callable[[TaskRecord], bool],
    handle: Callable[[TaskRecord], Awaitable[bool]],
    first_batch_done: Callable[[], None] | None = None,
) -> int:
    """`handle` the orphans `RECOVERY_BATCH` at a time; how many it handled.

    Each batch is re-checked with `still_orphaned` (a claim may have taken a record meanwhile);
    `first_batch_done` is called after the first batch.
    """
    count = 0
    for first in range(0, len(orphans), RECOVERY_BATCH):
        batch = [record for record in orphans[first : first + RECOVERY_BATCH] if still_orphaned(record)]
        count += await _batch(batch, handle)
        if first_batch_done is not None:
            first_batch_done()
            first_batch_done = None
    return count


async def _batch(records: Sequence[TaskRecord], handle: Callable[[TaskRecord], Awaitable[bool]]) -> int:
    """`handle` each record concurrently (stores batch concurrent writes); how many it handled."""
    done = 0

    async def one(record: TaskRecord) -> None:
        nonlocal done
        try:
            if await handle(record):
                done += 1
        except Exception:
            logger.warning("could not recover task %s; will retry", record.task_id, exc_info=True)

    async with anyio.create_task_group() as group:
        for record in records:
            group.start_soon(one, record)
    return done
