"""`LocalHost`: places a new task here, runs its body and settles it."""

from __future__ import annotations

import anyio
import pytest
from parts_helpers import ME, Parts, quick, record

from mcptasks._runtime.engine.host import BODY_TASK_NAME


@pytest.mark.anyio
async def test_a_placed_body_runs_here_and_its_end_is_written() -> None:
    parts = Parts()
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        assert parts.host.taking_work and parts.host.runner_for(None) == ME
        stored = await parts.host.place(quick, {"word": "yo"}, record("t1"), None, defer=False)
        assert stored.task_id == "t1" and parts.runs.get("t1") is not None
        run = parts.runs.get("t1")
        with anyio.fail_after(5):
            while run is not None:
                await run.ended.wait()
                run = parts.runs.get("t1")
        group.cancel_scope.cancel()
    final = await parts.store.get("t1")
    assert final is not None and final.status == "completed"
    assert final.result is not None and final.result["content"][0]["text"] == "yo"
    assert BODY_TASK_NAME == "mcptasks task body"


@pytest.mark.anyio
async def test_a_held_idempotency_key_starts_no_body() -> None:
    parts = Parts()
    await parts.store.create(record("first", idempotency_key="k"))
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        held = await parts.host.place(quick, {}, record("second", idempotency_key="k"), None, defer=False)
        assert held.task_id == "first"
        assert parts.runs.get("second") is None and len(parts.runs) == 0
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_host_that_is_leaving_takes_no_work() -> None:
    parts = Parts()
    async with anyio.create_task_group() as group:
        parts.host.open(group)
        parts.host.leaving()
        assert not parts.host.taking_work
        assert not parts.host.start_soon(anyio.lowlevel.checkpoint)
        parts.host.closed()
        group.cancel_scope.cancel()
