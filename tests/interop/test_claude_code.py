"""Claude Code (the real CLI from npm) against our servers; its model is a script (`model_standin`).

Claude Code's MCP client is the real one; only the model API is a stand-in on 127.0.0.1, which
answers each request from a per-conversation script and records what Claude Code handed the model.
The CLI is installed from npm into `.claude-code/` at `CLAUDE_CODE_VERSION` (with Node 22 from the
npm package `node-linux-<arch>` running its install script). `examples/conformance_server.py` is
served with `mcptasks serve` over Streamable HTTP (strict: no missing `Mcp-Name` accepted) and over
stdio, with SQLite stores the tests read; a second HTTP server (and the stdio one, by environment)
uses the `"tools"` fallback.

- Print mode (`claude -p`) declares no extension: an optional task tool runs inline, a required one
  answers -32021 with its remedy, and with the `"tools"` fallback the model follows the task through
  `task_status` / `task_answer`. These conversations run concurrently, once per module.
- The interactive UI (under tmux) declares the extension: a task call is "moved to the background
  as task ...", and its result reaches the model as a task notification; statuses show only in the
  user's task panel; a question is answered in Claude Code's form; the model stops a task with
  TaskStop, the user with `x` in the task panel (Esc interrupts the model's turn, not the task).

Every check is on what the model stand-in received and on the server's task records; waits poll
for a state with generous bounds, never for a time.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conformance_tools import NODE_VERSION, node_package
from model_standin import Block, ModelStandIn, Step, ToolResult, Turn, select, text, tool_use
from processes import clean_env, free_port, serving_http

from mcptasks._runtime.protocol import REQUIRED_TOOL_REMEDY

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".claude-code"
CLAUDE_CODE_VERSION = "2.1.332"
SERVER = "conf"
EXAMPLE = ROOT / "examples" / "conformance_server.py"
API_KEY = "sk-ant-standin-key"
WAIT = 120.0
TRANSPORTS = ["http", "stdio"]

pytestmark = pytest.mark.slow


def tool(name: str) -> str:
    """The name Claude Code gives the model for our server's tool `name`."""
    return f"mcp__{SERVER}__{name}"


# --- the CLI -------------------------------------------------------------------------------------


