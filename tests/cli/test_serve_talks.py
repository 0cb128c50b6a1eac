"""`mcptasks serve` says what it serves and logs every task transition; unusable stores and
missing extras are one `mcptasks: error:` line; Ctrl-C stops a stdio server (exit 130).

Real processes throughout: the server on 127.0.0.1 or on a pseudo-terminal, the official SDK
client, signals sent to the process. Every wait is bounded and waits for output, never a sleep.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import advertise
from private_servers import as_ordinary_user
from processes import ROOT, clean_env, cli_command, free_port, serving_http
from sdk_helpers import Tasks

from mcptasks.stores.postgres import PostgresTaskStore
from mcptasks.stores.redaction import redact_url
from mcptasks.stores.redis import RedisTaskStore
from mcptasks.stores.url import describe_store

pexpect = pytest.importorskip("pexpect")

EXAMPLES = ROOT / "examples"
HELLO = str(EXAMPLES / "hello.py")
CONFORMANCE = str(EXAMPLES / "conformance_server.py")
EXTENSION_ID = "io.modelcontextprotocol/tasks"
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""


def run_cli(
    *args: str,
    without: str | None = None,
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    unprivileged: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`python -m mcptasks ARGS` to completion, stdin closed (optionally without some packages;
    `unprivileged`: never with root's privileges, see `as_ordinary_user`)."""
    command = cli_command(*args, without=without)
    return subprocess.run(
        as_ordinary_user(command) if unprivileged else command,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        timeout=TIMEOUT,
    )


def one_error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 2 and one `mcptasks: error: ...` line holding every fragment."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mcptasks: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# -- the start-up block and the task log -----------------------------------------------------------


async def run_three_tasks(url: str) -> dict[str, str]:
    """A completed task, a tool error and a failed task; their ids by tool name."""
    ids: dict[str, str] = {}
    async with Client(url, extensions=[advertise(EXTENSION_ID)]) as client:
        tasks = Tasks(client)
        for name, arguments in (
            ("slow_compute", {"seconds": 0.2}),
            ("failing_job", {}),
            ("protocol_error_job", {}),
        ):
            created = await tasks.start(name, arguments)
            ids[name] = created["taskId"]
            await tasks.finish(created["taskId"])
    return ids


def wait_for_lines(log: Path, count: int, contains: str) -> list[str]:
    """The log's lines once `count` of them contain `contains` (polled, bounded)."""
    import time

    deadline = time.monotonic() + TIMEOUT
    while True:
        lines = log.read_text().splitlines()
        if sum(contains in line for line in lines) >= count:
            return lines
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


@pytest.mark.anyio
async def test_a_graceful_stop_on_memory_says_the_running_tasks_are_lost(tmp_path: Path) -> None:
    """On memory:// nothing outlives the process: a `retry_on_crash` task re-queued at a graceful
    stop is logged as lost with the process, a plain one fails naming the shutdown."""
    port = free_port()
    log = tmp_path / "server.log"
    env = clean_env(MCPTASKS_REPLICA_DIR=str(tmp_path))
    with serving_http(ROOT / "tests" / "replica_app.py", port=port, log=log, env=env) as server:
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[advertise(EXTENSION_ID)]) as client:
            tasks = Tasks(client)
            retried = (await tasks.start("idempotent_job", {"seconds": 300}))["taskId"]
            plain = (await tasks.start("work", {"seconds": 300}))["taskId"]
            for task_id in (retried, plain):
                await tasks.wait(task_id, lambda task: bool(task.get("statusMessage")))
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=TIMEOUT)  # uvicorn re-raises the SIGTERM once it has shut down
    text = log.read_text()
    [line] = [line for line in text.splitlines() if f"task {retried} requeued (tool idempotent_job)" in line]
    assert line.endswith("; its task store is not durable (memory): the task is lost when this process exits")
    [line] = [line for line in text.splitlines() if f"task {plain} failed (tool work)" in line]
    assert line.endswith("(code -32603, reason shutdown)"), line


