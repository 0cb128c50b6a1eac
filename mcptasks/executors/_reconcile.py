"""What the workflow-engine adapters (Temporal, DBOS) share: the workflow id of a task, which
active records `reconcile` looks at, and how a task whose workflow ended outside mcptasks ends."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import TypeVar

import anyio

from mcptasks._runtime.executor import ExecutorHost, HandedOver, HeldElsewhere, NotServedHere
from mcptasks._runtime.ledger import PARKED
from mcptasks.stores.base import TaskRecord

C = TypeVar("C")

SUBMIT_GRACE = 10.0
"""Seconds a new record may go without a workflow before `reconcile` starts one (a submit is in flight)."""
RECONCILE_BATCH = 256
"""The most records one `reconcile` pass asks the workflow engine about."""


def workflow_id(task_id: str) -> str:
    """The id of a task's workflow: a hash, so the task id (a bearer secret) is not shown as is."""
    return "mcptasks-" + hashlib.sha256(task_id.encode()).hexdigest()[:40]


def connected(client: C | None, system: str) -> C:
    """An adapter's client, or `RuntimeError` when it is used outside `serving`."""
    if client is None:
        raise RuntimeError(f"the {system} executor is not connected: its engine is not running")
    return client


def due_for_reconcile(active: Sequence[TaskRecord], live: set[str]) -> list[TaskRecord]:
    """The records `reconcile` checks (at most `RECONCILE_BATCH`): no live runner holds them and
    they are older than `SUBMIT_GRACE`; tasks parked in the store (`PARKED`, waiting for answers
    with nothing to run) last, so many of them cannot crowd out a task that needs its workflow."""
    now = time.time()
    due = [
        record
        for record in active
        if (record.runner is None or record.runner not in live) and now - record.created_at > SUBMIT_GRACE
    ]
    due.sort(key=lambda record: record.runner == PARKED)  # stable: the store's order otherwise
    return due[:RECONCILE_BATCH]


async def end_task_of_closed_workflow(
    host: ExecutorHost, task_id: str, system: str, failure: str | None = None
) -> bool:
    """A task's workflow ended in `system` without ending the task: cancel the task (`failure`
    None: the workflow was cancelled there), else fail it with `failure` (`executor_ended`).
    Whether this ended the task."""
    if failure is None:
        return await host.cancel_task(task_id, f"Cancelled in {system} (its workflow was cancelled).")
    return await host.fail_task(task_id, failure, reason="executor_ended")


async def let_body_stop(host: ExecutorHost, task_id: str) -> None:
    """After the task was ended outside the engine: wait up to `lease_ttl` for its body, running
    here, to stop at its next checkpoint."""
    with anyio.move_on_after(host.lease_ttl), suppress(HeldElsewhere, HandedOver, NotServedHere):
        await host.run_task(task_id)
