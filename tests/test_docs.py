"""The documentation works: every runnable snippet runs, and the site builds with zero warnings.

(a) Each `docs/snippets/*.py` is loaded as a fresh module (or run by pytest in a subprocess, for the
    snippets that are test files), and the servers it defines are driven through the official SDK's
    in-process client (`mcp.Client(app.mcp, extensions=[advertise(EXTENSION_ID)])` plus typed
    `tasks/*` requests, from `sdk_helpers`), over Streamable HTTP where the page is about HTTP, or
    through the CLI commands the pages show. The JSON on the Concepts page (`docs/snippets/wire/`)
    is replayed against its server and compared with the real answers.
    `test_every_snippet_is_exercised` fails when a snippet is added without a test here.
(b) The reference pages list every public name, CLI option and environment variable, and
    `mkdocs build --strict` builds the whole site into a temporary directory.

Nothing synchronises by sleeping: every wait polls observable state under a generous deadline.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client
from push_helpers import as_notification, listen, without_meta
from sdk_helpers import (
    RawClient,
    Tasks,
    bearer,
    mcp_error,
    poll,
    serve_http,
    tasks_extension,
    text,
    the_input_request,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SNIPPETS = DOCS / "snippets"
WIRE = SNIPPETS / "wire"
TIMEOUT = 30.0
"""Upper bound of every wait; never a synchronisation delay."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The SDK's transports, uvicorn and subprocess handling are exercised on asyncio."""
    return "asyncio"


# -- bookkeeping: which test exercises which snippet ----------------------------------------------

EXERCISED: set[str] = set()
F = TypeVar("F", bound=Callable[..., Any])


def exercises(*names: str) -> Callable[[F], F]:
    """Mark a test as one that runs the snippets `names` (paths relative to docs/snippets)."""
    EXERCISED.update(names)

    def mark(test: F) -> F:
        return test

    return mark


def _snippet_files() -> set[str]:
    return {
        str(path.relative_to(SNIPPETS))
        for pattern in ("*.py", "wire/*.json")
        for path in SNIPPETS.glob(pattern)
    }


def test_every_snippet_is_exercised() -> None:
    on_disk = _snippet_files()
    assert on_disk, "no snippets found"
    assert on_disk - EXERCISED == set(), "snippets without a test in tests/test_docs.py"
    assert EXERCISED - on_disk == set(), "tests name snippets that do not exist"


def test_every_snippet_is_shown_on_a_page() -> None:
    pages = "\n".join(path.read_text() for path in DOCS.rglob("*.md"))
    shown = set(re.findall(r'--8<-- "docs/snippets/([^":]+)', pages))
    assert _snippet_files() - shown == set(), "snippets no page includes"


# -- loading snippets and talking to their servers --------------------------------------------

_counter = itertools.count()


def load_snippet(name: str) -> ModuleType:
    """Import `docs/snippets/<name>` as a fresh module (fresh server, engine and store)."""
    path = SNIPPETS / name
    module_name = f"_docs_snippet_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic resolves the module's annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


@asynccontextmanager
async def connect(server: Any, *, tasks: bool = True) -> AsyncIterator[Tasks]:
    """An SDK client connected in process to a `TaskServer` (or an `MCPServer`)."""
    target = getattr(server, "mcp", server)
    extensions = [tasks_extension()] if tasks else []
    async with Client(target, extensions=extensions) as client:
        yield Tasks(client)


def sdk_text(result: Any) -> str:
    """The text of an SDK `CallToolResult`."""
    return "".join(getattr(block, "text", "") for block in result.content)


async def statuses_until(tasks: Tasks, task_id: str, done: Callable[[dict[str, Any]], bool]) -> list[str]:
    """Poll until `done(task)`; return every distinct statusMessage seen on the way."""
    seen: list[str] = []
    try:
        with anyio.fail_after(TIMEOUT):
            while True:
                task = await tasks.get(task_id)
                message = task.get("statusMessage")
                if message is not None and (not seen or seen[-1] != message):
                    seen.append(message)
                if done(task):
                    return seen
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out; statuses seen: {seen}") from None


async def eventually(check: Callable[[], bool], what: str) -> None:
    """Poll `check()` until it holds; fail after `TIMEOUT` seconds."""
    try:
        with anyio.fail_after(TIMEOUT):
            while True:
                if check():
                    return
                await anyio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def fast_polls(app: Any, interval_ms: int = 20) -> None:
    """Lower the advertised poll interval of every task tool of `app` (the client follows it)."""
    for tool in app.extension.task_tools.values():
        tool.poll_interval_ms = interval_ms


# -- tutorial ------------------------------------------------------------------------------------


