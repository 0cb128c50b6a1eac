"""Helpers of the fault-injection tests (`tests/faults/`): a private PostgreSQL database and its
backend terminator, a client that records every error the server answered, and the check that
every finished body's result was kept.

A real `mcptasks serve` process runs `tests/fault_app.py`; its bodies leave `<task>.ended` files
(with their payload) in a directory of the test's, so the test knows which bodies finished whatever
the store did. Nothing here synchronises by sleeping: waits poll observable state under generous
bounds; the only sleeps are the faults' own durations.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from fault_app import payload
from mcp import Client, MCPError
from processes import clean_env, free_port, listening, postgres_execute, serving_http
from sdk_helpers import BY_HAND, Tasks, tasks_extension

from mcptasks.wire import TERMINAL_STATUSES

APP = Path(__file__).resolve().parent / "fault_app.py"
BOUND = 60.0
"""Upper bound of any wait for an effect (a loaded 2-core machine); never a synchronisation."""
REQUEST_BOUND = 30.0
"""A request met by a fault must still be answered within this (no hang on a dead connection)."""
POSTGRES_URL = os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
POSTGRES_HINT = (
    "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
    "(trust auth, database `test`; or set MCPTASKS_TEST_POSTGRES_URL)"
)
STORE_UNAVAILABLE = "store_unavailable"
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602


# -- the server --------------------------------------------------------------------------------


@dataclass
class FaultServer:
    """One `mcptasks serve tests/fault_app.py` process; its stdout and stderr go to `log`."""

    port: int
    log: Path
    markers: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def lines(self, containing: str) -> list[str]:
        return [line for line in self.output().splitlines() if containing in line]


def faults_env(markers: Path, **extra: str) -> dict[str, str]:
    """The server's environment: evidence in `markers`, every call answered with a task, a body
    waiting for input re-reading its task often (so it meets the faults)."""
    return clean_env(
        MCPTASKS_FAULTS_DIR=str(markers),
        MCPTASKS_IMMEDIATE_RESULTS="false",
        MCPTASKS_INPUT_POLL_INTERVAL="0.2",
        PYTHONUNBUFFERED="1",
        **extra,
    )


@contextmanager
def fault_server(store: str, workdir: Path, *flags: str) -> Iterator[FaultServer]:
    """`mcptasks serve tests/fault_app.py` over HTTP on `store`, stopped afterwards."""
    markers = workdir / "markers"
    markers.mkdir(parents=True, exist_ok=True)
    server = FaultServer(free_port(), workdir / "server.log", markers)
    extra = ("--store", store, *flags)
    with serving_http(APP, port=server.port, log=server.log, extra=extra, env=faults_env(markers)):
        try:
            yield server
        finally:
            print(f"--- server log (tail) ---\n{server.output()[-6000:]}")  # shown for a failed test


# -- the client --------------------------------------------------------------------------------


@dataclass
class FaultClient:
    """`tasks/*` over the official SDK client; every error the server answers is kept in `errors`."""

    tasks: Tasks
    errors: list[MCPError] = field(default_factory=list)

    async def start(self, tool: str, arguments: Mapping[str, Any]) -> str:
        created = await self.tasks.start(tool, arguments)
        return str(created["taskId"])

    async def look(self, task_id: str) -> dict[str, Any] | None:
        """One `tasks/get`: the task, or None when the server answered an error (kept)."""
        try:
            with anyio.fail_after(REQUEST_BOUND):
                return await self.tasks.get(task_id)
        except MCPError as exc:
            self.errors.append(exc)
            return None

    async def poll_for(
        self, task_ids: Iterable[str], seconds: float, *, pollers: int = 4
    ) -> list[dict[str, Any]]:
        """Poll the tasks round robin from `pollers` concurrent callers for `seconds` (while a
        fault lasts); every task seen."""
        ids = list(task_ids)
        seen: list[dict[str, Any]] = []

        deadline = anyio.current_time() + seconds

        async def poller(offset: int) -> None:
            i = offset
            while anyio.current_time() < deadline:
                task = await self.look(ids[i % len(ids)])
                if task is not None:
                    seen.append(task)
                i += pollers
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            for offset in range(pollers):
                group.start_soon(poller, offset)
        return seen

    async def settle(self, task_ids: Iterable[str], *, within: float = BOUND) -> dict[str, dict[str, Any]]:
        """Poll every task until it is terminal or `within` seconds have passed; the last state
        seen of each (`{"status": "never answered"}` for one the server never answered for)."""
        last: dict[str, dict[str, Any]] = {task_id: {"status": "never answered"} for task_id in task_ids}
        deadline = anyio.current_time() + within
        while anyio.current_time() < deadline:
            pending = [i for i, task in last.items() if task["status"] not in TERMINAL_STATUSES]
            if not pending:
                break
            for task_id in pending:
                task = await self.look(task_id)
                if task is not None:
                    last[task_id] = task
            await anyio.sleep(0.05)
        return last

    async def until_answered(self, method: str, call: Any) -> Any:
        """`await call()` until the server answers it rather than refusing it as store_unavailable
        (just after a fault the first requests may still be refused)."""
        with anyio.fail_after(BOUND):
            while True:
                try:
                    return await call()
                except MCPError as exc:
                    self.errors.append(exc)
                    if not isinstance(exc.data, dict) or exc.data.get("reason") != STORE_UNAVAILABLE:
                        raise AssertionError(f"{method} failed: {describe_error(exc)}") from exc
                await anyio.sleep(0.1)


@asynccontextmanager
async def fault_client(url: str) -> AsyncIterator[FaultClient]:
    """An SDK client on `url` that advertises the tasks extension and declares every input capability."""
    async with Client(url, extensions=[tasks_extension()], **BY_HAND) as client:
        yield FaultClient(Tasks(client))


def describe_error(exc: MCPError) -> str:
    return f"code {exc.code}, message {exc.message!r}, data {exc.data!r}"


def store_error_problems(errors: Iterable[MCPError], *, allowed: Iterable[int] = ()) -> list[str]:
    """What is wrong with the errors a client met: each must be -32603 with
    `data.reason == "store_unavailable"` and an integer `data.retryAfterMs` (codes in `allowed`
    are let through: -32602 for a task a wiped store no longer has, say)."""
    problems = []
    let_through = set(allowed)
    for exc in errors:
        if exc.code in let_through:
            continue
        data = exc.data if isinstance(exc.data, dict) else {}
        retry_after = data.get("retryAfterMs")
        if (
            exc.code != INTERNAL_ERROR
            or data.get("reason") != STORE_UNAVAILABLE
            or not isinstance(retry_after, int)
            or isinstance(retry_after, bool)
        ):
            problems.append(describe_error(exc))
    return problems


def assert_store_errors(errors: list[MCPError], *, allowed: Iterable[int] = ()) -> None:
    problems = store_error_problems(errors, allowed=allowed)
    shown = Counter(problems).most_common(5)
    assert not problems, (
        f"{len(problems)} of {len(errors)} errors the client met were not a store_unavailable "
        f"-32603 with an integer retryAfterMs; most common: {shown}"
    )


# -- evidence and the check --------------------------------------------------------------------


def ended_bodies(markers: Path) -> dict[str, dict[str, Any]]:
    """Every `finish` body that reached its end: task id -> `{"n", "tag", "payload"}`."""
    ended = {}
    for path in markers.glob("*.ended"):
        ended[path.name.removesuffix(".ended")] = json.loads(path.read_text(encoding="utf-8"))
    return ended


async def wait_ended(markers: Path, task_ids: Iterable[str], *, within: float = BOUND) -> None:
    """Wait until every one of these tasks' bodies has reached its end."""
    wanted = set(task_ids)
    with anyio.move_on_after(within):
        while not wanted <= set(ended_bodies(markers)):  # noqa: ASYNC110 - the evidence is files
            await anyio.sleep(0.05)
    missing = wanted - set(ended_bodies(markers))
    assert not missing, f"{len(missing)} of {len(wanted)} bodies did not reach their end in {within:g} s"


