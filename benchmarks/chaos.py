"""Chaos soak: two `mcptasks serve` replicas on one private store, broken at random (seeded) moments
while a steady mix of tasks runs. Is any finished result lost, any answer wrong?

    python benchmarks/chaos.py                                  # 10 min on PostgreSQL, then 10 on Redis
    python benchmarks/chaos.py --minutes 2 --store redis --seed 7 --json chaos.json

Everything is private and on 127.0.0.1: the store is a PostgreSQL cluster of its own (`initdb` in
a temporary directory, as the `postgres` user when run as root; without the server binaries, a
private database on `--postgres-url`, and no restarts) or a `redis-server` of its own with an
append-only file (`appendfsync always`). The replicas run `tests/fault_app.py` (`mcptasks serve
... --lease-ttl 10`), whose bodies leave evidence files (started, ended with their payload).

- Load: `--clients` concurrent loops (default 10), each creating one task at a time on a random
  replica and following it to its end by `tasks/get` (every 0.25 s, from either replica): short
  tasks (`finish`, 0.05-0.3 s, 60 %), long ones (`finish`, 3-8 s, 25 %) and tasks waiting for input
  (`ask`, answered by `tasks/update`, 15 %). Bounded: one task per loop in flight, each followed for
  at most 3 minutes.
- Faults, one at a time, 8-25 s apart (seeded), in rounds of four in a shuffled order (two
  terminations, a store restart, a replica kill): backend terminations (PostgreSQL
  `pg_terminate_backend` of every backend of the database, Redis `CLIENT KILL` of every client,
  every 0.15 s for 1-4 s); a store restart (SIGKILL of Redis, `pg_ctl -m immediate stop` of
  PostgreSQL: a crash; down 1-3 s); a `kill -9` of one replica (restarted on its port after 1-3 s).
- After `--minutes` the load and the faults stop, the tasks in flight are followed to their end,
  and every task is read again.

Report (printed, and `--json`): tasks created, completed, failed by reason; results lost (target
0: a task the client saw complete whose result is no longer readable or differs, or a body that
finished, by its evidence file, whose task is not completed with its payload, unless its replica
was killed before the end could be written, counted apart); wrong answers (target 0: a result
that is not its own task's payload, or an input task whose result is not the answer given);
failures without a cause (a failure other than `worker_lost` of a task whose replica was killed);
-32603 answers without `data.reason: "store_unavailable"` (target 0); `tasks/get` latency p50/p99
during faults (a request started in a fault or the 2 s after it) and outside them; request errors
by kind; the RSS of each replica every 5 s.
"""

from __future__ import annotations

import os
import sys

# Run as `python benchmarks/chaos.py`, this directory comes first on sys.path and `http.py` here
# would shadow the standard library's `http` module.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)
# The private store servers of the fault tests, and their free-port helper.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

import argparse
import asyncio
import contextlib
import glob
import importlib.util
import itertools
import json
import logging
import platform
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil  # type: ignore[import-untyped]
from private_servers import PrivatePostgres, PrivateRedis
from processes import free_port

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "fault_app.py"
VERSION = "2026-07-28"
EXTENSION_ID = "io.modelcontextprotocol/tasks"
LEASE_TTL = 10.0
STARTUP = 90.0
"""Seconds a replica or a store may take to accept connections."""
FOLLOW = 180.0
"""Seconds a client follows one task before it counts as unfinished."""
DRAIN = 200.0
"""Seconds the tasks in flight may take to end after the load stopped."""
FAULT_TAIL = 2.0
"""Seconds after a fault during which `tasks/get` still counts as "during faults"."""
POLL = 0.25
RSS_EVERY = 5.0
TERMINATE_EVERY = 0.15
INVALID_PARAMS = -32602