@exercises("tutorial_1_hello.py")
async def test_tutorial_1_hello_runs_as_a_task_and_inline() -> None:
    snippet = load_snippet("tutorial_1_hello.py")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("hello", {"name": "Ada"})
        assert created["status"] == "working"
        seen = await statuses_until(tasks, created["taskId"], lambda t: t["status"] in TERMINAL)
        task = await tasks.get(created["taskId"])
    assert "thinking about Ada..." in seen
    assert task["status"] == "completed", task
    assert text(task["result"]) == "Hello, Ada!"
    async with connect(snippet.app, tasks=False) as plain:
        result = await plain.client.call_tool("hello", {"name": "Bo"})
    assert [getattr(block, "text", None) for block in result.content] == ["Hello, Bo!"]


@exercises("tutorial_2_steps.py")
async def test_tutorial_2_streams_output_and_returns_a_report() -> None:
    snippet = load_snippet("tutorial_2_steps.py")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "build"})
        seen = await statuses_until(tasks, created["taskId"], lambda t: t["status"] in TERMINAL)
        task = await tasks.get(created["taskId"])
    assert task["status"] == "completed", task
    report = task["result"]["structuredContent"]
    assert report["kind"] == "build" and report["steps"] == 2
    assert report["last_line"] == "built dist/app-1.0-py3-none-any.whl"
    assert any(message.startswith("build 1/2: compiling") for message in seen), seen


@exercises()
async def test_tutorial_2_failing_step_is_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = load_snippet("tutorial_2_steps.py")
    monkeypatch.setitem(snippet.PIPELINES, "test", [snippet.python("print('boom'); raise SystemExit(3)")])
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "test"})
        task = await tasks.finish(created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is True
    assert text(task["result"]) == "test step 1 exited with 3: boom"


@pytest.mark.parametrize("approve", [True, False])
@exercises("tutorial_3_approval.py")
async def test_tutorial_3_asks_for_approval(approve: bool) -> None:
    snippet = load_snippet("tutorial_3_approval.py")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "test"})
        task = await tasks.wait_input(created["taskId"])
        key, request = the_input_request(task)
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "The test pipeline passed. Publish the artifacts?"
        assert request["params"]["requestedSchema"]["properties"]["publish"]["type"] == "boolean"
        ack = await tasks.update(
            created["taskId"], {key: {"action": "accept", "content": {"publish": approve}}}
        )
        assert ack == {"resultType": "complete"}
        task = await tasks.finish(created["taskId"])
    assert task["status"] == "completed", task
    report = task["result"]["structuredContent"]
    assert report["published"] is approve
    assert ("uploading: 100%" in report["last_lines"]) is approve


def _marked_processes(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in process.info["cmdline"] or ()):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


@exercises("tutorial_4_cancel.py")
async def test_tutorial_4_cancel_ends_the_whole_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = load_snippet("tutorial_4_cancel.py")
    marker = f"docs-tutorial-{os.getpid()}-{next(_counter)}"
    sleeper = f"import time; time.sleep(120)  # {marker}"
    step = snippet.python(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}])\n"
        "print('child and grandchild running', flush=True)\n"
        f"time.sleep(120)  # {marker}\n"
    )
    monkeypatch.setitem(snippet.PIPELINES, "build", [step])
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "build"})
        await tasks.wait(
            created["taskId"],
            lambda t: "child and grandchild running" in (t.get("statusMessage") or ""),
            what="the step to start",
        )
        assert len(_marked_processes(marker)) == 2
        assert await tasks.cancel(created["taskId"]) == {"resultType": "complete"}
        task = await tasks.get(created["taskId"])
        assert task["status"] == "cancelled"
        await eventually(lambda: not _marked_processes(marker), "the process group to end")
        assert (await tasks.get(created["taskId"]))["status"] == "cancelled"


