"""The examples, driven end to end through the official SDK client, in process.

Each test loads an example file fresh, connects `mcp.Client` to its `MCPServer` with the tasks
extension advertised, and speaks `tools/call` + `tasks/get|update|cancel` as a client would.
Every wait polls the task (or the file system) under a generous deadline: nothing synchronises
by sleeping. The job-runner tests use tiny step commands through the `JOB_RUNNER_STEPS_<KIND>`
environment variables, which the example reads at call time.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from fresh_modules import load_fresh
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult
from sdk_helpers import connect, eventually, poll, text, the_input_request

from mcptasks import EngineConfig, Limits, TaskServer, ToolError
from mcptasks import Result as TaskResult
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXTENSION_ID = "io.modelcontextprotocol/tasks"

pytestmark = pytest.mark.anyio


def load_example(name: str) -> ModuleType:
    """Import `examples/<name>.py` as a fresh module (a fresh server, engine and store)."""
    return load_fresh(EXAMPLES / f"{name}.py")


# -- hello -----------------------------------------------------------------------------------------


async def test_hello_completes_as_a_task() -> None:
    hello = load_example("hello")
    async with connect(hello.app) as tasks:
        listed = await tasks.client.list_tools()
        assert [t.name for t in listed.tools] == ["hello"]
        task_id = (await tasks.start("hello", {"name": "Ada"}))["taskId"]
        task = await tasks.finish(task_id)
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is False
    assert text(task["result"]) == "Hello, Ada!"
    assert any("thinking about Ada" in m for m in tasks.seen_status), tasks.seen_status


async def test_hello_runs_inline_without_the_extension() -> None:
    hello = load_example("hello")
    async with connect(hello.app, tasks=False) as tasks:
        result = await tasks.client.call_tool("hello", {})
    assert result.is_error is False
    assert [getattr(block, "text", None) for block in result.content] == ["Hello, world!"]


# -- conformance server ----------------------------------------------------------------------------


async def test_conformance_server_lists_the_seven_fixture_tools_greet_first() -> None:
    conformance = load_example("conformance_server")
    async with connect(conformance.app) as tasks:
        listed = await tasks.client.list_tools()
    names = [tool.name for tool in listed.tools]
    assert names == [
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
    ]
    task_support = {
        tool.name: (tool.meta or {}).get(EXTENSION_ID, {}).get("taskSupport") for tool in listed.tools
    }
    assert task_support["greet"] is None
    assert task_support["failing_job"] == "required"
    assert task_support["slow_compute"] == "optional"


# -- job runner ------------------------------------------------------------------------------------


def py(script: str) -> list[str]:
    """A step command running `script` with the test's interpreter."""
    return [sys.executable, "-c", script]


def set_steps(monkeypatch: pytest.MonkeyPatch, pipeline: str, *commands: list[str] | str) -> None:
    monkeypatch.setenv(f"JOB_RUNNER_STEPS_{pipeline.upper()}", json.dumps(list(commands)))


@pytest.fixture
def job_runner() -> ModuleType:
    return load_example("job_runner")


def _running(pid: int) -> bool:
    """Whether `pid` still runs. A zombie (exited, waiting for its parent to reap it) does not:
    an orphaned grandchild is reaped by PID 1, which some containers never do."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


async def wait_for_file(path: Path) -> str:
    await eventually(path.exists, f"{path} to appear")
    return await anyio.Path(path).read_text()


async def test_job_runner_streams_output_and_publishes_after_approval(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    # The step prints one line, then waits for the test to have seen it in statusMessage.
    set_steps(
        monkeypatch,
        "test",
        py(
            "import os, sys, time\n"
            "print('unit-line-1', flush=True)\n"
            "deadline = time.monotonic() + 60\n"
            f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline: time.sleep(0.02)\n"
            "print('unit-line-2', flush=True)\n"
        ),
        py("print('lint ok')"),
    )
    set_steps(monkeypatch, "publish", py("print('uploaded 1 artifact')"))
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "test"}))["taskId"]
        await tasks.wait(
            task_id, lambda t: "unit-line-1" in (t.get("statusMessage") or ""), "the first output line"
        )
        go.touch()
        task = await tasks.wait(task_id, lambda t: t["status"] == "input_required", "the approval")
        key, request = the_input_request(task)
        assert request["method"] == "elicitation/create"
        assert "publish" in request["params"]["requestedSchema"]["properties"]
        assert "test pipeline passed" in request["params"]["message"]
        ack = await tasks.update(task_id, {key: {"action": "accept", "content": {"publish": True}}})
        assert ack["resultType"] == "complete"
        task = await tasks.finish(task_id)

    assert task["status"] == "completed", task
    result = task["result"]
    assert result["isError"] is False, result
    report = result["structuredContent"]
    assert report["kind"] == "test"
    assert report["exit_code"] == 0
    assert report["published"] is True
    assert report["duration_s"] > 0
    assert [step["exit_code"] for step in report["steps"]] == [0, 0, 0]
    tail = report["output_tail"]
    assert "unit-line-2" in tail and "lint ok" in tail and "uploaded 1 artifact" in tail
    assert tail.index("unit-line-2") < tail.index("lint ok") < tail.index("uploaded 1 artifact")
    assert json.loads(text(result)) == report


async def _engine_record(
    engine: TaskEngine, task_id: str, done: Callable[[TaskRecord], bool], what: str
) -> TaskRecord:
    """Poll the engine's record of `task_id` until `done` holds."""
    record: TaskRecord = await poll(lambda: engine.get(task_id, owner="o"), done, what=what)
    return record


