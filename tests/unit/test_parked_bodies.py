"""A body waiting for answers gives up its task: the engine keeps the generator suspended at its
question and resumes it in a new task (an answer, a cancellation, its timeout, a periodic re-read).

What the body sees must not change: its answers, its context variables, its `finally:` blocks,
cancellation and timeouts at the question. A body with a block open around its `yield` (a cancel
scope, a task group) keeps its task, since such a block must be exited in the task that entered it.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

import anyio
import pytest
from helpers import Client, accept, serve, wait_idle

from mcptasks import Elicit, Inputs, Result, task_tool

pytestmark = pytest.mark.anyio

request_id: ContextVar[str] = ContextVar("request_id", default="unset")


@task_tool
async def asks(n: int):
    """Asks one question and returns its answer with `n`."""
    answer = yield Elicit("value?")
    yield Result({"n": n, "answer": answer.data})


@task_tool
async def keeps_context(tag: str):
    """Sets a context variable, asks, and reports the variable after the answer."""
    request_id.set(tag)
    answer = yield Elicit("value?")
    yield Result({"seen": request_id.get(), "answer": answer.data})


@task_tool
async def asks_two():
    """Asks two questions at once."""
    first, second = yield Inputs(Elicit("first?"), Elicit("second?"))
    yield Result([first.data, second.data])


@task_tool
async def asks_inside_a_task_group():
    """Keeps a child task running in its own task group across its question."""
    ticks: list[int] = []

    async def tick() -> None:
        while True:
            ticks.append(1)
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(tick)
        with anyio.CancelScope():
            answer = yield Elicit("value?")
        task_group.cancel_scope.cancel()
    yield Result({"answer": answer.data, "ticked": bool(ticks)})


cleaned: list[str] = []


@task_tool(timeout=0.3)
async def asks_with_a_timeout():
    """Asks a question nobody answers; its timeout ends it."""
    try:
        yield Elicit("value?")
    finally:
        cleaned.append("timeout")
    yield Result("unreachable")


stopped: dict[str, anyio.Event] = {}


@task_tool
async def asks_until_stopped(tag: str):
    """Asks a question nobody answers; records its `finally:` (and sets `stopped[tag]`)."""
    try:
        yield Elicit("value?")
    finally:
        cleaned.append(tag)
        if tag in stopped:
            stopped[tag].set()
    yield Result("unreachable")


def live_tasks(backend: str) -> int:
    """How many tasks the event loop runs right now."""
    if backend == "asyncio":
        return len(asyncio.all_tasks())
    import trio

    def count(task: Any) -> int:
        return 1 + sum(count(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

    return count(trio.lowlevel.current_root_task())


async def test_a_body_waiting_for_input_holds_no_task(anyio_backend: str) -> None:
    async with serve(asks) as (_, protocol):
        client = Client(protocol)
        before = live_tasks(anyio_backend)
        ids = [await client.start("asks", {"n": n}) for n in range(20)]
        requests = [await client.input(task_id, count=1) for task_id in ids]
        assert live_tasks(anyio_backend) < before + 5  # not one per waiting body
        for n, (task_id, pending) in enumerate(zip(ids, requests, strict=True)):
            (key,) = pending
            await client.update(task_id, {key: accept({"v": n})})
        finals = [await client.finish(task_id) for task_id in ids]
    assert [final["result"]["structuredContent"] for final in finals] == [
        {"n": n, "answer": {"v": n}} for n in range(20)
    ]


async def test_context_variables_survive_parking_and_periodic_rereads() -> None:
    # Re-read every 20 ms: the body is resumed, finds no answer and parks again, many times.
    async with serve(keeps_context, input_poll_interval=0.02) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("keeps_context", {"tag": "call-7"})
        (key,) = await client.input(task_id, count=1)
        await anyio.sleep(0.2)
        await client.update(task_id, {key: accept({"v": 1})})
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {"seen": "call-7", "answer": {"v": 1}}


async def test_a_partial_answer_resumes_the_body_and_it_parks_again() -> None:
    async with serve(asks_two) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("asks_two")
        first, second = sorted(await client.input(task_id, count=2))
        await client.update(task_id, {first: accept({"v": 1})})
        assert (await client.get(task_id))["status"] == "input_required"
        await client.update(task_id, {second: accept({"v": 2})})
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {"result": [{"v": 1}, {"v": 2}]}


async def test_a_body_with_blocks_open_around_its_question_keeps_its_task() -> None:
    # Resumed in another task, leaving the task group would raise: it must wait where it is.
    async with serve(asks_inside_a_task_group) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("asks_inside_a_task_group")
        (key,) = await client.input(task_id, count=1)
        await client.update(task_id, {key: accept({"v": 3})})
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"] == {"answer": {"v": 3}, "ticked": True}


async def test_a_timeout_reaches_a_parked_body() -> None:
    # Long before the next re-read (an hour away): the timeout itself resumes the body.
    cleaned.clear()
    async with serve(asks_with_a_timeout, input_poll_interval=3600) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("asks_with_a_timeout")
        final = await client.finish(task_id)
        await wait_idle(engine)
    assert final["status"] == "failed"
    assert final["error"]["data"] == {"reason": "timeout", "timeoutMs": 300}
    assert cleaned == ["timeout"]


async def test_cancel_and_shutdown_run_the_finally_of_parked_bodies() -> None:
    cleaned.clear()
    stopped.clear()
    stopped["cancelled"] = anyio.Event()
    async with serve(asks_until_stopped) as (engine, protocol):
        client = Client(protocol)
        cancelled = await client.start("asks_until_stopped", {"tag": "cancelled"})
        await client.input(cancelled, count=1)
        await client.cancel(cancelled)
        await client.finish(cancelled)
        at_shutdown = await client.start("asks_until_stopped", {"tag": "shutdown"})
        await client.input(at_shutdown, count=1)
        with anyio.fail_after(10):
            await stopped["cancelled"].wait()
    assert cleaned == ["cancelled", "shutdown"]
    record = await engine.store.get(at_shutdown)
    assert record is not None and record.status == "failed"