@exercises()
async def test_tutorial_4_runs_to_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = load_snippet("tutorial_4_cancel.py")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "build"})
        task = await tasks.wait_input(created["taskId"])
        key, _ = the_input_request(task)
        await tasks.update(created["taskId"], {key: {"action": "decline"}})
        task = await tasks.finish(created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"]["published"] is False
    assert task["statusMessage"] == "publishing skipped"


@exercises("tutorial_5_client.py")
async def test_tutorial_5_client_follows_the_task(capsys: pytest.CaptureFixture[str]) -> None:
    server = load_snippet("tutorial_4_cancel.py")
    client = load_snippet("tutorial_5_client.py")
    fast_polls(server.app)
    report = await client.main(server.app.mcp, "build")
    assert report is not None and report["published"] is True
    printed = capsys.readouterr().out
    assert "server asks: The build pipeline passed. Publish the artifacts?  -> yes" in printed
    assert "[completed] publish 1/1: uploading: 100%" in printed


@exercises("home_ci_runner.py")
async def test_home_page_example() -> None:
    snippet = load_snippet("home_ci_runner.py")
    async with connect(snippet.app) as tasks:
        discovered = tasks.client.server_capabilities
        assert discovered is not None and discovered.extensions == {"io.modelcontextprotocol/tasks": {}}
        created = await tasks.start("run_pipeline", {"kind": "build"})
        assert created["pollIntervalMs"] == 2000 and created["ttlMs"] == 3_600_000
        task = await tasks.wait_input(created["taskId"])
        assert task["statusMessage"] == "starting build"
        key, _ = the_input_request(task)
        await tasks.update(created["taskId"], {key: {"action": "accept", "content": {"publish": True}}})
        task = await tasks.finish(created["taskId"])
    assert text(task["result"]) == "build passed, published=True"


# -- the tutorial's commands, for real: mcptasks serve, the client script, mcptasks call ----------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(
    *command: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Run `command` from the repository root until the block ends (SIGINT, then kill)."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        if port is not None:
            _wait_for_port(process, port)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _wait_for_port(process: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"{process.args} exited with {process.returncode}: {output}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def _readline(process: subprocess.Popen[str], timeout: float) -> str:
    """The next line `process` prints ('' at its end), waiting at most `timeout` seconds."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"{process.args} printed nothing for {timeout} s")
    return process.stdout.readline()


def run(
    *command: str, timeout: float = TIMEOUT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _cli_has(command: str) -> bool:
    """Whether `mcptasks <command>` is a registered subcommand."""
    return run(str(BIN / "mcptasks"), command, "--help").returncode == 0


@exercises()
@pytest.mark.slow
def test_tutorial_step_5_commands(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    store = f"sqlite:///{tmp_path / 'ci-tasks.db'}"
    serve = (str(BIN / "mcptasks"), "serve", "docs/snippets/tutorial_4_cancel.py", "--transport", "http")
    with running(*serve, "--port", str(port), "--store", store, port=port):
        client = run(sys.executable, "docs/snippets/tutorial_5_client.py", url, "build")
        assert client.returncode == 0, client.stdout + client.stderr
        assert "server asks: The build pipeline passed. Publish the artifacts?  -> yes" in client.stdout
        assert "'published': True" in client.stdout

        if not _cli_has("call"):
            pytest.skip("`mcptasks call` is not registered in mcptasks/cli.py yet")
        mcptasks = str(BIN / "mcptasks")
        called = run(mcptasks, "call", url, "run_pipeline", "kind=test")
        assert called.returncode == 0, called.stdout + called.stderr
        assert (
            json.loads(called.stdout)["published"] is False
        )  # no terminal: the question is answered `cancel`

        detached = run(mcptasks, "call", url, "run_pipeline", "kind=build", "--detach")
        assert detached.returncode == 0, detached.stderr
        task_id = detached.stdout.strip()
        assert "--resume" in detached.stderr
        got = run(mcptasks, "tasks", "get", url, task_id)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["taskId"] == task_id
        cancelled = run(mcptasks, "tasks", "cancel", url, task_id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.startswith("cancellation requested;")


# -- concepts --------------------------------------------------------------------------------------

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_TASK_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")


def normalized(value: Any) -> Any:
    """A wire object with `_meta` dropped and ids, timestamps and request states made comparable."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "_meta":
                continue
            if key == "taskId":
                assert isinstance(item, str) and _TASK_ID.match(item), item
                out[key] = "<taskId>"
            elif key in ("createdAt", "lastUpdatedAt"):
                assert isinstance(item, str) and _ISO.match(item), item
                out[key] = "<timestamp>"
            elif key == "requestState":
                assert isinstance(item, str) and item, item
                out[key] = "<requestState>"
            else:
                out[key] = normalized(item)
        return out
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def wire(name: str) -> dict[str, Any]:
    return dict(json.loads((WIRE / name).read_text()))


def documented_params(name: str, **real: str) -> dict[str, Any]:
    """The params of a documented request, with the real task id / request state put in."""
    params = dict(wire(name)["params"])
    params.update(real)
    return params


def assert_documented(answer: Any, name: str) -> None:
    documented = wire(name)
    if "error" in documented:
        assert answer.message.get("error") == documented["error"], answer.message
    else:
        assert normalized(answer.result) == normalized(documented["result"]), answer.result


@asynccontextmanager
async def reports_over_http() -> AsyncIterator[tuple[str, RawClient]]:
    """The Concepts page's server (`concepts_reports.py`) over HTTP, and a raw client for it."""
    snippet = load_snippet("concepts_reports.py")
    async with (
        serve_http(snippet.app.streamable_http_app()) as url,
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
    ):
        yield url, RawClient(http, url)


@exercises(
    "concepts_reports.py",
    "wire/tools_call.request.json",
    "wire/tools_call.result.json",
    "wire/tasks_get.request.json",
    "wire/tasks_get_working.result.json",
    "wire/tasks_get_input_required.result.json",
    "wire/tasks_update.request.json",
    "wire/ack.result.json",
    "wire/tasks_get_completed.result.json",
    "wire/tasks_get_failed.result.json",
    "wire/tasks_cancel.request.json",
    "wire/tasks_get_cancelled.result.json",
    "wire/missing_capability.error.json",
    "wire/before_task.request.json",
    "wire/before_task.result.json",
    "wire/before_task_retry.request.json",
)
@pytest.mark.slow
async def test_the_wire_examples_are_what_the_server_says() -> None:
    async with reports_over_http() as (_url, client):
        created = await client.send("tools/call", documented_params("tools_call.request.json"))
        assert_documented(created, "tools_call.result.json")
        task_id = created.result["taskId"]

        get = documented_params("tasks_get.request.json", taskId=task_id)
        working = await poll(
            lambda: client.send("tasks/get", get), lambda r: "statusMessage" in r.result, what="a status"
        )
        assert_documented(working, "tasks_get_working.result.json")
        asking = await poll(
            lambda: client.send("tasks/get", get),
            lambda r: r.result["status"] == "input_required",
            what="input_required",
        )
        assert_documented(asking, "tasks_get_input_required.result.json")

        ack = await client.send(
            "tasks/update", documented_params("tasks_update.request.json", taskId=task_id)
        )
        assert_documented(ack, "ack.result.json")
        done = await poll(
            lambda: client.send("tasks/get", get), lambda r: r.result["status"] in TERMINAL, what="the end"
        )
        assert_documented(done, "tasks_get_completed.result.json")

        ledger = await client.send(
            "tools/call",
            {**documented_params("tools_call.request.json"), "name": "sync_ledger", "arguments": {}},
        )
        ledger_get = documented_params("tasks_get.request.json", taskId=ledger.result["taskId"])
        failed = await poll(
            lambda: client.send("tasks/get", ledger_get),
            lambda r: r.result["status"] in TERMINAL,
            what="the failure",
        )
        assert_documented(failed, "tasks_get_failed.result.json")

        other = await client.send("tools/call", documented_params("tools_call.request.json"))
        other_id = other.result["taskId"]
        ack = await client.send(
            "tasks/cancel", documented_params("tasks_cancel.request.json", taskId=other_id)
        )
        assert_documented(ack, "ack.result.json")
        cancelled = await client.send(
            "tasks/get", documented_params("tasks_get.request.json", taskId=other_id)
        )
        assert_documented(cancelled, "tasks_get_cancelled.result.json")

        plain = documented_params("tools_call.request.json")
        meta = dict(plain["_meta"])
        meta["io.modelcontextprotocol/clientCapabilities"] = {}
        refused = await client.send(
            "tools/call", {**plain, "name": "sync_ledger", "arguments": {}, "_meta": meta}
        )
        assert refused.status == 400
        assert_documented(refused, "missing_capability.error.json")

        first = await client.send("tools/call", documented_params("before_task.request.json"))
        assert_documented(first, "before_task.result.json")
        retry = documented_params("before_task_retry.request.json", requestState=first.result["requestState"])
        closing = await client.send("tools/call", retry)
        assert closing.result["resultType"] == "task", closing.message
        finished = await client.finish(closing.result["taskId"])
        assert text(finished["result"]) == "2026-10 closed"


@exercises(
    "wire/listen.request.json",
    "wire/listen_ack.notification.json",
    "wire/listen_task.notification.json",
    "wire/listen_closing.result.json",
)
async def test_the_push_wire_examples_are_what_the_server_says() -> None:
    async with reports_over_http() as (url, client):
        created = await client.send("tools/call", documented_params("tools_call.request.json"))
        task_id = created.result["taskId"]
        get = documented_params("tasks_get.request.json", taskId=task_id)
        await poll(
            lambda: client.send("tasks/get", get), lambda r: "statusMessage" in r.result, what="a status"
        )
        notifications = dict(wire("listen.request.json")["params"]["notifications"])
        notifications["taskIds"] = [task_id]
        async with listen(url, notifications) as stream:
            subscription = {"io.modelcontextprotocol/subscriptionId": stream.request_id}
            ack = await stream.next()
            documented_ack = wire("listen_ack.notification.json")
            assert ack["method"] == documented_ack["method"]
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}
            assert ack["params"]["_meta"] == subscription
            state = await stream.next()
            documented_state = wire("listen_task.notification.json")
            assert state["method"] == documented_state["method"]
            assert normalized(state["params"]) == normalized(documented_state["params"])
            assert state["params"]["_meta"] == subscription
            while (
                state.get("method") == "notifications/tasks" and state["params"]["status"] != "input_required"
            ):
                state = await stream.next()
            (key,) = state["params"]["inputRequests"]
            answer = {key: {"action": "accept", "content": {"include_drafts": False}}}
            await client.send("tasks/update", {"taskId": task_id, "inputResponses": answer})
            closing = await stream.until_result()
        documented_closing = wire("listen_closing.result.json")["result"]
        assert closing["result"]["resultType"] == documented_closing["resultType"]
        assert closing["result"]["_meta"] == {**documented_closing["_meta"], **subscription}
        last = [f for f in stream.frames if f.get("method") == "notifications/tasks"][-1]
        assert as_notification(await client.get(task_id)) == without_meta(last["params"])


@exercises("howto_push.py")
async def test_howto_push() -> None:
    server = load_snippet("concepts_reports.py")  # pollIntervalMs 2000: a poll would show
    gets = 0

    async def count(ctx: Any, call_next: Any) -> Any:
        nonlocal gets
        gets += ctx.method == "tasks/get"
        return await call_next(ctx)

    server.app.mcp.middleware.insert(0, count)
    snippet = load_snippet("howto_push.py")
    async with serve_http(server.app.streamable_http_app()) as url:
        seen = await snippet.follow(url)
    assert seen[-1] == "completed: rendering"
    assert any(state.startswith("input_required") for state in seen)
    assert gets == 0  # every state came by push


@exercises("concepts_outcomes.py")
async def test_concepts_outcomes() -> None:
    snippet = load_snippet("concepts_outcomes.py")
    async with connect(snippet.app) as tasks:
        # Bodies that finish without suspending are answered with their result at once.
        squared = await tasks.call("with_result", {"n": 3})
        assert squared["resultType"] == "complete" and squared["structuredContent"] == {"square": 9}
        broken = await tasks.call("tool_error")
        assert broken["resultType"] == "complete" and broken["isError"] is True
        assert text(broken) == "disk quota exceeded"
        failed = await tasks.finish((await tasks.start("protocol_error"))["taskId"])
        assert failed["status"] == "failed"
        assert failed["error"] == {
            "code": -32050,
            "message": "backend unavailable",
            "data": {"retryable": True},
        }

        snippet.app.extension.protocol.immediate_results = False  # now every opted-in call is a task
        squared = await tasks.finish((await tasks.start("with_result", {"n": 3}))["taskId"])
        assert squared["result"]["structuredContent"] == {"square": 9}
        empty = await tasks.finish((await tasks.start("without_result"))["taskId"])
        assert empty["status"] == "completed"
        assert empty["result"] == {"resultType": "complete", "content": [], "isError": False}
        counted = await tasks.finish((await tasks.start("coroutine", {"n": 2}))["taskId"])
        assert text(counted["result"]) == "counted to 2 in task True"
        broken = await tasks.finish((await tasks.start("tool_error"))["taskId"])
        assert broken["status"] == "completed" and broken["result"]["isError"] is True
        assert text(broken["result"]) == "disk quota exceeded"
    async with connect(snippet.app, tasks=False) as plain:
        inline = await plain.call("coroutine", {"n": 2})
        assert text(inline) == "counted to 2 in task False"
        error = await mcp_error(plain.call("protocol_error"))
        assert error.error.code == -32050


@exercises("concepts_inputs.py")
async def test_concepts_inputs() -> None:
    snippet = load_snippet("concepts_inputs.py")
    async with connect(snippet.app) as tasks:
        task_id = (await tasks.start("open_port"))["taskId"]
        key, request = the_input_request(await tasks.wait_input(task_id))
        assert key == "port-1"
        await tasks.update(task_id, {key: {"action": "accept", "content": {"port": 70000}}})
        again = await tasks.wait(
            task_id,
            lambda t: t["status"] == "input_required" and key not in t["inputRequests"],
            what="a re-ask",
        )
        key2, request2 = the_input_request(again)
        assert key2 == "port-2"
        assert (
            "(Previous answer rejected: port: Input should be less than or equal to 65535)"
            in request2["params"]["message"]
        )
        await tasks.update(task_id, {key2: {"action": "accept", "content": {"port": 8080}}})
        assert text((await tasks.finish(task_id))["result"]) == "opened port 8080"

        declined = (await tasks.start("open_port"))["taskId"]
        key, _ = the_input_request(await tasks.wait_input(declined))
        await tasks.update(declined, {key: {"action": "decline"}})
        assert text((await tasks.finish(declined))["result"]) == "nothing opened"

        plan = (await tasks.start("plan_release", {"version": "2.0"}))["taskId"]
        both = (await tasks.wait_input(plan, count=2))["inputRequests"]
        methods = {request["method"]: key for key, request in both.items()}
        sample = {
            "role": "assistant",
            "content": {"type": "text", "text": "Faster builds."},
            "model": "m",
            "stopReason": "endTurn",
        }
        await tasks.update(plan, {methods["sampling/createMessage"]: sample})
        still = await tasks.get(plan)
        assert still["status"] == "input_required" and list(still["inputRequests"]) == [
            methods["elicitation/create"]
        ]
        await tasks.update(
            plan, {methods["elicitation/create"]: {"action": "accept", "content": {"confirm": True}}}
        )
        roots = await tasks.wait(
            plan,
            lambda t: any(r["method"] == "roots/list" for r in t.get("inputRequests", {}).values()),
            what="roots/list",
        )
        (roots_key,) = roots["inputRequests"]
        await tasks.update(plan, {roots_key: {"roots": [{"uri": "file:///repo"}]}})
        planned = await tasks.finish(plan)
        assert planned["result"]["structuredContent"] == {
            "notes": "Faster builds.",
            "decision": "go",
            "roots": ["file:///repo"],
        }

        task_id = (await tasks.start("imperative", {"path": "/tmp/x"}))["taskId"]
        key, request = the_input_request(await tasks.wait_input(task_id))
        assert request["params"]["message"] == "Delete /tmp/x?"
        await tasks.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        assert text((await tasks.finish(task_id))["result"]) == "deleted /tmp/x"


# -- how-to guides ---------------------------------------------------------------------------------


@exercises("howto_stores.py")
def test_howto_stores() -> None:
    from mcptasks import MemoryTaskStore, SqliteTaskStore
    from mcptasks.store.postgres import PostgresTaskStore
    from mcptasks.store.redis import RedisTaskStore

    snippet = load_snippet("howto_stores.py")

    def store_of(app: Any) -> Any:
        return app.extension.engine.store

    assert isinstance(store_of(snippet.dev), MemoryTaskStore)
    assert (
        isinstance(store_of(snippet.single_node), SqliteTaskStore)
        and store_of(snippet.single_node).path == "tasks.db"
    )
    assert store_of(snippet.absolute).path == "/var/lib/reports/tasks.db"
    assert (
        isinstance(store_of(snippet.shared), RedisTaskStore) and store_of(snippet.shared).prefix == "mcptasks"
    )
    assert isinstance(store_of(snippet.also_shared), PostgresTaskStore)
    assert store_of(snippet.also_shared).schema == "reports_tasks"
    assert snippet.redis_store.prefix == "billing" and snippet.redis_store.channel == "billing:changes"
    assert snippet.postgres_store.schema == "billing_tasks"
    assert store_of(snippet.billing) is snippet.postgres_store


@asynccontextmanager
async def replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """One more replica of howto_replica.py over the shared SQLite file in `tmp_path`."""
    monkeypatch.setenv("MCPTASKS_SECRET", "docs-test-secret-" + "0" * 32)
    monkeypatch.setenv("MCP_REQUEST_STATE_KEY", "docs-test-request-state-key-" + "1" * 32)
    snippet = load_snippet("howto_replica.py")
    snippet.app.use_store(f"sqlite:///{tmp_path / 'shared.db'}")
    yield snippet.app


@exercises("howto_replica.py")
async def test_howto_replica_input_before_the_task_crosses_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        replica(tmp_path, monkeypatch) as one,
        replica(tmp_path, monkeypatch) as two,
        Client(one.mcp, extensions=[tasks_extension()], elicitation_callback=_never) as a,
        Client(two.mcp, extensions=[tasks_extension()], elicitation_callback=_never) as b,
    ):
        first, second = Tasks(a), Tasks(b)
        arguments = {"service": "api", "version": "1.2.3"}
        asked = await first.call("deploy", arguments)  # replica one asks the question
        assert asked["resultType"] == "input_required", asked
        assert list(asked["inputRequests"]) == ["confirm"]
        answers = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        created_wire = await second.call(  # replica two gets the answer and creates the task
            "deploy", arguments, input_responses=answers, request_state=asked["requestState"]
        )
        assert created_wire["resultType"] == "task", created_wire
        task = await first.finish(created_wire["taskId"])  # created on two, polled on one
        assert text(task["result"]) == "api 1.2.3 is live"
        warmed = await second.finish((await first.start("warm_cache", {"region": "eu-west"}))["taskId"])
        assert text(warmed["result"]) == "eu-west: caches warm"