@pytest.mark.anyio
async def test_http_serve_prints_a_start_up_block_and_one_line_per_transition(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    store = f"sqlite:///{tmp_path / 't.db'}"
    with serving_http(CONFORMANCE, port=port, log=log, extra=("--store", store), cwd=tmp_path):
        ids = await run_three_tasks(f"http://127.0.0.1:{port}/mcp")
        lines = wait_for_lines(log, 3, "mcptasks.tasks: task ")
    text = "\n".join(lines)
    assert lines[0] == (
        f"mcptasks {__import__('mcptasks').__version__}: serving 'mcptasks-conformance' "
        f"over Streamable HTTP at http://127.0.0.1:{port}/mcp"
    ), text
    assert f"  store     {store}" in lines
    assert "  tasks     run in this process" in lines
    assert any(line.startswith("  fallback  inline") for line in lines), text
    tools = next(line for line in lines if line.startswith("  tools     "))
    assert "slow_compute (task optional)" in tools and "failing_job (task required)" in tools, tools
    assert "greet (no task)" in tools, tools
    assert "Ctrl-C stops the server." in lines
    assert "StreamableHTTP session manager started" not in text  # the SDK's info chatter is gone
    task_lines = [line for line in lines if "mcptasks.tasks:" in line]
    done, errored, failed = ids["slow_compute"], ids["failing_job"], ids["protocol_error_job"]
    expected = [
        f"task {done} created (tool slow_compute)",
        f"task {done} completed (tool slow_compute) in <s>",
        f"task {errored} created (tool failing_job)",
        f"task {errored} completed with a tool error (tool failing_job) in <s>: the job failed: disk quota exceeded",
        f"task {failed} created (tool protocol_error_job)",
        f"task {failed} failed (tool protocol_error_job) in <s>: backend unavailable (code -32603)",
    ]
    shown = [
        re.sub(r" in \d+\.\d\ds", " in <s>", line.split(" INFO mcptasks.tasks: ", 1)[1])
        for line in task_lines
    ]
    assert shown == expected, text


@pytest.mark.anyio
async def test_json_log_format_is_one_object_per_line(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=("--log-format", "json"), cwd=tmp_path):
        ids = await run_three_tasks(f"http://127.0.0.1:{port}/mcp")
        lines = wait_for_lines(log, 3, '"event": "created"')
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is JSON
    start = records[0]
    assert (start["event"], start["transport"], start["store"]) == ("serving", "http", "memory://")
    assert start["url"] == f"http://127.0.0.1:{port}/mcp"
    assert {"name": "failing_job", "taskSupport": "required"} in start["tools"]
    failed = [r for r in records if r.get("event") == "failed"]
    assert len(failed) == 1, records
    assert failed[0]["task_id"] == ids["protocol_error_job"]
    assert (failed[0]["tool"], failed[0]["status"], failed[0]["code"]) == (
        "protocol_error_job",
        "failed",
        -32603,
    )
    assert failed[0]["detail"] == "backend unavailable"
    assert failed[0]["reason"] == "error"  # the error's data names no reason of its own
    assert isinstance(failed[0]["duration"], float)


@pytest.mark.anyio
async def test_log_level_warning_hides_the_transitions(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=("--log-level", "warning"), cwd=tmp_path):
        await run_three_tasks(f"http://127.0.0.1:{port}/mcp")
    text = log.read_text()
    assert "serving 'mcptasks-conformance'" in text  # the start-up block is always printed
    assert "mcptasks.tasks" not in text, text


def test_store_names_never_show_a_password() -> None:
    assert redact_url("redis://user:s3cret@127.0.0.1:6379/0") == "redis://user:***@127.0.0.1:6379/0"
    assert "s3cret" not in describe_store(RedisTaskStore("redis://:s3cret@127.0.0.1:6379/0"))
    shown = describe_store(PostgresTaskStore("postgresql://app:s3cret@127.0.0.1:5432/test"))
    assert "s3cret" not in shown and "127.0.0.1:5432/test" in shown


# -- Ctrl-C on a stdio server ----------------------------------------------------------------------


def test_ctrl_c_stops_the_stdio_server_on_a_terminal(tmp_path: Path) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mcptasks", "serve", HELLO],
        encoding="utf-8",
        timeout=TIMEOUT,
        env=clean_env(),
        cwd=str(tmp_path),
    )
    child.expect("Ctrl-C stops the server.")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130, (child.exitstatus, child.signalstatus, child.before)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_stops_the_stdio_server_on_a_pipe(tmp_path: Path, signum: int, status: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mcptasks", "serve", HELLO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        seen = b""
        while b"Ctrl-C stops the server." not in seen:
            line = process.stderr.readline()
            assert line, seen
            seen += line
        process.send_signal(signum)
        assert process.wait(timeout=TIMEOUT) == status
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT)


