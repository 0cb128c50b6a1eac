"""The engine over a real SQLite file: durability across restarts, orphan recovery, real concurrency."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from helpers import Client, accept, serve, text_of, wait_for_status

from mcptasks import Elicit, EngineConfig, Result, SqliteTaskStore, task_tool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol
from mcptasks.stores import TaskRecord

pytestmark = pytest.mark.anyio

ACK = {"resultType": "complete"}


@task_tool
async def ask_once():
    answer = yield Elicit("value?")
    yield Result({"answer": answer.data})


@task_tool
async def parked():
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


TOOLS = (ask_once, parked)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "t.db"


async def put_record(db: Path, record: TaskRecord) -> None:
    """Write a record straight into the file, the way a process that died would have left it."""
    store = SqliteTaskStore(db)
    await store.open()
    try:
        await store.create(record)
    finally:
        await store.close()


async def read_record(db: Path, task_id: str) -> TaskRecord | None:
    store = SqliteTaskStore(db)
    await store.open()
    try:
        return await store.get(task_id)
    finally:
        await store.close()


def active_record(task_id: str, runner: str | None) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        owner=ANONYMOUS_OWNER,
        tool="parked",
        status="input_required",
        status_message="half way",
        ttl_ms=3_600_000,
        input_requests={"input-1": {"method": "elicitation/create", "params": {"message": "?"}}},
        input_key_counter=1,
        runner=runner,
    )


# -- the ordinary path on SQLite -------------------------------------------------------------


async def test_task_with_input_completes_on_sqlite(db: Path) -> None:
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("ask_once")
        await client.answer_only(task_id, accept({"v": 1}))
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"] == {"answer": {"v": 1}}


async def test_created_record_is_in_the_file_before_tools_call_returns(db: Path) -> None:
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        created = await Client(protocol).call("parked")
        other = await read_record(db, created["taskId"])  # a second connection to the file
    assert other is not None
    assert other.status == "working"


async def test_cancel_on_sqlite_runs_the_body_finally(db: Path) -> None:
    entered = anyio.Event()
    cleaned = anyio.Event()

    @task_tool
    async def tool() -> None:
        try:
            entered.set()
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    async with serve(tool, store=SqliteTaskStore(db)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        with anyio.fail_after(10):
            await entered.wait()
        assert await client.cancel(task_id) == ACK
        with anyio.fail_after(10):
            await cleaned.wait()
        final = await client.get(task_id)
    assert final["status"] == "cancelled"


async def test_answers_racing_ahead_of_their_key_are_not_used(db: Path) -> None:
    gate = anyio.Event()

    @task_tool
    async def chatty():
        for i in range(10):
            yield f"step {i}"
        await gate.wait()
        answer = yield Elicit("v?")
        yield Result(answer.data)

    async with serve(chatty, store=SqliteTaskStore(db)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("chatty")
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(client.get, task_id)
                tg.start_soon(client.update, task_id, {f"input-{i}": accept({"early": True})})
        gate.set()
        await client.answer_only(task_id, accept({"late": True}))
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {"late": True}


# -- restarts --------------------------------------------------------------------------------


async def test_completed_result_survives_an_engine_restart(db: Path) -> None:
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("ask_once")
        await client.answer_only(task_id, accept({"kept": "yes"}))
        before = await client.finish(task_id)

    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        after = await Client(protocol).get(task_id)
    assert after == before
    assert after["result"]["structuredContent"] == {"answer": {"kept": "yes"}}


async def test_task_running_at_a_clean_shutdown_is_failed_after_restart(db: Path) -> None:
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        task_id = await Client(protocol).start("parked")

    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        task = await Client(protocol).get(task_id)
    assert task["status"] == "failed"
    assert "shut down" in task["error"]["message"]


async def test_orphan_of_a_dead_runner_is_failed_on_start(db: Path) -> None:
    await put_record(db, active_record("orphan", runner="engine-that-died"))
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, protocol):
        task = await Client(protocol).get("orphan")
    assert task["status"] == "failed"
    assert "restarted" in task["error"]["message"]
    assert task["error"]["data"]["reason"] == "worker_lost"
    assert "inputRequests" not in task
    assert task["statusMessage"] == "Failed (worker lost)"


async def test_recover_orphans_false_leaves_the_orphan(db: Path) -> None:
    await put_record(db, active_record("orphan", runner="engine-that-died"))
    async with serve(*TOOLS, store=SqliteTaskStore(db), recover_orphans=False) as (_, protocol):
        task = await Client(protocol).get("orphan")
    assert task["status"] == "input_required"
    assert set(task["inputRequests"]) == {"input-1"}


async def test_task_of_a_live_engine_sharing_the_file_is_not_recovered(db: Path) -> None:
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (_, first):
        task_id = await Client(first).start("parked")
        async with serve(*TOOLS, store=SqliteTaskStore(db)) as (second_engine, second):
            assert await second_engine.recover() == 0
            seen_by_second = await Client(second).get(task_id)
        still = await Client(first).get(task_id)
    assert seen_by_second["status"] == "working"
    assert still["status"] == "working"


async def test_orphan_is_failed_after_restart_with_the_same_instance_id(db: Path) -> None:
    await put_record(db, active_record("orphan", runner="node-1"))
    async with serve(*TOOLS, store=SqliteTaskStore(db), instance_id="node-1") as (_, protocol):
        task = await Client(protocol).get("orphan")
    assert task["status"] == "failed"


CRASHING_SERVER = textwrap.dedent(
    """
    import sys

    import anyio

    from mcptasks import EngineConfig, Result, SqliteTaskStore, task_tool
    from mcptasks.lowlevel import TaskEngine


    @task_tool
    async def parked():
        await anyio.sleep_forever()
        yield Result(None)


    async def main():
        config = EngineConfig(lease_ttl=float(sys.argv[2]))
        async with TaskEngine(SqliteTaskStore(sys.argv[1]), config=config) as engine:
            record = await engine.start(parked, {}, owner="anonymous")
            print(record.task_id, flush=True)
            await anyio.sleep_forever()


    anyio.run(main)
    """
)


async def task_of_a_killed_process(db: Path, lease_ttl: float) -> str:
    """Start an engine in a child process, let it start a task, kill it; return the task id."""
    process = await anyio.open_process([sys.executable, "-c", CRASHING_SERVER, str(db), str(lease_ttl)])
    try:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(60):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        return line.decode().strip()
    finally:
        process.kill()
        await process.wait()
        await process.aclose()


async def test_task_of_a_killed_process_is_failed_by_the_next_engine(db: Path) -> None:
    task_id = await task_of_a_killed_process(db, 1.0)

    record = await read_record(db, task_id)
    assert record is not None and record.status == "working"  # the dead process left it so

    engine = TaskEngine(SqliteTaskStore(db), config=EngineConfig(lease_ttl=1.0, immediate_results=False))
    async with engine:
        protocol = TasksProtocol(engine, TOOLS)
        task = await wait_for_status(protocol, task_id, "failed", timeout=30)
    assert task["error"]["data"]["reason"] == "worker_lost"
    assert "restarted" in task["error"]["message"]


async def test_text_result_round_trips_through_the_file(db: Path) -> None:
    @task_tool
    async def unicode_tool():
        yield "héllo — 世界"
        yield Result('🎉 done\n\t"quoted"')

    async with serve(unicode_tool, store=SqliteTaskStore(db)) as (_, protocol):
        task_id = await Client(protocol).start("unicode_tool")
        await Client(protocol).finish(task_id)
    async with serve(unicode_tool, store=SqliteTaskStore(db)) as (_, protocol):
        task = await Client(protocol).get(task_id)
    assert task["statusMessage"] == "héllo — 世界"
    assert text_of(task["result"]) == '🎉 done\n\t"quoted"'


async def test_a_restarted_server_settles_its_predecessors_tasks_at_once(db: Path) -> None:
    """Default lease (15 s): the killed engine's lease is still live, yet its task is failed
    before the next engine on this machine has finished starting, because its process is gone."""
    task_id = await task_of_a_killed_process(db, 15.0)
    async with serve(*TOOLS, store=SqliteTaskStore(db)) as (engine, protocol):
        assert engine.lease_ttl == 15.0
        task = await Client(protocol).get(task_id)
    assert task["status"] == "failed"
    assert task["error"]["data"]["reason"] == "worker_lost"
