"""mcptasks task tools on a FastMCP 4 server (`mcptasks.server.fastmcp`, docs/how-to/fastmcp.md).

fastmcp (`FASTMCP`, the newest 4.x on PyPI when written) is installed without fastmcp-tasks, with
mcptasks' own requirements, into `.venv-fastmcp4/` (wheels only); mcptasks itself is imported from
this checkout through a `.pth` file, so the environment is made once and reused while its stamp
(the pins, mcptasks' requirements, this Python) matches. Servers run in it as real processes over
Streamable HTTP on 127.0.0.1; the clients run here: mcptasks' `TasksClient` / `start_tool_call`
on the official SDK's `Client`, raw JSON-RPC posts as the conformance harness sends them, and the
official conformance suite.

- The page: `inventory.py` as the page builds it, served by the page's `fastmcp run` command, and
  the page's `follow.py` against it, printing what the page shows.
- The conformance fixture tools on a FastMCP server (`fastmcp_host_app.py`): the ten tasks
  scenarios of the suite; then quick results, statuses, a question answered with `tasks/update`,
  cancellation, discovery, and a `required` tool called without the extension; inline runs.
- Inside the environment: importing the adapter loads no fastmcp; a second tasks extension and
  `task=True` tools are refused with the messages the page quotes.

When the package registry cannot be reached, the tests skip saying so.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from importlib.metadata import requires
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conformance_tools import TASKS_SCENARIOS, install
from doc_blocks import blocks, write_file
from mcp import Client, MCPError
from mcp.client.context import ClientRequestContext
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, TextContent
from processes import clean_env, free_port, process_test_marks, stop, wait_accepting
from sdk_helpers import RawClient

from mcptasks.client import TasksClient, start_tool_call
from mcptasks.wire import EXTENSION_ID, MISSING_REQUIRED_CLIENT_CAPABILITY

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PAGE = ROOT / "docs" / "how-to" / "fastmcp.md"
VENV = ROOT / ".venv-fastmcp4"
FASTMCP = "fastmcp==4.2.3"
INSTALL_TIMEOUT = 600.0
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""
NETWORK_TROUBLE = (
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Max retries exceeded",
    "ProxyError",
    "(from versions: none)",
)

pytestmark = process_test_marks()


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: the servers are other processes, and the client's trio support is tested elsewhere."""
    return "asyncio"


# -- the environment --------------------------------------------------------------------------


def _requirements() -> list[str]:
    """mcptasks' own requirements (no extras), as the installed distribution declares them."""
    return sorted(r for r in requires("mcptasks") or [] if "extra ==" not in r)


def _run(command: list[str], timeout: float, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd
    )


@pytest.fixture(scope="module")
def venv() -> Path:
    """The environment's bin directory, made (or reused) as the module docstring says; one test
    run at a time makes it."""
    with (Path(tempfile.gettempdir()) / "mcptasks-venv-fastmcp4.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _made_venv()


def _made_venv() -> Path:
    stamp = VENV / "mcptasks-stamp.json"
    key = json.dumps([FASTMCP, _requirements(), sys.version, str(ROOT)])
    python = VENV / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == key:
        return python.parent
    shutil.rmtree(VENV, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(VENV)], 120).check_returncode()
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary", ":all:"]
    installed = _run([*pip, FASTMCP, *_requirements()], INSTALL_TIMEOUT)
    if installed.returncode != 0:
        shutil.rmtree(VENV, ignore_errors=True)
        output = installed.stdout + installed.stderr
        tail = "\n".join(line for line in output.splitlines() if "is ignored" not in line)[-2000:]
        if any(marker in output for marker in NETWORK_TROUBLE):
            pytest.skip(f"the package registry is unreachable:\n{tail}")
        pytest.fail(f"pip could not install {FASTMCP}:\n{tail}")
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60)
    (Path(site.stdout.strip()) / "mcptasks-checkout.pth").write_text(f"{ROOT}\n")
    stamp.write_text(key)
    return python.parent


def test_the_environment_has_fastmcp_4_and_no_fastmcp_tasks(venv: Path) -> None:
    probe = "import fastmcp, importlib.util; print(fastmcp.__version__, importlib.util.find_spec('fastmcp_tasks'))"
    found = _run([str(venv / "python"), "-c", probe], TIMEOUT)
    assert found.stdout.split() == [FASTMCP.partition("==")[2], "None"], found.stderr


@contextmanager
def serving(command: list[str], port: int, log: Path, cwd: Path) -> Iterator[str]:
    """Run `command` (a server on 127.0.0.1:`port`); yield its MCP URL once it accepts."""
    env = clean_env(PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=cwd
        )
    try:
        wait_accepting(process, port, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)
    output = log.read_text()
    assert "Traceback" not in output and "shutdown failed" not in output, output[-3000:]


# -- the page ---------------------------------------------------------------------------------


def _page_block(section: str, lang: str) -> str:
    (block,) = [b for b in blocks(PAGE) if b.section == section and b.lang == lang]
    return block.code


