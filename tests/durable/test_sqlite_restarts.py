"""Durable bodies on SQLite across real restarts of `mcptasks serve`: a graceful stop (SIGTERM,
or SIGINT: Ctrl-C) hands the task over to the next start on the same file, a kill -9 is
recovered by that start at once (the dead runner's PID is gone, no lease to wait for).

What must hold, counted with the counter files of `tests/durable_app.py` (every real call of a
step's function, over every process): a finished step never runs again, a step interrupted
before its value was journalled runs again (async, or sync in a worker thread), the open
question is asked again under the key the client saw before the restart and the answer sent
to that key finishes the task with the right result. A hand-over is no attempt, a crash is one
(`max_attempts` bounds them); a failed step fails the same way on replay without running; a
body whose code changed in between fails as `journal_diverged`; a cancelled task is not replayed.
"""

from __future__ import annotations

import signal
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from durable.durable_helpers import (
    LOCAL_LEASE,
    Server,
    Servers,
    assert_once,
    body_pids,
    client_of,
    runs,
    servers_on,
    sqlite_url,
    stored,
    until,
)
from sdk_helpers import accept, the_input_request

from mcptasks._runtime.operator import cancel_task, open_store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RECOVERY_BOUND = LOCAL_LEASE / 2
"""A restart after a kill -9 must finish the task well within the lease: it recovered at once."""


def stop(server: Server, how: str) -> None:
    if how == "sigterm":
        server.sigterm()
    elif how == "sigint":  # Ctrl-C
        server.sigterm(signal.SIGINT)
    else:
        server.kill9()


async def ask_and_stop(servers: Servers, how: str, tool: str = "approve") -> tuple[str, str, dict[str, Any]]:
    """Start `tool` on a first server, wait for its question, stop the server `how`; the task id,
    the question's key and the question, as the client saw them before the stop."""
    first = servers.start("first")
    async with client_of(first) as tasks:
        task_id = str((await tasks.start(tool, {}))["taskId"])
        waiting = await tasks.wait_input(task_id, count=1)
    key, request = the_input_request(waiting)
    stop(first, how)
    return task_id, key, request


@pytest.mark.parametrize("how", ["sigterm", "sigint", "kill9"])
async def test_a_question_survives_a_restart_under_its_key(tmp_path: Path, how: str) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        task_id, key, request = await ask_and_stop(servers, how)
        record, journal = await stored(store, task_id)
        # Left as it was for the next instance: still waiting, same question, same key.
        assert record.status == "input_required", record
        assert [(e["kind"], e["name"]) for e in journal] == [
            ("step", "prepare"),
            ("ask", "elicitation/create"),
        ]
        assert journal[1]["keys"] == [key], journal
        if how != "kill9":
            assert record.runner is None, f"a graceful stop left the task claimed by {record.runner}"

        restarted = time.monotonic()
        second = servers.start("second")
        async with client_of(second) as tasks:
            await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the replay")
            again = await tasks.get(task_id)
            assert again["status"] == "input_required", again
            assert the_input_request(again) == (key, request), again
            # the key seen before the restart (a replay asking under another would never finish)
            await tasks.update(task_id, {key: accept(confirm=True)})
            done = await tasks.finish(task_id)
        took = time.monotonic() - restarted

    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    assert structured["outcome"] == f"plan-{task_id[:8]} applied", structured
    assert structured["pid"] == second.pid, structured
    assert_once(servers.counters, task_id, "prepare", "apply")
    assert body_pids(servers.counters, task_id) == [servers.started[0].pid, second.pid]
    assert took < RECOVERY_BOUND, f"the restarted server took {took:.1f} s (lease {LOCAL_LEASE} s)"
    record, journal = await stored(store, task_id)
    assert [e["kind"] for e in journal] == ["step", "ask", "answer", "step"], journal
    assert record.attempt == (2 if how == "kill9" else 1), record  # a hand-over is no attempt
    # the status the replay yielded again is not written again
    said = [message for _, message in record.status_history]
    assert said.count(f"prepared plan-{task_id[:8]}") == 1, record.status_history


