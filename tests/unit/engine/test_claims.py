"""`Claims` and `QueuePlacement`: queued tasks are claimed here, or left for workers."""

from __future__ import annotations

import anyio
import pytest
from parts_helpers import ME, Parts, quick, record

from mcptasks._runtime.engine.queue import Claims, QueuedAdmission, QueuePlacement


def claims_of(parts: Parts) -> Claims:
    return Claims(
        parts.store, parts.config, parts.tools, ME, None, parts.records, parts.runs, parts.ends, parts.host
    )


@pytest.mark.anyio
async def test_claim_runs_queued_tasks_here() -> None:
    parts = Parts()
    claims = claims_of(parts)
    await parts.store.create(record("q1", runner=None))
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        assert await claims.claim() == 1
        run = parts.runs.get("q1")
        assert run is not None
        with anyio.fail_after(5):
            await run.ended.wait()
        group.cancel_scope.cancel()
    current = await parts.store.get("q1")
    assert current is not None and current.status == "completed" and current.runner == ME


@pytest.mark.anyio
async def test_a_claim_of_an_unknown_tool_fails_the_task() -> None:
    parts = Parts()
    claims = claims_of(parts)
    unknown = record("q1", runner=ME).evolve(tool="nobody-knows")
    await parts.store.create(unknown)
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        claims.take(unknown)
        await claims.launch(unknown)
        group.cancel_scope.cancel()
    failed = await parts.store.get("q1")
    assert failed is not None and failed.status == "failed" and len(parts.runs) == 0


@pytest.mark.anyio
async def test_run_one_returns_the_status_of_a_task_that_ended() -> None:
    parts = Parts()
    claims = claims_of(parts)
    await parts.store.create(record("q1", runner=None))
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        with anyio.fail_after(5):
            assert await claims.run_one("q1") == "completed"
            assert await claims.run_one("q1") == "completed"  # a repeat is harmless
            assert await claims.run_one("never") == "gone"
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_queue_placement_leaves_a_new_task_queued() -> None:
    parts = Parts()
    placement = QueuePlacement(
        parts.store, parts.records, parts.host, QueuedAdmission(parts.store, parts.config), None
    )
    assert placement.runner_for(None) is None and not placement.takes_queued
    stored = await placement.place(quick, {}, record("q1", runner=None), None, defer=False)
    queued = await parts.store.get(stored.task_id)
    assert queued is not None and queued.runner is None and not queued.terminal
    assert len(parts.runs) == 0
