"""`mcptasks serve` as a user runs it: real subprocesses, real ports, real stdio.

Errors must be one line on stderr with exit status 2 (no traceback). The serving tests start
the command, wait until it accepts connections (polling, generous deadline), talk to it with the
official SDK client, and always stop it in `finally`.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import advertise
from mcp_types import CallToolRequest, CallToolRequestParams, Result
from processes import clean_env, free_port, serving_http
from pydantic import ConfigDict
from sdk_helpers import answered_by_hand

import mcptasks
from mcptasks.cli.main import build_parser
from mcptasks.client import GetTaskRequest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HELLO = str(EXAMPLES / "hello.py")
CONFORMANCE = str(EXAMPLES / "conformance_server.py")
EXTENSION_ID = "io.modelcontextprotocol/tasks"
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""


def mcptasks_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m mcptasks ARGS` to completion (stdin closed)."""
    return subprocess.run(
        [sys.executable, "-m", "mcptasks", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd or ROOT,
        timeout=TIMEOUT,
    )


def assert_usage_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 2 and exactly one `mcptasks: error: ...` line naming every fragment."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    (line,) = lines
    assert line.startswith("mcptasks: error: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


# -- errors ----------------------------------------------------------------------------------------


def test_missing_target_file() -> None:
    done = mcptasks_cli("serve", "no/such/server.py")
    assert_usage_error(done, "no/such/server.py", "no such file")


def test_target_file_without_the_attribute(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("application = None\n")
    assert_usage_error(
        mcptasks_cli("serve", str(tmp_path / "server.py")), "no attribute 'app'", "TARGET:ATTR"
    )
    assert_usage_error(mcptasks_cli("serve", f"{tmp_path / 'server.py'}:missing"), "no attribute 'missing'")


def test_target_of_the_wrong_type(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("app = 42\n")
    assert_usage_error(mcptasks_cli("serve", str(tmp_path / "server.py")), "int", "TaskServer", "MCPServer")
    assert_usage_error(mcptasks_cli("serve", "json:dumps"), "function", "not a TaskServer")


def test_target_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('no database configured')\n")
    (tmp_path / "syntax.py").write_text("def (:\n")
    assert_usage_error(
        mcptasks_cli("serve", str(tmp_path / "broken.py")), "RuntimeError: no database configured"
    )
    assert_usage_error(mcptasks_cli("serve", str(tmp_path / "syntax.py")), "SyntaxError")


def test_module_targets() -> None:
    assert_usage_error(mcptasks_cli("serve", "no_such_module_for_mcptasks"), "cannot import module")
    assert_usage_error(mcptasks_cli("serve", "json"), "'json' has no attribute 'app'")


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        ("mongodb://x", ("unsupported store URL 'mongodb://x'", "memory://", "sqlite:///")),
        ("sqlite://host/x.db", ("host part", "sqlite:///relative.db", "sqlite:////absolute/path.db")),
        ("memory://somewhere", ("memory://",)),
    ],
)
def test_bad_store_url(url: str, fragments: tuple[str, ...]) -> None:
    assert_usage_error(mcptasks_cli("serve", HELLO, "--store", url), *fragments)
    assert_usage_error(mcptasks_cli("serve", HELLO, env=clean_env(MCPTASKS_STORE=url)), *fragments)


def test_store_option_wins_over_the_environment() -> None:
    done = mcptasks_cli(
        "serve", HELLO, "--store", "sqlite://host/x.db", env=clean_env(MCPTASKS_STORE="mongodb://x")
    )
    assert_usage_error(done, "host part")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite:////nonexistent-mcptasks-dir/t.db", "does not exist"),
        ("redis://127.0.0.1:1/0", "cannot reach Redis"),
    ],
    ids=["sqlite-missing-directory", "redis-unreachable"],
)
def test_store_that_cannot_be_opened(url: str, fragment: str, transport: str) -> None:
    done = mcptasks_cli("serve", HELLO, "--store", url, "--transport", transport, "--port", str(free_port()))
    assert_usage_error(done, fragment)


