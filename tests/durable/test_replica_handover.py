"""Durable bodies handed over between two replicas of `mcptasks serve` on one shared store
(Redis, PostgreSQL): the replica running the body is stopped (SIGTERM) while the task waits for
input, and the other takes the body at once (well under the lease), asks the same question
under the same key, accepts the answer a client sends to it and finishes; after a kill -9 the
survivor accepts the answer at once, takes the body once the dead replica's lease has run out,
and the replay goes on with that answer. The replicas run under instance
ids of their own (`MCPTASKS_INSTANCE_ID`), so neither can tell the other's death by its PID, as
if they ran on two machines. The step before the question ran
once (the counter files of `tests/durable_app.py` count every real call over both processes).

Isolation from other users of the shared servers: each test gets a fresh Redis key prefix (in
database 12 by default, `MCPTASKS_DURABLE_REDIS_URL`; its keys are deleted afterwards) or a fresh
PostgreSQL schema (dropped afterwards).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from durable.durable_helpers import (
    Server,
    assert_once,
    body_pids,
    client_of,
    servers_on,
    shared_store,
    stored,
    until,
)
from processes import process_test_marks
from sdk_helpers import accept, the_input_request

pytestmark = process_test_marks()

HANDOVER_LEASE = 30.0
"""The lease in the SIGTERM tests: long, so a take-over "at once" is told apart from one that
waited for the lease."""
CRASH_LEASE = 3.0
"""The lease in the kill -9 tests: short, the survivor waits it out. A lease runs `lease_ttl`
from the last heartbeat, and heartbeats come every third of it: a take-over sooner than two
thirds of it after the kill did not wait for the lease."""


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
async def test_the_surviving_replica_takes_over_a_waiting_body(
    tmp_path: Path, backend: str, how: str
) -> None:
    lease = HANDOVER_LEASE if how == "sigterm" else CRASH_LEASE
    with shared_store(backend) as store, servers_on(store, tmp_path, lease_ttl=lease) as servers:
        # ids of their own: as if on two machines, neither judges the other by its PID
        one, two = servers.start("one", foreign=True), servers.start("two", foreign=True)
        by_pid = {one.pid: one, two.pid: two}
        async with client_of(one) as tasks:
            task_id = str((await tasks.start("approve", {}))["taskId"])
            waiting = await tasks.wait_input(task_id, count=1)
        key, request = the_input_request(waiting)
        (holder_pid,) = body_pids(servers.counters, task_id)  # either replica may have claimed it
        holder = by_pid[holder_pid]
        survivor: Server = two if holder is one else one

        stopped = time.monotonic()
        if how == "sigterm":
            holder.sigterm()
            record, _ = await stored(store, task_id)
            # handed over: queued (no runner), or claimed by the survivor already
            assert record.status == "input_required", record
            assert record.runner is None or record.runner.startswith(f"{survivor.name}-"), record
            await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the survivor's replay")
            taken = time.monotonic() - stopped
            assert taken < HANDOVER_LEASE / 3, f"the survivor took the body {taken:.1f} s after the stop"
            async with client_of(survivor) as tasks:  # answered after the replay asked again
                again = await tasks.get(task_id)
                assert again["status"] == "input_required", again
                assert the_input_request(again) == (key, request), again
                await tasks.update(task_id, {key: accept(confirm=True)})
                done = await tasks.finish(task_id)
        else:
            holder.kill9()
            async with client_of(survivor) as tasks:  # answered before the survivor takes the body
                await tasks.update(task_id, {key: accept(confirm=True)})
                answered = time.monotonic() - stopped
                assert len(body_pids(servers.counters, task_id)) == 1, "taken over before the lease ran out"
                await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the survivor's replay")
                taken = time.monotonic() - stopped
                assert taken > CRASH_LEASE / 2, f"the survivor took the body {taken:.1f} s after a kill -9"
                done = await tasks.finish(task_id)
            print(f"answered {answered:.2f} s after the kill")
        assert body_pids(servers.counters, task_id) == [holder.pid, survivor.pid]
        print(
            f"{backend} {how}: the survivor replayed the body {taken:.2f} s after the stop (lease {lease} s)"
        )
        record, _ = await stored(store, task_id)

    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    assert structured == {"outcome": f"plan-{task_id[:8]} applied", "pid": survivor.pid}, structured
    assert_once(servers.counters, task_id, "prepare", "apply")
    assert record.attempt == (1 if how == "sigterm" else 2), record  # a hand-over is no attempt
