"""MCPJam's SDK (`@mcpjam/sdk`, its `MCPClientManager`) against our server: keeps its row of
docs/how-to/clients-tested.md honest.

The SDK comes from npm at `MCPJAM_VERSION` into `.mcpjam/`, with Node 22 from the npm package
`node-linux-<arch>` and the MCP client it was built against pinned beside it (`CLIENT_VERSION`:
1.14.0 asks for `^2.0.0-alpha.2`, and the newer releases that range resolves to no longer export
`StdioClientTransport` from the package root, so the SDK does not load with them).
`mcpjam_driver.mjs` drives `examples/conformance_server.py` (served with `mcptasks serve` over
Streamable HTTP, with a SQLite store) the way MCPJam's users' tests do, with no model, once per
module, and prints what it saw; the tests check that and the server's side.

MCPJam has no SEP-2663 client: its default connection negotiates 2025-11-25 (`initialize`) and its
`mcpProtocolVersion: "2026-07-28"` preview declares neither the tasks extension nor `elicitation`,
so task tools run inline. On 2025-11-25 a question reaches its elicitation callback (or a handler,
when the server's config declares `elicitation`) as `elicitation/create`; statuses reach its
progress handler as `notifications/progress` in both eras. Without a reachable registry the tests
skip, saying so.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conformance_tools import NODE_VERSION, node_package
from processes import clean_env, free_port, serving_http

from mcptasks._runtime.protocol import REQUIRED_TOOL_REMEDY

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = ROOT / ".mcpjam"
MCPJAM_VERSION = "1.14.0"
CLIENT_VERSION = "2.0.0-alpha.2"
PINS = {
    "@mcpjam/sdk": MCPJAM_VERSION,
    "@modelcontextprotocol/client": CLIENT_VERSION,
    node_package(): NODE_VERSION,
}
DRIVER_TIMEOUT = 180.0
NETWORK_TROUBLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH")
"""npm error codes meaning the registry could not be reached (skip), not that a pin is wrong (fail)."""

pytestmark = pytest.mark.slow


def installed_version(package: str) -> str | None:
    """The version of `package` in the cache, if installed."""
    try:
        manifest = json.loads((CACHE / "node_modules" / package / "package.json").read_text())
        return str(manifest["version"])
    except (OSError, ValueError, KeyError):
        return None


def install_mcpjam() -> Path:
    """Install (once) the pinned packages into `.mcpjam/`; return the Node binary."""
    node = CACHE / "node_modules" / node_package() / "bin" / "node"
    if node.exists() and all(installed_version(name) == version for name, version in PINS.items()):
        return node
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is needed to install @mcpjam/sdk (install Node.js with npm)")
    CACHE.mkdir(exist_ok=True)
    command = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(CACHE)]
    pins = [f"{name}@{version}" for name, version in PINS.items()]
    command += pins
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.skip("npm install of @mcpjam/sdk took over 600 s (slow registry?)")
    if run.returncode != 0:
        output = (run.stdout + run.stderr)[-2000:]
        if any(code in output for code in NETWORK_TROUBLE):
            pytest.skip(f"the npm registry is unreachable:\n{output}")
        pytest.fail(f"npm could not install {' '.join(pins)}:\n{output}")
    assert all(installed_version(name) == version for name, version in PINS.items()), "install incomplete"
    return node


@dataclass
class Run:
    """The driver's observations and the server's side of them."""

    results: dict[str, Any]
    database: Path
    log: Path

    def session(self, name: str) -> dict[str, Any]:
        """One session's observations, failing with the driver's trace if it raised."""
        value: dict[str, Any] = self.results[name]
        assert "trace" not in value, f"{name} raised:\n{value['trace']}"
        return value

    def tasks(self) -> list[tuple[str, str]]:
        """(tool, status) of every task the server created."""
        with sqlite3.connect(self.database) as db:
            return [(str(tool), str(status)) for tool, status in db.execute("SELECT tool, status FROM tasks")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    node = install_mcpjam()
    directory = tmp_path_factory.mktemp("mcpjam")
    database, log = directory / "tasks.db", directory / "server.log"
    port = free_port()
    with serving_http(
        ROOT / "examples" / "conformance_server.py",
        port=port,
        log=log,
        extra=("--store", f"sqlite:///{database}"),
        env=clean_env(),
    ):
        driven = subprocess.run(
            [str(node), str(HERE / "mcpjam_driver.mjs"), f"http://127.0.0.1:{port}/mcp", str(CACHE)],
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT,
            # MCPJam's SDK reports eval runs to PostHog and Sentry unless told not to.
            env=clean_env(DO_NOT_TRACK="1", MCPJAM_TELEMETRY_DISABLED="1"),
            stdin=subprocess.DEVNULL,
            cwd=HERE,
        )
    assert driven.returncode == 0, (
        f"exit {driven.returncode}\nstdout:\n{driven.stdout}\nstderr:\n{driven.stderr}"
    )
    yield Run(json.loads(driven.stdout.strip().splitlines()[-1]), database, log)


def required_error(tool: str) -> dict[str, Any]:
    """The -32021 error a task_support="required" tool answers a call without the extension."""
    return {
        "code": -32021,
        "message": f"Tool {tool!r} requires the client capability extensions['io.modelcontextprotocol/tasks'] "
        f"in this request's _meta. {REQUIRED_TOOL_REMEDY}",
        "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    }


def statuses(*messages: str) -> list[dict[str, Any]]:
    """Progress events as the handler sees them: one per status, counted from 1."""
    return [{"progress": n, "total": None, "message": text} for n, text in enumerate(messages, 1)]


TOOLS = {
    "greet": None,
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}
LEGACY = ("legacy", "legacy_handler", "legacy_without_elicitation")
"""The 2025-11-25 sessions: elicitation callback, per-server handler, neither."""
WATCHED = statuses("watch: started", "watch: 0.5/1 s", "watch: 1.0/1 s")


def test_versions(run: Run) -> None:
    assert run.results["versions"] == {
        "@mcpjam/sdk": MCPJAM_VERSION,
        "@modelcontextprotocol/client": CLIENT_VERSION,
        "node": NODE_VERSION,
    }


def test_default_connection_is_2025_11_25(run: Run) -> None:
    for name in LEGACY:
        session = run.session(name)
        assert session["protocolVersion"] == "2025-11-25"
        assert session["tools"] == TOOLS
        assert "io.modelcontextprotocol/tasks" not in session["declared"].get("extensions", {})
        # An elicitation callback set before connecting, or `capabilities` in the server's config,
        # is what declares `elicitation`.
        assert ("elicitation" in session["declared"]) is (name != "legacy_without_elicitation")


def test_task_tools_run_inline(run: Run) -> None:
    legacy, modern = run.session("legacy"), run.session("modern")
    for session in (legacy, modern):
        quick = session["quick"]
        assert (quick["texts"], quick["isError"]) == (["quick: finished after 0.2 s"], False)
    protocol_error = legacy["protocol_error"]
    assert protocol_error["error"] == {
        "code": -32603,
        "message": "backend unavailable",
        "data": {"retryable": True},
    }
    # No call opted in to the extension: the server created no task, and MCPJam never polled one.
    assert run.tasks() == []
    for name in (*LEGACY, "modern"):
        assert not [method for method in run.session(name)["methods"] if method.startswith("tasks/")]


def test_required_tools_answer_32021(run: Run) -> None:
    legacy, modern = run.session("legacy"), run.session("modern")
    assert legacy["required"]["error"] == required_error("failing_job")
    assert modern["required"]["error"] == required_error("failing_job")
    # Refused before its question: the callback is never called.
    early = legacy["required_asking_first"]
    assert (early["error"], early["asked"]) == (required_error("test_tool_with_task"), [])


def test_questions_reach_the_elicitation_callback_on_2025_11_25(run: Run) -> None:
    legacy = run.session("legacy")
    confirm, decline, both = legacy["confirm"], legacy["decline"], legacy["multi_input"]
    assert (confirm["texts"], confirm["asked"]) == (["deleted a.txt"], ["Delete a.txt?"])
    assert (decline["texts"], decline["asked"]) == (["kept keep.txt"], ["Delete keep.txt?"])
    assert both["texts"] == ["MCPJam says go"]
    assert both["asked"] == ["Your name?", "Go ahead?"]  # one request after the other
    handled = run.session("legacy_handler")["confirm"]  # setElicitationHandler once connected
    assert (handled["texts"], handled["asked"]) == (["deleted d.txt"], ["Delete d.txt?"])


def test_questions_are_unsupported_without_elicitation(run: Run) -> None:
    # Nothing declared on 2025-11-25, or the 2026-07-28 preview (which declares no `elicitation`,
    # callback or not): the question is never sent and the body gets `Unsupported`.
    without = run.session("legacy_without_elicitation")["confirm"]
    assert (without["texts"], without["asked"]) == (["kept b.txt"], [])
    modern = run.session("modern")
    assert "elicitation" not in modern["declared"]
    assert (modern["confirm"]["texts"], modern["confirm"]["asked"]) == (["kept c.txt"], [])


def test_statuses_reach_the_progress_handler(run: Run) -> None:
    for name in ("legacy", "modern"):
        watched = run.session(name)["statuses"]
        assert watched["texts"] == ["watch: finished after 1 s"]
        assert watched["progress"] == WATCHED, name
    assert run.session("legacy")["protocol_error"]["progress"] == statuses("calling the backend")
    # With a progressHandler, MCPJam puts a progressToken on every call.
    assert all(run.session(name)["progressTokens"] for name in (*LEGACY, "modern"))


def test_2026_07_28_preview(run: Run) -> None:
    modern = run.session("modern")
    assert modern["protocolVersion"] == "2026-07-28"
    assert modern["serverExtensions"] == ["io.modelcontextprotocol/tasks"]
    assert modern["tools"] == TOOLS
    assert modern["declared"]["extensions"].keys() == {"io.modelcontextprotocol/apps"}
    assert modern["quick"]["resultType"] == "complete"
    assert "server/discover" in modern["methods"] and "initialize" not in modern["methods"]


def test_server_log_is_clean(run: Run) -> None:
    log = run.log.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log


def test_page_names_the_tested_version() -> None:
    page = (ROOT / "docs" / "how-to" / "clients-tested.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| [MCPJam]"))
    assert f"`@mcpjam/sdk` {MCPJAM_VERSION}" in row
    assert "tests/interop/test_mcpjam.py" in row
