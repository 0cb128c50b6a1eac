"""A private Redis killed under a running server: with an append-only file (every acknowledged write
survives) and without persistence (it comes back empty: a wiped store).

The Redis servers are private (own port, own directory; see `private_servers.py`): the shared one
is never touched.

What must hold: with AOF, every body that finished has its result readable afterwards with its
own payload, no task is failed, and every request the outage met is answered -32603
`store_unavailable`. Without persistence, the wipe is noticed and said once (an ERROR line with
"came back empty", naming the store and how many tasks it no longer finds), the end of each
running task is logged rather than written into the empty store (no task is recreated), and the
server goes on serving new tasks.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from fault_app import payload
from fault_helpers import (
    BOUND,
    INVALID_PARAMS,
    FaultClient,
    assert_kept,
    assert_store_errors,
    ended_bodies,
    fault_client,
    fault_server,
    wait_started,
)
from mcp import MCPError
from private_servers import PrivateRedis, private_redis
from processes import process_test_marks

pytestmark = process_test_marks()

TASKS = 20
OUTAGE = 2.0
"""Seconds Redis stays down."""
SPREAD = 3.0
"""The bodies end over this many seconds after their release: before, during and after the outage."""


@pytest.fixture(autouse=True)
def redis_py() -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")


async def test_every_finished_result_survives_a_redis_kill_and_restart(tmp_path: Path) -> None:
    tag = f"aof-{uuid.uuid4().hex[:8]}"
    gate = f"{tag}.go"
    with private_redis() as redis, fault_server(redis.url, tmp_path) as server:
        async with fault_client(server.url) as client:
            created = {}
            for n in range(TASKS):
                arguments = {"tag": tag, "n": n, "seconds": SPREAD * n / TASKS, "gate": gate}
                created[await client.start("finish", arguments)] = (tag, n)
            (server.markers / gate).touch()
            await anyio.sleep(SPREAD / 6)  # the fault's timing: some bodies end before the kill
            redis.kill()
            try:
                await client.poll_for(created, OUTAGE)
            finally:
                redis.start()
            final = await client.settle(created)
    ended = ended_bodies(server.markers)
    assert_kept(created, final, ended)
    assert len(ended) == TASKS
    assert_store_errors(client.errors)


async def _wipe(redis: PrivateRedis) -> None:
    """Kill the Redis (it keeps nothing) and start it again: every key is gone."""
    redis.kill()
    redis.start()


def _keys_naming(redis: PrivateRedis, task_ids: set[str]) -> list[str]:
    """Keys of the restarted Redis that name one of these tasks (or hold it in a value)."""
    import redis as redis_py

    client = redis_py.Redis(host="127.0.0.1", port=redis.port, decode_responses=True)
    try:
        found = []
        for key in client.scan_iter(count=1000):
            text = str(key)
            kind = client.type(key)
            if kind == "string":
                text += str(client.get(key) or "")
            elif kind == "hash":
                text += repr(client.hgetall(key))
            elif kind == "zset":
                text += repr(client.zrange(key, 0, -1))
            elif kind == "set":
                text += repr(client.smembers(key))
            if any(task_id in text for task_id in task_ids):
                found.append(str(key))
        return found
    finally:
        client.close()


async def test_a_wiped_redis_is_detected_and_no_task_is_recreated(tmp_path: Path) -> None:
    tag = f"wipe-{uuid.uuid4().hex[:8]}"
    gate = f"{tag}.go"
    with private_redis(persistent=False) as redis, fault_server(redis.url, tmp_path) as server:
        async with fault_client(server.url) as client:
            created = {}
            for n in range(TASKS):
                created[await client.start("finish", {"tag": tag, "n": n, "gate": gate})] = (tag, n)
            await wait_started(server.markers, created)  # every body runs (held at its gate)
            await _wipe(redis)
            (server.markers / gate).touch()

            def logged_ends() -> set[str]:
                lines = server.lines("is no longer in the task store")
                return {task_id for task_id in created if any(task_id in line for line in lines)}

            # The bodies may be stopped (their tasks are gone) or reach their end: either way each
            # end is logged, not written.
            with anyio.move_on_after(BOUND):
                while logged_ends() != set(created) or not server.lines("came back empty"):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            # No task was recreated: each is unknown now (the store kept nothing).
            for task_id in created:
                answer = await client.until_answered("tasks/get", lambda t=task_id: _unknown(client, t))
                assert answer is None, (task_id, answer)
            new_id = await client.until_answered(
                "tools/call", lambda: client.start("finish", {"tag": tag, "n": 1000})
            )
            (new,) = (await client.settle([new_id])).values()
        recreated = _keys_naming(redis, set(created))
    empty = server.lines("came back empty")
    assert len(empty) == 1, f"expected one line saying the store came back empty, got {empty}"
    assert " ERROR " in empty[0], empty[0]
    assert f"127.0.0.1:{redis.port}" in empty[0], f"the line does not name the store: {empty[0]}"
    assert re.search(rf"\b{TASKS}\b", empty[0]), f"the line does not say {TASKS} tasks are gone: {empty[0]}"
    assert logged_ends() == set(created), f"ends logged for {len(logged_ends())} of {TASKS} tasks"
    assert set(ended_bodies(server.markers)) <= {*created, new_id}
    assert not recreated, f"written into the wiped store: {recreated}"
    assert new["status"] == "completed", (new["status"], new.get("error"), new)
    assert new["result"]["structuredContent"]["payload"] == payload(tag, 1000)
    assert_store_errors(client.errors, allowed=[INVALID_PARAMS])


async def _unknown(client: FaultClient, task_id: str) -> dict[str, Any] | None:
    """None when the server says the task is unknown (-32602); the task when it has one."""
    try:
        return await client.tasks.get(task_id)
    except MCPError as exc:
        if exc.code == INVALID_PARAMS:
            return None
        raise