def _load_payload() -> Callable[[str, int], str]:
    spec = importlib.util.spec_from_file_location("chaos_fault_app", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function: Callable[[str, int], str] = module.payload
    return function


def wait_listening(port: int, process: subprocess.Popen[bytes] | None = None, what: str = "server") -> None:
    deadline = time.monotonic() + STARTUP
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: nothing listens on port {port} after {STARTUP:g} s") from None
            time.sleep(0.05)


# -- stores ----------------------------------------------------------------------------------------


class RedisStore:
    """A private `redis-server` with AOF (`appendfsync always`) on its own port and directory."""

    kind = "redis"
    restartable = True

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is not installed")
        self.directory = Path(tempfile.mkdtemp(prefix="mcptasks-chaos-redis-"))
        self.server = PrivateRedis(self.directory)
        self.port = self.server.port
        self.url = self.server.url

    def start(self) -> None:
        self.server.start()

    def crash(self) -> None:
        self.server.kill()

    async def cut_connections(self) -> int:
        import redis.asyncio as aioredis

        client = aioredis.Redis(host="127.0.0.1", port=self.port)
        try:
            normal = await client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")  # type: ignore[no-untyped-call]
            pubsub = await client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")  # type: ignore[no-untyped-call]
            return int(normal) + int(pubsub)
        finally:
            await client.aclose()

    def close(self) -> None:
        self.crash()
        shutil.rmtree(self.directory, ignore_errors=True)


class PostgresStore:
    """A PostgreSQL cluster of its own (`initdb`), database `chaos`; `crash()` is an immediate stop."""

    kind = "postgres"
    restartable = True
    database = "chaos"

    def __init__(self, bindir: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="mcptasks-chaos-pg-"))
        self.server = PrivatePostgres(self.directory, bindir)
        self.server.init()
        self.port = self.server.port
        self.admin = self.server.url
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> None:
        self.server.start()

    def create_database(self) -> None:
        asyncio.run(_execute(self.admin, f'CREATE DATABASE "{self.database}"'))

    def crash(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.server.kill()

    async def cut_connections(self) -> int:
        return await _terminate(self.admin, self.database)

    def close(self) -> None:
        self.crash()
        shutil.rmtree(self.directory, ignore_errors=True)


class SharedPostgresDatabase:
    """A private database on a PostgreSQL server this benchmark must not stop: no restarts."""

    kind = "postgres"
    restartable = False

    def __init__(self, server_url: str) -> None:
        self.admin = server_url
        self.database = f"mcptasks_chaos_{uuid.uuid4().hex[:12]}"
        base, _, _ = server_url.rpartition("/")
        self.url = f"{base}/{self.database}"

    def start(self) -> None:
        asyncio.run(_execute(self.admin, f'CREATE DATABASE "{self.database}"'))

    def crash(self) -> None:
        raise RuntimeError("the shared PostgreSQL server is never stopped")

    async def cut_connections(self) -> int:
        return await _terminate(self.admin, self.database)

    def close(self) -> None:
        asyncio.run(_execute(self.admin, f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'))


async def _execute(url: str, sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _terminate(admin: str, database: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(admin)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
        return sum(1 for row in rows if row["ended"])
    finally:
        await conn.close()


Store = RedisStore | PostgresStore | SharedPostgresDatabase


def make_store(kind: str, postgres_url: str) -> Store:
    if kind == "redis":
        store: Store = RedisStore()
        store.start()
        return store
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found and (os.geteuid() != 0 or shutil.which("runuser") is not None):
        cluster = PostgresStore(Path(found[-1]).parent)
        cluster.start()
        cluster.create_database()
        return cluster
    print(f"no PostgreSQL server binaries: a private database on {postgres_url}, without store restarts")
    shared = SharedPostgresDatabase(postgres_url)
    shared.start()
    return shared


# -- replicas --------------------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    port: int
    store: str
    workdir: Path
    markers: Path
    process: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)
    ready: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPTASKS_")}
        env.update(
            MCPTASKS_FAULTS_DIR=str(self.markers),
            MCPTASKS_IMMEDIATE_RESULTS="false",
            MCPTASKS_INPUT_POLL_INTERVAL="0.5",
            PYTHONUNBUFFERED="1",
        )
        command = [sys.executable, "-m", "mcptasks", "serve", str(APP), "--transport", "http"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--store", self.store]
        command += ["--lease-ttl", str(LEASE_TTL)]
        log = self.workdir / f"{self.name}-{len(self.pids)}.log"
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=ROOT
            )
        self.pids.append(self.process.pid)
        wait_listening(self.port, self.process, f"replica {self.name}")
        self.ready = True

    def kill9(self) -> int:
        assert self.process is not None
        pid = self.process.pid
        self.ready = False
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        return pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)

    def rss(self) -> int | None:
        if not self.ready or self.process is None or self.process.poll() is not None:
            return None
        try:
            return int(psutil.Process(self.process.pid).memory_info().rss)
        except psutil.Error:
            return None


# -- the client ------------------------------------------------------------------------------------

_ids = itertools.count(1)
CAPABILITIES: dict[str, Any] = {"extensions": {EXTENSION_ID: {}}, "elicitation": {}}
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "mcptasks-chaos", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
}
NAME_FIELD = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId"}


def _data_of(error: dict[str, Any]) -> dict[str, Any]:
    data = error.get("data")
    return data if isinstance(data, dict) else {}


class Unreachable(Exception):
    """No HTTP answer (connection refused or reset, a timeout): the replica is down or hung."""


@dataclass
class Sample:
    start: float
    seconds: float
    outcome: str


@dataclass
class Tracked:
    task_id: str
    kind: str
    tag: str
    n: int
    created: float
    answer: str | None = None
    answered: bool = False
    final: dict[str, Any] | None = None


@dataclass
class Soak:
    store: Store
    replicas: list[Replica]
    tag: str
    payload: Callable[[str, int], str]
    http: httpx2.AsyncClient
    stop_load: float
    created: dict[str, Tracked] = field(default_factory=dict)
    create_errors: Counter[str] = field(default_factory=Counter)
    request_errors: Counter[str] = field(default_factory=Counter)
    gets: list[Sample] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    killed: list[tuple[int, float]] = field(default_factory=list)
    rss: list[dict[str, Any]] = field(default_factory=list)
    counter: Iterator[int] = field(default_factory=itertools.count)

    async def send(self, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC request: the answering message (a result or an error)."""
        request_id = next(_ids)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        name = params.get(NAME_FIELD.get(method, ""))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
        try:
            response = await self.http.post(url, content=json.dumps(body), headers=headers)
        except httpx2.TransportError as exc:
            raise Unreachable(type(exc).__name__) from exc
        text = response.text
        try:
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
                message: dict[str, Any] = next(f for f in frames if f.get("id") == request_id)
            else:
                message = json.loads(text)
        except (ValueError, StopIteration):
            message = {"error": {"code": response.status_code, "message": text[:200]}}
        return message

    def error_kind(self, message: dict[str, Any]) -> str:
        error = message.get("error") or {}
        data = _data_of(error)
        return f"{error.get('code')} {data.get('reason') or error.get('message', '')[:60]}"

    async def create(self, rng: random.Random, kind: str, n: int) -> Tracked | None:
        if kind == "ask":
            tool, arguments = "ask", {"tag": self.tag, "n": n}
        else:
            seconds = rng.uniform(0.05, 0.3) if kind == "short" else rng.uniform(3.0, 8.0)
            tool, arguments = "finish", {"tag": self.tag, "n": n, "seconds": round(seconds, 3)}
        order = rng.sample(self.replicas, len(self.replicas))
        for replica in order:
            try:
                message = await self.send(replica.url, "tools/call", {"name": tool, "arguments": arguments})
            except Unreachable as exc:
                self.request_errors[f"tools/call unreachable ({exc})"] += 1
                continue
            result = message.get("result")
            if result is None:
                self.create_errors[self.error_kind(message)] += 1
                return None
            if result.get("resultType") != "task":
                self.create_errors[f"not a task: {str(result)[:80]}"] += 1
                return None
            tracked = Tracked(str(result["taskId"]), kind, self.tag, n, time.monotonic())
            if kind == "ask":
                tracked.answer = f"answer {n} {self.payload(self.tag, n)[:8]}"
            self.created[tracked.task_id] = tracked
            return tracked
        return None

    async def get(self, rng: random.Random, task_id: str, *, record: bool = True) -> dict[str, Any] | None:
        replica = rng.choice(self.replicas)
        start = time.monotonic()
        try:
            message = await self.send(replica.url, "tasks/get", {"taskId": task_id})
        except Unreachable as exc:
            self.request_errors[f"tasks/get unreachable ({exc})"] += 1
            return None
        seconds = time.monotonic() - start
        if "result" in message:
            if record:
                self.gets.append(Sample(start, seconds, "ok"))
            return dict(message["result"])
        kind = self.error_kind(message)
        self.request_errors[f"tasks/get {kind}"] += 1
        if record:
            self.gets.append(Sample(start, seconds, kind))
        if (message.get("error") or {}).get("code") == INVALID_PARAMS:
            return {"status": "unknown", "error": message["error"]}
        return None

    async def answer(self, rng: random.Random, tracked: Tracked, task: dict[str, Any]) -> None:
        keys = list(task.get("inputRequests") or {})
        if not keys:
            return
        responses = {key: {"action": "accept", "content": {"value": tracked.answer}} for key in keys}
        replica = rng.choice(self.replicas)
        try:
            message = await self.send(
                replica.url, "tasks/update", {"taskId": tracked.task_id, "inputResponses": responses}
            )
        except Unreachable as exc:
            self.request_errors[f"tasks/update unreachable ({exc})"] += 1
            return
        if "result" in message:
            tracked.answered = True
        else:
            self.request_errors[f"tasks/update {self.error_kind(message)}"] += 1

    async def follow(self, rng: random.Random, tracked: Tracked) -> None:
        deadline = tracked.created + FOLLOW
        while time.monotonic() < deadline:
            await anyio.sleep(POLL)
            task = await self.get(rng, tracked.task_id)
            if task is None:
                continue
            status = task.get("status")
            if status in ("completed", "failed", "cancelled", "unknown"):
                tracked.final = task
                return
            if status == "input_required" and tracked.kind == "ask":
                await self.answer(rng, tracked, task)

    async def client_loop(self, index: int, seed: int) -> None:
        rng = random.Random(f"{seed}:client:{index}")
        while time.monotonic() < self.stop_load:
            kind = rng.choices(["short", "long", "ask"], weights=[60, 25, 15])[0]
            tracked = await self.create(rng, kind, next(self.counter))
            if tracked is None:
                await anyio.sleep(0.2)
                continue
            await self.follow(rng, tracked)

    # -- faults --

    async def fault_loop(self, seed: int, min_gap: float, max_gap: float) -> None:
        rng = random.Random(f"{seed}:faults")
        # Terminations (every failover, pooler restart or idle timeout) come twice per round.
        kinds = ["terminate", "terminate", "replica_kill"] + (
            ["store_restart"] if self.store.restartable else []
        )
        order: list[str] = []
        while True:
            gap = rng.uniform(min_gap, max_gap)
            if time.monotonic() + gap + 8 > self.stop_load:
                return
            await anyio.sleep(gap)
            if not order:
                order = rng.sample(kinds, len(kinds))
            kind = order.pop()
            start = time.monotonic()
            detail = await getattr(self, f"_{kind}")(rng)
            self.faults.append({"kind": kind, "start": start, "end": time.monotonic(), **detail})

    async def _terminate(self, rng: random.Random) -> dict[str, Any]:
        seconds = rng.uniform(1.0, 4.0)
        deadline = time.monotonic() + seconds
        ended = rounds = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                ended += await self.store.cut_connections()
            rounds += 1
            await anyio.sleep(TERMINATE_EVERY)
        return {"seconds": round(seconds, 2), "rounds": rounds, "connections_ended": ended}

    async def _store_restart(self, rng: random.Random) -> dict[str, Any]:
        down = rng.uniform(1.0, 3.0)
        await anyio.to_thread.run_sync(self.store.crash)
        await anyio.sleep(down)
        await anyio.to_thread.run_sync(self.store.start)
        return {"down": round(down, 2)}

    async def _replica_kill(self, rng: random.Random) -> dict[str, Any]:
        replica = rng.choice(self.replicas)
        down = rng.uniform(1.0, 3.0)
        pid = replica.kill9()
        self.killed.append((pid, time.time()))
        await anyio.sleep(down)
        await anyio.to_thread.run_sync(replica.start)
        return {"replica": replica.name, "pid": pid, "down": round(down, 2)}

    async def rss_loop(self, until: float, started: float) -> None:
        while time.monotonic() < until:
            for replica in self.replicas:
                value = replica.rss()
                if value is not None and replica.process is not None:
                    self.rss.append(
                        {
                            "t": round(time.monotonic() - started, 1),
                            "replica": replica.name,
                            "pid": replica.process.pid,
                            "rss_mb": round(value / 2**20, 1),
                        }
                    )
            await anyio.sleep(RSS_EVERY)


# -- the run ---------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _in_fault(start: float, faults: list[dict[str, Any]]) -> bool:
    return any(f["start"] <= start <= f["end"] + FAULT_TAIL for f in faults)


async def _reread(soak: Soak, task_id: str) -> dict[str, Any] | None:
    """The task as the store has it now (retrying a store that is still reconnecting)."""
    rng = random.Random(task_id)
    for _ in range(40):
        task = await soak.get(rng, task_id, record=False)
        if task is not None:
            return task
        await anyio.sleep(0.25)
    return None


def _evidence(markers: Path, tag: str) -> tuple[dict[str, dict[str, Any]], dict[str, set[int]]]:
    ended: dict[str, dict[str, Any]] = {}
    started: dict[str, set[int]] = {}
    for path in markers.iterdir():
        name = path.name
        if name.endswith(".ended"):
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("tag") == tag:
                ended[name.removesuffix(".ended")] = data
        elif ".started." in name:
            task_id, _, pid = name.rpartition(".started.")
            started.setdefault(task_id, set()).add(int(pid))
    return ended, started


def _payload_problem(soak: Soak, tracked: Tracked, task: dict[str, Any]) -> str | None:
    """Why a completed task's result is not its own (None when it is)."""
    result = task.get("result") or {}
    content = result.get("structuredContent") or {}
    if result.get("isError"):
        return f"a tool error: {result}"
    if content.get("payload") != soak.payload(tracked.tag, tracked.n) or content.get("n") != tracked.n:
        return f"not its payload: {content}"
    if tracked.kind == "ask" and content.get("answer") != {"value": tracked.answer}:
        return f"not the answer given ({tracked.answer!r}): {content.get('answer')}"
    return None


async def verify(soak: Soak, markers: Path) -> dict[str, Any]:
    ended, started = _evidence(markers, soak.tag)
    killed = soak.killed
    lost: list[str] = []
    wrong: list[str] = []
    lost_with_replica: list[str] = []
    unexplained: list[str] = []
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for task_id, tracked in soak.created.items():
        final = tracked.final
        status = final.get("status") if final else "unfinished"
        statuses[str(status)] += 1
        now = await _reread(soak, task_id)
        if final is not None and status == "completed":
            problem = _payload_problem(soak, tracked, final)
            if problem is not None:
                wrong.append(f"{task_id}: {problem}")
            if now is None or now.get("status") != "completed" or _payload_problem(soak, tracked, now):
                lost.append(f"{task_id}: seen completed, now {now and now.get('status')}")
        if final is not None and status == "failed":
            error = final.get("error") or {}
            data = _data_of(error)
            reason = str(data.get("reason") or error.get("code"))
            reasons[reason] += 1
            pids = started.get(task_id, set())
            if reason != "worker_lost" or not pids & {pid for pid, _ in killed}:
                unexplained.append(f"{task_id} ({tracked.kind}): {reason}: {error.get('message')}")
        if task_id in ended and status != "completed":
            body = ended[task_id]
            if any(pid == body["pid"] and when >= body["time"] for pid, when in killed):
                lost_with_replica.append(task_id)
            else:
                lost.append(f"{task_id}: its body ended, the task is {status}")
    return {
        "statuses": dict(statuses),
        "failed_by_reason": dict(reasons),
        "results_lost": lost,
        "wrong_answers": wrong,
        "lost_with_killed_replica": lost_with_replica,
        "failures_without_cause": unexplained,
        "bodies_ended": len(ended),
    }


async def soak_one(kind: str, args: argparse.Namespace, payload: Callable[[str, int], str]) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"mcptasks-chaos-run-{kind}-"))
    markers = workdir / "markers"
    markers.mkdir()
    store = await anyio.to_thread.run_sync(make_store, kind, args.postgres_url)
    replicas = [Replica(name, free_port(), store.url, workdir, markers) for name in ("A", "B")]
    try:
        for replica in replicas:
            await anyio.to_thread.run_sync(replica.start)
        began = time.monotonic()
        load_ends = began + args.minutes * 60
        tag = f"chaos-{args.seed}-{uuid.uuid4().hex[:6]}"
        async with httpx2.AsyncClient(timeout=30.0) as http:
            soak = Soak(store, replicas, tag, payload, http, load_ends)
            print(
                f"{kind}: {args.minutes:g} min, {args.clients} clients, seed {args.seed}, store {store.url}"
            )
            async with anyio.create_task_group() as group:
                group.start_soon(soak.rss_loop, load_ends + DRAIN, began)
                group.start_soon(soak.fault_loop, args.seed, args.min_gap, args.max_gap)
                async with anyio.create_task_group() as clients:
                    for index in range(args.clients):
                        clients.start_soon(soak.client_loop, index, args.seed)
                drained = time.monotonic()
                checked = await verify(soak, markers)
                group.cancel_scope.cancel()
        report = _report(kind, args, soak, checked, began, load_ends, drained, workdir)
    finally:
        for replica in replicas:
            await anyio.to_thread.run_sync(replica.stop)
        await anyio.to_thread.run_sync(store.close)
    if args.keep:
        print(f"logs and evidence files kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _report(
    kind: str,
    args: argparse.Namespace,
    soak: Soak,
    checked: dict[str, Any],
    began: float,
    load_ends: float,
    drained: float,
    workdir: Path,
) -> dict[str, Any]:
    during = [s.seconds * 1000 for s in soak.gets if _in_fault(s.start, soak.faults)]
    outside = [s.seconds * 1000 for s in soak.gets if not _in_fault(s.start, soak.faults)]
    faults = [
        {**f, "start": round(f["start"] - began, 1), "end": round(f["end"] - began, 1)} for f in soak.faults
    ]
    rss: dict[str, Any] = {}
    for row in soak.rss:
        key = f"{row['replica']} pid {row['pid']}"
        rss.setdefault(key, []).append(row["rss_mb"])
    return {
        "store": kind,
        "store_url": soak.store.url,
        "minutes": args.minutes,
        "seed": args.seed,
        "clients": args.clients,
        "load_seconds": round(load_ends - began, 1),
        "drain_seconds": round(drained - load_ends, 1),
        "tasks_created": len(soak.created),
        "created_by_kind": dict(Counter(t.kind for t in soak.created.values())),
        "create_refused": dict(soak.create_errors),
        **checked,
        "faults": faults,
        "fault_counts": dict(Counter(f["kind"] for f in soak.faults)),
        "tasks_get": {
            "during_faults": {
                "n": len(during),
                "p50_ms": _percentile(during, 0.5),
                "p99_ms": _percentile(during, 0.99),
            },
            "outside_faults": {
                "n": len(outside),
                "p50_ms": _percentile(outside, 0.5),
                "p99_ms": _percentile(outside, 0.99),
            },
        },
        "request_errors": dict(soak.request_errors),
        "errors_without_reason": sum(
            count
            for name, count in (soak.request_errors + soak.create_errors).items()
            if " -32603 " in f" {name} " and "store_unavailable" not in name
        ),
        "rss_series": soak.rss,
        "rss_summary_mb": {
            key: {"first": values[0], "max": max(values), "last": values[-1], "samples": len(values)}
            for key, values in rss.items()
        },
        "workdir": str(workdir) if args.keep else None,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def print_report(report: dict[str, Any]) -> None:
    get = report["tasks_get"]
    rows = [
        (
            "store",
            f"{report['store']} ({report['minutes']:g} min, seed {report['seed']}, {report['clients']} clients)",
        ),
        ("tasks created", f"{report['tasks_created']} {report['created_by_kind']}"),
        ("creates refused", str(report["create_refused"] or 0)),
        ("final states", str(report["statuses"])),
        ("failed by reason", str(report["failed_by_reason"] or 0)),
        ("results lost (target 0)", str(len(report["results_lost"]))),
        ("wrong answers (target 0)", str(len(report["wrong_answers"]))),
        ("failures without a cause (target 0)", str(len(report["failures_without_cause"]))),
        ("-32603 answers without store_unavailable (target 0)", str(report["errors_without_reason"])),
        ("ended just before their replica was killed", str(len(report["lost_with_killed_replica"]))),
        ("faults", str(report["fault_counts"])),
        (
            "tasks/get during faults",
            f"n {get['during_faults']['n']}, p50 {_ms(get['during_faults']['p50_ms'])}, "
            f"p99 {_ms(get['during_faults']['p99_ms'])}",
        ),
        (
            "tasks/get outside faults",
            f"n {get['outside_faults']['n']}, p50 {_ms(get['outside_faults']['p50_ms'])}, "
            f"p99 {_ms(get['outside_faults']['p99_ms'])}",
        ),
        ("drain after the load", f"{report['drain_seconds']} s"),
    ]
    rows += [
        (
            f"RSS {key}",
            f"first {v['first']} MB, max {v['max']} MB, last {v['last']} MB ({v['samples']} samples)",
        )
        for key, v in report["rss_summary_mb"].items()
    ]
    width = max(len(name) for name, _ in rows)
    print()
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    for label in ("results_lost", "wrong_answers", "failures_without_cause"):
        for line in report[label][:10]:
            print(f"  {label}: {line}")
    if report["request_errors"]:
        print("  request errors:")
        for name, count in sorted(report["request_errors"].items(), key=lambda item: -item[1]):
            print(f"    {count:6d}  {name}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="minutes of load and faults per store (default 10)"
    )
    parser.add_argument(
        "--store", choices=["postgres", "redis", "all"], default="all", help="default: both in turn"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault schedule and the task mix")
    parser.add_argument("--clients", type=int, default=10, help="concurrent client loops (default 10)")
    parser.add_argument("--min-gap", type=float, default=8.0, help="shortest pause between faults (s)")
    parser.add_argument("--max-gap", type=float, default=25.0, help="longest pause between faults (s)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="server for a private database when no PostgreSQL binaries are installed",
    )
    parser.add_argument(
        "--json", type=Path, default=Path("chaos.json"), help="report file (default chaos.json)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the replicas' logs and evidence files")
    args = parser.parse_args()
    if args.min_gap <= 0 or args.max_gap < args.min_gap or args.minutes <= 0 or args.clients < 1:
        parser.error("need --minutes > 0, --clients >= 1 and 0 < --min-gap <= --max-gap")
    payload = _load_payload()
    # The SDK, loaded with the app, logs every HTTP request of the client at INFO.
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    kinds = ["postgres", "redis"] if args.store == "all" else [args.store]
    environment = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    reports = []
    for kind in kinds:
        report = anyio.run(soak_one, kind, args, payload)
        print_report(report)
        reports.append(report)
    environment["load_after"] = os.getloadavg()
    args.json.write_text(json.dumps({"environment": environment, "runs": reports}, indent=2, default=str))
    print(f"report written to {args.json}")
    bad = sum(
        len(r["results_lost"])
        + len(r["wrong_answers"])
        + len(r["failures_without_cause"])
        + r["errors_without_reason"]
        for r in reports
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
