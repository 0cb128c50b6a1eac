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
import anyio.lowlevel
import pytest
from helpers import wait_for_status

from mcptasks import EngineConfig, Limits, Result, task_tool
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.protocol import ANONYMOUS_OWNER
from mcptasks._runtime.push import ListenSlot, TaskPush, requested_task_ids
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


async def opened(push: TaskPush, task_ids: list[str], owner: str = ANONYMOUS_OWNER) -> ListenSlot:
    """A listen slot for `task_ids` (as a host takes one before its ack)."""
    return await push.accept(task_ids, owner=owner, meta=OPTED_IN)


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

        slot = await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN)
        async with anyio.create_task_group() as group:
            reasons: list[str] = []

            async def listen() -> None:
                reasons.append(await push.stream(slot, send=stuck))

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
                reasons.append(await push.stream(await opened(push, [task_id]), send=send))

            group.start_soon(listen)
            await first.wait()
            push.feed.close()
        assert reasons == ["shutdown"]
        # a listen arriving while the server stops ends at once
        assert await push.stream(await opened(push, [task_id]), send=send) == "shutdown"
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
                await push.stream(await opened(push, [task_id]), send=send)

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
        with await push.accept([mine, theirs, "nope"], owner=ANONYMOUS_OWNER, meta=OPTED_IN) as slot:
            assert slot.task_ids == [mine]
        gates["mine"].set()
        await wait_for_status(engine, mine, "completed")
        # a finished task is still agreed: its final state is sent once, then the stream is done
        assert push.open_streams == 0
        slot = await push.accept([mine], owner=ANONYMOUS_OWNER, meta=OPTED_IN)
        assert slot.task_ids == [mine]
        sent: list[dict[str, Any]] = []

        async def send(params: dict[str, Any]) -> None:
            sent.append(params)

        assert await push.stream(slot, send=send) == "done"
        assert push.open_streams == 0
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
            group.start_soon(partial(push.stream, await opened(push, [task_id]), send=send))
            await first.wait()
            assert push.open_streams == 1
            with pytest.raises(ProtocolError) as refused:
                await push.accept([task_id], owner="someone-else", meta=OPTED_IN)
            assert refused.value.code == INTERNAL_ERROR
            assert "server limit of 1 task listen streams" in refused.value.message
            gates["limit"].set()
        assert push.open_streams == 0
        with await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN) as slot:
            assert slot.task_ids == [task_id]


class _SlowGets(MemoryTaskStore):
    """A memory store whose reads yield to the event loop, as a networked store's do."""

    async def get(self, task_id: str, *, owner: str | None = None) -> Any:
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        return await super().get(task_id, owner=owner)


async def test_concurrent_accepts_never_exceed_the_bound() -> None:
    engine = TaskEngine(_SlowGets(), tools=[stepper])
    push = TaskPush(engine, max_streams=8, max_streams_per_owner=8)
    async with engine:
        task_id = await start(engine, "burst")
        slots: list[ListenSlot] = []
        refused: list[ProtocolError] = []

        async def one() -> None:
            try:
                slots.append(await push.accept([task_id], owner=ANONYMOUS_OWNER, meta=OPTED_IN))
            except ProtocolError as exc:
                refused.append(exc)

        async with anyio.create_task_group() as group:
            for _ in range(30):
                group.start_soon(one)
        assert (len(slots), len(refused), push.open_streams) == (8, 22, 8)
        for slot in slots:
            slot.release()
            slot.release()  # a second release gives nothing back twice
        assert (push.open_streams, push.streams_of(ANONYMOUS_OWNER)) == (0, 0)
        gates["burst"].set()


async def test_each_owner_has_a_share_and_the_refusal_names_the_bound() -> None:
    async with pushing(max_streams=8, max_streams_per_owner=3) as (engine, push):
        task_id = await start(engine, "share")
        a = [await opened(push, [task_id], "a") for _ in range(3)]
        with pytest.raises(ProtocolError) as refused:
            await opened(push, [task_id], "a")
        assert refused.value.message.startswith(
            "Subscription limit reached: per-owner limit of 3 task listen streams reached"
        )
        assert refused.value.data == {"reason": "too_many_listen_streams", "scope": "owner", "limit": 3}
        # owner a filling its share does not stop owner b
        others = [await opened(push, [], owner) for owner in ("b", "b", "b", "c", "c")]
        assert (push.open_streams, push.streams_of("a"), push.streams_of("b")) == (8, 3, 3)
        with pytest.raises(ProtocolError) as refused:
            await opened(push, [], "d")
        assert "server limit of 8 task listen streams reached" in refused.value.message
        assert refused.value.data == {"reason": "too_many_listen_streams", "scope": "server", "limit": 8}
        # a released slot frees its place in both counts
        a[0].release()
        assert (push.open_streams, push.streams_of("a")) == (7, 2)
        (await opened(push, [], "d")).release()
        (await opened(push, [task_id], "a")).release()
        for slot in [*a, *others]:
            slot.release()
        assert (push.open_streams, push.streams_of("a"), push.streams_of("b")) == (0, 0, 0)
        gates["share"].set()


async def test_a_refused_or_failed_accept_takes_no_slot() -> None:
    async with pushing(max_streams=2) as (engine, push):
        with pytest.raises(ProtocolError):
            await push.accept(["x"], owner=ANONYMOUS_OWNER, meta={})  # not opted in
        assert push.open_streams == 0

        async def broken(task_id: str, *, owner: str | None = None) -> Any:
            raise RuntimeError("store down")

        engine.store.get = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await push.accept(["x"], owner=ANONYMOUS_OWNER, meta=OPTED_IN)
        assert (push.open_streams, push.streams_of(ANONYMOUS_OWNER)) == (0, 0)


def test_the_listen_limits_come_from_the_engine_config_and_are_validated() -> None:
    limits = Limits()
    assert (limits.max_listen_streams, limits.listen_share) == (1024, 256)
    assert Limits(max_listen_streams=10).listen_share == 2
    assert Limits(max_listen_streams=3).listen_share == 1
    assert Limits(max_listen_streams_per_owner=None).listen_share == 1024
    assert Limits(max_listen_streams=8, max_listen_streams_per_owner=8).listen_share == 8
    engine = TaskEngine(
        MemoryTaskStore(),
        config=EngineConfig(limits=Limits(max_listen_streams=40, max_listen_streams_per_owner=5)),
    )
    push = TaskPush(engine)
    assert (push.max_streams, push.max_streams_per_owner) == (40, 5)
    assert TaskPush(engine, max_streams=12).max_streams_per_owner == 3
    for bad in (
        {"max_listen_streams": 0},
        {"max_listen_streams": 2.5},
        {"max_listen_streams": True},
        {"max_listen_streams_per_owner": 0},
        {"max_listen_streams_per_owner": "half"},
        {"max_listen_streams": 8, "max_listen_streams_per_owner": 9},
    ):
        with pytest.raises(ValueError, match="max_listen_streams"):
            Limits(**bad)
    for wrong in ({"max_streams": 0}, {"max_streams_per_owner": -1}, {"max_streams": 1.5}):
        with pytest.raises(ValueError, match="max_streams"):
            TaskPush(engine, **wrong)
