"""`examples/approval_gate.py` run as its docstring and the "Approval gates" how-to show it: a real
`mcptasks serve` on a SQLite file, `mcptasks call --detach`, the operator's `mcptasks admin answer`,
and `mcptasks call --resume` printing the result; unanswered, its deadline declines it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from processes import ROOT, clean_env, cli_command, free_port, process_test_marks, serving_http

pytestmark = process_test_marks()

EXAMPLE = ROOT / "examples" / "approval_gate.py"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args), cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=120, check=False
    )


async def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: cli(*args, cwd=cwd))


async def shown_when(store: str, task_id: str, cwd: Path, waiting: bool) -> dict[str, Any]:
    """`admin show --json` once the task waits for its approval (`waiting`) or no longer does
    (polled, generous bound)."""
    with anyio.fail_after(60):
        while True:
            done = await run_cli("admin", "show", task_id, "--store", store, "--json", cwd=cwd)
            assert done.returncode == 0, done.stderr
            view: dict[str, Any] = json.loads(done.stdout)
            if (view["status"] == "input_required") == waiting:
                return view
            await anyio.sleep(0.2)


@pytest.mark.parametrize("answered", [True, False])
async def test_the_approval_gate_is_answered_by_an_operator_or_its_deadline(
    tmp_path: Path, answered: bool
) -> None:
    store = "sqlite:///approvals.db"  # relative, as the docstring has it: in the working directory
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = clean_env(APPROVAL_TIMEOUT="3600" if answered else "2")
    extra = ("--store", store)
    with serving_http(EXAMPLE, port=port, log=tmp_path / "serve.log", extra=extra, env=env, cwd=tmp_path):
        started = await run_cli("call", url, "release", "version=1.4.2", "--detach", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        view = await shown_when(store, task_id, tmp_path, waiting=True)
        [(key, request)] = view["inputRequests"].items()
        assert key == "approve-1"
        assert request["params"]["message"] == "Ship app-1.4.2.tar.gz (checks passed)?"
        assert view["inputDeadlines"][key]["answer"] == {"action": "decline"}
        listed = await run_cli("admin", "list", "--store", store, "--status", "input_required", cwd=tmp_path)
        assert task_id in listed.stdout, listed
        if answered:
            done = await run_cli(
                "admin",
                "answer",
                task_id,
                "--store",
                store,
                "--answer",
                "approve=true",
                "--answer",
                "note=LGTM",
                cwd=tmp_path,
            )
            assert done.returncode == 0 and done.stdout == f"{task_id}: answered; now working\n", done
        else:  # nobody answers: the deadline does (`call --resume` would ask on a terminal)
            await shown_when(store, task_id, tmp_path, waiting=False)
        result = await run_cli("call", url, "release", f"--resume={task_id}", "--json-output", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        shown = await run_cli("admin", "show", task_id, "--store", store, "--json", cwd=tmp_path)

    structured = json.loads(result.stdout)["structuredContent"]
    if answered:
        assert structured == {
            "version": "1.4.2",
            "shipped": True,
            "detail": "shipped app-1.4.2.tar.gz (LGTM)",
        }
    else:
        assert structured == {"version": "1.4.2", "shipped": False, "answer": "decline"}
    audit = json.loads(shown.stdout)["answers"][key]
    assert audit["by"] == ("operator" if answered else "deadline"), audit
