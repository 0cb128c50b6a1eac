"""Several real `mcptasks serve` / `mcptasks worker` processes sharing one Redis or PostgreSQL store.

The servers run `tests/replica_app.py` on ephemeral ports; the tests talk Streamable HTTP to them
(the official SDK client for the cross-replica input round trip, raw JSON-RPC POSTs with the
2026-07-28 envelope and `Mcp-Name` elsewhere) and check that any replica answers for any task,
that a killed replica's tasks are failed or re-run by the survivors, and that nothing runs twice.

Every test runs on both backends. Starting a server costs seconds (SDK imports), so each backend
has one long-lived trio of replicas (`trio`, module scope) that tests add doomed replicas to;
the survivors are the trio. The dedicated-worker test needs a store no running replica claims
from, so it gets its own (`isolated`) and runs first, before the trio of that backend exists.

Isolation from other users of the servers: a Redis URL cannot carry a key prefix (redis-py hands
unknown query options to the connection, which rejects them), so Redis runs use a dedicated
database, 14 by default (`MCPTASKS_REPLICA_REDIS_URL`), whose `mcptasks:*` keys are deleted after
use. PostgreSQL runs use fresh schemas (`?schema=mcptasks_rep_<hex>`), dropped afterwards.

No sleep is a synchronisation: every wait polls observable state (a port, a log line, a marker
file, `tasks/get`) and is bounded.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from processes import ServerProcess, listening, postgres_execute
from push_helpers import as_notification, listen, task_frames, without_meta
from sdk_helpers import RawClient, Tasks, answered_by_hand, tasks_extension

from mcptasks._runtime.recovery import SHUTDOWN_MESSAGE, WORKER_LOST_MESSAGE
from mcptasks.wire import IDEMPOTENCY_META, TERMINAL_STATUSES

ROOT = Path(__file__).resolve().parents[2]
APP = "tests/replica_app.py"
LEASE_TTL = 2.0
STARTUP_TIMEOUT = 90.0
"""Seconds processes may take to get ready (SDK imports take seconds on a loaded 2-core machine)."""
WAIT = 30.0
"""Upper bound of an ordinary wait."""
DETECTION_BOUND = 15.0
"""Seconds within which survivors must fail a killed replica's tasks (lease 2 s: about 2 s)."""

REDIS_URL = os.environ.get("MCPTASKS_REPLICA_REDIS_URL", "redis://127.0.0.1:6379/14")
POSTGRES_URL = os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_HINT = 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
POSTGRES_HINT = (
    "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
    "(trust auth, database `test`; or set MCPTASKS_TEST_POSTGRES_URL)"
)

pytestmark = pytest.mark.anyio


# -- stores ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")
        if not listening(REDIS_URL, 6379):
            pytest.skip(f"no Redis at {urlsplit(REDIS_URL).netloc}; start one with: {REDIS_HINT}")
    else:
        pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install asyncpg)")
        if not listening(POSTGRES_URL, 5432):
            pytest.skip(
                f"PostgreSQL is not reachable at {urlsplit(POSTGRES_URL).netloc}; start it with {POSTGRES_HINT}"
            )
    return str(request.param)


_redis_in_use: list[str] = []
"""Who uses the Redis database right now (one user at a time: it has one key namespace)."""


def _redis_keys(client: Any) -> list[Any]:
    return list(client.scan_iter(match="mcptasks:*", count=1000))


