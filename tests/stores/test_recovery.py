"""Recovery after a restart: dead predecessors on this machine are recognised at once, and a large
backlog of orphans is recovered in the background while the engine already serves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from helpers import Client, serve

from mcptasks import Result, SqliteTaskStore, task_tool
from mcptasks._runtime.instances import gone_from_this_host, new_instance_id
from mcptasks._runtime.recovery import RECOVERY_BATCH
from mcptasks.lowlevel import ANONYMOUS_OWNER
from mcptasks.stores import TaskRecord

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """SQLite runs on asyncio and on trio (the directory's default is asyncio)."""
    return str(request.param)


PRINT_ID = "from mcptasks._runtime.instances import new_instance_id; print(new_instance_id(), flush=True)"


@task_tool
async def parked():
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


@task_tool
async def quick():
    yield Result("done")


def _id_of_a_process(wait: bool) -> tuple[str, subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-c", PRINT_ID + "; import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    instance_id = process.stdout.readline().decode().strip()
    if wait:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)
    return instance_id, process


def test_instance_ids_tell_live_and_dead_processes_of_this_host_apart() -> None:
    ours = new_instance_id()
    assert not gone_from_this_host(ours)
    assert ours != new_instance_id()  # two engines in one process have distinct ids
    alive, process = _id_of_a_process(wait=False)
    try:
        assert not gone_from_this_host(alive)
    finally:
        process.kill()
    process.wait(timeout=60)
    assert gone_from_this_host(alive)
    exited, _ = _id_of_a_process(wait=True)
    assert gone_from_this_host(exited)


def test_a_killed_but_unreaped_process_counts_as_gone() -> None:
    zombie_id, process = _id_of_a_process(wait=False)
    os.kill(process.pid, 9)
    try:
        # Wait until it has exited without collecting it: its pid still exists, in state Z.
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        assert os.path.exists(f"/proc/{process.pid}")
        assert gone_from_this_host(zombie_id)
    finally:
        process.wait(timeout=60)


@pytest.mark.parametrize(
    "instance_id",
    ["engine-a", "0123456789ab-1-1-deadbeef", "node-1", "", "a" * 12 + f"-{os.getpid()}-0-00000000"],
)
def test_ids_of_other_machines_or_chosen_by_users_are_never_judged(instance_id: str) -> None:
    assert not gone_from_this_host(instance_id)


def test_a_reused_pid_is_told_apart_by_its_start_time() -> None:
    ours = new_instance_id()
    node, pid, started, token = ours.split("-")
    assert pid == str(os.getpid())
    assert not gone_from_this_host(ours)
    assert gone_from_this_host(f"{node}-{pid}-{int(started) + 1}-{token}")


class GatedStore(SqliteTaskStore):
    """A SQLite store whose writes to orphans wait for a gate after the first `open_writes`."""

    def __init__(self, path: Path, open_writes: int) -> None:
        super().__init__(path)
        self.open_writes = open_writes
        self.gate = anyio.Event()
        self.held = 0

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        if record.task_id.startswith("orphan-"):
            if self.open_writes > 0:
                self.open_writes -= 1
            else:
                self.held += 1
                await self.gate.wait()
        return await super().replace(record, expected_version=expected_version)


async def test_engine_serves_while_a_large_backlog_is_recovered(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    total = RECOVERY_BATCH * 3 + 5
    seed = SqliteTaskStore(db)
    await seed.open()
    try:
        for n in range(total):
            await seed.create(
                TaskRecord(
                    task_id=f"orphan-{n:05d}",
                    owner=ANONYMOUS_OWNER,
                    tool="parked",
                    runner="engine-that-died",
                    ttl_ms=3_600_000,
                )
            )
    finally:
        await seed.close()

    store = GatedStore(db, open_writes=RECOVERY_BATCH)
    async with serve(parked, quick, store=store) as (engine, protocol):
        # Entered with only the first batch done: the rest waits at the gate, and the engine serves.
        client = Client(protocol)
        active = [r for r in await store.list_active() if r.task_id.startswith("orphan-")]
        assert len(active) == total - RECOVERY_BATCH
        new = await client.start("quick")
        assert (await client.finish(new))["status"] == "completed"
        assert store.held > 0
        store.gate.set()
        with anyio.fail_after(60):
            while True:
                if not [r for r in await store.list_active() if r.task_id.startswith("orphan-")]:
                    break
                await anyio.sleep(0.05)
        assert engine.active_runs == 0
    check = SqliteTaskStore(db)
    await check.open()
    try:
        for n in range(total):
            record = await check.get(f"orphan-{n:05d}")
            assert record is not None and record.status == "failed"
            assert record.error is not None and record.error["data"]["reason"] == "worker_lost"
    finally:
        await check.close()
