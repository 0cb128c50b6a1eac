"""Interop with the MCP Inspector CLI (`@modelcontextprotocol/inspector`, a real third-party client).

The Inspector and Node 22 come from the npm registry into `.inspector/` on first use. Both
protocol eras: `legacy` (2025-11-25: no tasks, calls run inline) and `modern` (2026-07-28: the
Inspector declares the tasks extension but not `elicitation`, so a call runs as a task and is never
asked a question it cannot answer). Servers run as `mcptasks serve` over Streamable HTTP, with a
SQLite store so the test can see whether a call became a task; `tools/list` also runs over stdio.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_tools import install_inspector
from processes import clean_env, free_port, serving_http

ROOT = Path(__file__).resolve().parents[2]
ERAS = ["legacy", "modern"]
FAST_STEP = json.dumps([[sys.executable, "-c", "print('step ok')"]])

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The Inspector CLI command line prefix."""
    node, launcher = install_inspector()
    return [str(node), str(launcher), "--cli"]


def run_inspector(command: list[str], *args: str, home: Path, timeout: float = 180) -> dict[str, Any]:
    """Run the Inspector CLI with `--format json`; return its `result` (failing on an error).

    `home` keeps the Inspector's catalog and client config out of the real home directory.
    """
    env = clean_env(
        HOME=str(home),
        MCP_CATALOG_PATH=str(home / "catalog.json"),
        MCP_CLIENT_CONFIG_PATH=str(home / "client.json"),
        JOB_RUNNER_STEPS_TEST=FAST_STEP,
        JOB_RUNNER_STEPS_BUILD=FAST_STEP,
    )
    run = subprocess.run(
        [*command, "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert run.returncode == 0, f"exit {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    output = json.loads(run.stdout.strip().splitlines()[-1])
    assert "result" in output, output
    result: dict[str, Any] = output["result"]
    return result


def tool_call(era: str, tool: str, arguments: dict[str, Any], url: str, *extra: str) -> list[str]:
    """Inspector arguments calling `tool` with `arguments` on the server at `url` in `era`."""
    return [
        "--protocol-era",
        era,
        "--method",
        "tools/call",
        "--tool-name",
        tool,
        "--tool-args-json",
        json.dumps(arguments),
        *extra,
        "--server-url",
        url,
    ]


class Server:
    """An `mcptasks serve` process over HTTP with a SQLite store the test can read."""

    def __init__(self, url: str, database: Path) -> None:
        self.url = url
        self.database = database

    def tasks(self) -> list[tuple[str, str]]:
        """(tool, status) of every task the server created."""
        with sqlite3.connect(self.database) as db:
            return [(str(t), str(s)) for t, s in db.execute("SELECT tool, status FROM tasks")]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Any] = []

    def start(example: str, **env: str) -> Server:
        database = tmp_path / f"{example}-{len(started)}.db"
        port = free_port()
        context = serving_http(
            ROOT / "examples" / f"{example}.py",
            port=port,
            log=tmp_path / f"{example}-{len(started)}.log",
            extra=("--store", f"sqlite:///{database}"),
            env=clean_env(**env),
        )
        context.__enter__()
        started.append(context)
        return Server(f"http://127.0.0.1:{port}/mcp", database)

    yield start
    for context in reversed(started):
        context.__exit__(None, None, None)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("example", ["hello", "job_runner"])
def test_tools_list_over_stdio(inspector: list[str], tmp_path: Path, era: str, example: str) -> None:
    target = [sys.executable, "-m", "mcptasks", "serve", f"examples/{example}.py"]
    listed = run_inspector(inspector, "--protocol-era", era, "--method", "tools/list", *target, home=tmp_path)
    tools = {tool["name"]: tool for tool in listed["tools"]}
    name = "hello" if example == "hello" else "run_pipeline"
    assert set(tools) == {name}
    assert tools[name]["_meta"]["io.modelcontextprotocol/tasks"] == {"taskSupport": "optional"}
    assert tools[name]["inputSchema"]["type"] == "object"


@pytest.mark.parametrize("era", ERAS)
def test_hello_call(inspector: list[str], serve: Any, tmp_path: Path, era: str) -> None:
    server = serve("hello")
    result = run_inspector(
        inspector, *tool_call(era, "hello", {"name": "Inspector"}, server.url), home=tmp_path
    )
    assert result["isError"] is False
    assert [block["text"] for block in result["content"]] == ["Hello, Inspector!"]
    assert server.tasks() == ([("hello", "completed")] if era == "modern" else [])


@pytest.mark.parametrize("era", ERAS)
def test_job_runner_completes_without_publishing(
    inspector: list[str], serve: Any, tmp_path: Path, era: str
) -> None:
    # The Inspector does not declare `elicitation`: the approval question is never sent, so the
    # pipeline completes (modern: as a task; legacy: inline) and does not publish.
    marker = tmp_path / "published"
    publish = json.dumps([[sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]])
    server = serve("job_runner", JOB_RUNNER_STEPS_TEST=FAST_STEP, JOB_RUNNER_STEPS_PUBLISH=publish)
    result = run_inspector(
        inspector, *tool_call(era, "run_pipeline", {"kind": "test"}, server.url), home=tmp_path
    )
    assert result["isError"] is False, result
    report = result["structuredContent"]
    assert report["kind"] == "test"
    assert report["published"] is False
    assert report["exit_code"] == 0
    assert "step ok" in report["output_tail"]
    assert not marker.exists()
    assert server.tasks() == ([("run_pipeline", "completed")] if era == "modern" else [])


@pytest.mark.parametrize("era", ERAS)
def test_load_100_calls_8_concurrent(inspector: list[str], serve: Any, tmp_path: Path, era: str) -> None:
    server = serve("hello")
    load = ("--load", "--load-requests", "100", "--load-concurrency", "8")
    summary = run_inspector(
        inspector, *tool_call(era, "hello", {"name": "load"}, server.url, *load), home=tmp_path, timeout=600
    )
    assert summary["requests"] == 100
    assert summary["ok"] == 100, summary
    assert summary["toolErrors"] == 0 and summary["errors"] == 0, summary
    assert summary["concurrency"] == 8
    if era == "modern":
        assert sorted(set(server.tasks())) == [("hello", "completed")]
        assert len(server.tasks()) == 100