@pytest.mark.parametrize("step", ["transform", "grind"])
@pytest.mark.parametrize("how", ["sigterm", "kill9"])
async def test_a_step_interrupted_by_a_restart_runs_again_and_the_others_once(
    tmp_path: Path, how: str, step: str
) -> None:
    """Inside the 2nd of 3 steps: `transform` (async) or `grind` (sync, in a worker thread),
    each sleeping 120 s on its first run."""
    store = sqlite_url(tmp_path)
    arguments = {"source": "inbox", "seconds": 120, "threaded": step == "grind"}
    with servers_on(store, tmp_path) as servers:
        first = servers.start("first")
        async with client_of(first) as tasks:
            task_id = str((await tasks.start("pipeline", arguments))["taskId"])
            await until(lambda: runs(servers.counters, task_id)[(step, "start")] == 1, "step 2 to begin")
        if how == "sigterm":
            stopped = time.monotonic()
            first.popen.send_signal(signal.SIGTERM)
            code = first.popen.wait(timeout=60)
            stopping = time.monotonic() - stopped
            record, _ = await stored(store, task_id)
            # handed over (not left to crash recovery): queued, and no attempt counted
            assert (record.status, record.runner, record.attempt) == ("working", None, 1), (
                f"after SIGTERM (exit {code}, {stopping:.1f} s): runner {record.runner!r}, "
                f"attempt {record.attempt}\n{first.output()[-3000:]}"
            )
            assert code in (0, -signal.SIGTERM), f"exit {code}:\n{first.output()[-3000:]}"
            assert stopping < 5, f"the graceful stop took {stopping:.1f} s"
        else:
            first.kill9()
        counted = runs(servers.counters, task_id)
        assert counted[(step, "end")] == 0 and counted[("publish", "start")] == 0, counted

        restarted = time.monotonic()
        second = servers.start("second")
        async with client_of(second) as tasks:
            done = await tasks.finish(task_id)
        took = time.monotonic() - restarted

    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    assert structured["items"] == [10, 20, 30] and structured["message"] == "published 60", structured
    assert structured["pid"] == second.pid, structured
    counted = runs(servers.counters, task_id)
    assert_once(servers.counters, task_id, "fetch", "publish")
    # at least once: the interrupted run of step 2 never returned, so it ran again (once)
    assert counted[(step, "start")] == 2 and counted[(step, "end")] == 1, counted
    assert body_pids(servers.counters, task_id) == [first.pid, second.pid]
    assert took < RECOVERY_BOUND, f"the restarted server took {took:.1f} s (lease {LOCAL_LEASE} s)"
    record, _ = await stored(store, task_id)
    assert record.attempt == (1 if how == "sigterm" else 2), record