def test_taken_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = mcptasks_cli("serve", HELLO, "--transport", "http", "--host", "127.0.0.1", "--port", str(port))
    assert_usage_error(done, f"127.0.0.1:{port}", "in use")


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_port_out_of_range(port: str) -> None:
    assert_usage_error(mcptasks_cli("serve", HELLO, "--transport", "http", "--port", port), "--port")


def test_usage_errors_come_from_argparse() -> None:
    done = mcptasks_cli()
    assert done.returncode == 2
    assert "usage: mcptasks" in done.stderr
    done = mcptasks_cli("serve", HELLO, "--transport", "carrier-pigeon")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


# -- entry points ----------------------------------------------------------------------------------


def test_version() -> None:
    done = mcptasks_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mcptasks {mcptasks.__version__}"


def test_the_version_is_the_changelogs() -> None:
    project = (ROOT / "pyproject.toml").read_text()
    [declared] = re.findall(r'^version = "([^"]+)"$', project, re.MULTILINE)
    newest = re.search(r"^## (\S+)", (ROOT / "docs" / "changelog.md").read_text(), re.MULTILINE)
    assert newest is not None
    assert declared == mcptasks.__version__ == newest.group(1)


def test_every_option_has_a_help_text() -> None:
    def missing(parser: argparse.ArgumentParser, name: str) -> Iterator[str]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    yield from missing(subparser, f"{name} {sub}")
            elif action.help is None:
                yield f"{name} {'/'.join(action.option_strings) or action.dest}"

    assert list(missing(build_parser(), "mcptasks")) == []
    shown = mcptasks_cli("serve", "--help").stdout
    assert "Streamable HTTP" in shown and "interface to listen on" in shown