async def test_job_runner_survives_a_restart_while_it_waits_for_approval(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Durable: a server stopped while the task waits for approval hands it over; the next start
    replays the body from its journal (no command runs again), asks the same question under the
    same key, and the answer given to that key completes the task."""
    log = tmp_path / "runs.log"
    append = "open({path!r}, 'a').write({line!r} + chr(10)); print({line!r})"
    set_steps(monkeypatch, "build", py(append.format(path=str(log), line="build")))
    set_steps(monkeypatch, "publish", py(append.format(path=str(log), line="publish")))
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    config = EngineConfig(immediate_results=False)
    async with TaskEngine(url, config=config, tools=[job_runner.run_pipeline]) as first:
        created = await first.start(job_runner.run_pipeline, {"kind": "build"}, owner="o")
        waiting = await _engine_record(
            first, created.task_id, lambda r: r.status == "input_required", "the approval"
        )
    (key,) = waiting.input_requests
    question = waiting.input_requests[key]
    # The server started again: it finds the task handed over and replays it.
    monkeypatch.setenv("JOB_RUNNER_STEPS_BUILD", "[]")  # the replay keeps the journalled commands
    async with TaskEngine(url, config=config, tools=[job_runner.run_pipeline]) as second:
        again = await _engine_record(
            second, created.task_id, lambda r: r.status == "input_required", "the question again"
        )
        assert again.input_requests == {key: question}
        await second.update(
            created.task_id, {key: {"action": "accept", "content": {"publish": True}}}, owner="o"
        )
        done = await _engine_record(second, created.task_id, lambda r: r.status == "completed", "the end")
    assert done.result is not None and done.result["isError"] is False, done.result
    report = done.result["structuredContent"]
    assert report["published"] is True
    assert [step["exit_code"] for step in report["steps"]] == [0, 0]
    assert report["output_tail"][-1] == "publish"
    assert "build" in report["output_tail"]
    assert log.read_text().splitlines() == ["build", "publish"]  # each command ran once


@pytest.mark.parametrize(
    "answer",
    [{"action": "decline"}, {"action": "accept", "content": {"publish": False}}],
    ids=["declined", "accepted-no"],
)
async def test_job_runner_does_not_publish_without_approval(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answer: dict[str, Any]
) -> None:
    marker = tmp_path / "published"
    set_steps(monkeypatch, "build", py("print('built')"))
    set_steps(monkeypatch, "publish", py(f"open({str(marker)!r}, 'w').close()"))
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "build"}))["taskId"]
        task = await tasks.wait(task_id, lambda t: t["status"] == "input_required", "the approval")
        key, _ = the_input_request(task)
        await tasks.update(task_id, {key: answer})
        task = await tasks.finish(task_id)

    assert task["status"] == "completed", task
    report = task["result"]["structuredContent"]
    assert report["published"] is False
    assert report["exit_code"] == 0
    assert len(report["steps"]) == 1
    assert "built" in report["output_tail"]
    assert not marker.exists()


async def test_job_runner_without_elicitation_finishes_without_publishing(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A client that opted in to tasks but cannot answer questions is never asked.
    marker = tmp_path / "published"
    set_steps(monkeypatch, "test", py("print('ok')"))
    set_steps(monkeypatch, "publish", py(f"open({str(marker)!r}, 'w').close()"))
    async with connect(job_runner.app, elicitation_callback=None) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "test"}))["taskId"]
        task = await tasks.finish(task_id)

    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"]["published"] is False
    assert "cannot answer the approval question" in task["statusMessage"]
    assert not marker.exists()


async def test_job_runner_inline_runs_every_step_once(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Without the tasks extension but with elicitation, the approval is an input_required round;
    # the steps before it must not run again when the client retries with the answer.
    log = tmp_path / "runs.log"
    append = "open({path!r}, 'a').write({line!r} + chr(10))"
    set_steps(monkeypatch, "test", py(append.format(path=str(log), line="test")))
    set_steps(monkeypatch, "publish", py(append.format(path=str(log), line="publish")))
    asked: list[str] = []

    async def approve(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"publish": True})

    async with Client(job_runner.app.mcp, elicitation_callback=approve) as client:
        result = await client.call_tool("run_pipeline", {"kind": "test"})

    assert result.is_error is False, result
    assert result.structured_content is not None and result.structured_content["published"] is True
    assert len(asked) == 1
    assert log.read_text().splitlines() == ["test", "publish"]


async def test_job_runner_failing_step_is_a_tool_error_with_the_tail(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    never = tmp_path / "second-step-ran"
    set_steps(
        monkeypatch,
        "test",
        py(
            "import sys\nprint('collected 3 items')\nprint('FAILED test_math.py::test_add', flush=True)\nsys.exit(3)"
        ),
        py(f"open({str(never)!r}, 'w').close()"),
    )
    async with connect(job_runner.app) as tasks:
        task = await tasks.run("run_pipeline", {"kind": "test"})

    assert task["status"] == "completed", task  # a tool error is not a task failure
    result = task["result"]
    assert result["isError"] is True
    message = text(result)
    assert "exited with 3" in message
    assert "FAILED test_math.py::test_add" in message and "collected 3 items" in message
    assert not never.exists()


async def test_job_runner_throttles_status_writes(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import RecordingStore

    store = RecordingStore()
    job_runner.app.use_store(store)
    # The engine's own coalescing is off, so the writes are the example's throttle alone (with it
    # on, a last line yielded within Limits.status_interval of the next status is superseded by it,
    # as documented: the last status wins).
    unthrottled = replace(job_runner.app.extension.config, limits=Limits(status_interval=0))
    job_runner.app.configure(unthrottled)
    chatty = "import time\nend, i = time.monotonic() + 1.0, 0\nwhile time.monotonic() < end:\n    i += 1; print(f'line {i}')\n"
    set_steps(monkeypatch, "build", py(chatty))
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "build"}))["taskId"]
        task = await tasks.wait(task_id, lambda t: t["status"] == "input_required", "the approval")
        key, _ = the_input_request(task)
        await tasks.update(task_id, {key: {"action": "decline"}})
        task = await tasks.finish(task_id)
    last_line = task["result"]["structuredContent"]["output_tail"][-1]
    messages = [record.status_message for record in store.of(task_id)]
    writes = [m for previous, m in zip([None, *messages[:-1]], messages, strict=True) if m != previous]
    step_lines = [m for m in writes if m and m.startswith("build 1/1: line ")]
    # The step printed lines for 1 s: at most one write per STATUS_INTERVAL (generous slack for a
    # loaded machine), the first line at once, and the very last line once the output ended.
    assert 2 <= len(step_lines) <= 2.0 / job_runner.STATUS_INTERVAL + 2, step_lines
    assert step_lines[-1] == f"build 1/1: {last_line}"
    assert int(last_line.split()[1]) > 10 * len(step_lines)  # many lines, few writes


async def test_job_runner_runs_shell_strings_and_merges_stderr(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_steps(monkeypatch, "build", "echo to-stdout; echo to-stderr 1>&2; read line || echo no-stdin")
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "build"}))["taskId"]
        task = await tasks.wait(task_id, lambda t: t["status"] == "input_required", "the approval")
        key, _ = the_input_request(task)
        await tasks.update(task_id, {key: {"action": "decline"}})
        task = await tasks.finish(task_id)
    report = task["result"]["structuredContent"]
    assert report["output_tail"][-3:] == ["to-stdout", "to-stderr", "no-stdin"]
    assert report["output_tail"][-4] == "$ echo to-stdout; echo to-stderr 1>&2; read line || echo no-stdin"
    assert report["steps"][0]["command"] == "echo to-stdout; echo to-stderr 1>&2; read line || echo no-stdin"


async def test_job_runner_reports_a_program_that_cannot_start(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    set_steps(monkeypatch, "test", [str(tmp_path / "no-such-program")])
    async with connect(job_runner.app) as tasks:
        task = await tasks.run("run_pipeline", {"kind": "test"})
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is True
    assert "cannot start" in text(task["result"]) and "no-such-program" in text(task["result"])


async def test_job_runner_rejects_a_malformed_override(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_RUNNER_STEPS_BUILD", '{"not": "a list"}')
    async with connect(job_runner.app) as tasks:
        task = await tasks.run("run_pipeline", {"kind": "build"})
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is True
    assert "JOB_RUNNER_STEPS_BUILD" in text(task["result"])


async def test_job_runner_rejects_an_unknown_kind(job_runner: ModuleType) -> None:
    async with connect(job_runner.app) as tasks:
        result = await tasks.call("run_pipeline", {"kind": "deploy"})
    assert result["resultType"] == "complete", result  # invalid arguments: no task is created
    assert result["isError"] is True
    assert "kind" in text(result)


def _stubborn_step(pid_file: Path, *, leader_ignores_term: bool, child_ignores_term: bool) -> list[str]:
    """A step that starts a grandchild, writes `<leader pid> <grandchild pid>`, prints, and sleeps."""
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    grandchild = (
        "import os, signal, sys, time\n"
        + (ignore + "\n" if child_ignores_term else "")
        + "path = sys.argv[1]\n"
        "open(path + '.tmp', 'w').write(f'{os.getppid()} {os.getpid()}')\n"
        "os.replace(path + '.tmp', path)\n"
        "time.sleep(120)\n"
    )
    return py(
        "import signal, subprocess, sys, time\n"
        + (ignore + "\n" if leader_ignores_term else "")
        + f"subprocess.Popen([sys.executable, '-c', {grandchild!r}, {str(pid_file)!r}])\n"
        "print('step running', flush=True)\n"
        "time.sleep(120)\n"
    )


async def assert_processes_end(pids: list[int]) -> None:
    await eventually(lambda: not any(_running(pid) for pid in pids), f"processes {pids} to end")


@pytest.mark.parametrize(
    ("leader_ignores_term", "child_ignores_term"),
    [(False, False), (True, False), (False, True)],
    ids=["polite", "stubborn-leader", "stubborn-grandchild"],
)
async def test_job_runner_cancel_kills_the_whole_process_group(
    job_runner: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    leader_ignores_term: bool,
    child_ignores_term: bool,
) -> None:
    pid_file = tmp_path / "pids"
    step = _stubborn_step(
        pid_file, leader_ignores_term=leader_ignores_term, child_ignores_term=child_ignores_term
    )
    set_steps(monkeypatch, "build", step)
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "build"}))["taskId"]
        await tasks.wait(task_id, lambda t: "step running" in (t.get("statusMessage") or ""), "output")
        pids = [int(p) for p in (await wait_for_file(pid_file)).split()]
        assert all(_running(pid) for pid in pids)
        assert os.getpgid(pids[1]) == pids[0] != os.getpgid(0)  # its own process group

        ack = await tasks.cancel(task_id)
        assert ack["resultType"] == "complete"
        await assert_processes_end(pids)
        task = await tasks.get(task_id)
        assert task["status"] == "cancelled", task
        assert "result" not in task


async def test_job_runner_server_shutdown_kills_a_running_step(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    set_steps(
        monkeypatch, "test", _stubborn_step(pid_file, leader_ignores_term=False, child_ignores_term=True)
    )
    async with connect(job_runner.app) as tasks:
        await tasks.start("run_pipeline", {"kind": "test"})
        pids = [int(p) for p in (await wait_for_file(pid_file)).split()]
    # The client is gone and the server's lifespan has ended: the engine stopped the body.
    await assert_processes_end(pids)


def test_job_runner_reads_overrides_at_call_time(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert job_runner.steps_for("test") == job_runner.PIPELINES["test"]
    monkeypatch.setenv("JOB_RUNNER_STEPS_TEST", json.dumps(["make test", ["tox", "-e", "py"]]))
    assert job_runner.steps_for("test") == ["make test", ["tox", "-e", "py"]]
    assert job_runner.describe(["echo", "a b"]) == "echo 'a b'"
    for bad in ("[", "[]x", '[""]', "[[]]", "[1]", '"make"'):
        monkeypatch.setenv("JOB_RUNNER_STEPS_TEST", bad)
        with pytest.raises(ToolError, match="JOB_RUNNER_STEPS_TEST"):
            job_runner.steps_for("test")


@pytest.mark.slow
async def test_job_runner_default_build_pipeline(
    job_runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pipeline in ("test", "build", "publish"):
        monkeypatch.delenv(f"JOB_RUNNER_STEPS_{pipeline.upper()}", raising=False)
    async with connect(job_runner.app) as tasks:
        task_id = (await tasks.start("run_pipeline", {"kind": "build"}))["taskId"]
        task = await tasks.wait(task_id, lambda t: t["status"] == "input_required", "the approval")
        key, _ = the_input_request(task)
        await tasks.update(task_id, {key: {"action": "accept", "content": {"publish": True}}})
        task = await tasks.finish(task_id)
    report = task["result"]["structuredContent"]
    assert report["published"] is True
    assert len(report["steps"]) == 3
    assert report["output_tail"][-1] == "uploading artifact: 100%"
    assert any("compiling module" in m for m in tasks.seen_status), tasks.seen_status
    # the stand-ins are shown by a short label, not as a shell-quoted interpreter command line
    labels = ["compile (stand-in)", "package (stand-in)", "upload (stand-in)"]
    assert [step["command"] for step in report["steps"]] == labels
    assert [line for line in report["output_tail"] if "(stand-in)" in line] == labels
    shown = [*tasks.seen_status, *report["output_tail"]]
    assert not [m for m in shown if sys.executable in m or "import time" in m], shown


# -- the code before a generator's first yield runs in the task, not on tools/call ----------------


def _early_server() -> TaskServer:
    app = TaskServer("early")

    @app.task_tool
    async def broken_config() -> AsyncIterator[str]:
        raise ToolError("bad configuration")
        yield "never"  # pragma: no cover

    @app.task_tool
    async def slow_start() -> AsyncIterator[str | TaskResult]:
        await anyio.sleep(3)
        yield "started"
        yield TaskResult("done")

    return app


async def test_tool_error_before_the_first_yield_is_a_tool_error() -> None:
    async with connect(_early_server()) as tasks:
        task = await tasks.run("broken_config")
    assert task["status"] == "completed", task  # a tool error is not a task failure
    result = task["result"]
    assert result["isError"] is True
    assert "bad configuration" in text(result)


async def test_tools_call_returns_the_task_before_the_first_yield() -> None:
    async with connect(_early_server()) as tasks:
        started = anyio.current_time()
        task_id = (await tasks.start("slow_start"))["taskId"]
        latency = anyio.current_time() - started
        await tasks.finish(task_id)
    assert latency < 1.5, f"tools/call took {latency:.1f} s"


# -- regressions of bugs found while writing these tests ---------------------------------------


def test_examples_pass_mypy_strict(tmp_path: Path) -> None:
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.exists():
        pytest.skip("mypy is not installed next to this interpreter")
    done = subprocess.run(
        [
            str(mypy),
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            "examples/job_runner.py",
            "examples/hello.py",
        ],
        capture_output=True,
        text=True,
        cwd=EXAMPLES.parent,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- webhook_receiver --------------------------------------------------------------------------------


def start_receiver(port: int, secret: str) -> subprocess.Popen[str]:
    """`python examples/webhook_receiver.py --port PORT`, as the how-to runs it."""
    env = {**os.environ, "MCPTASKS_WEBHOOK_SECRET": secret}
    command = [sys.executable, str(EXAMPLES / "webhook_receiver.py"), "--port", str(port)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)


def accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


async def test_the_webhook_receiver_verifies_and_prints_each_event_once() -> None:
    import httpx2
    from processes import free_port
    from standardwebhooks.webhooks import Webhook
    from webhook_helpers import SECRET

    port = free_port()
    receiver = start_receiver(port, SECRET)
    url = f"http://127.0.0.1:{port}/hooks"
    try:
        await eventually(lambda: accepting(port), "the receiver to listen")
        hello = load_example("hello")
        settings = {"webhooks": (url,), "webhook_secret": SECRET, "webhook_allow_private": True}
        hello.app.configure(replace(hello.app.config, **settings))
        async with connect(hello.app) as tasks:
            task_id = (await tasks.start("hello", {"name": "Ada"}))["taskId"]
            await tasks.finish(task_id)
        assert receiver.stdout is not None
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(receiver.stdout.readline, abandon_on_cancel=True)
        event = json.loads(line)
        assert event["type"] == "task.completed" and event["id"].startswith("msg_")
        assert event["data"]["taskId"] == task_id and event["data"]["tool"] == "hello"
        # the same event again (a retry) is taken but not printed; a forged one is refused
        body = json.dumps({"type": "task.completed", "timestamp": "x", "data": {}})
        now = datetime.now(tz=timezone.utc)
        headers = {
            "webhook-id": event["id"],
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(SECRET).sign(event["id"], now, body),
        }
        async with httpx2.AsyncClient() as http:
            assert (await http.post(url, content=body, headers=headers)).status_code == 200
            forged = {**headers, "webhook-signature": "v1,AAAA"}
            assert (await http.post(url, content=body, headers=forged)).status_code == 401
    finally:
        receiver.terminate()
        rest, _ = receiver.communicate(timeout=30)
    assert rest == ""  # nothing printed after the first event
