"""A durable body waiting for answers parks in the store (`EngineConfig.park_waiting`): its run
is dropped and its claim given up to `ledger.PARKED`; the answer queues it again and a claim
replays it from its journal. A body that is not durable waits in memory and holds no
`max_concurrent` slot either. In process, on a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import accept, wait_for_status

from mcptasks import Elicit, EngineConfig, Result, SqliteTaskStore, TaskContext, task_tool
from mcptasks._runtime import ledger
from mcptasks._runtime.recovery import abandoned
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine
from mcptasks.stores import TaskRecord

pytestmark = pytest.mark.anyio

prepared: list[str] = []


def prepare(task_id: str) -> str:
    prepared.append(task_id)
    return f"plan-{task_id[:4]}"


@task_tool(durable=True)
async def gate(ctx: TaskContext) -> Any:
    plan = await ctx.step(prepare, ctx.task_id or "")
    answer = yield Elicit(f"apply {plan}?")
    yield Result({"plan": plan, "answer": answer.data})


@task_tool
async def plain_gate() -> Any:
    answer = yield Elicit("go?")
    yield Result({"answer": answer.data})


events: list[tuple[str, str]] = []
"""What `held_gate` bodies did, in order: ("resumed", task id) past the answer, ("ended", task id)."""
release: list[anyio.Event] = []


@task_tool
async def held_gate(ctx: TaskContext) -> Any:
    answer = yield Elicit("go?")
    events.append(("resumed", ctx.task_id or ""))
    await release[0].wait()
    events.append(("ended", ctx.task_id or ""))
    yield Result({"answer": answer.data})


@asynccontextmanager
async def engine_on(path: Path, **config: Any) -> AsyncIterator[TaskEngine]:
    settings = EngineConfig(park_waiting=True, max_concurrent=1, claim_interval=0.05, **config)
    async with TaskEngine(
        SqliteTaskStore(path), config=settings, tools=[gate, plain_gate, held_gate]
    ) as engine:
        yield engine


async def answer(engine: TaskEngine, task_id: str, value: str) -> None:
    record = await wait_for_status(engine, task_id, "input_required")
    (key,) = record.input_requests
    await engine.update(task_id, {key: accept({"value": value})}, owner=ANONYMOUS_OWNER)


async def parked_record(engine: TaskEngine, task_id: str) -> TaskRecord:
    with anyio.fail_after(10):
        while True:
            record = await engine.store.get(task_id)
            if record is not None and record.runner == ledger.PARKED:
                return record
            await anyio.sleep(0.01)


async def test_a_durable_body_parks_in_the_store_and_is_replayed_when_answered(tmp_path: Path) -> None:
    prepared.clear()
    async with engine_on(tmp_path / "t.db") as engine:
        first = (await engine.start(gate, {}, owner=ANONYMOUS_OWNER)).task_id
        second = (await engine.start(gate, {}, owner=ANONYMOUS_OWNER)).task_id
        for task_id in (first, second):
            record = await parked_record(engine, task_id)
            assert record.status == "input_required" and record.input_requests
        assert engine.active_runs == 0  # no run, no slot: both wait with max_concurrent=1
        await answer(engine, second, "yes")
        done = await wait_for_status(engine, second, "completed")
        assert done.result["structuredContent"] == {"plan": f"plan-{second[:4]}", "answer": {"value": "yes"}}
        assert prepared.count(second) == 1  # the replay did not run the finished step again
        assert (await engine.store.get(first)).runner == ledger.PARKED  # still waiting


async def test_a_parked_task_is_cancelled_and_no_recovery_takes_it(tmp_path: Path) -> None:
    async with engine_on(tmp_path / "t.db") as engine:
        task_id = (await engine.start(gate, {}, owner=ANONYMOUS_OWNER)).task_id
        record = await parked_record(engine, task_id)
        assert not abandoned(record, instance_id="me", live=set(), here=False, claiming=False)
        assert await engine.recover() == 0
        await engine.cancel(task_id, owner=ANONYMOUS_OWNER)
        assert (await engine.store.get(task_id)).status == "cancelled"


async def test_a_body_that_is_not_durable_waits_in_memory_without_a_slot(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    async with (
        engine_on(path, run_tasks=False) as creator,
        engine_on(path, input_poll_interval=0.1) as worker,
    ):
        first = (await creator.start(plain_gate, {}, owner=ANONYMOUS_OWNER)).task_id
        await wait_for_status(creator, first, "input_required")
        assert (await creator.store.get(first)).runner == worker.instance_id  # it waits on the worker
        # the waiting body holds no slot of max_concurrent=1: the next queued task is claimed
        second = (await creator.start(plain_gate, {}, owner=ANONYMOUS_OWNER)).task_id
        await wait_for_status(creator, second, "input_required")
        await answer(creator, first, "a")
        await answer(creator, second, "b")
        done = await wait_for_status(creator, first, "completed")
        assert done.result["structuredContent"] == {"answer": {"value": "a"}}
        await wait_for_status(creator, second, "completed")


async def test_answered_bodies_waiting_in_memory_resume_one_slot_at_a_time(tmp_path: Path) -> None:
    events.clear()
    release[:] = [anyio.Event()]
    path = tmp_path / "t.db"
    async with (
        engine_on(path, run_tasks=False) as creator,
        engine_on(path, input_poll_interval=0.1) as worker,
    ):
        ids = [(await creator.start(held_gate, {}, owner=ANONYMOUS_OWNER)).task_id for _ in range(2)]
        for task_id in ids:  # both wait, with max_concurrent=1
            await wait_for_status(creator, task_id, "input_required")
        for task_id in ids:
            await answer(creator, task_id, "go")
        with anyio.fail_after(10):
            while True:
                if events:
                    break
                await anyio.sleep(0.01)
        with anyio.move_on_after(0.5):  # a bounded negative check: the other waits for the slot
            while True:
                if len(events) > 1:
                    break
                await anyio.sleep(0.01)
        assert len(events) == 1 and worker.active_runs == 2, events
        release[0].set()
        for task_id in ids:
            await wait_for_status(creator, task_id, "completed")
    first, second = events[0][1], events[2][1]
    assert events == [("resumed", first), ("ended", first), ("resumed", second), ("ended", second)]


def test_the_ledger_parks_only_a_waiting_run_and_an_answer_queues_it_again() -> None:
    waiting = TaskRecord(
        task_id="t", owner="o", tool="gate", status="input_required", runner="me",
        input_requests={"input-1": {"method": "elicitation/create", "params": {}}},
    )  # fmt: skip
    assert ledger.parked_by("other", 1)(waiting) is None
    assert ledger.parked_by("me", 2)(waiting) is None
    parked = ledger.parked_by("me", 1)(waiting)
    assert parked is not None and parked.runner == ledger.PARKED
    assert ledger.parked_by("me", 1)(waiting.evolve(input_requests={})) is None
    accepted: dict[str, Any] = {}
    answered = ledger.answered({"input-1": {"action": "accept"}}, accepted)(parked)
    assert answered is not None and answered.runner is None and answered.status == "working"
    held = ledger.answered({"input-1": {"action": "accept"}}, accepted)(waiting)
    assert held is not None and held.runner == "me"  # a live run keeps its claim