@contextmanager
def fresh_store(backend: str, user: str) -> Iterator[str]:
    """A store URL nobody else uses; emptied (Redis) or dropped (PostgreSQL) afterwards."""
    if backend == "postgres":
        schema = f"mcptasks_rep_{uuid.uuid4().hex[:12]}"
        try:
            yield f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={schema}"
        finally:
            postgres_execute(POSTGRES_URL, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    import redis

    if _redis_in_use:
        raise RuntimeError(f"{user} needs {REDIS_URL}, which {_redis_in_use[0]} still uses (test order)")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        live = client.zrangebyscore("mcptasks:runners", time.time(), "+inf")
        if live:
            pytest.skip(f"{REDIS_URL} is used by live mcptasks instances; set MCPTASKS_REPLICA_REDIS_URL")
        stale = _redis_keys(client)
        if stale:  # left by an interrupted run of this module
            client.delete(*stale)
        _redis_in_use.append(user)
        try:
            yield REDIS_URL
        finally:
            _redis_in_use.remove(user)
            keys = _redis_keys(client)
            if keys:
                client.delete(*keys)
    finally:
        client.close()


# -- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Proc(ServerProcess):
    """One server or worker process; its output goes to `log`."""

    def ready(self) -> bool:
        if self.port is None:
            return "running" in self.output()  # `mcptasks worker <id> running N task tools`
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


@dataclass
class Cluster:
    """Starts servers and workers on one store; `close()` ends every process it started."""

    store: str
    dir: Path
    markers: Path
    procs: list[Proc] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("MCPTASKS_STORE", None)
        env.update(MCPTASKS_REPLICA_DIR=str(self.markers), PYTHONUNBUFFERED="1", **extra)
        return env

    def spawn(self, name: str, argv: list[str], env: dict[str, str], port: int | None = None) -> Proc:
        log = self.dir / f"{name}-{len(self.procs)}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(name, popen, log, port)
        self.procs.append(proc)
        return proc

    def serve_argv(self, port: int, *flags: str) -> list[str]:
        argv = [sys.executable, "-m", "mcptasks", "serve", APP, "--transport", "http"]
        return [*argv, "--host", "127.0.0.1", "--port", str(port), "--store", self.store, *flags]

    def serve(self, name: str, *, enqueue_only: bool = False) -> Proc:
        port = free_port()
        flags = ["--lease-ttl", str(LEASE_TTL)] + (["--enqueue-only"] if enqueue_only else [])
        return self.spawn(name, self.serve_argv(port, *flags), self.env(), port)

    def worker(self, name: str) -> Proc:
        argv = [sys.executable, "-m", "mcptasks", "worker", APP, "--store", self.store]
        return self.spawn(name, [*argv, "--lease-ttl", str(LEASE_TTL)], self.env())

    def start(self, *names: str) -> list[Proc]:
        procs = [self.serve(name) for name in names]
        self.ready(*procs)
        return procs

    def ready(self, *procs: Proc) -> None:
        """Wait (bounded polling) until every server accepts connections and every worker runs."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        for proc in procs:
            while not proc.ready():
                if proc.popen.poll() is not None:
                    raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.output()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"{proc.name} not ready after {STARTUP_TIMEOUT} s:\n{proc.output()}")
                time.sleep(0.05)

    def close(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout=WAIT)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} (pid {p.pid}) ---\n{p.output()[-3000:]}" for p in self.procs)


@contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    try:
        yield cluster
    finally:
        cluster.close()
        print(cluster.logs())  # pytest shows it for a failed test only


@pytest.fixture(scope="module")
def trio(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Replicas A, B, C on one store, for the whole module (per backend)."""
    workdir = tmp_path_factory.mktemp(f"trio-{backend}")
    with (
        fresh_store(backend, "the replica trio") as url,
        running(Cluster(url, workdir, workdir / "markers")) as cluster,
    ):
        cluster.markers.mkdir()
        cluster.start("A", "B", "C")
        yield cluster


@pytest.fixture
def extra(trio: Cluster, tmp_path: Path) -> Iterator[Cluster]:
    """More processes on the trio's store (sharing its markers), ended after the test."""
    with running(Cluster(trio.store, tmp_path, trio.markers)) as cluster:
        yield cluster


@pytest.fixture
def isolated(backend: str, tmp_path: Path) -> Iterator[Cluster]:
    """Processes on a store of their own (no replica of the trio claims from it)."""
    with (
        fresh_store(backend, "an isolated test") as url,
        running(Cluster(url, tmp_path, tmp_path / "markers")) as c,
    ):
        c.markers.mkdir()
        yield c


@pytest.fixture
async def http() -> Any:
    async with httpx2.AsyncClient(timeout=WAIT) as client:
        yield client


class Replica(RawClient):
    """Raw JSON-RPC POSTs (2026-07-28 headers, `Mcp-Name` = taskId) to one server; `_meta` dropped."""

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        result = (await self.send(method, params)).result
        result.pop("_meta", None)
        return result

    async def create(self, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        created = await self.rpc("tools/call", params)
        assert created["resultType"] == "task", created
        return created

    async def noop(self, i: int) -> tuple[str, dict[str, Any]]:
        """Call `noop(i)`; its task id and the answer: a `CreateTaskResult`, or the result itself
        (a body that finishes without suspending may be answered at once; its task exists too)."""
        answer = await self.rpc("tools/call", {"name": "noop", "arguments": {"i": i}})
        if answer["resultType"] == "task":
            return answer["taskId"], answer
        assert answer["resultType"] == "complete" and answer.get("isError") is False, answer
        assert answer["structuredContent"]["i"] == i, answer
        task_id = answer["structuredContent"]["task"]
        # answered before its record was written (`Limits.max_unwritten_results`): the answer does
        # not name the task, this body told us its id; its record is in the store soon after
        await until(
            lambda: self.send("tasks/get", {"taskId": task_id}),
            lambda response: "result" in response.message,
            what=f"the record of {task_id}, answered at once",
        )
        return task_id, answer

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.rpc("tasks/get", {"taskId": task_id})

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.rpc("tasks/cancel", {"taskId": task_id})


def replicas(http: httpx2.AsyncClient, *procs: Proc) -> list[Replica]:
    return [Replica(http, proc.url) for proc in procs]


# -- waiting -----------------------------------------------------------------------------------


async def until(
    look: Callable[[], Awaitable[Any]],
    predicate: Callable[[Any], bool],
    *,
    what: str,
    within: float = WAIT,
    pause: float = 0.05,
) -> Any:
    """Call `look()` until `predicate` holds on its value; fail after `within` seconds."""
    last: Any = None
    try:
        with anyio.fail_after(within):
            while True:
                last = await look()
                if predicate(last):
                    return last
                await anyio.sleep(pause)
    except TimeoutError:
        raise AssertionError(f"timed out after {within} s waiting for {what}; last seen: {last!r}") from None


async def marker(cluster: Cluster, pattern: str, *, within: float = WAIT) -> list[Path]:
    """Wait until a marker file matching `pattern` exists; return the matches."""

    async def look() -> list[Path]:
        return sorted(cluster.markers.glob(pattern))

    return await until(look, bool, what=f"a marker {pattern!r}", within=within)


async def terminal(client: Replica, task_id: str, *, within: float = WAIT) -> dict[str, Any]:
    return await until(
        lambda: client.get(task_id),
        lambda t: t["status"] in TERMINAL_STATUSES,
        what=f"{task_id} to end",
        within=within,
    )


def structured(task: dict[str, Any]) -> dict[str, Any]:
    # the status, error and message first: pytest cuts a long dict before them
    assert task["status"] == "completed", (task["status"], task.get("error"), task.get("statusMessage"), task)
    result = task["result"]
    assert result.get("isError") is False, result
    return dict(result["structuredContent"])


def runs_log(cluster: Cluster) -> Counter[str]:
    """How many times each task id's `noop` body ran."""
    path = cluster.markers / "runs.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split()[0] for line in lines)


# -- 4. serving replicas plus dedicated workers (first: its store must have no other claimer) -----


@pytest.mark.slow
async def test_dedicated_workers_run_what_the_server_queues(
    isolated: Cluster, http: httpx2.AsyncClient
) -> None:
    server = isolated.serve("S", enqueue_only=True)
    isolated.ready(server)
    (client,) = replicas(http, server)
    # queued before any worker exists: one to run later, one cancelled while queued
    early = (await client.create("work", {"seconds": 0.2}))["taskId"]
    dropped = (await client.create("work", {"seconds": 0.2}))["taskId"]
    assert await client.cancel(dropped) == {"resultType": "complete"}
    assert (await client.get(early))["status"] == "working"

    workers = [isolated.worker(f"W{n}") for n in (1, 2, 3, 4)]
    isolated.ready(*workers)
    worker_pids = {w.pid for w in workers}

    ids = {(await client.noop(i))[0]: i for i in range(40)}
    slow = [(await client.create("work", {"seconds": 0.3}))["taskId"] for _ in range(4)]
    for task_id, i in ids.items():
        result = structured(await terminal(client, task_id))
        assert result["i"] == i
        assert result["pid"] in worker_pids, (result, worker_pids, server.pid)
    for task_id in [early, *slow]:
        assert structured(await terminal(client, task_id))["pid"] in worker_pids
        (started,) = isolated.markers.glob(f"{task_id}.started.*")
        assert int(started.name.rsplit(".", 1)[1]) in worker_pids
    assert (await client.get(dropped))["status"] == "cancelled"
    assert not list(isolated.markers.glob(f"{dropped}.*"))  # never ran
    runs = runs_log(isolated)
    assert set(runs) == set(ids)
    assert set(runs.values()) == {1}, [t for t, n in runs.items() if n > 1]

    # input and cancel sent to the server reach bodies running on the workers
    asking = (await client.create("ask", {"question": "Deploy?"}))["taskId"]
    waiting = await until(lambda: client.get(asking), lambda t: t["status"] == "input_required", what="input")
    (key,) = waiting["inputRequests"]
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    assert await client.rpc("tasks/update", {"taskId": asking, "inputResponses": answer}) == {
        "resultType": "complete"
    }
    answered = structured(await terminal(client, asking))
    assert answered["confirmed"] is True and answered["pid"] in worker_pids
    doomed = (await client.create("work", {"seconds": 300}))["taskId"]
    (started,) = await marker(isolated, f"{doomed}.started.*")
    assert await client.cancel(doomed) == {"resultType": "complete"}
    await marker(isolated, f"{doomed}.stopped.{started.name.rsplit('.', 1)[1]}")

    # workers die one after another while running a retry_on_crash job: each death moves it to a
    # live worker, until max_attempts (3) runs were lost and it fails
    job = (await client.create("idempotent_job", {"seconds": 300}))["taskId"]
    alive = {w.pid: w for w in workers}
    for attempt in (1, 2, 3):
        (run,) = await marker(isolated, f"{job}.run.{attempt}.*", within=DETECTION_BOUND)
        victim = alive.pop(int(run.name.rsplit(".", 1)[1]))
        await until(
            lambda: client.get(job),
            lambda t, n=attempt: f"attempt {n} of 3" in t.get("statusMessage", ""),
            what=f"attempt {attempt}",
        )
        victim.kill9()
    lost = await terminal(client, job, within=DETECTION_BOUND)
    assert lost["status"] == "failed", lost
    assert lost["error"]["message"] == WORKER_LOST_MESSAGE
    assert lost["error"]["data"] == {"reason": "worker_lost", "attempts": 3}
    assert len(list(isolated.markers.glob(f"{job}.run.*"))) == 3


# -- 1. any replica answers for any task ---------------------------------------------------------


async def test_input_round_trip_across_replicas(trio: Cluster) -> None:
    """Created on A, polled on B, answered on C (tasks/update), finished on A: the SDK client over HTTP."""
    a, b, c = trio.procs
    async with (
        # The creating call declares `elicitation`; the task remembers it on every replica.
        Client(a.url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand) as client_a,
        Client(b.url, extensions=[tasks_extension()]) as client_b,
        Client(c.url, extensions=[tasks_extension()]) as client_c,
    ):
        on_a, on_b, on_c = Tasks(client_a), Tasks(client_b), Tasks(client_c)
        task_id = (await on_a.start("ask", {"question": "Ship it?"}))["taskId"]
        waiting = await on_b.wait_input(task_id, count=1)
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Ship it?"
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        assert await on_c.update(task_id, answer) == {"resultType": "complete"}
        done = await on_a.finish(task_id)
        assert structured(done) == {"pid": a.pid, "confirmed": True, "task": task_id}
        assert await on_b.get(task_id) == done
        assert await on_c.get(task_id) == done


async def test_push_across_replicas(trio: Cluster, http: httpx2.AsyncClient) -> None:
    """Listen on B, body on A, answered on C: B pushes every state, each equal to tasks/get."""
    a, b, c = trio.procs
    on_a, on_c = replicas(http, a, c)
    task_id = (await on_a.create("ask", {"question": "Push it?"}))["taskId"]
    async with listen(b.url, {"taskIds": [task_id]}) as stream:
        ack = await stream.next(timeout=WAIT)
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        pushed = task_frames([await stream.next(timeout=WAIT)])[0]
        while pushed["status"] != "input_required":
            pushed = task_frames([await stream.next(timeout=WAIT)])[0]
        ((key, request),) = pushed["inputRequests"].items()
        assert request["params"]["message"] == "Push it?"
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        assert await on_c.rpc("tasks/update", {"taskId": task_id, "inputResponses": answer}) == {
            "resultType": "complete"
        }
        while pushed["status"] not in TERMINAL_STATUSES:
            pushed = task_frames([await stream.next(timeout=WAIT)])[0]
        closing = await stream.next(timeout=WAIT)
    assert structured(pushed) == {"pid": a.pid, "confirmed": True, "task": task_id}
    assert without_meta(pushed) == as_notification(await on_c.get(task_id))
    assert closing["id"] == stream.request_id


async def test_cancel_on_another_replica_stops_the_body(trio: Cluster, http: httpx2.AsyncClient) -> None:
    a, b, _ = trio.procs
    on_a, on_b = replicas(http, a, b)
    task_id = (await on_a.create("work", {"seconds": 120}))["taskId"]
    await marker(trio, f"{task_id}.started.{a.pid}")
    await until(lambda: on_b.get(task_id), lambda t: "statusMessage" in t, what="a status from the body")
    assert await on_b.cancel(task_id) == {"resultType": "complete"}
    assert (await on_a.get(task_id))["status"] == "cancelled"
    await marker(trio, f"{task_id}.stopped.{a.pid}", within=15)
    final = await on_a.get(task_id)
    assert final["status"] == "cancelled" and "result" not in final and "error" not in final
    assert a.popen.poll() is None


# -- 2. a replica dies ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_killed_replica_tasks_fail_as_worker_lost(
    trio: Cluster, extra: Cluster, http: httpx2.AsyncClient
) -> None:
    (doomed,) = extra.start("D")
    a, b, c = trio.procs
    on_d, on_a, on_b, on_c = replicas(http, doomed, a, b, c)
    finished = [(await on_d.noop(i))[0] for i in range(5)]
    results = {task_id: await terminal(on_d, task_id) for task_id in finished}
    assert all(structured(t)["pid"] == doomed.pid for t in results.values())
    lost_work = [(await on_d.create("work", {"seconds": 300}))["taskId"] for _ in range(3)]
    asking = (await on_d.create("ask", {}))["taskId"]
    unrelated = (await on_a.create("work", {"seconds": 300}))["taskId"]
    for task_id in lost_work:
        await marker(trio, f"{task_id}.started.{doomed.pid}")
    await until(lambda: on_c.get(asking), lambda t: t["status"] == "input_required", what="the question")

    doomed.kill9()
    killed_at = time.monotonic()
    for task_id in [*lost_work, asking]:
        lost = await terminal(on_b, task_id, within=DETECTION_BOUND)
        assert lost["status"] == "failed", lost
        assert lost["error"]["message"] == WORKER_LOST_MESSAGE
        assert lost["error"]["data"] == {"reason": "worker_lost"}
    detected = time.monotonic() - killed_at
    print(f"\nworker-lost detection after kill -9: {detected:.2f} s (lease {LEASE_TTL} s)")
    assert detected < DETECTION_BOUND

    for task_id in [*lost_work, asking]:  # every survivor gives the same answer
        assert await on_a.get(task_id) == await on_c.get(task_id)
    for task_id, before in results.items():  # completed results outlive their runner
        assert await on_a.get(task_id) == before
        assert await on_c.get(task_id) == before
    # a task of a live replica is no collateral damage
    assert (await on_b.get(unrelated))["status"] == "working"
    assert not list(trio.markers.glob(f"{unrelated}.stopped.*"))
    assert await on_c.cancel(unrelated) == {"resultType": "complete"}
    await marker(trio, f"{unrelated}.stopped.{a.pid}")


# -- 3. retry_on_crash -------------------------------------------------------------------------


@pytest.mark.slow
async def test_retry_on_crash_reruns_on_a_survivor(
    trio: Cluster, extra: Cluster, http: httpx2.AsyncClient
) -> None:
    (doomed,) = extra.start("D")
    on_d, on_b = replicas(http, doomed, trio.procs[1])
    # the first attempt would take a minute (it is killed long before), the retry one second
    task_id = (await on_d.create("idempotent_job", {"seconds": 60, "retry_seconds": 1}))["taskId"]
    await marker(trio, f"{task_id}.run.1.{doomed.pid}")
    first = await until(
        lambda: on_b.get(task_id), lambda t: "attempt 1 of 3" in t.get("statusMessage", ""), what="attempt 1"
    )
    assert first["status"] == "working"

    doomed.kill9()
    killed_at = time.monotonic()
    seen: list[tuple[str, str]] = []

    async def look() -> dict[str, Any]:
        task = await on_b.get(task_id)
        seen.append((task["status"], task.get("statusMessage", "")))
        return task

    retrying = await until(
        look,
        lambda t: "attempt 2 of 3" in t.get("statusMessage", "") or t["status"] in TERMINAL_STATUSES,
        what="the retry",
        within=DETECTION_BOUND,
    )
    message = retrying.get("statusMessage")
    print(f"\nretry visible {time.monotonic() - killed_at:.2f} s after kill -9: {message!r}")
    assert retrying["status"] == "working", retrying
    done = await until(look, lambda t: t["status"] in TERMINAL_STATUSES, what="the retried run to end")
    result = structured(done)
    assert result["attempt"] == 2 and result["runs"] == 2, (result, seen)
    assert result["pid"] in {p.pid for p in trio.procs}
    runs = sorted(p.name for p in trio.markers.glob(f"{task_id}.run.*"))
    assert runs == sorted([f"{task_id}.run.1.{doomed.pid}", f"{task_id}.run.2.{result['pid']}"])
    assert {status for status, _ in seen} <= {"working", "completed"}, seen


@pytest.mark.slow
async def test_paused_replica_does_not_write_to_its_rerun_task(
    trio: Cluster, extra: Cluster, http: httpx2.AsyncClient
) -> None:
    """A runner that stalls past its lease (SIGSTOP: a GC pause, a frozen VM, a partition) and wakes
    after its retry_on_crash task was re-run elsewhere must leave the task to the new runner."""
    (paused,) = extra.start("D")
    on_d, on_b = replicas(http, paused, trio.procs[1])
    # attempt 1 has ~2.5 s left when it wakes up; attempt 2 takes 4 s
    task_id = (await on_d.create("idempotent_job", {"seconds": 3, "retry_seconds": 4}))["taskId"]
    await until(
        lambda: on_b.get(task_id), lambda t: "0.5/3 s" in t.get("statusMessage", ""), what="attempt 1"
    )
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        await until(
            lambda: on_b.get(task_id),
            lambda t: "attempt 2 of 3" in t.get("statusMessage", ""),
            what="the re-run",
            within=DETECTION_BOUND,
        )
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    seen: list[tuple[str, str]] = []

    async def look() -> dict[str, Any]:
        task = await on_b.get(task_id)
        seen.append((task["status"], task.get("statusMessage", "")))
        return task

    done = await until(look, lambda t: t["status"] in TERMINAL_STATUSES, what="the end")
    stale = [message for _, message in seen if "attempt 1 of 3" in message]
    outcome = done.get("result", {}).get("structuredContent") or done
    assert not stale, (
        f"the paused runner wrote to the re-run task: {stale[:2]}...{stale[-1:]}; ended with {outcome}"
    )
    assert structured(done)["attempt"] == 2, done


async def test_sigterm_fails_or_requeues_the_running_tasks(
    trio: Cluster, extra: Cluster, http: httpx2.AsyncClient
) -> None:
    """A replica stopped gracefully records its tasks itself: no lease wait."""
    (stopping,) = extra.start("D")
    on_d, on_b = replicas(http, stopping, trio.procs[1])
    plain = (await on_d.create("work", {"seconds": 300}))["taskId"]
    retried = (await on_d.create("idempotent_job", {"seconds": 60, "retry_seconds": 0.5}))["taskId"]
    await marker(trio, f"{plain}.started.{stopping.pid}")
    await marker(trio, f"{retried}.run.1.{stopping.pid}")
    stopping.popen.send_signal(signal.SIGTERM)
    stopping.popen.wait(timeout=WAIT)
    stopped = await on_b.get(plain)
    assert stopped["status"] == "failed", stopped
    assert stopped["error"] == {"code": -32603, "message": SHUTDOWN_MESSAGE, "data": {"reason": "shutdown"}}
    assert (trio.markers / f"{plain}.stopped.{stopping.pid}").exists()
    result = structured(await terminal(on_b, retried))
    assert result["attempt"] == 2 and result["pid"] in {p.pid for p in trio.procs}


# -- 5. idempotent creation ----------------------------------------------------------------------


async def test_idempotency_key_is_shared_by_replicas(trio: Cluster, http: httpx2.AsyncClient) -> None:
    clients = replicas(http, *trio.procs)

    def key() -> dict[str, str]:
        return {IDEMPOTENCY_META: f"order-{uuid.uuid4().hex}"}

    first_key = key()
    first = await clients[0].create("work", {"seconds": 300}, **first_key)
    again = await clients[1].create("work", {"seconds": 300}, **first_key)
    assert again["taskId"] == first["taskId"]

    # the same key sent to all three replicas at once still makes one task
    racing_key = key()
    racing: list[str] = []

    async def call(client: Replica) -> None:
        racing.append((await client.create("work", {"seconds": 300}, **racing_key))["taskId"])

    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(call, client)
    assert len(racing) == 3 and len(set(racing)) == 1 and racing[0] != first["taskId"]

    other = await clients[2].create("work", {"seconds": 300}, **key())
    assert other["taskId"] not in (first["taskId"], racing[0])

    # one body per task: each started once; stop them and count again
    ids = (first["taskId"], racing[0], other["taskId"])
    for task_id in ids:
        await marker(trio, f"{task_id}.started.*")
        assert await clients[1].cancel(task_id) == {"resultType": "complete"}
    for task_id in ids:
        await marker(trio, f"{task_id}.stopped.*")
        assert len(list(trio.markers.glob(f"{task_id}.started.*"))) == 1
    # a retry after the task ended still names it
    assert (await clients[2].create("work", {"seconds": 300}, **first_key))["taskId"] == first["taskId"]


# -- 6. volume ---------------------------------------------------------------------------------

VOLUME = 2000
IN_FLIGHT = 32


@pytest.mark.slow
async def test_volume_every_task_completes_exactly_once(trio: Cluster, http: httpx2.AsyncClient) -> None:
    """2,000 zero-work tasks created on three replicas, then polled on another until terminal."""
    clients = replicas(http, *trio.procs)
    pids = {p.pid for p in trio.procs}
    created: dict[int, dict[str, Any]] = {}
    finals: dict[int, dict[str, Any]] = {}
    seen: dict[int, list[str]] = {}
    limiter = anyio.CapacityLimiter(IN_FLIGHT)

    async def create(i: int) -> None:
        async with limiter:
            task_id, answer = await clients[i % 3].noop(i)
            created[i] = {"taskId": task_id, **answer}
            seen[i] = [answer.get("status", "completed")]  # an immediate result: completed at once

    async def finish(i: int) -> None:
        async with limiter:
            task = created[i]
            while True:
                current = await clients[(i + 1) % 3].get(task["taskId"])
                seen[i].append(current["status"])
                assert current["createdAt"] == task.get("createdAt", current["createdAt"]), (task, current)
                assert current["lastUpdatedAt"] >= current["createdAt"], current
                if current["status"] in TERMINAL_STATUSES:
                    break
                await anyio.sleep(0.05)
            finals[i] = current
            if i % 10 == 0:  # a sample read again from the third replica: the same terminal record
                assert await clients[(i + 2) % 3].get(task["taskId"]) == current

    began = time.monotonic()
    with anyio.fail_after(150):  # about 20-40 s on a 2-core machine; the bound only ends a hang
        async with anyio.create_task_group() as tg:
            for i in range(VOLUME):
                tg.start_soon(create, i)
        made = time.monotonic()
        async with anyio.create_task_group() as tg:
            for i in range(VOLUME):
                tg.start_soon(finish, i)
    done = time.monotonic()
    immediate = sum(1 for task in created.values() if task["resultType"] == "complete")
    print(
        f"\n{VOLUME} tasks ({immediate} answered with an immediate result), {IN_FLIGHT} in flight: "
        f"created in {made - began:.1f} s, all terminal after {done - began:.1f} s"
    )

    task_ids = {task["taskId"] for task in created.values()}
    assert len(task_ids) == VOLUME and len(finals) == VOLUME
    ran_on: Counter[int] = Counter()
    for i, final in finals.items():
        result = structured(final)
        assert result == {"i": i, "pid": result["pid"], "task": created[i]["taskId"]}, result
        assert result["pid"] in pids, result
        if created[i]["resultType"] == "complete":  # the immediate answer is the stored result
            assert created[i]["structuredContent"] == result
        ran_on[result["pid"]] += 1
        # working (any number of times), then completed, nothing else
        assert re.fullmatch("w*c+", "".join(status[0] for status in seen[i])), seen[i]
    runs = runs_log(trio)
    assert {t: runs[t] for t in task_ids} == dict.fromkeys(task_ids, 1)  # each body ran exactly once
    assert set(ran_on) == pids


# -- the command line flags this module relies on ---------------------------------------------
# (Regression tests: `main()` once dropped --enqueue-only and --lease-ttl and ignored `worker`.)


async def test_cli_worker_keeps_running(trio: Cluster, extra: Cluster) -> None:
    worker = extra.worker("W")
    extra.ready(worker)  # it printed "mcptasks worker <id> running 4 task tools"
    assert worker.popen.poll() is None


async def test_cli_serve_enqueue_only_runs_nothing_itself(
    trio: Cluster, extra: Cluster, http: httpx2.AsyncClient
) -> None:
    server = extra.serve("S", enqueue_only=True)
    extra.ready(server)
    (client,) = replicas(http, server)
    task_id, created = await client.noop(0)
    assert created["resultType"] == "task" and created["status"] == "working"
    # the trio claims and runs the queued task; the enqueue-only server does not
    assert structured(await terminal(client, task_id))["pid"] in {p.pid for p in trio.procs}


def _heartbeat_expiries(store_url: str) -> dict[str, float]:
    """Every runner's heartbeat expiry (epoch seconds), read from the store's keys or tables."""
    if store_url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(store_url)
        try:
            return {m.decode(): s for m, s in client.zrange("mcptasks:runners", 0, -1, withscores=True)}
        finally:
            client.close()
    import asyncpg

    schema = dict(p.split("=", 1) for p in urlsplit(store_url).query.split("&"))["schema"]

    async def read() -> dict[str, float]:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            rows = await conn.fetch(f'SELECT runner, expires_at FROM "{schema}".runners')
            return {row["runner"]: float(row["expires_at"]) for row in rows}
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, read()).result()


async def test_cli_serve_lease_ttl_is_used(trio: Cluster, extra: Cluster) -> None:
    before = set(_heartbeat_expiries(trio.store))
    server = extra.serve("S")  # --lease-ttl 2
    extra.ready(server)
    expiries = _heartbeat_expiries(trio.store)
    (new,) = set(expiries) - before
    # a heartbeat counts for --lease-ttl seconds (2), not the default 15
    assert expiries[new] - time.time() <= LEASE_TTL + 0.5
