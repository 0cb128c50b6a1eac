"""Agent frameworks' own MCP clients against our example servers: keeps docs/how-to/clients-tested.md honest.

Each framework is installed at the exact versions in `CLIENTS` (PyPI, wheels only) into a virtual
environment of its own under `.ci/work/client-venvs/` (named by the pins and this Python, so a
re-run reuses it; `.ci/run` starts from an empty `.ci/work`). A driver script in this directory,
run with that environment's Python, calls the framework's MCP client API directly, as its users'
code would (no model), and prints one JSON object of what each case observed; the tests assert on
it. Servers run as `mcptasks serve` over Streamable HTTP on a free 127.0.0.1 port with a SQLite
store the tests can read.

- Strands Agents (`strands_driver.py`): its own SEP-2663 tasks client, on the strict default
  server: quick calls, statuses, input through its elicitation callback, cancellation, and
  `examples/job_runner.py` with approval.
- pydantic-ai `MCPToolset` with fastmcp-tasks (`pydantic_ai_driver.py`): that client never sends
  `Mcp-Name` on `tasks/*`. On the default server every task request is refused with -32020 naming
  the switch; with `accept_missing_mcp_name` on (the `mcptasks serve` flag, or the environment
  variable) every case passes and the server warns once per client.
- Google ADK `McpToolset` (`adk_driver.py`): no Tasks support, so task tools answer inline and
  `task_support="required"` ones -32021. Given an elicitation callback, its default handshake
  (2025-11-25) gets the questions as `elicitation/create` and answers them; on 2026-07-28 it cannot
  answer an `input_required` round. Without a callback the questions are never asked.
- LangChain `langchain.mcp.MCPAdapter` (`langchain_driver.py`): no Tasks code of its own; its
  FastMCP client drives tasks once `fastmcp_tasks` is imported, sending no `Mcp-Name` on
  `tasks/*` (refused with -32020 by default, accepted with `--accept-missing-mcp-name`). Without
  that import task tools answer inline and questions go through LangChain's LangGraph interrupts.

When the packages cannot be installed because the registry is unreachable, the tests skip saying
so; any other install failure (a pin that no longer resolves, say) fails them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from processes import clean_env, free_port, serving_http

from mcptasks._runtime.protocol import REQUIRED_TOOL_REMEDY

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VENVS = ROOT / ".ci" / "work" / "client-venvs"
INSTALL_TIMEOUT = 900.0
DRIVER_TIMEOUT = 600.0


@dataclass(frozen=True)
class Client:
    """One framework: what to install and the oldest Python its pins support."""

    name: str
    pins: tuple[str, ...]
    min_python: tuple[int, int]


STRANDS = Client("strands", ("strands-agents==1.62.0", "mcp==2.1.1"), (3, 10))
PYDANTIC_AI = Client(
    "pydantic-ai",
    # pydantic-ai-slim with only the MCP extras is what pydantic-ai 2.68 would bring for this
    # (the `pydantic-ai` meta-package stops at 2.66 on PyPI; the slim package has 2.68.0).
    (
        "pydantic-ai-slim[mcp-tasks]==2.68.0",
        "fastmcp-slim==4.1.4",
        "fastmcp-tasks==4.1.4",
        "mcp==2.3.0",
    ),
    (3, 11),
)
ADK = Client("google-adk", ("google-adk[mcp]==2.13.0", "mcp==2.3.0"), (3, 11))
LANGCHAIN = Client(
    "langchain",
    # `langchain.mcp` (the `mcp` extra brings FastMCP); fastmcp-tasks is what turns on the
    # FastMCP client's task support (4.1.4 is its newest release, and it pins FastMCP 4.1.4).
    ("langchain[mcp]==1.5.2", "fastmcp==4.1.4", "fastmcp-tasks==4.1.4", "mcp==2.3.0"),
    (3, 11),
)
CLIENTS = {client.name: client for client in (STRANDS, PYDANTIC_AI, ADK, LANGCHAIN)}

NETWORK_TROUBLE = (
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Max retries exceeded",
    "ProxyError",
    "SSLError",
)
"""pip output meaning the registry could not be reached (skip), not that the pins are wrong (fail).