async def test_a_body_changed_between_runs_fails_as_diverged(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        task_id, _, _ = await ask_and_stop(servers, "sigterm", tool="evolving")
        # variant "b" does a step where the journal holds variant "a"'s question (position 1)
        second = servers.start("second", variant="b")
        async with client_of(second) as tasks:
            done = await tasks.finish(task_id)

    assert done["status"] == "failed", done
    error = done["error"]
    assert error["code"] == -32603, error
    assert error["data"]["reason"] == "journal_diverged", error
    assert error["data"]["position"] == 1, error
    assert error["message"].startswith("Task tool 'evolving' diverged from its journal at position 1: "), (
        error
    )
    assert "the journal holds a question" in error["message"], error
    assert "this run asked for step 'shortcut'" in error["message"], error
    assert "its code changed while the task was in flight" in error["message"], error
    counted = runs(servers.counters, task_id)
    assert counted[("prepare", "start")] == 1, counted
    assert counted[("shortcut", "start")] == 0, f"the diverging step ran: {counted}"
    assert body_pids(servers.counters, task_id) == [servers.started[0].pid, second.pid]


async def test_a_cancelled_durable_task_is_not_replayed(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        first = servers.start("first")
        async with client_of(first) as tasks:
            asking = str((await tasks.start("approve", {}))["taskId"])
            stepping = str((await tasks.start("pipeline", {"seconds": 120}))["taskId"])
            offline = str((await tasks.start("approve", {}))["taskId"])
            control = str((await tasks.start("approve", {}))["taskId"])
            for task_id in (asking, offline, control):
                await tasks.wait_input(task_id, count=1)
            await until(
                lambda: runs(servers.counters, stepping)[("transform", "start")] == 1, "step 2 to begin"
            )
            for task_id in (asking, stepping):  # one waiting for input, one inside a step
                await tasks.cancel(task_id)
                await tasks.wait_status(task_id, "cancelled")
        first.sigterm()
        # cancelled by an operator while no server runs (`mcptasks tasks cancel`), handed over as it is
        async with open_store(store) as opened:
            cancelled = await cancel_task(opened, offline)
        assert cancelled is not None and cancelled.status == "cancelled", cancelled

        second = servers.start("second")
        async with client_of(second) as tasks:
            # the control task is replayed by the new server and finishes: the restart did claim
            await until(lambda: len(body_pids(servers.counters, control)) == 2, "the control task's replay")
            key, _ = the_input_request(await tasks.get(control))
            await tasks.update(control, {key: accept(confirm=False)})
            finished = await tasks.finish(control)
            after = {task_id: await tasks.get(task_id) for task_id in (asking, stepping, offline)}

    assert finished["status"] == "completed", finished
    assert finished["result"]["structuredContent"]["outcome"].endswith(" skipped"), finished
    for task_id, task in after.items():
        assert task["status"] == "cancelled", task
        assert body_pids(servers.counters, task_id) == [first.pid], f"{task_id} was replayed"
    for task_id in (asking, offline):
        assert runs(servers.counters, task_id)[("apply", "start")] == 0
    assert runs(servers.counters, stepping)[("transform", "start")] == 1
    assert runs(servers.counters, stepping)[("publish", "start")] == 0


def ran(counters: Path, task_id: str, times: int) -> bool:
    """Whether the task's body has started `times` times."""
    return len(body_pids(counters, task_id)) == times


async def test_hand_overs_do_not_count_as_attempts_but_crashes_do(tmp_path: Path) -> None:
    """`max_attempts` (3) bounds the runs crashes start: two graceful stops, then kill -9s; the
    third crash fails the task (`worker_lost`, 3 attempts), the finished step never re-ran."""
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        task_id = ""
        # (how this run ends, the attempt it is): stops leave the attempt, crashes bump it
        plan = [("sigterm", 1), ("sigterm", 1), ("kill9", 1), ("kill9", 2), ("kill9", 3)]
        for n, (how, attempt) in enumerate(plan, start=1):
            server = servers.start(f"run{n}")
            async with client_of(server) as tasks:
                if n == 1:
                    task_id = str((await tasks.start("approve", {}))["taskId"])
                await until(partial(ran, servers.counters, task_id, n), f"run {n} of the body")
                await tasks.wait_input(task_id, count=1)
            record, _ = await stored(store, task_id)
            assert (record.status, record.attempt) == ("input_required", attempt), (n, record)
            stop(server, how)
        last = servers.start("last")
        async with client_of(last) as tasks:
            done = await tasks.finish(task_id)

    assert done["status"] == "failed", done
    assert done["error"]["data"]["reason"] == "worker_lost", done
    assert done["error"]["data"].get("attempts") == 3, done
    assert len(body_pids(servers.counters, task_id)) == len(plan), body_pids(servers.counters, task_id)
    assert_once(servers.counters, task_id, "prepare")


async def test_failed_steps_fail_the_same_way_on_replay_without_running(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        task_id, key, _ = await ask_and_stop(servers, "sigterm", tool="salvage")
        second = servers.start("second")
        async with client_of(second) as tasks:
            await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the replay")
            await tasks.update(task_id, {key: accept(confirm=True)})
            done = await tasks.finish(task_id)

    assert done["status"] == "completed", done
    failures = done["result"]["structuredContent"]["failures"]
    assert failures[0] == {"step": "flaky", "type": "RuntimeError", "message": "the disk is on fire"}, (
        failures
    )
    assert (failures[1]["step"], failures[1]["type"]) == ("odd", "TypeError"), failures
    assert "set" in failures[1]["message"], failures
    counted = runs(servers.counters, task_id)
    assert counted[("flaky", "start")] == 1, counted
    assert counted[("odd", "start")] == 1, counted
    _, journal = await stored(store, task_id)
    assert [(e["kind"], e.get("error", {}).get("type")) for e in journal[:2]] == [
        ("step", "RuntimeError"),
        ("step", "TypeError"),
    ], journal
