"""Store failures the engine meets while tasks run, on a real SQLite file: whatever a store call
raises, a finished body's end is kept until it is written; an end the store refuses for good fails
the task saying so; requests get `store_unavailable`; a store that comes back empty is noticed."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Client, serve, wait_idle

from mcptasks import ProtocolError, Result, SqliteTaskStore, task_tool
from mcptasks.lowlevel import StoreRetry
from mcptasks.stores import TaskRecord

pytestmark = pytest.mark.anyio

QUICK_RETRY = StoreRetry(budget=10.0, initial=0.01, maximum=0.05)


class FaultyStore(SqliteTaskStore):
    """A SQLite store whose next calls of one kind raise the given exceptions, in order."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failing_ends: list[BaseException] = []
        """Raised, one per call, by writes of a terminal record."""
        self.failing_gets: list[BaseException] = []
        self.failing_creates: list[BaseException] = []

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        if record.terminal and self.failing_ends:
            raise self.failing_ends.pop(0)
        return await super().replace(record, expected_version=expected_version)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        if self.failing_gets:
            raise self.failing_gets.pop(0)
        return await super().get(task_id, owner=owner)

    async def create(self, record: TaskRecord) -> TaskRecord:
        if self.failing_creates:
            raise self.failing_creates.pop(0)
        return await super().create(record)


gates: dict[str, anyio.Event] = {}


@task_tool
async def payload(n: int):
    yield f"working on {n}"
    await gates["finish"].wait()
    yield Result({"n": n, "payload": f"result-{n}"})


@task_tool
async def forever():
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


@pytest.fixture
def store(tmp_path: Path) -> FaultyStore:
    gates["finish"] = anyio.Event()
    return FaultyStore(tmp_path / "t.db")


def driver_in_a_bad_state() -> Exception:
    # What asyncpg raises on a connection whose backend was terminated mid-operation: no
    # "connection" in its type, so no whitelist of outage errors knows it.
    return RuntimeError("cannot switch to state 12; another operation (2) is in progress")


async def test_an_end_met_by_any_store_error_is_retried_until_it_is_written(
    store: FaultyStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.failing_ends = [driver_in_a_bad_state() for _ in range(3)]
    async with serve(payload, store=store, store_retry=QUICK_RETRY) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("payload", {"n": 7})
        await client.wait(task_id, "working")
        gates["finish"].set()
        final = await client.finish(task_id)
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"] == {"n": 7, "payload": "result-7"}
    assert store.failing_ends == []  # all three failures were met and ridden out
    assert f"the task store failed while recording the end of task {task_id}" in caplog.text
    assert "RuntimeError: cannot switch to state 12" in caplog.text


async def test_an_end_that_outlasts_the_retry_budget_is_kept_and_written_later(
    store: FaultyStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcptasks")
    retry = StoreRetry(budget=0.05, initial=0.01, maximum=0.01)
    store.failing_ends = [driver_in_a_bad_state() for _ in range(50)]
    async with serve(payload, store=store, store_retry=retry) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("payload", {"n": 3})
        await client.wait(task_id, "working")
        gates["finish"].set()
        await wait_idle(engine)  # the body is over; its end is kept, not written
        assert (await client.get(task_id))["status"] == "working"
        assert f"could not record the end of task {task_id} yet" in caplog.text
        while store.failing_ends:  # the reaper's rounds while the store still fails
            await engine.recover()
            assert (await client.get(task_id))["status"] == "working"  # never failed as lost
        await engine.recover()
        final = await client.get(task_id)
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"] == {"n": 3, "payload": "result-3"}
    assert f"recorded the end of task {task_id} after the task store came back" in caplog.text
    assert "worker_lost" not in caplog.text


async def test_an_end_the_store_refuses_for_good_fails_the_task_saying_so(store: FaultyStore) -> None:
    store.failing_ends = [sqlite3.IntegrityError("CHECK constraint failed: body")]
    async with serve(payload, store=store, store_retry=QUICK_RETRY) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("payload", {"n": 1})
        await client.wait(task_id, "working")
        gates["finish"].set()
        final = await client.finish(task_id)
    assert final["status"] == "failed", final
    error: dict[str, Any] = final["error"]
    assert error["data"] == {"reason": "store_rejected"}
    assert error["message"] == (
        "The task ended (completed), but its end could not be recorded "
        "(IntegrityError: CHECK constraint failed: body)."
    )


async def test_requests_met_by_any_store_error_are_told_the_store_failed(store: FaultyStore) -> None:
    async with serve(payload, store=store) as (_, protocol):
        client = Client(protocol)
        store.failing_creates = [sqlite3.OperationalError("database or disk is full")]
        with pytest.raises(ProtocolError) as full:
            await client.start("payload", {"n": 1})
        assert full.value.code == -32603
        assert full.value.data == {"reason": "store_unavailable", "retryAfterMs": 1000}
        assert full.value.message == (
            "The task store's disk is full (OperationalError: database or disk is full); "
            "try again once space is freed."
        )
        task_id = await client.start("payload", {"n": 2})
        store.failing_gets = [driver_in_a_bad_state()]
        with pytest.raises(ProtocolError) as failed:
            await client.get(task_id)
        assert failed.value.code == -32603
        assert failed.value.data == {"reason": "store_unavailable", "retryAfterMs": 1000}
        assert failed.value.message == (
            "The task store could not serve this request "
            "(RuntimeError: cannot switch to state 12; another operation (2) is in progress); try again shortly."
        )
        assert (await client.get(task_id))["status"] == "working"  # the next one is served
        gates["finish"].set()
        assert (await client.finish(task_id))["status"] == "completed"


async def test_a_store_that_comes_back_empty_is_noticed(
    store: FaultyStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(forever, payload, store=store) as (engine, protocol):
        client = Client(protocol)
        lost = [await client.start("forever") for _ in range(2)]
        await engine.recover()  # the store's data marker as this engine first saw it
        with sqlite3.connect(tmp_path / "t.db") as wipe:  # what a restore of an empty backup does
            wipe.execute("DELETE FROM tasks")
            wipe.execute("DROP TABLE store_epoch")
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="mcptasks"):
            await engine.recover()
            await wait_idle(engine)  # the bodies of the lost tasks are stopped
        came_back = [r.getMessage() for r in caplog.records if "came back empty" in r.getMessage()]
        assert len(came_back) == 1, caplog.text
        assert "2 task(s) of this server are no longer in it" in came_back[0]
        assert repr(store).split(",")[0] in came_back[0]  # it names the store
        for task_id in lost:
            assert f"task {task_id} is no longer in the task store; its end was not written" in caplog.text
            with pytest.raises(ProtocolError, match="Unknown task"):
                await client.get(task_id)
        task_id = await client.start("payload", {"n": 5})  # the server goes on serving
        gates["finish"].set()
        assert (await client.finish(task_id))["status"] == "completed"
        caplog.clear()
        await engine.recover()
        assert "came back empty" not in caplog.text  # said once
