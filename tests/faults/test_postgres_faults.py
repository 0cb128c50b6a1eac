"""PostgreSQL backends terminated under a running server, as every failover, pooler restart or
idle timeout does: every backend of the server's database is ended (`pg_terminate_backend`, from
a separate connection) every 0.15 s for 3.5 s.

The database is a private one on the shared server (created for this module, dropped after it),
so the terminations reach nobody else's sessions; the shared server is never stopped.

What must hold: every body that finished has its result readable afterwards, with its own payload;
no task is failed (no server died, no lease expired); every request the faults met is answered
-32603 with `data.reason: "store_unavailable"` and an integer `retryAfterMs`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from fault_app import payload
from fault_helpers import (
    FaultServer,
    PrivateDatabase,
    assert_kept,
    assert_store_errors,
    ended_bodies,
    fault_client,
    fault_server,
    private_database,
    terminate_backends,
)
from processes import process_test_marks
from sdk_helpers import accept

pytestmark = process_test_marks()

TASKS = 60
FAULTS = 3.5
"""Seconds the terminations last."""
EVERY = 0.15
"""Seconds between two rounds of terminations."""


@pytest.fixture(scope="module")
def database() -> Iterator[PrivateDatabase]:
    with private_database() as db:
        yield db


@pytest.fixture(scope="module")
def server(database: PrivateDatabase, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServer]:
    workdir: Path = tmp_path_factory.mktemp("postgres-faults")
    with fault_server(database.url, workdir) as running:
        yield running


async def test_every_finished_result_survives_backend_terminations(
    database: PrivateDatabase, server: FaultServer
) -> None:
    tag = f"pg-{uuid.uuid4().hex[:8]}"
    gate = f"{tag}.go"
    async with fault_client(server.url) as client:
        # Held at a gate, then released into the faults: the ends spread over the whole window.
        created = {}
        for n in range(TASKS):
            arguments = {"tag": tag, "n": n, "seconds": FAULTS * n / TASKS, "gate": gate}
            created[await client.start("finish", arguments)] = (tag, n)
        terminated = []

        async def faults() -> None:
            terminated.append(await terminate_backends(database.name, seconds=FAULTS, every=EVERY))

        async with anyio.create_task_group() as group:
            group.start_soon(faults)
            (server.markers / gate).touch()
            await client.poll_for(created, FAULTS)
        final = await client.settle(created)
    assert terminated[0] > 0, "no backend was terminated: the fault did not happen"
    ended = {k: v for k, v in ended_bodies(server.markers).items() if v["tag"] == tag}
    assert_kept(created, final, ended)
    assert len(ended) == TASKS
    assert_store_errors(client.errors)


async def test_a_task_waiting_for_input_rides_out_backend_terminations(
    database: PrivateDatabase, server: FaultServer
) -> None:
    tag = f"pg-ask-{uuid.uuid4().hex[:8]}"
    async with fault_client(server.url) as client:
        task_id = await client.start("ask", {"tag": tag, "n": 1})
        waiting = await client.tasks.wait_input(task_id, count=1)
        (key,) = waiting["inputRequests"]
        terminated = []

        async def faults() -> None:
            terminated.append(await terminate_backends(database.name, seconds=FAULTS, every=EVERY))

        async with anyio.create_task_group() as group:
            group.start_soon(faults)
            seen = await client.poll_for([task_id], FAULTS, pollers=2)
        # The body kept waiting through the faults (it re-reads its task every 0.2 s).
        assert {task["status"] for task in seen} <= {"input_required"}, [t["status"] for t in seen]
        answered = await client.until_answered(
            "tasks/update", lambda: client.tasks.update(task_id, {key: accept(value="after the faults")})
        )
        assert answered == {"resultType": "complete"}, answered
        final = (await client.settle([task_id]))[task_id]
    assert terminated[0] > 0, "no backend was terminated: the fault did not happen"
    assert final["status"] == "completed", (final["status"], final.get("error"), final)
    assert final["result"]["structuredContent"] == {
        "tag": tag,
        "n": 1,
        "payload": payload(tag, 1),
        "answer": {"value": "after the faults"},
    }
    assert_store_errors(client.errors)