async def _never(context: Any, params: Any) -> Any:
    """An elicitation callback that is never called: it makes the SDK declare `elicitation`."""
    raise AssertionError("the test answers input through inputResponses")


@exercises()
async def test_howto_replica_enqueue_only_and_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with replica(tmp_path, monkeypatch) as serving, replica(tmp_path, monkeypatch) as working:
        serving.extension.engine.run_tasks = False  # what `mcptasks serve --enqueue-only` sets
        worker = working.extension.engine  # what `mcptasks worker` runs
        async with worker, connect(serving) as tasks:
            task_id = (await tasks.start("warm_cache", {"region": "us-east"}))["taskId"]
            task = await tasks.finish(task_id)
            assert text(task["result"]) == "us-east: caches warm"
            record = await worker.store.get(task_id)
            assert record is not None and record.runner == worker.instance_id


@exercises()
@pytest.mark.slow
def test_howto_replica_cli_worker(tmp_path: Path) -> None:
    port = _free_port()
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {"MCPTASKS_STORE": store, "MCPTASKS_SECRET": "s" * 64, "MCP_REQUEST_STATE_KEY": "k" * 64}
    mcptasks = str(BIN / "mcptasks")
    with running(
        mcptasks, "worker", "docs/snippets/howto_replica.py", "--concurrency", "4", env=env
    ) as worker:
        assert worker.stdout is not None
        first = _readline(worker, TIMEOUT)
        if not first.startswith("mcptasks worker "):
            worker.wait(timeout=TIMEOUT)
            pytest.skip(
                f"`mcptasks worker` did not start a worker (exit {worker.returncode}, output {first!r})"
            )
        worker_id = first.split()[2]
        serve = (
            mcptasks,
            "serve",
            "docs/snippets/howto_replica.py",
            "--transport",
            "http",
            "--port",
            str(port),
        )
        with running(*serve, "--enqueue-only", env=env, port=port):

            async def warm() -> str:
                from mcptasks.client import TaskHandle, TasksClient, start_tool_call

                async with Client(
                    f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient(max_poll_interval=0.05)]
                ) as client:
                    handle = await start_tool_call(client, "warm_cache", {"region": "ap-south"})
                    assert isinstance(handle, TaskHandle)
                    result = await handle.result()
                    assert sdk_text(result) == "ap-south: caches warm"
                    return handle.task_id

            task_id = anyio.run(warm)

            async def runner() -> str | None:
                from mcptasks import SqliteTaskStore

                store = SqliteTaskStore(tmp_path / "shared.db")
                await store.open()
                try:
                    record = await store.get(task_id)
                    return record.runner if record else None
                finally:
                    await store.close()

            assert anyio.run(runner) == worker_id