def install_claude_code() -> Path:
    """Install (once) Claude Code at `CLAUDE_CODE_VERSION` into `.claude-code/`; return its binary.

    The npm package `@anthropic-ai/claude-code` ships its native binary in a platform package
    (`@anthropic-ai/claude-code-linux-x64`, ...), which is what runs here.
    """
    modules = CACHE / "node_modules"
    platform_package = modules / "@anthropic-ai" / f"claude-code-{node_package().removeprefix('node-')}"
    binary = platform_package / "claude"
    if _installed_version(platform_package) == CLAUDE_CODE_VERSION and binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is needed to install Claude Code (install Node.js with npm)")
    CACHE.mkdir(exist_ok=True)
    common = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", str(CACHE)]
    node = f"{node_package()}@{NODE_VERSION}"
    subprocess.run([*common, node], check=True, capture_output=True, timeout=600)
    # Claude Code's install script wants Node 22: run npm with it first on PATH.
    node_bin = modules / node_package() / "bin"
    env = clean_env(PATH=f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    package = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
    subprocess.run([*common, package, node], check=True, capture_output=True, timeout=900, env=env)
    assert _installed_version(platform_package) == CLAUDE_CODE_VERSION, "Claude Code did not install"
    return binary


def _installed_version(package: Path) -> str | None:
    try:
        return str(json.loads((package / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="module")
def claude() -> Path:
    """The Claude Code binary (checked to report the pinned version)."""
    binary = install_claude_code()
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith(CLAUDE_CODE_VERSION), version
    return binary


def claude_env(home: Path, model: ModelStandIn) -> dict[str, str]:
    """The whole environment of a Claude Code process: a private home, the stand-in model, no
    telemetry, updates or other traffic (`IS_SANDBOX`: CI runs as root, where Claude Code refuses
    to skip permission prompts otherwise)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "IS_SANDBOX": "1",
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": API_KEY,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def private_home(base: Path, workdir: Path) -> Path:
    """A home whose Claude Code config skips onboarding, trusts `workdir` and approves the key."""
    home = base / "home"
    home.mkdir(parents=True)
    config = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {str(workdir): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(config))
    return home


# --- the servers ---------------------------------------------------------------------------------


@dataclass
class Servers:
    """The module's HTTP servers: the default one and one with the `"tools"` fallback."""

    default_url: str
    fallback_url: str
    database: Path
    fallback_database: Path
    logs: tuple[Path, Path]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    directory = tmp_path_factory.mktemp("claude-code-servers")
    database, fallback_database = directory / "tasks.db", directory / "fallback.db"
    default_port, fallback_port = free_port(), free_port()
    logs = (directory / "server.log", directory / "fallback.log")
    with (
        serving_http(EXAMPLE, port=default_port, log=logs[0], extra=("--store", f"sqlite:///{database}")),
        serving_http(
            EXAMPLE,
            port=fallback_port,
            log=logs[1],
            extra=("--store", f"sqlite:///{fallback_database}"),
            env=clean_env(MCPTASKS_FALLBACK="tools"),
        ),
    ):
        yield Servers(
            f"http://127.0.0.1:{default_port}/mcp",
            f"http://127.0.0.1:{fallback_port}/mcp",
            database,
            fallback_database,
            logs,
        )
    for log in logs:
        # The strict server refuses tasks/* without an Mcp-Name header: none was refused.
        assert "Mcp-Name" not in log.read_text(errors="replace"), log.read_text(errors="replace")


@pytest.fixture(scope="module")
def model() -> Iterator[ModelStandIn]:
    with ModelStandIn() as standin:
        yield standin


def mcp_config(
    servers: Servers, transport: str, database: Path, *, fallback: bool = False, status_tool: bool = False
) -> str:
    """The `--mcp-config` JSON for our server as `SERVER` (`database`: the stdio server's store;
    `status_tool`: stdio only, the server lists `task_status` beside the task tools)."""
    if transport == "http":
        entry: dict[str, Any] = {
            "type": "http",
            "url": servers.fallback_url if fallback else servers.default_url,
        }
    else:
        env = {"PATH": os.environ.get("PATH", ""), **({"MCPTASKS_FALLBACK": "tools"} if fallback else {})}
        if status_tool:
            env["MCPTASKS_STATUS_TOOL"] = "1"
        command = ["-m", "mcptasks", "serve", str(EXAMPLE), "--store", f"sqlite:///{database}"]
        entry = {"type": "stdio", "command": sys.executable, "args": command, "env": env}
    return json.dumps({"mcpServers": {SERVER: entry}})


def tasks(database: Path) -> list[dict[str, Any]]:
    """Every task record in a SQLite store: `tool`, `status` and the stored body's fields."""
    if not database.exists():
        return []
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT task_id, tool, status, body FROM tasks").fetchall()
    return [{"task_id": i, "tool": t, "status": s, **json.loads(b)} for i, t, s, b in rows]


def task_with(database: Path, name: str, **arguments: Any) -> dict[str, Any] | None:
    """The task of tool `name` whose arguments include `arguments` (None when there is none)."""
    found = [
        record
        for record in tasks(database)
        if record["tool"] == name and arguments.items() <= record["arguments"].items()
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def structured(result: ToolResult) -> dict[str, Any]:
    """A generated fallback tool's result as the model got it: Claude Code hands the model a
    result's `structuredContent` (as JSON) when there is one, so that is what these are."""
    value = json.loads(result.text)
    assert isinstance(value, dict) and "guidance" in value, result.text
    return value


# --- print mode ----------------------------------------------------------------------------------


@dataclass
class PrintCase:
    """One `claude -p` conversation: its script, its server, what came out."""

    name: str
    transport: str
    steps: list[Step]
    fallback: bool = False
    output: str = ""
    turns: tuple[Turn, ...] = ()
    database: Path = Path()


def follow_fallback(started_by: str) -> Step:
    """A model step that follows a fallback task: answer its question yes, poll until it ends."""

    def step(turn: Turn) -> list[Block]:
        status = {"taskId": structured(turn.result_of(tool(started_by)))["taskId"]}
        last = turn.tool_results()[-1]
        if last.name == tool("task_status"):
            seen = structured(last)
            if seen["status"] in ("completed", "failed", "cancelled"):
                return [text("The task ended.")]
            question = re.search(r'key "([^"]+)"', seen["guidance"])
            if question and seen["status"] == "input_required":
                return [tool_use(tool("task_answer"), {**status, "key": question.group(1), "answer": True})]
            time.sleep(0.2)  # the model waits a little between polls
        return [tool_use(tool("task_status"), status)]

    return step


def print_cases(transport: str) -> list[PrintCase]:
    """The print-mode conversations for one transport."""
    polls = [follow_fallback("confirm_delete")] * 60
    return [
        PrintCase(
            f"print-quick-{transport}",
            transport,
            [[select(tool("greet"))], [tool_use(tool("greet"), {"name": f"print {transport}"})]],
        ),
        PrintCase(
            f"print-optional-{transport}",
            transport,
            [
                [select(tool("slow_compute"))],
                [tool_use(tool("slow_compute"), {"seconds": 0.2, "label": f"inline-{transport}"})],
            ],
        ),
        PrintCase(
            f"print-required-{transport}",
            transport,
            [[select(tool("failing_job"))], [tool_use(tool("failing_job"))]],
        ),
        PrintCase(
            f"print-fallback-{transport}",
            transport,
            [
                [select(tool("confirm_delete"), tool("task_status"), tool("task_answer"))],
                [tool_use(tool("confirm_delete"), {"filename": f"fallback-{transport}.txt"})],
                *polls,
            ],
            fallback=True,
        ),
    ]


def run_print(claude: Path, model: ModelStandIn, servers: Servers, case: PrintCase, directory: Path) -> None:
    workdir = directory / case.name
    workdir.mkdir()
    home = private_home(workdir, workdir)
    stdio_database = workdir / "tasks.db"
    config = mcp_config(servers, case.transport, stdio_database, fallback=case.fallback)
    prompt = model.script(case.name, case.steps) + " Use the MCP tools as scripted."
    command = [str(claude), "-p", prompt, "--mcp-config", config, "--strict-mcp-config"]
    command.append("--dangerously-skip-permissions")
    run = subprocess.run(
        command,
        env=claude_env(home, model),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, f"{case.name}: exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    case.output = run.stdout
    case.turns = tuple(model.turns(case.name))
    if case.transport == "stdio":
        case.database = stdio_database
    else:
        case.database = servers.fallback_database if case.fallback else servers.database


@pytest.fixture(scope="module")
def printed(
    claude: Path, model: ModelStandIn, servers: Servers, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, PrintCase]:
    """Every print-mode conversation, run concurrently (each has its own home and script)."""
    directory = tmp_path_factory.mktemp("claude-code-print")
    cases = [case for transport in TRANSPORTS for case in print_cases(transport)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(run_print, claude, model, servers, case, directory) for case in cases]:
            future.result()
    return {case.name: case for case in cases}


def last_result(case: PrintCase, name: str) -> ToolResult:
    assert case.turns, f"{case.name}: the model got no request"
    return case.turns[-1].result_of(tool(name))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_print_mode_quick_result(printed: dict[str, PrintCase], transport: str) -> None:
    case = printed[f"print-quick-{transport}"]
    result = last_result(case, "greet")
    assert not result.is_error
    assert f"Hello, print {transport}!" in result.text
    # Claude Code's system prompt lists the MCP tools as deferred: the model loads them by name.
    listed = case.turns[-1].transcript()
    assert "The following deferred tools are now available via ToolSearch" in listed
    assert tool("greet") in listed and tool("slow_compute") in listed


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_print_mode_optional_task_tool_runs_inline(printed: dict[str, PrintCase], transport: str) -> None:
    case = printed[f"print-optional-{transport}"]
    result = last_result(case, "slow_compute")
    assert not result.is_error
    assert result.text.strip() == f"inline-{transport}: finished after 0.2 s"
    # No extension declared: no task was created.
    assert task_with(case.database, "slow_compute", label=f"inline-{transport}") is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_print_mode_required_task_tool_gets_32021(printed: dict[str, PrintCase], transport: str) -> None:
    case = printed[f"print-required-{transport}"]
    result = last_result(case, "failing_job")
    assert result.is_error
    assert "Tool 'failing_job' requires the client capability extensions" in result.text
    assert REQUIRED_TOOL_REMEDY in result.text
    assert "claude -p" in result.text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_print_mode_fallback_tools(printed: dict[str, PrintCase], transport: str) -> None:
    case = printed[f"print-fallback-{transport}"]
    filename = f"fallback-{transport}.txt"
    # The model gets the start result's structuredContent, whose `guidance` repeats its text.
    started = structured(last_result(case, "confirm_delete"))
    task_id = started["taskId"]
    assert started["guidance"].startswith(f"Started background task {task_id} (confirm_delete).")
    assert f'Call task_status with taskId="{task_id}"' in started["guidance"]
    statuses = [structured(r) for r in case.turns[-1].tool_results() if r.name == tool("task_status")]
    asked = [seen["guidance"] for seen in statuses if seen["status"] == "input_required"]
    assert asked, statuses
    assert f'- key "input-1": Delete {filename}? Answer with an object with: confirm' in asked[0]
    answered = last_result(case, "task_answer")
    assert not answered.is_error, answered.text
    assert statuses[-1]["status"] == "completed"
    # The result's own content blocks follow the text, which this model never sees: it reads
    # the result in the structured `result` field.
    assert statuses[-1]["result"]["content"] == [{"type": "text", "text": f"deleted {filename}"}]
    record = task_with(case.database, "confirm_delete", filename=filename)
    assert record is not None and record["task_id"] == task_id
    assert record["status"] == "completed"
    assert record["result"]["content"] == [{"type": "text", "text": f"deleted {filename}"}]


# --- the interactive UI --------------------------------------------------------------------------


class Terminal:
    """Claude Code's interactive UI in a tmux session of its own (private tmux server, 200x50)."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "tmux.sock"
        self.directory = directory

    def tmux(self, *args: str) -> str:
        run = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return run.stdout

    def start(self, command: list[str], env: dict[str, str]) -> None:
        # `env -i`: the tmux server's own environment does not leak into Claude Code.
        line = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *command])
        self.tmux("new-session", "-d", "-s", "cc", "-x", "200", "-y", "50", "-c", str(self.directory), line)
        self.tmux("set-option", "-t", "cc", "remain-on-exit", "on")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "cc")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "cc", *keys)

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "cc", "-l", line)
        self.keys("Enter")

    def wait_for(self, pattern: str, timeout: float = WAIT) -> str:
        """The screen once `pattern` (a regex) shows on it and the screen has settled (a key sent
        while the UI is still redrawing can be lost)."""
        deadline = time.monotonic() + timeout
        previous = None
        while True:
            screen = self.screen()
            if re.search(pattern, screen) and screen == previous:
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"{pattern!r} never showed; the screen:\n{screen}")
            previous = screen
            time.sleep(0.3)

    def press_until_gone(self, key: str, pattern: str, timeout: float = WAIT) -> None:
        """Press `key` until `pattern` leaves the screen (again every few seconds, in case the UI
        dropped it)."""
        deadline = time.monotonic() + timeout
        while re.search(pattern, self.screen()):
            if time.monotonic() > deadline:
                pytest.fail(f"{pattern!r} stayed after {key}; the screen:\n{self.screen()}")
            self.keys(key)
            for _ in range(10):
                time.sleep(0.3)
                if not re.search(pattern, self.screen()):
                    return

    def close(self) -> None:
        self.tmux("kill-server")


@dataclass
class Session:
    """One interactive conversation: its terminal, its script's case name, the stores to read."""

    terminal: Terminal
    case: str
    database: Path
    model: ModelStandIn

    def until(self, what: str, check: Callable[[Turn], bool]) -> Turn:
        """The model's latest request once one satisfies `check` (`what` names it on failure)."""
        turns = self.model.wait_for(self.case, lambda turns: any(map(check, turns)), timeout=WAIT)
        if not any(map(check, turns)):
            pytest.fail(f"the model never got {what}; the screen:\n{self.terminal.screen()}")
        return turns[-1]

    def result(self, name: str) -> Turn:
        """The model's latest request once the result of tool `name` reached it."""
        return self.until(f"a {name} result", lambda turn: any(r.name == name for r in turn.tool_results()))

    def notified(self) -> tuple[Turn, str]:
        """The model's latest request once a task notification reached it, and the notification."""
        turn = self.until("a task notification", lambda turn: "<task-notification>" in last_user_text(turn))
        return turn, last_user_text(turn)


def last_user_text(turn: Turn) -> str:
    """The latest user message of a request after the prompt ("" when there is none)."""
    texts = turn.user_texts()
    return texts[-1] if texts else ""


@pytest.fixture
def interactive(
    claude: Path, model: ModelStandIn, servers: Servers, tmp_path: Path
) -> Iterator[Callable[[str, str, list[Step]], Session]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is needed to drive Claude Code's interactive UI (apt-get install tmux)")
    terminals: list[Terminal] = []

    def start(case: str, transport: str, steps: list[Step], *, status_tool: bool = False) -> Session:
        workdir = tmp_path / "work"
        workdir.mkdir()
        home = private_home(tmp_path, workdir)
        database = workdir / "tasks.db" if transport == "stdio" else servers.database
        config = mcp_config(servers, transport, database, status_tool=status_tool)
        prompt = model.script(case, steps) + " Use the MCP tools as scripted."
        terminal = Terminal(workdir)
        terminals.append(terminal)
        command = [str(claude), prompt, "--mcp-config", config, "--strict-mcp-config"]
        terminal.start([*command, "--dangerously-skip-permissions"], claude_env(home, model))
        return Session(terminal, case, database, model)

    yield start
    for terminal in terminals:
        terminal.close()


BACKGROUND = re.compile(
    r"started server-side task (?P<task>\S+)\. It was moved to the background as task (?P<local>\w+)"
)


def backgrounded(result: ToolResult) -> re.Match[str]:
    """What Claude Code tells the model when a task tool's call becomes a background task."""
    found = BACKGROUND.search(result.text)
    assert found, result.text
    return found


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_interactive_quick_result(interactive: Any, transport: str) -> None:
    label = f"quick-{transport}"
    session = interactive(
        f"quick-{transport}",
        transport,
        [
            [select(tool("greet"), tool("slow_compute"))],
            [tool_use(tool("greet"), {"name": label})],
            [tool_use(tool("slow_compute"), {"seconds": 0.5, "label": label})],
            [text("Started it.")],
            [text("Got the result.")],
        ],
    )
    turn, notification = session.notified()
    assert f"Hello, {label}!" in turn.result_of(tool("greet")).text
    started = backgrounded(turn.result_of(tool("slow_compute")))
    assert "you'll receive a notification with the result when it completes" in started.string
    assert f"<task-id>{started['local']}</task-id>" in notification
    assert "<status>completed</status>" in notification
    assert f"MCP task {started['task']} ({SERVER}/slow_compute) completed." in notification
    assert f"{label}: finished after 0.5 s" in notification
    record = task_with(session.database, "slow_compute", label=label)
    assert record is not None and record["task_id"] == started["task"]
    assert record["status"] == "completed"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_interactive_question_answered_in_form(interactive: Any, transport: str) -> None:
    filename = f"form-{transport}.txt"
    session = interactive(
        f"form-{transport}",
        transport,
        [
            [select(tool("confirm_delete"))],
            [tool_use(tool("confirm_delete"), {"filename": filename})],
            [text("It may ask you something.")],
            [text("Done.")],
        ],
    )
    terminal = session.terminal
    terminal.wait_for(rf"Delete {re.escape(filename)}\?")
    assert f"MCP server “{SERVER}” requests your input" in terminal.screen()
    record = task_with(session.database, "confirm_delete", filename=filename)
    assert record is not None and record["status"] == "input_required"
    terminal.keys("Space")  # tick the one boolean field
    terminal.wait_for("Confirm: ☒")
    terminal.keys("Down")
    terminal.wait_for("\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT} Accept")
    terminal.press_until_gone("Enter", "requests your input")
    turn, notification = session.notified()
    started = backgrounded(turn.result_of(tool("confirm_delete")))
    assert f"<task-id>{started['local']}</task-id>" in notification
    assert f"deleted {filename}" in notification
    # The question went to the user only: the model never saw it.
    assert f"Delete {filename}?" not in turn.transcript()
    record = task_with(session.database, "confirm_delete", filename=filename)
    assert record is not None and record["status"] == "completed"
    assert record["result"]["content"] == [{"type": "text", "text": f"deleted {filename}"}]


def stop_background_task(turn: Turn) -> list[Block]:
    """The model calls TaskStop with the id Claude Code gave it for the background task."""
    started = backgrounded(turn.result_of(tool("slow_compute")))
    return [tool_use("TaskStop", {"task_id": started["local"]})]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_model_stops_task_with_taskstop(interactive: Any, transport: str) -> None:
    label = f"taskstop-{transport}"
    session = interactive(
        f"taskstop-{transport}",
        transport,
        [
            [select(tool("slow_compute"), "TaskStop")],
            [tool_use(tool("slow_compute"), {"seconds": 600, "label": label})],
            stop_background_task,
            [text("Stopped it.")],
        ],
    )
    turn = session.result("TaskStop")
    started = backgrounded(turn.result_of(tool("slow_compute")))
    stopped = turn.result_of("TaskStop")
    assert not stopped.is_error
    assert f"Task {started['local']} (“{SERVER}/slow_compute”) is stopped." in stopped.text
    record = eventually(
        lambda: (
            (r := task_with(session.database, "slow_compute", label=label))
            and r["status"] == "cancelled"
            and r
        ),
        f"the {label} task to be cancelled",
    )
    assert record["task_id"] == started["task"]


def test_model_reads_progress_with_the_status_tool(interactive: Any) -> None:
    """With `status_tool` on, the model follows its background task's statusMessage by the
    server-side task id Claude Code tells it."""
    label = "status-tool"

    def ask_status(turn: Turn) -> list[Block]:
        started = backgrounded(turn.result_of(tool("slow_compute")))
        return [tool_use(tool("task_status"), {"taskId": started["task"]})]

    session = interactive(
        label,
        "stdio",
        [
            [select(tool("slow_compute"), tool("task_status"))],
            [tool_use(tool("slow_compute"), {"seconds": 600, "label": label})],
            ask_status,
            [text("It is running.")],
        ],
        status_tool=True,
    )
    turn = session.result(tool("task_status"))
    started = backgrounded(turn.result_of(tool("slow_compute")))
    status = turn.result_of(tool("task_status")).text
    assert f"Task {started['task']} (slow_compute) is working." in status
    assert f"Latest message: {label}: " in status


def test_user_sees_statuses_and_stops_task(interactive: Any) -> None:
    label = "panel-http"
    released = threading.Event()

    def think_long(turn: Turn) -> list[Block]:
        released.wait(WAIT)  # until the user interrupts this turn with Esc
        return [text("Still thinking.")]

    session = interactive(
        "panel-http",
        "http",
        [
            [select(tool("slow_compute"))],
            [tool_use(tool("slow_compute"), {"seconds": 600, "label": label})],
            think_long,
            [text("It runs in the background.")],
        ],
    )
    terminal = session.terminal
    try:
        started = backgrounded(session.result(tool("slow_compute")).result_of(tool("slow_compute")))
        # Esc interrupts the model's turn; the task goes on.
        terminal.wait_for("esc to interrupt")
        terminal.press_until_gone("Escape", "esc to interrupt")
        terminal.wait_for("Interrupted")
        released.set()
        record = task_with(session.database, "slow_compute", label=label)
        assert record is not None and record["task_id"] == started["task"]
        assert record["status"] == "working"
        # The statuses reach the user's task panel (↓ to manage, Enter to view the task).
        terminal.wait_for("↓ to manage")
        terminal.keys("Down")
        terminal.wait_for("enter to view tasks")
        terminal.keys("Enter")
        terminal.wait_for(rf"Status: +working · {label}: \d+\.\d/600 s")
        terminal.keys("Escape")
        terminal.wait_for("Esc to close")
        terminal.keys("Escape")
        # The user asks; the model's request carries no status of the task.
        terminal.wait_for("↓ to manage")
        terminal.type("How is it going?")
        turn = session.until("the user's question", lambda turn: "How is it going?" in last_user_text(turn))
        assert not re.search(rf"{label}: (started|\d)", turn.transcript())
        # `x` in the task panel stops it: Claude Code cancels the task on the server.
        terminal.wait_for("↓ to manage")
        terminal.keys("Down")
        terminal.wait_for("enter to view tasks")
        terminal.keys("Enter")
        terminal.wait_for("x to stop")
        terminal.keys("x")
        eventually(
            lambda: (
                (r := task_with(session.database, "slow_compute", label=label)) and r["status"] == "cancelled"
            ),
            f"the {label} task to be cancelled",
        )
    finally:
        released.set()


def test_clients_tested_page_names_this_version() -> None:
    """docs/how-to/clients-tested.md names the Claude Code version tested here, and this file."""
    page = (ROOT / "docs" / "how-to" / "clients-tested.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| [Claude Code]"))
    assert f"| {CLAUDE_CODE_VERSION} |" in row
    assert "tests/interop/test_claude_code.py" in row
