"""`Liveness`: orphans of a gone runner are failed; the placement is asked to reconcile."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import pytest
from anyio.abc import TaskGroup
from parts_helpers import ME, Parts, record

from mcptasks._runtime.engine.liveness import Liveness
from mcptasks._runtime.engine.queue import Claims
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.mrtr import StartedBody
from mcptasks.stores.base import TaskRecord


class CountingPlacement:
    """A placement that runs nothing and counts reconcile calls."""

    executor: Executor | None = None
    takes_queued = False

    def __init__(self) -> None:
        self.reconciled: list[int] = []

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        return None

    async def place(
        self, tool: Any, args: Any, record: TaskRecord, prepared: Any, *, defer: bool
    ) -> TaskRecord:
        return record

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        pass

    async def unparked(self, record: TaskRecord) -> None:
        pass

    async def stop(self, task_id: str) -> None:
        pass

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        self.reconciled.append(len(active))
        return 0


def liveness_of(parts: Parts, placement: CountingPlacement) -> Liveness:
    claims = Claims(
        parts.store, parts.config, parts.tools, ME, None, parts.records, parts.runs, parts.ends, parts.host
    )
    return Liveness(
        parts.store, parts.config, parts.tools, ME, parts.records, parts.runs, parts.ends, claims, placement
    )


@pytest.mark.anyio
async def test_a_task_of_a_gone_runner_is_failed_and_ours_are_kept() -> None:
    parts = Parts()
    placement = CountingPlacement()
    liveness = liveness_of(parts, placement)
    await liveness.heartbeat()
    await parts.store.create(record("lost", runner="a-runner-long-gone"))
    await parts.store.create(record("queued", runner=None))
    assert await liveness.recover() == 1
    lost = await parts.store.get("lost")
    assert lost is not None and lost.status == "failed"
    assert lost.error is not None and lost.error["data"]["reason"] == "worker_lost"
    queued = await parts.store.get("queued")
    assert queued is not None and not queued.terminal
    assert placement.reconciled == [2]


@pytest.mark.anyio
async def test_a_record_of_this_instance_that_runs_nowhere_is_an_orphan() -> None:
    parts = Parts()
    liveness = liveness_of(parts, CountingPlacement())
    await liveness.heartbeat()
    await parts.store.create(record("left", runner=ME))  # an earlier life of this instance
    assert await liveness.recover() == 1
    left = await parts.store.get("left")
    assert left is not None and left.status == "failed"