@exercises("howto_auth.py")
async def test_howto_auth_scopes_tasks_to_their_owner() -> None:
    snippet = load_snippet("howto_auth.py")
    async with serve_http(snippet.app.streamable_http_app()) as url:
        result = await snippet.payroll_as(url, "alice-token", "2026-10")
        assert sdk_text(result) == "payroll 2026-10: 42 employees"
        async with (
            bearer("alice-token") as alice_http,
            bearer("bob-token") as bob_http,
            bearer("nobody") as bad_http,
        ):
            alice = RawClient(alice_http, url)
            bob = RawClient(bob_http, url)
            task_id = (await alice.call("payroll_report", {"month": "2026-11"})).result["taskId"]
            foreign = await bob.send("tasks/get", {"taskId": task_id})
            assert foreign.error["code"] == -32602 and foreign.error["message"] == "Unknown task"
            assert (await bob.send("tasks/cancel", {"taskId": task_id})).error["code"] == -32602
            assert (await alice.finish(task_id))["status"] == "completed"
            rejected = await bad_http.post(url, json={}, headers={"Content-Type": "application/json"})
            assert rejected.status_code == 401


@exercises("howto_fallback.py")
async def test_howto_fallback_two_tools() -> None:
    snippet = load_snippet("howto_fallback.py")
    async with Client(snippet.app.mcp) as client:  # a host without the extension
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["export_table", "task_status", "task_answer", "task_cancel"]
        started = await client.call_tool("export_table", {"table": "orders"})
        assert started.structured_content is not None
        task_id = started.structured_content["taskId"]
        assert started.structured_content == {"taskId": task_id, "status": "working", "pollIntervalMs": 5000}
        assert sdk_text(started) == (
            f"Started background task {task_id} (export_table). It keeps running after this reply. "
            f'Call task_status with taskId="{task_id}" about every 5 s until it is completed; '
            "answer its questions with task_answer; stop it with task_cancel."
        )

        async def status_until(wanted: str) -> Any:
            with anyio.fail_after(TIMEOUT):
                while True:
                    status = await client.call_tool("task_status", {"taskId": task_id})
                    assert status.structured_content is not None
                    if status.structured_content["status"] == wanted:
                        return status
                    await anyio.sleep(0.01)

        asking = await status_until("input_required")
        assert sdk_text(asking) == (
            f"Task {task_id} (export_table) is input required.\n"
            "Latest message: counting the rows of orders\n"
            "It is waiting for answers (use task_answer):\n"
            '- key "input-1": orders has 2,000,000 rows. Export all of them? '
            "Answer with an object with: confirm (boolean: Export every row?)."
        )
        answered = await client.call_tool(
            "task_answer", {"taskId": task_id, "key": "input-1", "answer": True}
        )
        assert answered.is_error is False
        done = await status_until("completed")
        assert "exported orders to exports/orders.csv" in sdk_text(done)
        again = await client.call_tool("task_cancel", {"taskId": task_id})
        assert sdk_text(again) == f"Task {task_id} is cancelled (or had already finished)."
        unknown = await client.call_tool("task_status", {"taskId": "nope"})
        assert unknown.is_error is True
    async with connect(snippet.app) as tasks:  # a client with the extension still gets a real task
        created = await tasks.start("export_table", {"table": "users"})
        assert created["resultType"] == "task"


