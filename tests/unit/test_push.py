"""`TaskPush` and `TaskFeed` in process (no SDK): slow listeners, shutdown, lost notifications.

The wire itself is covered over real HTTP (`test_push_http.py`), stdio and replicas; here the
stream logic meets its edge cases through its public API, with `send` functions the test controls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest
from helpers import wait_for_status

from mcptasks import EngineConfig, Result, task_tool
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.protocol import ANONYMOUS_OWNER
from mcptasks._runtime.push import TaskPush, requested_task_ids
from mcptasks.errors import ProtocolError
from mcptasks.stores.memory import MemoryTaskStore
from mcptasks.wire import INTERNAL_ERROR, MISSING_REQUIRED_CLIENT_CAPABILITY

pytestmark = pytest.mark.anyio

OPTED_IN = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
}

gates: dict[str, anyio.Event] = {}


@task_tool(poll_interval=0.05)
async def stepper(label: str, steps: int):
    """Report `steps` statuses, wait for the gate, then finish."""
    for i in range(steps):
        yield f"{label} {i}"
    await gates[label].wait()
    yield Result(f"{label} done")


@asynccontextmanager
async def pushing(**options: Any) -> AsyncIterator[tuple[TaskEngine, TaskPush]]:
    announce = options.pop("announce_changes", True)
    engine = TaskEngine(MemoryTaskStore(), tools=[stepper], config=EngineConfig(push=announce))
    push = TaskPush(engine, **options)
    async with engine, anyio.create_task_group() as group:
        await group.start(push.feed.run, engine.store)
        yield engine, push
        group.cancel_scope.cancel()


async def start(engine: TaskEngine, label: str, steps: int = 1) -> str:
    gates[label] = anyio.Event()
    record = await engine.start(stepper, {"label": label, "steps": steps}, owner=ANONYMOUS_OWNER)
    await wait_for_status(engine, record.task_id, "working")
    return record.task_id


async def test_a_listener_that_stops_reading_is_dropped_and_the_task_goes_on() -> None:
    async with pushing(stall_timeout=0.2) as (engine, push):
        task_id = await start(engine, "stall")
        sent: list[dict[str, Any]] = []
        first = anyio.Event()

        async def stuck(params: dict[str, Any]) -> None:
            sent.append(params)
            first.set()
            if len(sent) > 1:
                await anyio.sleep_forever()  # a transport that never drains

        agreed = await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN)
        async with anyio.create_task_group() as group:
            reasons: list[str] = []

            async def listen() -> None:
                reasons.append(await push.stream(agreed, owner=ANONYMOUS_OWNER, send=stuck))

            group.start_soon(listen)
            await first.wait()
            gates["stall"].set()  # the task finishes while its listener is stuck
            record = await wait_for_status(engine, task_id, "completed")
        assert reasons == ["slow"]
        assert record.status == "completed"
        assert not push.feed.watching(task_id)


async def test_closing_the_feed_ends_streams_as_shutdown() -> None:
    async with pushing() as (engine, push):
        task_id = await start(engine, "close")
        first = anyio.Event()

        async def send(params: dict[str, Any]) -> None:
            first.set()

        reasons: list[str] = []
        async with anyio.create_task_group() as group:

            async def listen() -> None:
                reasons.append(await push.stream([task_id], owner=ANONYMOUS_OWNER, send=send))

            group.start_soon(listen)
            await first.wait()
            push.feed.close()
        assert reasons == ["shutdown"]
        # a listen arriving while the server stops ends at once
        assert await push.stream([task_id], owner=ANONYMOUS_OWNER, send=send) == "shutdown"
        gates["close"].set()


async def test_a_lost_change_notification_is_repaired_by_the_resync() -> None:
    async with pushing(resync_interval=0.2, announce_changes=False) as (engine, push):
        task_id = await start(engine, "lost")
        seen: list[str] = []
        first = anyio.Event()

        async def send(params: dict[str, Any]) -> None:
            seen.append(params["status"])
            first.set()

        async with anyio.create_task_group() as group:

            async def listen() -> None:
                await push.stream([task_id], owner=ANONYMOUS_OWNER, send=send)

            group.start_soon(listen)
            await first.wait()
            gates["lost"].set()  # no change is announced: only the periodic re-read sees the end
        assert seen == ["working", "completed"]


async def test_accept_needs_the_extension_and_keeps_only_own_tasks() -> None:
    async with pushing() as (engine, push):
        mine = await start(engine, "mine")
        theirs = (await engine.start(stepper, {"label": "mine", "steps": 0}, owner="someone-else")).task_id
        with pytest.raises(ProtocolError) as raised:
            await push.accept([mine], owner=ANONYMOUS_OWNER, meta={})
        assert raised.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert await push.accept([mine, theirs, "nope"], owner=ANONYMOUS_OWNER, meta=OPTED_IN) == [mine]
        gates["mine"].set()
        await wait_for_status(engine, mine, "completed")
        # a finished task is still agreed: its final state is sent once, then the stream is done
        assert await push.accept([mine], owner=ANONYMOUS_OWNER, meta=OPTED_IN) == [mine]
        sent: list[dict[str, Any]] = []

        async def send(params: dict[str, Any]) -> None:
            sent.append(params)

        assert await push.stream([mine], owner=ANONYMOUS_OWNER, send=send) == "done"
        assert [params["status"] for params in sent] == ["completed"]


def test_requested_task_ids_parses_and_deduplicates() -> None:
    assert requested_task_ids({"toolsListChanged": True}) is None
    assert requested_task_ids({"taskIds": ["a", "b", "a"]}) == ["a", "b"]
    for bad in ("a", [1], {"a": 1}):
        with pytest.raises(ProtocolError):
            requested_task_ids({"taskIds": bad})
    with pytest.raises(ProtocolError):
        requested_task_ids({"taskIds": [str(i) for i in range(1001)]})


async def test_streams_beyond_the_limit_are_refused_before_the_ack() -> None:
    async with pushing(max_streams=1) as (engine, push):
        task_id = await start(engine, "limit")
        first = anyio.Event()

        async def send(params: dict[str, Any]) -> None:
            first.set()

        async with anyio.create_task_group() as group:
            group.start_soon(partial(push.stream, [task_id], owner=ANONYMOUS_OWNER, send=send))
            await first.wait()
            assert push.open_streams == 1
            with pytest.raises(ProtocolError) as refused:
                await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN)
            assert refused.value.code == INTERNAL_ERROR
            gates["limit"].set()
        assert push.open_streams == 0
        assert await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN) == [task_id]
