"""Webhooks from real `mcptasks serve` processes: every event of 100 tasks reaches a real
receiver, signed, although the server is killed with kill -9 while their completion events are
in flight; the next start on the same store delivers them (same ids). On SQLite, and on the
shared PostgreSQL and Redis when they run.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from durable.durable_helpers import shared_store, sqlite_url
from mcp import Client
from processes import ROOT, ServerProcess, clean_env, free_port, stop, wait_accepting
from sdk_helpers import BY_HAND, Tasks, tasks_extension
from webhook_helpers import SECRET, Receiver, arrive, receiving

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

APP = "tests/webhook_app.py"
TASKS = 100


@contextmanager
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield sqlite_url(tmp_path)
    else:
        with shared_store(backend) as url:
            yield url


def start(
    name: str,
    store: str,
    receiver: Receiver,
    workdir: Path,
    *,
    extra: tuple[str, ...] = (),
    worker: bool = False,
    hooks: bool = True,
) -> ServerProcess:
    port = free_port()
    log = workdir / f"{name}.log"
    if worker:
        argv = [sys.executable, "-m", "mcptasks", "worker", APP, "--store", store]
    else:
        argv = [sys.executable, "-m", "mcptasks", "serve", APP, "--transport", "http"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--store", store, *extra]
    if hooks:
        argv += ["--webhook", receiver.url, "--webhook-allow-private"]
    env = clean_env(
        MCPTASKS_WEBHOOK_SECRET=SECRET,
        MCPTASKS_WEBHOOK_TIMEOUT="2",
        MCPTASKS_WEBHOOK_SWEEP_INTERVAL="0.5",
        MCPTASKS_IMMEDIATE_RESULTS="false",
        PYTHONUNBUFFERED="1",
    )
    with log.open("wb") as output:
        popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
        )
    if worker:
        return ServerProcess(name, popen, log)
    wait_accepting(popen, port, log)
    return ServerProcess(name, popen, log, port)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_every_event_of_100_tasks_arrives_across_a_kill_9(tmp_path: Path, backend: str) -> None:
    with store_url(backend, tmp_path) as store, receiving() as receiver:
        first = start("first", store, receiver, tmp_path)
        try:
            async with Client(first.url, extensions=[tasks_extension()], **BY_HAND) as client:
                tasks = Tasks(client)
                ids = [
                    str((await tasks.start("approve", {"change": f"c{n}"}))["taskId"]) for n in range(TASKS)
                ]
                keys = {}
                for task_id in ids:
                    waiting = await tasks.wait_input(task_id, count=1)
                    (keys[task_id],) = waiting["inputRequests"]
                await arrive(lambda: len(receiver.unique()) == TASKS, "every input_required event")
                receiver.hold.clear()  # the completion events stay in flight, unanswered
                for task_id in ids:
                    await tasks.update(
                        task_id, {keys[task_id]: {"action": "accept", "content": {"confirm": True}}}
                    )
                for task_id in ids:
                    assert (await tasks.finish(task_id))["status"] == "completed"
            await arrive(lambda: len(receiver.deliveries) > TASKS, "a completion event in flight")
            first.kill9()
        finally:
            stop(first.popen)
        receiver.hold.set()
        second = start("second", store, receiver, tmp_path)
        try:
            await arrive(
                lambda: len(receiver.unique()) == 2 * TASKS, "every event after the restart", bound=120
            )
        finally:
            stop(second.popen)
        print(first.output()[-3000:], second.output()[-3000:])
    assert all(d.verified for d in receiver.deliveries)
    kinds: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for delivery in receiver.deliveries:
        event = delivery.event
        kinds[event["data"]["taskId"]][event["type"]].add(delivery.id)
    assert set(kinds) == set(ids)
    for task_id in ids:
        # one id per event however often it came (duplicates carry the same id)
        assert {kind: len(found) for kind, found in kinds[task_id].items()} == {
            "task.input_required": 1,
            "task.completed": 1,
        }, kinds[task_id]
    # the events in flight at the kill came again from the second server, under their ids
    assert len(receiver.deliveries) > len(receiver.unique())


async def test_a_worker_sends_the_events_of_the_bodies_it_runs(tmp_path: Path) -> None:
    """With `serve --enqueue-only`, the worker that runs a body writes its end and sends it (the
    replica here has no webhook settings: every event came from the worker)."""
    with receiving() as receiver:
        store = sqlite_url(tmp_path)
        server = start("replica", store, receiver, tmp_path, extra=("--enqueue-only",), hooks=False)
        worker = start("worker", store, receiver, tmp_path, worker=True)
        try:
            async with Client(server.url, extensions=[tasks_extension()], **BY_HAND) as client:
                tasks = Tasks(client)
                ids = [str((await tasks.start("quick", {"n": n}))["taskId"]) for n in range(10)]
                for task_id in ids:
                    assert (await tasks.finish(task_id))["status"] == "completed"
            await arrive(lambda: len(receiver.unique()) == 10, "every completion event")
        finally:
            stop(worker.popen)
            stop(server.popen)
    assert {d.event["data"]["taskId"] for d in receiver.events()} == set(ids)