@exercises("howto_extension.py")
async def test_howto_extension_on_your_own_mcpserver() -> None:
    from mcptasks.cli import load_target
    from mcptasks.ext import extension_of

    snippet = load_snippet("howto_extension.py")
    async with connect(snippet.server) as tasks:
        names = {tool.name for tool in (await tasks.client.list_tools()).tools}
        assert names == {"stock", "recount", "greet"}
        assert (await tasks.client.call_tool("stock", {"sku": "ABC-1"})).structured_content == {"result": 7}
        assert sdk_text(await tasks.client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
        task = await tasks.finish((await tasks.start("recount", {"warehouse": "main"}))["taskId"])
        assert text(task["result"]) == "main: 1,204 items"
    target = load_target(str(SNIPPETS / "howto_extension.py") + ":server")
    assert extension_of(target) is not None


@exercises("howto_client.py")
async def test_howto_client(tmp_path: Path) -> None:
    server = load_snippet("concepts_reports.py")
    fast_polls(server.app)
    snippet = load_snippet("howto_client.py")
    async with serve_http(server.app.streamable_http_app()) as url:
        result = await snippet.transparent(url)
        assert result.structured_content == {"month": "2026-10", "pages": 12, "drafts": True}
        seen = await snippet.explicit(url)
        assert "input_required" in seen and seen[-1] == "completed"
        assert await snippet.outcomes(url) == [
            "failed: -32050 Ledger service unavailable",
            "cancelled: Cancelled by the client.",
        ]
        ledger = tmp_path / "ledger.db"
        task_id = await snippet.start_and_leave(url, ledger)
        results = await snippet.resume_pending(url, ledger)
        assert list(results) == [task_id]
        assert results[task_id].structured_content == {"month": "2027-01", "pages": 12, "drafts": True}
        assert snippet.TaskLedger(ledger).pending() == []
    assert snippet.client_extension.policy.stuck_after == 600.0


def _pytest(snippet: str) -> subprocess.CompletedProcess[str]:
    return run(
        sys.executable,
        "-m",
        "pytest",
        f"docs/snippets/{snippet}",
        "-q",
        "-p",
        "no:cacheprovider",
        timeout=300,
    )


@exercises("howto_custom_store.py", "test_custom_store.py")
@pytest.mark.slow
def test_howto_custom_store_passes_the_store_contract() -> None:
    completed = _pytest("test_custom_store.py")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert re.search(r"\b\d{2} passed", completed.stdout), completed.stdout


@exercises("test_my_tools.py")
@pytest.mark.slow
def test_howto_testing_example_passes() -> None:
    completed = _pytest("test_my_tools.py")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "4 passed" in completed.stdout, completed.stdout


# -- the reference pages are complete --------------------------------------------------------------


def _options(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), ""
                yield from _options(sub, (*path, name))
        else:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    yield path, option


def test_cli_reference_lists_every_command_and_option() -> None:
    from mcptasks import call_cli, cli

    page = (DOCS / "reference" / "cli.md").read_text()
    missing = []
    for parser in (cli.build_parser(), call_cli.build_parser()):
        for path, option in _options(parser):
            if option:
                if f"`{option}" not in page and f" {option} " not in page and f"[{option}" not in page:
                    missing.append(f"{' '.join(path)} {option}")
            elif f"mcptasks {' '.join(path)}" not in page:
                missing.append(" ".join(path))
    assert missing == []


def test_api_reference_lists_every_public_name() -> None:
    import mcptasks
    import mcptasks.client

    api = (DOCS / "reference" / "api.md").read_text()
    client = (DOCS / "reference" / "client.md").read_text()
    client_names = set(mcptasks.client.__all__)
    assert [
        n
        for n in mcptasks.__all__
        if n != "__version__" and n not in client_names and f"::: mcptasks.{n}\n" not in api
    ] == []
    assert [
        n
        for n in mcptasks.client.__all__
        if n != "EXTENSION_ID" and f"::: mcptasks.client.{n}\n" not in client
    ] == []


def test_configuration_page_lists_every_environment_variable() -> None:
    page = (DOCS / "reference" / "configuration.md").read_text()
    names = set()
    for path in (ROOT / "mcptasks").rglob("*.py"):
        names.update(re.findall(r'"(MCPTASKS_[A-Z_]+)"', path.read_text()))
    assert names, "no environment variables found"
    assert sorted(name for name in names if f"`{name}`" not in page) == []


def test_error_page_lists_every_code() -> None:
    from mcptasks import wire

    page = (DOCS / "reference" / "errors.md").read_text()
    codes = [
        wire.MISSING_REQUIRED_CLIENT_CAPABILITY,
        wire.INVALID_PARAMS,
        wire.METHOD_NOT_FOUND,
        wire.HEADER_MISMATCH,
        wire.INTERNAL_ERROR,
        wire.LEGACY_MISSING_CAPABILITY,
        -32000,
    ]
    assert [code for code in codes if f"| {code} |" not in page and f"({code})" not in page] == []


# -- the site builds -------------------------------------------------------------------------------


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]' installs it)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    completed = subprocess.run(
        [mkdocs, "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert not re.search(r"^(WARNING|ERROR)", completed.stderr, re.MULTILINE), completed.stderr
    assert (site / "index.html").is_file()
