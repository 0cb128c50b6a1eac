"""Immediate results follow one rule on every store: a body that ends at once is answered inline.

A body that returns without waiting on real work gets its result as the `tools/call` answer, even
when it yields statuses first; one that sleeps or asks a question first gets a task, whatever the
store (memory, an SQLite file, PostgreSQL, Redis).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import opted_in_meta, serve, wait_for, wait_idle
from operator_stores import store_url

from mcptasks import Elicit, Limits, ProtocolError, Result, TaskContext, task_tool
from mcptasks.authoring import Status
from mcptasks.stores import MemoryTaskStore
from mcptasks.stores.admin import TaskQuery
from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.wire import IDEMPOTENCY_META

__all__ = ["store_url"]

pytestmark = pytest.mark.anyio


@task_tool(task_support="optional")
async def instant(n: int) -> int:
    """No work at all."""
    return n * 2


@task_tool(task_support="optional")
async def reports_first(n: int) -> Any:
    """Yields a status before its result."""
    yield Status("on it")
    yield Result(n)


@task_tool(task_support="optional")
async def asks_first(n: int) -> Any:
    """Asks a question before its result."""
    yield Elicit("go on?")
    yield Result(n)


@task_tool(task_support="optional")
async def sleeps_first(n: int) -> int:
    """Waits on the clock before its result."""
    await anyio.sleep(0.2)
    return n


async def answers(url: str) -> dict[str, str]:
    """The `resultType` each tool's opted-in call gets on the store at `url`."""
    seen: dict[str, str] = {}
    async with serve(
        instant, reports_first, asks_first, sleeps_first, store=store_from_url(url), immediate_results=True
    ) as (
        _,
        protocol,
    ):
        for name in ("instant", "reports_first", "asks_first", "sleeps_first"):
            answer = await protocol.call_tool(name, {"n": 21}, meta=opted_in_meta())
            seen[name] = answer["resultType"]
            if name in ("instant", "reports_first"):
                assert answer["structuredContent"] == {"result": 42 if name == "instant" else 21}
    return seen


@task_tool(task_support="optional")
async def reports_then_waits(n: int) -> Any:
    """Yields a status, then waits until the server stops."""
    yield Status(f"halfway to {n}")
    await anyio.sleep_forever()
    yield Result(n)  # pragma: no cover


async def held_status_is_written(url: str) -> None:
    """A status held while the call waited for an immediate result reaches the record."""
    async with serve(reports_then_waits, store=store_from_url(url), immediate_results=True) as (_, protocol):
        created = await protocol.call_tool("reports_then_waits", {"n": 7}, meta=opted_in_meta())
        assert created["resultType"] == "task"
        seen = await wait_for(
            protocol,
            created["taskId"],
            lambda task: task.get("statusMessage") == "halfway to 7",
            what="the status",
        )
        assert seen["status"] == "working"


class CountedWrites:
    """A store that counts the writes made through it; every other call goes straight through."""

    WRITES = ("create", "replace", "replace_and_publish")

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self.durable = inner.durable
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in self.WRITES:
            return value

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.writes.append(name)
            return await value(*args, **kwargs)

        return counted


runs: list[str] = []


@task_tool(task_support="optional")
async def counts_runs(ctx: TaskContext, n: int) -> int:
    """Notes each run of its body, then ends at once."""
    runs.append(ctx.task_id or "")
    return n


@task_tool(task_support="optional")
async def saves_first(ctx: TaskContext, n: int) -> int:
    """Writes a checkpoint before its result."""
    await ctx.checkpoint({"step": 1})
    return n


async def one_write_for_an_immediate_result(url: str) -> None:
    """A body that ends at once is stored once, already completed."""
    store = CountedWrites(store_from_url(url))
    async with serve(instant, store=store, immediate_results=True) as (engine, protocol):  # type: ignore[arg-type]
        answer = await protocol.call_tool("instant", {"n": 21}, meta=opted_in_meta())
        assert answer["resultType"] == "complete"
        assert answer["structuredContent"] == {"result": 42}
        await wait_idle(engine)  # the answer does not wait for the write
        assert store.writes == ["create"]
        (record,) = (await store.inner.list_tasks(TaskQuery(tools=frozenset({"instant"})))).records
        assert record.status == "completed"
        assert record.result is not None and record.result["structuredContent"] == {"result": 42}


