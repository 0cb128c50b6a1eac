"""`ImmediateResults`: a body that ends at once answers its call with its result."""

from __future__ import annotations

import anyio
import pytest
from parts_helpers import Parts, Result, Yields, quick, record, task_tool

from mcptasks._runtime.engine.immediate import ImmediateResults


@task_tool
async def slow() -> Yields:
    """Sleeps, so it does not end at once."""
    await anyio.sleep(0.2)
    yield Result("late")


@pytest.mark.anyio
async def test_a_body_that_ends_at_once_is_answered_with_its_result() -> None:
    parts = Parts()
    immediate = ImmediateResults(parts.records, parts.runs, parts.host.start_soon)
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        await parts.host.place(quick, {"word": "now"}, record("t1"), None, defer=True)
        outcome = await immediate.settled("t1")
        assert outcome is not None and outcome.result is not None
        assert outcome.result["content"][0]["text"] == "now"
        assert await immediate.settled("t1") is None  # the call is answered once
        run = parts.runs.get("t1")
        with anyio.fail_after(5):
            while run is not None:
                await run.ended.wait()
                run = parts.runs.get("t1")
        group.cancel_scope.cancel()
    stored = await parts.store.get("t1")
    assert stored is not None and stored.status == "completed"


@pytest.mark.anyio
async def test_a_body_that_works_on_gets_the_task_and_its_record_is_stored() -> None:
    parts = Parts()
    parts.tools[slow.name] = slow
    immediate = ImmediateResults(parts.records, parts.runs, parts.host.start_soon)
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        await parts.host.place(slow, {}, record("t1").evolve(tool=slow.name), None, defer=True)
        assert await parts.store.get("t1") is None  # deferred
        assert await immediate.settled("t1") is None
        stored = await parts.store.get("t1")
        assert stored is not None and not stored.terminal  # written before the task is answered
        group.cancel_scope.cancel()
