"""Checkpoints: a body saves small JSON state with its task; a re-run after a lost worker starts with it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Client, accept, opted_in_meta, serve

from mcptasks import Elicit, MemoryTaskStore, Result, SqliteTaskStore, TaskContext, task_tool
from mcptasks.authoring import MAX_CHECKPOINT_BYTES
from mcptasks.lowlevel import ANONYMOUS_OWNER
from mcptasks.stores import TaskRecord

pytestmark = pytest.mark.anyio


@task_tool
async def saves_then_asks(ctx: TaskContext):
    before = ctx.saved
    await ctx.checkpoint({"job": "job #7", "tuple": (1, 2)})
    answer = yield Elicit("go on?")
    yield Result({"before": before, "after": ctx.saved, "answer": answer.data})


async def test_checkpoint_is_stored_with_the_task_and_not_shown_to_clients() -> None:
    store = MemoryTaskStore()
    async with serve(saves_then_asks, store=store) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("saves_then_asks")
        await client.input(task_id, count=1)
        record = await store.get(task_id)
        assert record is not None and record.checkpoint == {"job": "job #7", "tuple": [1, 2]}
        task = await client.get(task_id)
        assert "checkpoint" not in str(task) and "job #7" not in str(task)
        await client.answer_only(task_id, accept({}))
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {
        "before": None,
        "after": {"job": "job #7", "tuple": [1, 2]},
        "answer": {},
    }


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        (object(), "plain JSON"),
        ({"x": math.nan}, "plain JSON"),
        ({1j: 1}, "plain JSON"),
        ("x" * (MAX_CHECKPOINT_BYTES + 1), f"at most {MAX_CHECKPOINT_BYTES} bytes"),
    ],
)
async def test_a_bad_checkpoint_is_refused_and_the_last_good_one_kept(state: Any, problem: str) -> None:
    @task_tool
    async def saver(ctx: TaskContext):
        await ctx.checkpoint({"good": 1})
        try:
            await ctx.checkpoint(state)
        except ValueError as exc:
            yield Result({"error": str(exc), "saved": ctx.saved})

    store = MemoryTaskStore()
    async with serve(saver, store=store) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("saver")
        final = await client.finish(task_id)
        record = await store.get(task_id)
    assert problem in final["result"]["structuredContent"]["error"]
    assert final["result"]["structuredContent"]["saved"] == {"good": 1}
    assert record is not None and record.checkpoint == {"good": 1}


async def test_the_saved_state_is_a_copy() -> None:
    @task_tool
    async def mutator(ctx: TaskContext):
        state: dict[str, Any] = {"items": [1]}
        await ctx.checkpoint(state)
        state["items"].append(2)
        yield Result({"saved": ctx.saved})

    async with serve(mutator) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("mutator"))
    assert final["result"]["structuredContent"] == {"saved": {"items": [1]}}


async def test_inline_run_keeps_checkpoints_for_the_call() -> None:
    @task_tool
    async def inline(ctx: TaskContext):
        await ctx.checkpoint(["a"])
        yield Result({"saved": ctx.saved, "task": ctx.task_id})

    async with serve(inline) as (_, protocol):
        result = await protocol.call_tool("inline", {}, meta=None, owner=ANONYMOUS_OWNER)
    assert result["structuredContent"] == {"saved": ["a"], "task": None}


async def test_a_rerun_after_a_lost_worker_starts_from_the_checkpoint(tmp_path: Path) -> None:
    """The record a dead server left (runner gone, checkpoint saved) is re-run with that state."""
    db = tmp_path / "t.db"
    runs: list[tuple[int, Any]] = []

    @task_tool(retry_on_crash=True, max_attempts=3)
    async def resumable(ctx: TaskContext):
        runs.append((ctx.attempt, ctx.saved))
        job = (ctx.saved or {}).get("job") or f"started-by-attempt-{ctx.attempt}"
        await ctx.checkpoint({"job": job})
        yield Result({"job": job, "attempt": ctx.attempt})

    left = TaskRecord(
        task_id="left-behind",
        owner=ANONYMOUS_OWNER,
        tool="resumable",
        status="working",
        ttl_ms=3_600_000,
        runner="engine-that-died",
        checkpoint={"job": "job-42"},
    )
    store = SqliteTaskStore(db)
    await store.open()
    try:
        await store.create(left)
    finally:
        await store.close()

    async with serve(resumable, store=SqliteTaskStore(db)) as (_, protocol):
        client = Client(protocol)
        with anyio.fail_after(30):
            final = await client.finish("left-behind")
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"] == {"job": "job-42", "attempt": 2}
    assert runs == [(2, {"job": "job-42"})]


async def test_a_checkpoint_saved_before_the_task_existed_is_kept_by_the_task() -> None:
    """Input rounds on the `tools/call` (MRTR) run before the task exists; a checkpoint saved
    then is written into the task once it is created."""

    @task_tool(input_before_task=True)
    async def early(ctx: TaskContext):
        await ctx.checkpoint({"phase": "before the task"})
        answer = yield Elicit("name?", key="name", before_task=True)
        yield "now in the task"
        yield Result({"saved": ctx.saved, "name": answer.data, "task": ctx.task_id is not None})

    meta = opted_in_meta()
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = {}
    store = MemoryTaskStore()
    async with serve(early, store=store) as (_, protocol):
        first = await protocol.call_tool("early", {}, meta=meta, owner=ANONYMOUS_OWNER)
        assert first["resultType"] == "input_required"
        created = await protocol.call_tool(
            "early",
            {},
            meta=meta,
            owner=ANONYMOUS_OWNER,
            input_responses={"name": accept({"n": "Ada"})},
            request_state=first["requestState"],
        )
        assert created["resultType"] == "task"
        final = await Client(protocol).finish(created["taskId"])
        record = await store.get(created["taskId"])
    assert final["result"]["structuredContent"] == {
        "saved": {"phase": "before the task"},
        "name": {"n": "Ada"},
        "task": True,
    }
    assert record is not None and record.checkpoint == {"phase": "before the task"}