async def stored_before_the_task_is_answered(url: str) -> None:
    """Whatever the body does in its first turns, a task answer names a record already stored."""
    store = store_from_url(url)
    async with serve(asks_first, sleeps_first, saves_first, store=store, immediate_results=True) as (
        _,
        protocol,
    ):
        for name, status in (("asks_first", "input_required"), ("sleeps_first", "working")):
            created = await protocol.call_tool(name, {"n": 3}, meta=opted_in_meta())
            assert created["resultType"] == "task"
            record = await store.get(created["taskId"])
            assert record is not None and record.status == status
        # a checkpoint in the first turns is written with the record (it makes the answer a task)
        created = await protocol.call_tool("saves_first", {"n": 5}, meta=opted_in_meta())
        assert created["resultType"] == "task"
        record = await store.get(created["taskId"])
        assert record is not None and record.checkpoint == {"step": 1}


async def an_idempotent_call_runs_once(url: str) -> None:
    """An idempotency key still creates the record first: the same key again does not re-run."""
    runs.clear()
    meta = {**opted_in_meta(), IDEMPOTENCY_META: "same-call"}
    async with serve(counts_runs, store=store_from_url(url), immediate_results=True) as (_, protocol):
        first = await protocol.call_tool("counts_runs", {"n": 1}, meta=meta)
        again = await protocol.call_tool("counts_runs", {"n": 1}, meta=meta)
    assert first["resultType"] == "complete"
    assert again["resultType"] == "task" and again["taskId"] == runs[0]
    assert len(runs) == 1


class HeldCreates:
    """A store whose creates wait until `release()`; every other call goes straight through."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self.durable = inner.durable
        self.entered = 0
        self._open = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def create(self, record: TaskRecord) -> TaskRecord:
        self.entered += 1
        await self._open.wait()
        return await self.inner.create(record)

    def release(self) -> None:
        self._open.set()


async def answered_before_the_write(url: str) -> None:
    """An immediate result is answered while its record is still being written; then it is stored."""
    store = HeldCreates(store_from_url(url))
    async with serve(instant, store=store, immediate_results=True) as (engine, protocol):  # type: ignore[arg-type]
        with anyio.fail_after(30):  # waiting for the write would wait for `release()` forever
            answer = await protocol.call_tool("instant", {"n": 4}, meta=opted_in_meta())
        assert answer["resultType"] == "complete" and answer["structuredContent"] == {"result": 8}
        assert store.entered == 1 and engine.active_runs == 1  # its write is still held
        query = TaskQuery(tools=frozenset({"instant"}))
        assert (await store.inner.list_tasks(query)).records == []
        store.release()
        await wait_idle(engine)
        (record,) = (await store.inner.list_tasks(query)).records
        assert record.status == "completed" and record.result is not None
        assert record.result["structuredContent"] == {"result": 8}


async def waits_for_the_write_beyond_the_limit(url: str, limit: int) -> None:
    """Past `max_unwritten_results` answered-but-unwritten results, a call waits for its write."""
    store = HeldCreates(store_from_url(url))
    limits = Limits(max_unwritten_results=limit)
    answers: list[dict[str, Any]] = []

    async def call(n: int) -> None:
        answers.append(await protocol.call_tool("instant", {"n": n}, meta=opted_in_meta()))

    async with serve(instant, store=store, immediate_results=True, limits=limits) as (engine, protocol):  # type: ignore[arg-type]
        for n in range(limit):
            await call(n)  # answered, writes held
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call, limit)
            await anyio.wait_all_tasks_blocked()
            assert store.entered == limit + 1 and len(answers) == limit  # the last one waits
            store.release()
        assert [answer["structuredContent"]["result"] for answer in answers] == [
            2 * n for n in range(limit + 1)
        ]
        await wait_idle(engine)
        assert (
            len((await store.inner.list_tasks(TaskQuery(tools=frozenset({"instant"})))).records) == limit + 1
        )


class FlakyCreates(MemoryTaskStore):
    """A memory store whose first create fails as an unreachable store's would."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    async def create(self, record: TaskRecord) -> TaskRecord:
        if not self.failures:
            self.failures += 1
            raise OSError("the store is unreachable")
        return await super().create(record)