So does "(from versions: none)": the index answered nothing at all for a package that exists. A
pin missing from a list of versions that the index did serve fails the test instead."""

MISSING_NAME_WARNING = re.compile(
    r"WARNING mcptasks: accepted (tasks/\w+) without an Mcp-Name header from client (\S+) (\S+) "
    r"\(accept_missing_mcp_name is on; logged once per client\)"
)

pytestmark = pytest.mark.slow


# -- the client environments ------------------------------------------------------------------


def venv_python(client: Client) -> Path:
    """The Python of `client`'s environment, installing it first if needed (skip: no registry)."""
    if sys.version_info[:2] < client.min_python:
        pytest.skip(f"{client.name} needs Python {'.'.join(map(str, client.min_python))} or newer")
    key = json.dumps([client.pins, sys.version_info[:3]])
    home = VENVS / f"{client.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    python = home / "bin" / "python"
    stamp = home / "installed.json"
    if stamp.exists() and python.exists():
        return python
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, capture_output=True, timeout=120)
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    install += ["--only-binary", ":all:", *client.pins]
    try:
        run = subprocess.run(install, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip(f"installing {' '.join(client.pins)} took over {INSTALL_TIMEOUT:g} s (slow registry?)")
    if run.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        output = run.stdout + run.stderr
        tail = "\n".join(line for line in output.splitlines() if "is ignored" not in line)[-2000:]
        if any(marker in output for marker in NETWORK_TROUBLE) or "(from versions: none)" in output:
            pytest.skip(
                f"the package registry is unreachable or serves none of {' '.join(client.pins)}:\n{tail}"
            )
        pytest.fail(f"pip could not install {' '.join(client.pins)}:\n{tail}")
    seconds = round(time.monotonic() - started, 1)
    stamp.write_text(json.dumps({"pins": client.pins, "python": sys.version, "install_s": seconds}))
    return python


@pytest.fixture(scope="module")
def strands_python() -> Path:
    return venv_python(STRANDS)


@pytest.fixture(scope="module")
def pydantic_ai_python() -> Path:
    return venv_python(PYDANTIC_AI)


@pytest.fixture(scope="module")
def adk_python() -> Path:
    return venv_python(ADK)


@pytest.fixture(scope="module")
def langchain_python() -> Path:
    return venv_python(LANGCHAIN)


def drive(python: Path, driver: str, *args: str) -> dict[str, Any]:
    """Run `driver` (a script in this directory) with `python`; return its JSON line."""
    env = clean_env()
    env.pop("PYTHONPATH", None)  # the driver sees only its own environment's packages
    env["PYTHONNOUSERSITE"] = "1"
    run = subprocess.run(
        [str(python), str(HERE / driver), *args],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=HERE,
    )
    assert run.returncode == 0, (
        f"{driver} exited {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    )
    results: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return results


# -- the servers ------------------------------------------------------------------------------


@dataclass
class Run:
    """One driver run against one server: what the driver saw, and the server's side of it."""

    results: dict[str, Any]
    database: Path
    log: Path

    def case(self, name: str) -> Any:
        """A case's observations, failing with the driver's traceback if the case raised."""
        value = self.results[name]
        assert not (isinstance(value, dict) and "trace" in value), f"{name} raised:\n{value['trace']}"
        return value

    def tasks(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(tool, status, arguments) of every task the server created, oldest first."""
        with sqlite3.connect(self.database) as db:
            rows = db.execute("SELECT tool, status, body FROM tasks ORDER BY created_at").fetchall()
        return [(str(tool), str(status), json.loads(body)["arguments"]) for tool, status, body in rows]

    def missing_name_warnings(self) -> list[tuple[str, str, str]]:
        """(method, client name, client version) of each missing-`Mcp-Name` warning logged."""
        found = MISSING_NAME_WARNING.finditer(self.log.read_text())
        return [(match[1], match[2], match[3]) for match in found]


def serve_and_drive(
    directory: Path,
    example: str,
    python: Path,
    driver: str,
    *args: str,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Run:
    """Serve `examples/<example>.py`, run `driver URL *args` against it, stop the server."""
    directory.mkdir(parents=True, exist_ok=True)
    database, log = directory / "tasks.db", directory / "server.log"
    port = free_port()
    with serving_http(
        ROOT / "examples" / f"{example}.py",
        port=port,
        log=log,
        extra=("--store", f"sqlite:///{database}", *extra),
        env=clean_env(**(env or {})),
    ):
        results = drive(python, driver, f"http://127.0.0.1:{port}/mcp", *args)
    return Run(results, database, log)


def without_asked(value: dict[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if key != "asked"}


def test_page_names_the_tested_versions() -> None:
    """docs/how-to/clients-tested.md names every pin tested here, and this file."""
    page = (ROOT / "docs" / "how-to" / "clients-tested.md").read_text().replace("`", "")
    assert "tests/interop/test_agent_clients.py" in page
    for client in CLIENTS.values():
        for pin in client.pins:
            name, version = re.sub(r"\[.*\]", "", pin).split("==")
            assert f"{name} {version}" in page, f"the Tested clients page does not name {name} {version}"


# -- Strands Agents ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strands_conformance(strands_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    directory = tmp_path_factory.mktemp("strands-conformance")
    return serve_and_drive(
        directory, "conformance_server", strands_python, "strands_driver.py", "conformance"
    )


@pytest.fixture(scope="module")
def strands_job_runner(strands_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    directory = tmp_path_factory.mktemp("strands-job-runner")
    marker = directory / "published"
    steps = {
        "JOB_RUNNER_STEPS_TEST": json.dumps([[sys.executable, "-c", "print('step ok')"]]),
        "JOB_RUNNER_STEPS_PUBLISH": json.dumps(
            [[sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"]]
        ),
    }
    run = serve_and_drive(
        directory, "job_runner", strands_python, "strands_driver.py", "job_runner", env=steps
    )
    yield run, marker


def test_strands_versions(strands_conformance: Run) -> None:
    assert strands_conformance.results["versions"] == {"strands-agents": "1.62.0", "mcp": "2.1.1"}
    assert "slow_compute" in strands_conformance.results["tools"]


def test_strands_quick_results(strands_conformance: Run) -> None:
    run = strands_conformance
    plain = run.case("quick_plain")
    assert (plain["status"], plain["texts"]) == ("success", ["Hello, Strands!"])
    quick = run.case("quick_task")
    assert (quick["status"], quick["texts"]) == ("success", ["quick: finished after 0.2 s"])
    failed = run.case("tool_error")
    assert (failed["status"], failed["texts"]) == ("error", ["the job failed: disk quota exceeded"])
    tasks = run.tasks()
    assert ("slow_compute", "completed", {"seconds": 0.2, "label": "quick"}) in tasks
    assert ("failing_job", "completed", {}) in tasks  # a tool error is a completed task
    assert all(tool != "greet" for tool, _, _ in tasks)  # a plain tool never becomes a task


def test_strands_statuses(strands_conformance: Run) -> None:
    watched = strands_conformance.case("statuses")
    assert watched["handle"] == "working"
    seen = watched["seen"]
    # Polled every 0.1 s while the task reports progress every 0.5 s for 1.5 s: the working
    # statuses carry its messages (which ones are seen depends on scheduling: not asserted).
    assert len(seen) >= 2 and all(status == "working" for status, *_ in seen[:-1]), seen
    assert all(message.startswith("watch: ") for _, message, *_ in seen), seen
    assert seen[-1] == ["completed", "watch: 1.5/1.5 s", ["watch: finished after 1.5 s"]]


def test_strands_input_through_elicitation_callback(strands_conformance: Run) -> None:
    run = strands_conformance
    confirmed, declined = run.case("input_confirm"), run.case("input_decline")
    assert (confirmed["texts"], confirmed["asked"]) == (["deleted a.txt"], ["Delete a.txt?"])
    assert (declined["texts"], declined["asked"]) == (["kept keep.txt"], ["Delete keep.txt?"])
    both = run.case("multi_input")
    assert both["texts"] == ["Strands says go"]
    assert sorted(both["asked"]) == ["Go ahead?", "Your name?"]
    early = run.case("input_before_task")  # asked on tools/call itself, before the task exists
    assert (early["texts"], early["asked"]) == (["Hello, Strands!"], ["What is your name?"])
    tasks = run.tasks()
    for tool, arguments in [
        ("confirm_delete", {"filename": "a.txt"}),
        ("confirm_delete", {"filename": "keep.txt"}),
        ("multi_input", {}),
        ("test_tool_with_task", {}),
    ]:
        assert (tool, "completed", arguments) in tasks


def test_strands_cancel(strands_conformance: Run) -> None:
    run = strands_conformance
    assert without_asked(run.case("cancel")) == {"acknowledged": "complete", "final": "cancelled"}
    # call_tool_sync(cancel_signal=...), the signal set while the task waits for input: Strands
    # stops the call and sends tasks/cancel for the task.
    signalled = run.case("cancel_signal")
    assert signalled["cancelled"] is True and signalled["status"] == "error"
    assert signalled["asked"] == ["Delete stop.txt?"]
    tasks = run.tasks()
    assert ("slow_compute", "cancelled", {"seconds": 600, "label": "cancel me"}) in tasks
    assert ("confirm_delete", "cancelled", {"filename": "stop.txt"}) in tasks


def test_strands_sends_mcp_name(strands_conformance: Run) -> None:
    # Strands sends Mcp-Name on every tasks/* request: the strict default server accepted them all.
    assert strands_conformance.missing_name_warnings() == []


def test_strands_job_runner_with_approval(strands_job_runner: Any) -> None:
    run, marker = strands_job_runner
    approved, declined = run.case("approved"), run.case("declined")
    question = "The test pipeline passed in"
    for report in (approved, declined):
        assert report["status"] == "success", report
        assert len(report["asked"]) == 1 and report["asked"][0].startswith(question)
        assert report["asked"][0].endswith("Publish the artifacts?")
        assert report["structured"]["kind"] == "test" and report["structured"]["exit_code"] == 0
        assert "step ok" in report["structured"]["output_tail"]
    assert approved["structured"]["published"] is True
    assert declined["structured"]["published"] is False
    assert marker.read_text() == "x"  # the publish step ran once: for the approved run only
    assert [(tool, status) for tool, status, _ in run.tasks()] == [("run_pipeline", "completed")] * 2


# -- pydantic-ai (MCPToolset with fastmcp-tasks) ----------------------------------------------

PYDANTIC_AI_TASK_CASES = [
    "quick_task",
    "quick_ordinary_call",
    "statuses",
    "input_confirm",
    "input_decline",
    "multi_input",
    "cancel",
]


@pytest.fixture(scope="module")
def pydantic_ai_default(pydantic_ai_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    directory = tmp_path_factory.mktemp("pydantic-ai-default")
    return serve_and_drive(directory, "conformance_server", pydantic_ai_python, "pydantic_ai_driver.py")


@pytest.fixture(scope="module", params=["flag", "env"])
def pydantic_ai_accepting(
    request: pytest.FixtureRequest, pydantic_ai_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Run:
    """The same cases with missing `Mcp-Name` accepted: by `mcptasks serve` flag, or by env."""
    directory = tmp_path_factory.mktemp(f"pydantic-ai-{request.param}")
    extra: tuple[str, ...] = ()
    env: dict[str, str] = {}
    if request.param == "flag":
        extra = ("--accept-missing-mcp-name",)
    else:
        env = {"MCPTASKS_ACCEPT_MISSING_MCP_NAME": "on"}
    return serve_and_drive(
        directory, "conformance_server", pydantic_ai_python, "pydantic_ai_driver.py", extra=extra, env=env
    )


def test_pydantic_ai_versions(pydantic_ai_default: Run) -> None:
    assert pydantic_ai_default.results["versions"] == {
        "pydantic-ai-slim": "2.68.0",
        "fastmcp-slim": "4.1.4",
        "fastmcp-tasks": "4.1.4",
        "mcp": "2.3.0",
    }


def test_pydantic_ai_refused_by_default_naming_the_switch(pydantic_ai_default: Run) -> None:
    run = pydantic_ai_default
    assert run.case("quick_plain")["value"] == "Hello, pydantic-ai!"  # no task, no tasks/* request
    for name in [*PYDANTIC_AI_TASK_CASES, "named_client"]:
        refused = run.results[name]
        assert refused.get("code") == -32020, (name, refused)
        message = refused["error"]
        assert "tasks/get over HTTP needs an Mcp-Name header equal to params.taskId" in message, message
        assert "accept_missing_mcp_name" in message and "--accept-missing-mcp-name" in message, message
    assert run.missing_name_warnings() == []


def test_pydantic_ai_with_missing_name_accepted(pydantic_ai_accepting: Run) -> None:
    run = pydantic_ai_accepting
    assert run.case("quick_plain")["value"] == "Hello, pydantic-ai!"
    assert run.case("quick_task")["value"] == "quick: finished after 0.2 s"
    assert run.case("quick_ordinary_call")["value"] == "ordinary: finished after 0.2 s"
    watched = run.case("statuses")["value"]
    seen = watched["seen"]
    assert len(seen) >= 2 and all(status == "working" for status, _ in seen[:-1]), seen
    assert all(message.startswith("watch: ") for _, message in seen), seen
    assert seen[-1] == ["completed", "watch: 1.5/1.5 s"]
    assert watched["result"] == ["watch: finished after 1.5 s"]
    confirmed, declined = run.case("input_confirm"), run.case("input_decline")
    assert (confirmed["value"], confirmed["asked"]) == ("deleted a.txt", ["Delete a.txt?"])
    assert (declined["value"], declined["asked"]) == ("kept keep.txt", ["Delete keep.txt?"])
    both = run.case("multi_input")
    assert both["value"] == "pydantic-ai says go"
    assert sorted(both["asked"]) == ["Go ahead?", "Your name?"]
    assert run.case("cancel")["value"] == {"final": "cancelled"}
    assert run.case("named_client")["value"] == "named: finished after 0.2 s"
    tasks = run.tasks()
    assert ("slow_compute", "cancelled", {"seconds": 600, "label": "cancel me"}) in tasks
    assert sum(status == "completed" for _, status, _ in tasks) == len(tasks) - 1


def test_pydantic_ai_warned_once_per_client(pydantic_ai_accepting: Run) -> None:
    run = pydantic_ai_accepting
    clients = run.results["client_info"]
    # Dozens of tasks/* requests from two clients: one warning each, naming its clientInfo
    # (the first client sends the mcp SDK's default, as pydantic-ai leaves it unset).
    warned = [(name, version) for _, name, version in run.missing_name_warnings()]
    assert sorted(warned) == sorted([tuple(clients["default"]), tuple(clients["named"])]), run.log.read_text()
    assert ("pydantic-ai-interop", "2.68.0") in warned


# -- Google ADK (McpToolset, no Tasks support) ------------------------------------------------

ADK_ERAS = {"legacy": "2025-11-25", "modern": "2026-07-28"}
"""The driver's argument -> the protocol revision ADK then speaks: its default `initialize`
handshake, or `server/discover` with ADK_ENABLE_MCP_MODERN_PROTOCOL=1 (experimental in ADK)."""


@pytest.fixture(scope="module", params=sorted(ADK_ERAS))
def adk_conformance(
    request: pytest.FixtureRequest, adk_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Run]:
    directory = tmp_path_factory.mktemp(f"adk-{request.param}")
    run = serve_and_drive(directory, "conformance_server", adk_python, "adk_driver.py", request.param)
    return request.param, run


def test_adk_versions(adk_conformance: tuple[str, Run]) -> None:
    era, run = adk_conformance
    assert run.results["versions"] == {"google-adk": "2.13.0", "mcp": "2.3.0"}
    assert "slow_compute" in run.results["tools"] and "failing_job" in run.results["tools"]
    assert run.results["protocol_versions"] == [ADK_ERAS[era]]


def test_adk_optional_task_tools_answer_inline(adk_conformance: tuple[str, Run]) -> None:
    _, run = adk_conformance
    for name, text in [("quick_plain", "Hello, ADK!"), ("quick_task", "quick: finished after 0.2 s")]:
        answered = run.case(name)
        assert (answered["texts"], answered["isError"], answered["adk_error"]) == ([text], False, None)
        assert answered["codes"] == []
    # A JSON-RPC error from an inline body: ADK hands the model an error dict and logs the code.
    failed = run.case("protocol_error")
    assert failed["adk_error"] == "MCP tool execution failed: backend unavailable"
    assert failed["codes"] == [-32603]
    assert run.tasks() == []  # ADK never opts in: no call became a task


def test_adk_required_task_tools_refused_with_32021(adk_conformance: tuple[str, Run]) -> None:
    _, run = adk_conformance
    for name, tool in [("required", "failing_job"), ("required_input_before_task", "test_tool_with_task")]:
        refused = run.case(name)
        assert refused["adk_error"] == (
            f"MCP tool execution failed: Tool {tool!r} requires the client capability "
            f"extensions['io.modelcontextprotocol/tasks'] in this request's _meta. {REQUIRED_TOOL_REMEDY}"
        )
        assert refused["codes"] == [-32021] and refused["asked"] == []


def test_adk_questions(adk_conformance: tuple[str, Run]) -> None:
    era, run = adk_conformance
    # Without an elicitation callback ADK declares no `elicitation`: the inline body's questions
    # are never sent and evaluate to Unsupported, which these tools read as "no".
    kept, both = run.case("input_confirm"), run.case("multi_input")
    assert (kept["texts"], kept["asked"]) == (["kept a.txt"], [])
    assert (both["texts"], both["asked"]) == (["someone says stop"], [])
    confirmed, answered = run.case("callback_confirm"), run.case("callback_multi_input")
    if era == "legacy":
        # 2025-11-25: the inline body's questions go out as elicitation/create requests on the
        # call, and ADK's callback answers them.
        assert (confirmed["texts"], confirmed["asked"]) == (["deleted b.txt"], ["Delete b.txt?"])
        assert answered["texts"] == ["ADK says go"]
        assert sorted(answered["asked"]) == ["Go ahead?", "Your name?"]
    else:
        # 2026-07-28: the server answers input_required, which ADK's call_tool does not accept.
        for case in (confirmed, answered):
            assert case["asked"] == []
            assert case["adk_error"] == (
                "Unexpected error during MCP tool execution: Server returned InputRequiredResult; "
                "pass allow_input_required=True to receive it and retry call_tool(..., "
                "input_responses=..., request_state=result.request_state)."
            )


# -- LangChain (langchain.mcp MCPAdapter on FastMCP) ------------------------------------------

LANGCHAIN_TASK_CASES = [
    "task_quick",
    "task_tool_error",
    "task_protocol_error",
    "task_input_before_task",
    "task_confirm",
    "task_decline",
    "task_multi_input",
]
"""The cases that call through a FastMCP client with `fastmcp_tasks` imported (and a handler)."""

CLAIMED_RESULT = (
    "UnexpectedClaimedResult: Server returned a claimed result (ClientCreateTaskResult); pass the "
    "owning extension to Client(extensions=[...]) for transparent resolution"
)


@pytest.fixture(scope="module")
def langchain_default(langchain_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Every case on the default (strict) server: inline first, then with `fastmcp_tasks`."""
    directory = tmp_path_factory.mktemp("langchain-default")
    database = str(directory / "tasks.db")
    return serve_and_drive(
        directory, "conformance_server", langchain_python, "langchain_driver.py", database, "all"
    )


@pytest.fixture(scope="module")
def langchain_accepting(langchain_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The task cases with missing `Mcp-Name` accepted (`mcptasks serve` flag)."""
    directory = tmp_path_factory.mktemp("langchain-accepting")
    database = str(directory / "tasks.db")
    return serve_and_drive(
        directory,
        "conformance_server",
        langchain_python,
        "langchain_driver.py",
        database,
        "tasks",
        extra=("--accept-missing-mcp-name",),
    )


def test_langchain_versions(langchain_default: Run) -> None:
    run = langchain_default
    assert run.results["versions"] == {
        "langchain": "1.5.2",
        "fastmcp": "4.1.4",
        "fastmcp-tasks": "4.1.4",
        "mcp": "2.3.0",
    }
    assert "slow_compute" in run.results["tools"] and "failing_job" in run.results["tools"]
    # FastMCP's default handshake is server/discover; `Client(url, mode="legacy")` is initialize.
    assert run.results["protocol_versions"] == ["2025-11-25", "2026-07-28"]


def test_langchain_inline_without_fastmcp_tasks(langchain_default: Run) -> None:
    run = langchain_default
    plain, quick = run.case("quick_plain"), run.case("quick_task")
    assert (plain["texts"], plain["status"]) == (["Hello, LangChain!"], "success")
    assert (quick["texts"], quick["status"]) == (["inline: finished after 0.2 s"], "success")
    # A JSON-RPC error from an inline body is raised from the tool, not handed to the model.
    failed = run.results["protocol_error"]
    assert (failed["error"], failed["code"]) == ("MCPError: backend unavailable", -32603)
    for name, tool in [("required", "failing_job"), ("required_input_before_task", "test_tool_with_task")]:
        refused = run.results[name]
        assert refused["error"] == (
            f"MCPError: Tool {tool!r} requires the client capability "
            f"extensions['io.modelcontextprotocol/tasks'] in this request's _meta. {REQUIRED_TOOL_REMEDY}"
        )
        assert refused["code"] == -32021 and refused["asked"] == []
    # No inline case became a task: the only tasks are those of the cases run with fastmcp_tasks.
    assert sorted(tool for tool, _, _ in run.tasks()) == sorted(
        ["slow_compute"] * 3
        + ["failing_job", "protocol_error_job", "test_tool_with_task", "multi_input"]
        + ["confirm_delete"] * 2
    )


def test_langchain_questions_through_interrupts_and_handlers(langchain_default: Run) -> None:
    run = langchain_default
    # 2026-07-28, MCPAdapter(url): each input_required round is one LangGraph interrupt carrying
    # every question of the round; resuming the graph with the answers finishes the call.
    confirmed, both = run.case("interrupt_confirm"), run.case("interrupt_multi_input")
    assert (confirmed["texts"], confirmed["rounds"]) == (["deleted a.txt"], [["Delete a.txt?"]])
    assert both["texts"] == ["LangChain says go"]
    assert [sorted(questions) for questions in both["rounds"]] == [["Go ahead?", "Your name?"]]
    # A FastMCP client with its own elicitation_handler: LangChain keeps it and it answers.
    declined = run.case("handler_decline")
    assert (declined["texts"], declined["asked"]) == (["kept keep.txt"], ["Delete keep.txt?"])
    # 2025-11-25: the question goes out as elicitation/create, which MCPAdapter's own client
    # refuses (it answers only interrupts): the model gets a tool error naming both sides.
    refused = run.case("legacy_interrupt_confirm")
    assert refused["status"] == "error" and refused["rounds"] == []
    [text] = refused["texts"]
    assert text.startswith("Tool 'confirm_delete' asked the client (elicitation/create) and got no answer: ")
    assert "interrupt-based elicitation cannot answer" in text, text
    answered = run.case("legacy_handler_confirm")
    assert (answered["texts"], answered["asked"]) == (["deleted c.txt"], ["Delete c.txt?"])


def test_langchain_statuses_as_progress_on_2025_11_25(langchain_default: Run) -> None:
    watched = langchain_default.case("legacy_statuses")
    assert (watched["texts"], watched["status"]) == (["watch: finished after 1.5 s"], "success")
    seen = watched["progress"]  # FastMCP's progress_handler, given each statusMessage
    assert seen[0] == "watch: started" and seen[-1] == "watch: 1.5/1.5 s", seen
    assert all(message.startswith("watch: ") for message in seen), seen


def test_langchain_tasks_refused_by_default_naming_the_switch(langchain_default: Run) -> None:
    run = langchain_default
    for name in LANGCHAIN_TASK_CASES:
        refused = run.results[name]
        assert refused.get("code") == -32020, (name, refused)
        message = refused["error"]
        assert "tasks/get over HTTP needs an Mcp-Name header equal to params.taskId" in message, message
        assert "accept_missing_mcp_name" in message and "--accept-missing-mcp-name" in message, message
    assert run.results["task_default_adapter"]["error"].startswith(CLAIMED_RESULT)
    assert run.missing_name_warnings() == []


def test_langchain_tasks_with_missing_name_accepted(langchain_accepting: Run) -> None:
    run = langchain_accepting
    answers = {name: run.case(name) for name in LANGCHAIN_TASK_CASES}
    observed = {name: (case["status"], case["texts"], case["asked"]) for name, case in answers.items()}
    assert observed == {
        "task_quick": ("success", ["tasked: finished after 0.2 s"], []),
        "task_tool_error": ("error", ["the job failed: disk quota exceeded"], []),
        "task_protocol_error": ("error", ["backend unavailable"], []),
        "task_input_before_task": ("success", ["Hello, LangChain!"], ["What is your name?"]),
        "task_confirm": ("success", ["deleted a.txt"], ["Delete a.txt?"]),
        "task_decline": ("success", ["kept keep.txt"], ["Delete keep.txt?"]),
        "task_multi_input": ("success", ["LangChain says go"], ["Your name?", "Go ahead?"]),
    }
    tasks = run.tasks()
    for task in [
        ("slow_compute", "completed", {"seconds": 0.2, "label": "tasked"}),
        ("failing_job", "completed", {}),
        ("protocol_error_job", "failed", {}),
        ("test_tool_with_task", "completed", {}),
        ("confirm_delete", "completed", {"filename": "a.txt"}),
        ("confirm_delete", "completed", {"filename": "keep.txt"}),
        ("multi_input", "completed", {}),
    ]:
        assert task in tasks
    # MCPAdapter(url)'s own client calls the session directly, which cannot resolve the task it
    # opted in to: the tool raises, and the task it started runs on with nobody to read it.
    assert run.results["task_default_adapter"]["error"].startswith(CLAIMED_RESULT)
    assert ({"seconds": 0.2, "label": "interrupt-armed"}) in [arguments for _, _, arguments in tasks]
    # Every client is FastMCP's with the mcp SDK's default clientInfo: one warning in all.
    assert run.missing_name_warnings() == [("tasks/get", "mcp", "0.1.0")]


def test_langchain_cancelling_the_caller_leaves_the_task_running(langchain_accepting: Run) -> None:
    # LangChain offers no cancel; stopping the caller (asyncio cancellation, as when an agent run
    # is stopped) sends no tasks/cancel: the task is still working a second later.
    stopped = langchain_accepting.case("task_cancel_caller")
    assert stopped == {"while_running": "working", "after_cancel": "working", "asked": []}