# -- stores that cannot be used --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "worker"])
@pytest.mark.parametrize(
    ("scheme", "package", "extra"),
    [("redis://127.0.0.1:6379/0", "redis", "redis"), ("postgresql://127.0.0.1/test", "asyncpg", "postgres")],
)
def test_a_missing_extra_names_the_pip_command(command: str, scheme: str, package: str, extra: str) -> None:
    done = run_cli(command, HELLO, "--store", scheme, without=package)
    one_error_line(done, f"needs the {package!r} package", f"pip install 'mcptasks[{extra}]'")


def test_a_missing_extra_in_the_served_file_names_the_pip_command(tmp_path: Path) -> None:
    target = tmp_path / "app.py"
    target.write_text(
        'from mcptasks import TaskServer\napp = TaskServer("x", store="redis://127.0.0.1:6379/0")\n'
    )
    one_error_line(run_cli("serve", str(target), without="redis"), "pip install 'mcptasks[redis]'")


@pytest.fixture
def corrupt_db(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not an SQLite database, just some bytes " * 100)
    return path


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_corrupt_sqlite_store_is_one_line(command: str, corrupt_db: Path) -> None:
    done = run_cli(command, HELLO, "--store", f"sqlite:///{corrupt_db}")
    one_error_line(done, f"sqlite:///{corrupt_db}", "not a database", "choose another path")


def test_a_corrupt_store_configured_in_the_file_is_one_line(tmp_path: Path, corrupt_db: Path) -> None:
    target = tmp_path / "app.py"
    target.write_text(
        f'from mcptasks import TaskServer\napp = TaskServer("x", store="sqlite:///{corrupt_db}")\n'
    )
    one_error_line(run_cli("serve", str(target)), "not a database")


def test_a_read_only_sqlite_store_is_one_line(tmp_path: Path) -> None:
    # Run as an ordinary user even under root (CI): root's file access would open the file anyway.
    path = tmp_path / "ro.db"
    sqlite3.connect(path).close()  # an empty file: opening it as a store must write the schema
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        done = run_cli("serve", HELLO, "--store", f"sqlite:///{path}", unprivileged=True)
    finally:
        tmp_path.chmod(0o755)
    line = one_error_line(done)
    assert line == (
        f"mcptasks: error: cannot open the task store sqlite:///{path}: attempt to write a readonly "
        "database; make the file and its directory writable by this user, or choose another path"
    ), done.stderr
    assert done.stdout == ""  # no start-up block: nothing was served
    assert [entry.name for entry in tmp_path.iterdir()] == ["ro.db"]  # no journal, no WAL
    assert path.stat().st_size == 0  # and no schema: the store was not changed


@pytest.mark.parametrize(
    "args",
    [
        ("call", "http://127.0.0.1:9/mcp", "hello"),
        ("tasks", "get", "http://127.0.0.1:9/mcp", "some-task-id"),
        ("tasks", "pending"),
    ],
    ids=["call", "tasks-get", "tasks-pending"],
)
def test_a_corrupt_ledger_is_one_line(args: tuple[str, ...], corrupt_db: Path) -> None:
    done = run_cli(*args, "--ledger", str(corrupt_db))
    one_error_line(done, "ledger", str(corrupt_db), "not a database")


# -- the missing-header hint -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_task_server_apps_name_the_missing_protocol_header() -> None:
    import httpx2
    from sdk_helpers import serve_http

    from mcptasks import TaskServer

    app = TaskServer("hint")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with serve_http(app.streamable_http_app()) as url, httpx2.AsyncClient(timeout=TIMEOUT) as http:
        bare = await http.post(url, json=body, headers=accept)
        versioned = await http.post(url, json=body, headers={**accept, "MCP-Protocol-Version": "2026-07-28"})
    assert bare.status_code == 400
    assert "'MCP-Protocol-Version: 2026-07-28'" in bare.json()["error"]["message"]
    # With the header the server's own answer passes unchanged (here: the missing _meta envelope).
    assert versioned.status_code == 400
    assert "MCP-Protocol-Version" not in versioned.json()["error"]["message"]


def test_only_missing_session_errors_get_the_hint() -> None:
    from mcptasks.server.http_hints import hinted

    assert hinted(b"not json") is None
    assert hinted(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Bad Request: other"}}') is None
    assert hinted(b'{"jsonrpc":"2.0","id":1,"result":{}}') is None
    changed = hinted(
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Missing session ID"}}'
    )
    assert changed is not None
    assert json.loads(changed)["error"]["message"].startswith(
        "Bad Request: Missing session ID (send the header"
    )