def test_python_dash_m_and_the_console_script_agree() -> None:
    help_text = mcptasks_cli("serve", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--store" in help_text.stdout and "--transport" in help_text.stdout
    script = Path(sys.executable).with_name("mcptasks")
    if not script.exists():
        pytest.skip("the mcptasks console script is not installed next to this interpreter")
    done = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=TIMEOUT, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mcptasks {mcptasks.__version__}"


# -- serving over HTTP -----------------------------------------------------------------------------


class AnyResult(Result):
    model_config = ConfigDict(extra="allow")


def _wire(result: Result) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


async def start_task(client: Client, name: str, arguments: dict[str, Any]) -> str:
    request = CallToolRequest(params=CallToolRequestParams(name=name, arguments=arguments))
    created = _wire(await client.session.send_request(request, AnyResult))
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return _wire(await client.session.send_request(GetTaskRequest.of(task_id), AnyResult))


async def finish(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        while True:
            task = await get_task(client, task_id)
            if task["status"] in ("completed", "failed", "cancelled"):
                return task
            await anyio.sleep(0.05)


@contextmanager
def http_server(
    target: str, tmp_path: Path, *extra: str, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Serve `target` over HTTP in a subprocess (cwd `tmp_path`); yield its MCP URL once it accepts."""
    port = free_port()
    with serving_http(
        target, port=port, log=tmp_path / f"server-{port}.log", extra=extra, env=env, cwd=tmp_path
    ):
        yield f"http://127.0.0.1:{port}/mcp"


async def run_slow_compute(url: str) -> tuple[str, dict[str, Any]]:
    async with Client(url, extensions=[advertise(EXTENSION_ID)]) as client:
        # Not 0 s: a body that never suspends may be answered at once, without a task.
        task_id = await start_task(client, "slow_compute", {"seconds": 0.2})
        return task_id, await finish(client, task_id)


def assert_finished(task: dict[str, Any]) -> None:
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is False
    assert task["result"]["content"][0]["text"] == "compute: finished after 0.2 s"


@pytest.mark.anyio
async def test_http_serve_with_a_sqlite_store_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = f"sqlite:///{db}"  # an absolute path: sqlite:////tmp/.../t.db
    with http_server(CONFORMANCE, tmp_path, "--store", store) as url:
        task_id, task = await run_slow_compute(url)
        assert_finished(task)
        assert db.is_file()
    # A fresh process on the same file still answers tasks/get for the finished task.
    with http_server(CONFORMANCE, tmp_path, "--store", store) as url:
        async with Client(url, extensions=[advertise(EXTENSION_ID)]) as client:
            assert_finished(await get_task(client, task_id))


@pytest.mark.anyio
async def test_http_serve_honours_the_store_environment_variable(tmp_path: Path) -> None:
    env = clean_env(MCPTASKS_STORE="sqlite:///from-env.db")  # relative to the server's cwd
    with http_server(CONFORMANCE, tmp_path, env=env) as url:
        _, task = await run_slow_compute(url)
        assert_finished(task)
    assert (tmp_path / "from-env.db").is_file()


@pytest.mark.anyio
async def test_http_serve_of_the_job_runner(tmp_path: Path) -> None:
    env = clean_env(JOB_RUNNER_STEPS_TEST=json.dumps([[sys.executable, "-c", "print(42)"]]))
    with http_server(str(EXAMPLES / "job_runner.py"), tmp_path, env=env) as url:
        # The callback declares `elicitation`: the approval question is only asked of such clients.
        async with Client(
            url, extensions=[advertise(EXTENSION_ID)], elicitation_callback=answered_by_hand
        ) as client:
            task_id = await start_task(client, "run_pipeline", {"kind": "test"})
            with anyio.fail_after(TIMEOUT):
                while (task := await get_task(client, task_id))["status"] != "input_required":
                    assert task["status"] == "working", task
                    await anyio.sleep(0.05)
            assert task["statusMessage"].endswith("waiting for approval to publish")


# -- serving over stdio ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "mcptasks", "serve", HELLO],
        [sys.executable, HELLO],
    ],
    ids=["mcptasks-serve", "python-file"],
)
async def test_stdio_serve_of_hello(command: list[str], tmp_path: Path) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(tmp_path), env=clean_env())
    async with Client(params, extensions=[advertise(EXTENSION_ID)]) as client:
        task_id = await start_task(client, "hello", {"name": "stdio"})
        task = await finish(client, task_id)
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "Hello, stdio!"


@pytest.mark.anyio
async def test_stdio_serve_of_the_job_runner_lists_its_tool(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(EXAMPLES / "job_runner.py")], cwd=str(tmp_path), env=clean_env()
    )
    async with Client(params, extensions=[advertise(EXTENSION_ID)]) as client:
        listed = await client.list_tools()
    (tool,) = listed.tools
    assert tool.name == "run_pipeline"
    assert tool.input_schema["properties"]["kind"]["enum"] == ["test", "build"]
    assert (tool.meta or {})[EXTENSION_ID] == {"taskSupport": "optional"}


# -- configuration ---------------------------------------------------------------------------------


def test_invalid_flag_values_name_the_field() -> None:
    assert_usage_error(mcptasks_cli("serve", HELLO, "--lease-ttl", "0"), "EngineConfig.lease_ttl", "0")


def test_invalid_worker_concurrency_names_the_field(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    done = mcptasks_cli("worker", HELLO, "--store", store, "--concurrency", "0")
    assert_usage_error(done, "EngineConfig.max_concurrent", "0")


def test_an_unparsable_environment_variable_is_named(tmp_path: Path) -> None:
    done = mcptasks_cli("serve", HELLO, env=clean_env(MCPTASKS_POLL_LIMIT="sometimes"))
    assert_usage_error(done, "MCPTASKS_POLL_LIMIT", "sometimes")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "mcptasks", "serve", HELLO],
        [sys.executable, HELLO],
    ],
    ids=["mcptasks-serve", "python-file"],
)
async def test_the_environment_configures_a_server_built_without_config(
    command: list[str], tmp_path: Path
) -> None:
    env = clean_env(MCPTASKS_FALLBACK="reject")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(tmp_path), env=env)
    async with Client(params) as client:  # no tasks extension: "reject" refuses the call
        with pytest.raises(MCPError) as refused:
            await client.call_tool("hello", {"name": "stdio"})
    assert refused.value.error.code == -32021