async def test_an_answered_result_whose_write_fails_is_stored_on_retry() -> None:
    # The client has its result; the record is still written once the store answers.
    store = FlakyCreates()
    async with serve(instant, store=store, immediate_results=True) as (engine, protocol):
        answer = await protocol.call_tool("instant", {"n": 5}, meta=opted_in_meta())
        assert answer["resultType"] == "complete" and answer["structuredContent"] == {"result": 10}
        await wait_idle(engine)
        (record,) = (await store.list_tasks(TaskQuery(tools=frozenset({"instant"})))).records
    assert store.failures == 1 and record.status == "completed"


class RefusingStore(MemoryTaskStore):
    """A memory store that is unreachable for creates."""

    async def create(self, record: TaskRecord) -> TaskRecord:
        raise OSError("the store is unreachable")


async def test_a_failed_first_write_fails_the_call_and_stops_the_body() -> None:
    # As when a create fails before the body starts: the call fails and nothing runs on.
    store = RefusingStore()
    async with serve(sleeps_first, store=store, immediate_results=True) as (engine, protocol):
        with pytest.raises(ProtocolError):
            await protocol.call_tool("sleeps_first", {"n": 1}, meta=opted_in_meta())
        await wait_idle(engine)
        assert await store.list_active() == []


EXPECTED = {"instant": "complete", "reports_first": "complete", "asks_first": "task", "sleeps_first": "task"}


async def test_immediate_results_on_memory() -> None:
    assert await answers("memory://") == EXPECTED


async def test_a_held_status_is_written_on_memory() -> None:
    await held_status_is_written("memory://")


async def test_one_write_for_an_immediate_result_on_memory() -> None:
    await one_write_for_an_immediate_result("memory://")


async def test_stored_before_the_task_is_answered_on_memory() -> None:
    await stored_before_the_task_is_answered("memory://")


async def test_an_idempotent_call_runs_once_on_memory() -> None:
    await an_idempotent_call_runs_once("memory://")


async def test_answered_before_the_write_on_memory() -> None:
    await answered_before_the_write("memory://")


@pytest.mark.parametrize("limit", [0, 2])
async def test_waits_for_the_write_beyond_the_limit_on_memory(limit: int) -> None:
    await waits_for_the_write_beyond_the_limit("memory://", limit)


class TestSharedStores:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    async def test_immediate_results_on_shared_stores(self, store_url: str) -> None:
        assert await answers(store_url) == EXPECTED

    async def test_a_held_status_is_written_on_shared_stores(self, store_url: str) -> None:
        await held_status_is_written(store_url)

    async def test_one_write_for_an_immediate_result_on_shared_stores(self, store_url: str) -> None:
        await one_write_for_an_immediate_result(store_url)

    async def test_stored_before_the_task_is_answered_on_shared_stores(self, store_url: str) -> None:
        await stored_before_the_task_is_answered(store_url)

    async def test_an_idempotent_call_runs_once_on_shared_stores(self, store_url: str) -> None:
        await an_idempotent_call_runs_once(store_url)

    async def test_answered_before_the_write_on_shared_stores(self, store_url: str) -> None:
        await answered_before_the_write(store_url)

    async def test_waits_for_the_write_beyond_the_limit_on_shared_stores(self, store_url: str) -> None:
        await waits_for_the_write_beyond_the_limit(store_url, 1)
