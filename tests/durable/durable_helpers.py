"""Helpers of the durable-body proof tests: real `mcptasks serve tests/durable_app.py` processes
on a real store, stopped (SIGTERM) or killed (SIGKILL) and started again, an SDK client per
process, and the counter files the bodies leave (see `tests/durable_app.py`).

Nothing here synchronises by sleeping: every wait polls observable state (a port, a counter
file, `tasks/get`) under a generous bound, so a loaded 2-core machine only makes a test slower.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from durable_app import read_events
from mcp import Client
from processes import ROOT, ServerProcess, clean_env, free_port, listening, postgres_execute, wait_accepting
from sdk_helpers import BY_HAND, Tasks, tasks_extension

from mcptasks._runtime.operator import open_store

APP = "tests/durable_app.py"
BOUND = 60.0
"""Upper bound of any wait for an effect; never a synchronisation."""
STOP_BOUND = 30.0
"""Seconds a SIGTERMed server may take to shut down gracefully before the test calls it hung."""
LOCAL_LEASE = 30.0
"""The lease of the single-host (SQLite) servers: long, so that a recovery "at once" (a restart
finding the dead runner's PID gone) is told apart from one that waited for the lease."""

REDIS_URL = os.environ.get("MCPTASKS_DURABLE_REDIS_URL", "redis://127.0.0.1:6379/12")
POSTGRES_URL = os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_HINT = 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
POSTGRES_HINT = (
    "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
    "(trust auth, database `test`; or set MCPTASKS_TEST_POSTGRES_URL)"
)


# -- servers ------------------------------------------------------------------------------------


class Server(ServerProcess):
    """One `mcptasks serve tests/durable_app.py` process; its output goes to `log`."""

    def sigterm(self, signum: int = signal.SIGTERM) -> float:
        """Stop it gracefully (SIGTERM, or SIGINT: Ctrl-C) and wait for its exit; the seconds
        that took. Fails when it does not exit within `STOP_BOUND` or exits with an error (a
        graceful stop logs `requeued` for each durable task it hands over)."""
        started = time.monotonic()
        self.popen.send_signal(signum)
        try:
            code = self.popen.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=STOP_BOUND)
            pytest.fail(
                f"{self.name} did not stop within {STOP_BOUND} s of {signal.Signals(signum).name}:\n"
                f"{self.output()[-4000:]}"
            )
        # 0, or the signal: uvicorn re-raises it after its graceful shutdown (130: KeyboardInterrupt)
        assert code in (0, -signum, 128 + signum), (
            f"{self.name} exited with {code} after {signal.Signals(signum).name}:\n{self.output()[-4000:]}"
        )
        return time.monotonic() - started


class Worker(ServerProcess):
    """One `mcptasks worker` process (no port)."""

    def wait_ready(self) -> None:
        """Wait for its start-up line (printed once it takes work)."""
        deadline = time.monotonic() + BOUND
        while "mcptasks worker " not in self.output():
            if self.popen.poll() is not None:
                pytest.fail(f"{self.name} exited with {self.popen.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} did not start within {BOUND} s:\n{self.output()}")
            time.sleep(0.05)


@dataclass
class Servers:
    """Starts servers on one store; every process it started is ended afterwards."""

    store: str
    workdir: Path
    counters: Path
    lease_ttl: float = LOCAL_LEASE
    started: list[Server] = field(default_factory=list)

    def start(self, name: str, *, variant: str = "a", foreign: bool = False) -> Server:
        """`mcptasks serve` on a free port, returned once it accepts connections.

        `foreign`: the server gets an instance id of the user's (`MCPTASKS_INSTANCE_ID`), which
        no other process judges by its PID, as if it ran on another machine: its tasks count as
        lost only when its lease runs out.
        """
        port = free_port()
        log = self.workdir / f"{name}.log"
        argv = [sys.executable, "-m", "mcptasks", "serve", APP, "--transport", "http"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--store", self.store]
        argv += ["--lease-ttl", str(self.lease_ttl)]
        env = clean_env(
            MCPTASKS_DURABLE_DIR=str(self.counters),
            MCPTASKS_DURABLE_VARIANT=variant,
            MCPTASKS_IMMEDIATE_RESULTS="false",
            PYTHONUNBUFFERED="1",
        )
        if foreign:
            env["MCPTASKS_INSTANCE_ID"] = f"{name}-{uuid.uuid4().hex[:8]}"
        with log.open("wb") as output:
            popen = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )
        server = Server(name, popen, log, port)
        self.started.append(server)
        wait_accepting(popen, port, log)
        return server

    def close(self) -> None:
        for server in self.started:
            if server.popen.poll() is None:
                server.popen.send_signal(signal.SIGTERM)
        for server in self.started:
            try:
                server.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.popen.kill()
                server.popen.wait(timeout=15)

    def logs(self) -> str:
        return "\n".join(f"--- {s.name} (pid {s.pid}) ---\n{s.output()[-4000:]}" for s in self.started)