async def wait_started(markers: Path, task_ids: Iterable[str], *, within: float = BOUND) -> None:
    """Wait until every one of these tasks' bodies has begun (a `<task>.started.<pid>` file)."""
    wanted = set(task_ids)

    def started() -> set[str]:
        return {path.name.partition(".started.")[0] for path in markers.glob("*.started.*")}

    with anyio.move_on_after(within):
        while not wanted <= started():  # noqa: ASYNC110 - the evidence is files
            await anyio.sleep(0.05)
    missing = wanted - started()
    assert not missing, f"{len(missing)} of {len(wanted)} bodies did not begin in {within:g} s"


def failure_of(task: Mapping[str, Any]) -> str:
    error = task.get("error") or {}
    data = error.get("data")
    if not isinstance(data, dict):
        data = {}
    return f"failed ({data.get('reason', 'no reason')}: {error.get('message')!r})"


def kept_problems(
    created: Mapping[str, tuple[str, int]],
    final: Mapping[str, Mapping[str, Any]],
    ended: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """Every task created (`task id -> (tag, n)`) must be completed with its own payload, and every
    body that reached its end (`ended`, from the evidence files) must have its result readable.
    No task may be failed: none of these faults ends a body or takes a lease over."""
    problems = []
    for task_id, (tag, n) in created.items():
        task = final.get(task_id, {"status": "never looked at"})
        status = task["status"]
        body = "its body finished" if task_id in ended else "its body did not finish"
        if status == "failed":
            problems.append(f"{task_id} ({tag} {n}): {failure_of(task)}; {body}")
            continue
        if status != "completed":
            problems.append(f"{task_id} ({tag} {n}): {status}, not completed; {body}")
            continue
        result = task.get("result") or {}
        got = (result.get("structuredContent") or {}).get("payload")
        if result.get("isError") or got != payload(tag, n):
            problems.append(f"{task_id} ({tag} {n}): completed with {result!r}, not its own payload")
        elif task_id in ended and ended[task_id]["payload"] != got:
            problems.append(
                f"{task_id}: the body ended with {ended[task_id]['payload']}, the result has {got}"
            )
    for task_id in set(ended) - set(created):
        problems.append(f"{task_id}: a body ended for a task the client never created")
    return problems


def assert_kept(
    created: Mapping[str, tuple[str, int]],
    final: Mapping[str, Mapping[str, Any]],
    ended: Mapping[str, Mapping[str, Any]],
) -> None:
    problems = kept_problems(created, final, ended)
    statuses = Counter(
        failure_of(task) if task["status"] == "failed" else task["status"] for task in final.values()
    )
    lost = sum(1 for task_id in ended if final.get(task_id, {}).get("status") != "completed")
    assert not problems, (
        f"{lost} of {len(ended)} finished results lost; {len(problems)} of {len(created)} tasks wrong "
        f"(final states: {dict(statuses)}):\n" + "\n".join(problems[:15])
    )


# -- PostgreSQL --------------------------------------------------------------------------------


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


@dataclass(frozen=True)
class PrivateDatabase:
    """A database of its own on the shared PostgreSQL server (whose backends a test may terminate)."""

    name: str
    url: str


@contextmanager
def private_database() -> Iterator[PrivateDatabase]:
    """A uniquely named database on the shared server, dropped (its connections cut) afterwards.
    The shared server itself is never stopped."""
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install asyncpg)")
    if not listening(POSTGRES_URL, 5432):
        pytest.skip(
            f"PostgreSQL is not reachable at {urlsplit(POSTGRES_URL).netloc}; start it with {POSTGRES_HINT}"
        )
    name = f"mcptasks_faults_{uuid.uuid4().hex[:12]}"
    try:
        postgres_execute(POSTGRES_URL, f'CREATE DATABASE "{name}"')
    except Exception as exc:  # no CREATEDB privilege, say
        pytest.skip(f"cannot create a private database on {urlsplit(POSTGRES_URL).netloc}: {exc}")
    try:
        yield PrivateDatabase(name, _with_database(POSTGRES_URL, name))
    finally:
        postgres_execute(POSTGRES_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def terminate_backends(database: str, *, seconds: float, every: float) -> int:
    """Terminate every backend of `database` (but this one) every `every` seconds for `seconds`,
    from a separate connection (what a failover or a pooler restart does); how many were ended."""
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    ended = 0
    deadline = anyio.current_time() + seconds
    try:
        while anyio.current_time() < deadline:
            rows = await conn.fetch(
                "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
            ended += sum(1 for row in rows if row["ended"])
            await anyio.sleep(every)
    finally:
        await conn.close()
    return ended
