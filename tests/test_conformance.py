"""The official MCP conformance suite's ten tasks scenarios against `examples/conformance_server.py`.

The suite (`@modelcontextprotocol/conformance`) needs Node 22; both come from the npm registry into
`.conformance/` on first use. Each scenario must finish with no FAILURE check.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_tools import install
from processes import free_port, serving_http

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]


@pytest.fixture(scope="module", params=["memory://", "sqlite"])
def server_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = request.param
    if store == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('conformance') / 'tasks.db'}"
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with serving_http(
        ROOT / "examples" / "conformance_server.py", port=port, log=log, extra=("--store", store)
    ):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def conformance() -> tuple[Path, Path]:
    return install()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tasks_scenario(
    scenario: str, server_url: str, conformance: tuple[Path, Path], tmp_path: Path
) -> None:
    node, cli = conformance
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [str(node), str(cli), "server", "--url", server_url, "--scenario", scenario, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    reports = list(tmp_path.glob(f"server-{scenario}-*/checks.json"))
    assert reports, f"no checks.json written\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    checks = json.loads(reports[0].read_text())
    failures = [c for c in checks if c["status"] == "FAILURE"]
    assert not failures, json.dumps(failures, indent=2)
    assert run.returncode == 0, run.stdout + run.stderr
    statuses = {c["status"] for c in checks}
    if scenario == "tasks-status-notifications":
        assert statuses == {"SKIPPED"}  # the suite's own stub asserts nothing yet
    else:
        assert "SUCCESS" in statuses