@contextmanager
def servers_on(store: str, workdir: Path, *, lease_ttl: float = LOCAL_LEASE) -> Iterator[Servers]:
    counters = workdir / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    servers = Servers(store, workdir, counters, lease_ttl)
    try:
        yield servers
    finally:
        servers.close()
        print(servers.logs())  # pytest shows it for a failed test only


@asynccontextmanager
async def client_of(server: Server) -> AsyncIterator[Tasks]:
    """An SDK client on `server` that advertises the tasks extension and declares every input
    capability (the tests answer questions by hand through `tasks/update`)."""
    async with Client(server.url, extensions=[tasks_extension()], **BY_HAND) as client:
        yield Tasks(client)


# -- stores -------------------------------------------------------------------------------------


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'tasks.db'}"


def skip_unless_redis() -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")
    if not listening(REDIS_URL, 6379):
        pytest.skip(f"no Redis at {urlsplit(REDIS_URL).netloc}; start one with: {REDIS_HINT}")


def skip_unless_postgres() -> None:
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install asyncpg)")
    if not listening(POSTGRES_URL, 5432):
        pytest.skip(
            f"PostgreSQL is not reachable at {urlsplit(POSTGRES_URL).netloc}; start it with {POSTGRES_HINT}"
        )


@contextmanager
def shared_store(backend: str) -> Iterator[str]:
    """A store URL on the shared Redis or PostgreSQL server that nobody else uses: a fresh key
    prefix (deleted afterwards) or a fresh schema (dropped afterwards)."""
    name = f"mcptasks_durable_{uuid.uuid4().hex[:12]}"
    if backend == "postgres":
        skip_unless_postgres()
        try:
            yield f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}schema={name}"
        finally:
            postgres_execute(POSTGRES_URL, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        return
    skip_unless_redis()
    import redis

    try:
        yield f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}prefix={name}"
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=f"{name}:*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


async def stored(store: str, task_id: str) -> tuple[Any, list[dict[str, Any]]]:
    """The task's record and its journal (entries parsed), read from the store itself."""
    import json

    async with open_store(store) as opened:
        record = await opened.get(task_id)
        journal = [json.loads(text) for text in await opened.read_journal(task_id)]  # type: ignore[attr-defined]
    return record, journal


# -- counters -----------------------------------------------------------------------------------


def runs(counters: Path, task_id: str) -> Counter[tuple[str, str]]:
    """How often each `(what, event)` was written for the task, over every process."""
    return Counter((what, event) for what, event, _ in events_in(counters, task_id))


def events_in(counters: Path, task_id: str) -> list[tuple[str, str, int]]:
    """The task's counter lines, `(what, event, pid)`, read from the test's counter directory."""
    return read_events(counters / f"{task_id}.runs")


def body_pids(counters: Path, task_id: str) -> list[int]:
    """The processes the task's body started in, in order (one per run or replay)."""
    return [pid for what, event, pid in events_in(counters, task_id) if (what, event) == ("body", "start")]


async def until(check: Callable[[], Any], what: str, *, bound: float = BOUND) -> Any:
    """Poll `check()` until it returns something truthy; return it (fail after `bound` seconds)."""
    last: Any = None
    with anyio.move_on_after(bound):
        while True:
            last = check()
            if last:
                return last
            await anyio.sleep(0.05)
    raise AssertionError(f"timed out after {bound} s waiting for {what}; last: {last!r}")


def assert_once(counters: Path, task_id: str, *steps: str) -> None:
    """Each of `steps` began and returned exactly once for the task, over every process."""
    counted = runs(counters, task_id)
    for step in steps:
        assert (counted[(step, "start")], counted[(step, "end")]) == (1, 1), (
            f"step {step!r} ran {counted[(step, 'start')]} times: {events_in(counters, task_id)}"
        )