def test_page_files_pass_ruff(tmp_path: Path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    files = [write_file(PAGE, name, tmp_path) for name in ("inventory.py", "follow.py")]
    config = [
        "--config",
        str(ROOT / "pyproject.toml"),
        "--config",
        "lint.isort.known-first-party=['mcptasks']",
    ]
    checked = _run([ruff, "check", *config, *map(str, files)], TIMEOUT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_page_example_runs_as_shown(venv: Path, tmp_path: Path) -> None:
    """`fastmcp run inventory.py:mcp ...` as the page shows it; `python follow.py URL` against it
    prints the page's lines (some `working` states may fall between two polls)."""
    for name in ("inventory.py", "follow.py"):
        write_file(PAGE, name, tmp_path)
    port = free_port()
    serve = shlex.split(_page_block("Serve it", "bash").replace("8000", str(port)))
    assert serve[0] == "fastmcp"
    follow = shlex.split(_page_block("Call it", "bash").replace("8000", str(port)))
    assert follow[:2] == ["python", "follow.py"]
    with serving([str(venv / "fastmcp"), *serve[1:]], port, tmp_path / "server.log", tmp_path):
        ran = _run([sys.executable, *follow[1:]], TIMEOUT, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = _page_block("Call it", "text").splitlines()
    printed = ran.stdout.splitlines()
    assert [line for line in shown if not line.startswith("working ")] == [
        line for line in printed if not line.startswith("working ")
    ]
    working = [line for line in printed if line.startswith("working ")]
    assert working == [line for line in shown if line in working], printed
    assert (tmp_path / "inventory.db").exists()


def test_in_process_checks_are_what_the_page_says(venv: Path) -> None:
    """Importing the adapter loads no fastmcp; a second tasks extension and `task=True` tools are
    refused as the page says; through FastMCP's in-memory client (whose lifespan ends cleanly), a
    disabled task tool is neither listed nor run, and `FastMCP.call_tool` runs task tools inline."""
    ran = _run([str(venv / "python"), str(HERE / "fastmcp_host_app.py"), "checks"], TIMEOUT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["lazy"] is True, "importing mcptasks.server.fastmcp loaded fastmcp"
    page = " ".join(PAGE.read_text().split())
    assert f"`ValueError: {seen['clash']}`" in page
    assert seen["task_true"].startswith("RuntimeError: "), seen
    assert "(native_job)" in seen["task_true"] and "mcptasks.task_tool" in seen["task_true"]
    assert "slow_compute" not in seen["listed"] and "confirm_delete" in seen["listed"]
    assert seen["disabled"] == [True, "Unknown tool: 'slow_compute'"]
    assert seen["in_process"] == ["someone says stop", "kept d.txt"]


# -- the conformance fixtures on FastMCP --------------------------------------------------------


@pytest.fixture(scope="module")
def fixtures_url(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("fastmcp-fixtures")
    port = free_port()
    command = [str(venv / "python"), str(HERE / "fastmcp_host_app.py"), "serve", str(port)]
    with serving(command, port, directory / "server.log", directory) as url:
        yield url


def _scenario(node: Path, cli: Path, url: str, scenario: str, out: Path) -> list[dict[str, Any]]:
    """The checks of one tasks scenario against `url` (one FAILURE check when it did not run)."""
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(node), str(cli), "server", "--url", url, "--scenario", scenario, "-o", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    reports = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    if not reports:
        return [
            {"id": scenario, "status": "FAILURE", "errorMessage": run.stdout[-2000:] + run.stderr[-2000:]}
        ]
    checks: list[dict[str, Any]] = json.loads(reports[-1].read_text())
    return checks


def test_conformance_tasks_scenarios(fixtures_url: str, tmp_path: Path) -> None:
    """The official suite's ten tasks scenarios, three at a time: no FAILURE, no WARNING."""
    try:
        node, cli = install()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the conformance suite cannot be installed: {exc}")
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(
            zip(
                TASKS_SCENARIOS,
                pool.map(lambda s: _scenario(node, cli, fixtures_url, s, tmp_path / s), TASKS_SCENARIOS),
                strict=True,
            )
        )
    problems = {
        scenario: [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
        for scenario, checks in results.items()
    }
    assert {scenario: found for scenario, found in problems.items() if found} == {}
    assert all(results[s] for s in TASKS_SCENARIOS if s != "tasks-status-notifications")


def _text(result: CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent), result
    return first.text


class Asked:
    """An elicitation callback that accepts with `content` and records each question."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.messages: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.messages.append(params.message)
        return ElicitResult(action="accept", content=self.content)


async def test_quick_result_and_statuses(fixtures_url: str) -> None:
    async with Client(fixtures_url, extensions=[TasksClient()]) as client:
        quick = await start_tool_call(client, "slow_compute", {"seconds": 0, "label": "quick"})
        assert quick.task_id is None, "a body that ends at once is answered with its result"
        assert _text(await quick.result()) == "quick: finished after 0 s"

        handle = await start_tool_call(client, "slow_compute", {"seconds": 1, "label": "slow"})
        assert handle.task_id is not None
        seen = []
        with anyio.fail_after(TIMEOUT):
            async with handle.watch() as updates:
                async for task in updates:
                    seen.append((task.status, task.status_message))
        assert seen[-1] == ("completed", "slow: 1.0/1 s"), seen
        shown = ["slow: started", "slow: 0.5/1 s", "slow: 1.0/1 s"]
        messages = [message for _, message in seen if message is not None]
        assert messages == [m for m in shown if m in messages], seen
        assert _text(await handle.result()) == "slow: finished after 1 s"


async def test_question_answered_with_tasks_update(fixtures_url: str) -> None:
    """Two questions at once, answered one by one with `tasks/update` (`handle.respond`); the
    callback only declares elicitation (a client that cannot answer is never asked)."""
    unused = Asked({})
    async with Client(fixtures_url, extensions=[TasksClient()], elicitation_callback=unused) as client:
        handle = await start_tool_call(client, "multi_input", {})
        with anyio.fail_after(TIMEOUT):
            async with handle.watch(answer_inputs=False) as updates:
                async for task in updates:
                    if task.input_requests and len(task.input_requests) == 2:
                        break
        asked = task.input_requests
        assert asked is not None
        by_message = {request["params"]["message"]: key for key, request in asked.items()}
        assert set(by_message) == {"Your name?", "Go ahead?"}
        await handle.respond({by_message["Your name?"]: {"action": "accept", "content": {"name": "Ada"}}})
        left = await handle.status()
        assert left.status == "input_required" and list(left.input_requests or {}) == [
            by_message["Go ahead?"]
        ]
        await handle.respond({by_message["Go ahead?"]: {"action": "accept", "content": {"confirm": True}}})
        with anyio.fail_after(TIMEOUT):
            done = await handle.wait(answer_inputs=False)
        assert done.status == "completed"
        assert _text(await handle.result()) == "Ada says go"
    assert unused.messages == []


async def test_transparent_call_answers_the_question_itself(fixtures_url: str) -> None:
    asked = Asked({"confirm": True})
    async with Client(fixtures_url, extensions=[TasksClient()], elicitation_callback=asked) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
    assert _text(result) == "deleted a.txt"
    assert asked.messages == ["Delete a.txt?"]


async def test_cancel(fixtures_url: str) -> None:
    async with Client(fixtures_url, extensions=[TasksClient()]) as client:
        handle = await start_tool_call(client, "slow_compute", {"seconds": 60})
        await handle.cancel()
        with anyio.fail_after(TIMEOUT):
            ended = await handle.wait()
        assert ended.status == "cancelled"
        await handle.cancel()  # idempotent on a terminal task
        assert (await handle.status()).status == "cancelled"


async def test_extension_advertised_and_tools_listed(fixtures_url: str) -> None:
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        raw = RawClient(http, fixtures_url)
        discovered = (await raw.send("server/discover")).result
        listed = (await raw.send("tools/list")).result
        listen = await raw.send("subscriptions/listen", {"notifications": {"taskIds": ["any"]}})
    assert listen.message["error"]["code"] == -32601, "the page says push is not served"
    capabilities = discovered["capabilities"]
    assert capabilities["extensions"][EXTENSION_ID] == {}
    assert "tasks" not in capabilities
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert listed["tools"][0]["name"] == "greet"
    support = {
        name: tool.get("_meta", {}).get(EXTENSION_ID, {}).get("taskSupport") for name, tool in tools.items()
    }
    assert support == {
        "greet": None,
        "slow_compute": "optional",
        "failing_job": "required",
        "protocol_error_job": "optional",
        "confirm_delete": "optional",
        "multi_input": "optional",
        "test_tool_with_task": "required",
    }
    assert tools["confirm_delete"]["inputSchema"]["required"] == ["filename"]


async def test_required_tool_without_the_extension(fixtures_url: str) -> None:
    async with Client(fixtures_url) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("failing_job", {})
    assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        raw = await RawClient(http, fixtures_url, capabilities={}).call("failing_job")
    assert raw.status == 400
    assert raw.message["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_inline_runs_without_the_extension(fixtures_url: str) -> None:
    """What the page says of inline runs: on 2026-07-28 a question is an `input_required` round;
    on a 2025-11-25 connection it is not asked (`Unsupported`), and no request gets a task."""
    asked = Asked({"confirm": True})
    async with Client(fixtures_url, elicitation_callback=asked) as client:
        with anyio.fail_after(TIMEOUT):
            assert _text(await client.call_tool("slow_compute", {"seconds": 0.1})) == (
                "compute: finished after 0.1 s"
            )
            assert _text(await client.call_tool("confirm_delete", {"filename": "b.txt"})) == "deleted b.txt"
    assert asked.messages == ["Delete b.txt?"]
    legacy_asked = Asked({"confirm": True})
    extensions = [TasksClient()]
    async with Client(
        fixtures_url, mode="legacy", extensions=extensions, elicitation_callback=legacy_asked
    ) as client:
        assert client.protocol_version == "2025-11-25"
        with anyio.fail_after(TIMEOUT):
            assert _text(await client.call_tool("confirm_delete", {"filename": "c.txt"})) == "kept c.txt"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("failing_job", {})
    assert legacy_asked.messages == []
    assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
