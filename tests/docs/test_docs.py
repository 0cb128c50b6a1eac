"""The documentation works as displayed: the code every page shows is the code these tests run.

The pages keep their code in the Markdown. The tutorial, home page and README are the source of their
code (`doc_blocks` rebuilds each tutorial step from the page); the other pages show the files under
`docs/snippets/` whole, kept equal to them by `python tests/sync_docs.py`.

(a) Each `docs/snippets/*.py` is loaded as a fresh module (or run by pytest in a subprocess, for the
    snippets that are test files), and the servers it defines are driven through the official SDK's
    in-process client (`mcp.Client(app.mcp, extensions=[advertise(EXTENSION_ID)])` plus typed
    `tasks/*` requests, from `sdk_helpers`), over Streamable HTTP where the page is about HTTP, or
    through the CLI commands the pages show. The JSON on the Concepts page (`docs/snippets/wire/`)
    is replayed against its server and compared with the real answers.
    `test_every_snippet_is_exercised` fails when a snippet is added without a test here.
(b) The reference pages list every public name, CLI option and environment variable
    (tests/docs/test_site.py builds the site and looks at it in a browser).

Nothing synchronises by sleeping: every wait polls observable state under a generous deadline.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import itertools
import json
import logging
import os
import re
import selectors
import shlex
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
import sync_docs
from doc_blocks import blocks, build_file, write_file
from engines import TemporalDevServer
from fresh_modules import load_fresh
from mcp import Client
from mcp_types import ElicitResult
from operator_stores import seeded_sqlite
from push_helpers import as_notification, listen, without_meta
from sdk_helpers import (
    BY_HAND,
    RawClient,
    Tasks,
    bearer,
    connect,
    eventually,
    mcp_error,
    poll,
    serve_http,
    tasks_extension,
    text,
    the_input_request,
)

from mcptasks.wire import TERMINAL_STATUSES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SNIPPETS = DOCS / "snippets"
WIRE = SNIPPETS / "wire"
TUTORIAL = DOCS / "tutorial.md"
TIMEOUT = 30.0
"""Upper bound of every wait; never a synchronisation delay."""
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.anyio


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
    assert on_disk - EXERCISED == set(), "snippets without a test in tests/docs/test_docs.py"
    assert EXERCISED - on_disk == set(), "tests name snippets that do not exist"


def test_every_snippet_is_shown_whole_and_as_it_is() -> None:
    """Pages show snippet code in the Markdown (no include lines), all of it, equal to the file."""
    stale = [
        str(page.relative_to(ROOT))
        for page in sync_docs.pages()
        if sync_docs.synced(page) != page.read_text()
    ]
    assert stale == [], "run: python tests/sync_docs.py"
    refs = sync_docs.shown_refs()
    shown = {ref.removeprefix("docs/snippets/").partition(":")[0] for ref in refs}
    assert _snippet_files() - shown == set(), "snippets no page shows"
    unshown = {name: sync_docs.unshown_lines(SNIPPETS / name, refs) for name in _snippet_files()}
    assert {name: lines for name, lines in unshown.items() if lines} == {}, "code lines no page shows"


# -- loading snippets and talking to their servers --------------------------------------------

_counter = itertools.count()


def load_snippet(name: str) -> ModuleType:
    """Import `docs/snippets/<name>` as a fresh module (fresh server, engine and store)."""
    return load_file(SNIPPETS / name)


def load_built(directory: Path, page: Path, name: str, *, through: str | None = None) -> ModuleType:
    """Import the file `name` as a reader builds it from `page` up to the section `through`."""
    return load_file(write_file(page, name, directory / f"{name}-{next(_counter)}", through=through))


def load_file(path: Path) -> ModuleType:
    """Import the Python file `path` as a fresh module."""
    return load_fresh(path)


def sdk_text(result: Any) -> str:
    """The text of an SDK `CallToolResult`."""
    return "".join(getattr(block, "text", "") for block in result.content)


def fast_polls(app: Any, interval_ms: int = 20) -> None:
    """Lower the advertised poll interval of every task tool of `app` (the client follows it)."""
    for tool in app.extension.task_tools.values():
        tool.poll_interval_ms = interval_ms


# -- tutorial: every step as the page shows it ------------------------------------------------------
#
# The tutorial keeps its code in docs/tutorial.md; doc_blocks rebuilds hello.py, ci.py and client.py
# from the page's blocks exactly as a reader following it has them at the end of each step.


@exercises()
async def test_tutorial_1_hello_runs_as_a_task_and_inline(tmp_path: Path) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "hello.py", through="Step 1")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("hello", {"name": "Ada"})
        assert created["status"] == "working"
        task = await tasks.finish(created["taskId"])
        seen = tasks.seen_status
    assert "thinking about Ada..." in seen
    assert task["status"] == "completed", task
    assert text(task["result"]) == "Hello, Ada!"
    async with connect(snippet.app, tasks=False) as plain:
        result = await plain.client.call_tool("hello", {"name": "Bo"})
    assert [getattr(block, "text", None) for block in result.content] == ["Hello, Bo!"]


@exercises()
async def test_tutorial_2_streams_output_and_returns_a_report(tmp_path: Path) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 2")
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "build"})
        task = await tasks.finish(created["taskId"])
        seen = tasks.seen_status
    assert task["status"] == "completed", task
    report = task["result"]["structuredContent"]
    assert report["kind"] == "build" and report["steps"] == 2
    assert report["last_line"] == "built dist/app-1.0-py3-none-any.whl"
    assert any(message.startswith("build 1/2: compiling") for message in seen), seen


@exercises()
async def test_tutorial_2_failing_step_is_a_tool_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 2")
    monkeypatch.setitem(snippet.PIPELINES, "test", [snippet.python("print('boom'); raise SystemExit(3)")])
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "test"})
        task = await tasks.finish(created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["isError"] is True
    assert text(task["result"]) == "test step 1 exited with 3: boom"


@pytest.mark.parametrize("approve", [True, False])
@exercises()
async def test_tutorial_3_asks_for_approval(tmp_path: Path, approve: bool) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 3")
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


@exercises()
async def test_tutorial_4_cancel_ends_the_whole_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 4")
    marker = f"docs-tutorial-{os.getpid()}-{next(_counter)}"
    sleeper = f"import time; time.sleep(120)  # {marker}"
    step = snippet.python(
        "import subprocess, sys, time",
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}])",
        "print('child and grandchild running', flush=True)",
        f"time.sleep(120)  # {marker}",
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
async def test_tutorial_4_runs_to_completion(tmp_path: Path) -> None:
    snippet = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 4")
    assert snippet.KILL_GRACE_SECONDS == 2.0
    async with connect(snippet.app) as tasks:
        created = await tasks.start("run_pipeline", {"kind": "build"})
        task = await tasks.wait_input(created["taskId"])
        key, _ = the_input_request(task)
        await tasks.update(created["taskId"], {key: {"action": "decline"}})
        task = await tasks.finish(created["taskId"])
    assert task["status"] == "completed", task
    assert task["result"]["structuredContent"]["published"] is False
    assert task["statusMessage"] == "publishing skipped"


@exercises()
async def test_tutorial_5_client_follows_the_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = load_built(tmp_path, TUTORIAL, "ci.py", through="Step 5")  # the durable runner
    client = load_built(tmp_path, TUTORIAL, "client.py")
    fast_polls(server.app)
    report = await client.main(server.app.mcp, "build")
    assert report is not None and report["published"] is True
    printed = capsys.readouterr().out
    assert "server asks: The build pipeline passed. Publish the artifacts?  -> yes" in printed
    assert "[completed] publish 1/1: uploading: 100%" in printed


def test_tutorial_code_is_complete_and_lint_clean(tmp_path: Path) -> None:
    """Every Python block of the tutorial builds a file, and each step's files pass ruff."""
    untitled = [block.where for block in blocks(TUTORIAL) if block.lang == "python" and not block.title]
    assert untitled == [], "Python blocks the tests do not run"
    ruff = shutil.which("ruff", path=str(BIN))
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    steps = [("hello.py", "Step 1"), *(("ci.py", f"Step {n}") for n in (2, 3, 4, 5))]
    files = [
        write_file(TUTORIAL, name, tmp_path / step.replace(" ", ""), through=step) for name, step in steps
    ]
    files.append(write_file(TUTORIAL, "client.py", tmp_path / "Step5"))
    checked = subprocess.run(
        [
            ruff,
            "check",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--config",
            "lint.isort.known-first-party=['mcptasks']",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_building_a_file_replays_adds_and_replacements(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# One\n\n"
        '```python title="m.py"\nimport os\n\nX = 1\n"""About X."""\n\n\n# says hi\ndef f():\n    return X\n```\n\n'
        "# Two\n\n"
        '```python title="m.py — replace X, f"\nX = 2\n```\n\n'
        '```python title="m.py — replace the imports"\nimport sys\n```\n\n'
        '```python title="m.py"\ndef g():\n    return sys.argv\n```\n\n'
        "# Three\n\n"
        '```python title="m.py — replace nothing_here"\nY = 3\n```\n'
    )
    assert (
        build_file(page, "m.py", through="One")
        == 'import os\n\nX = 1\n"""About X."""\n\n\n# says hi\ndef f():\n    return X\n'
    )
    assert (
        build_file(page, "m.py", through="Two") == "import sys\n\nX = 2\n\n\ndef g():\n    return sys.argv\n"
    )
    with pytest.raises(ValueError, match="replaces 'nothing_here'"):
        build_file(page, "m.py")
    with pytest.raises(ValueError, match=r"no file 'other\.py'"):
        build_file(page, "other.py")


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
@exercises()
async def test_home_page_and_readme_example(page: str, tmp_path: Path) -> None:
    """The one Python block of the README and of the home page, run as shown."""
    (example,) = [block for block in blocks(ROOT / page) if block.lang == "python"]
    path = tmp_path / "ci_runner.py"
    path.write_text(example.code)
    snippet = load_file(path)
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
    *command: str, env: dict[str, str] | None = None, port: int | None = None, cwd: Path = ROOT
) -> Iterator[subprocess.Popen[str]]:
    """Run `command` (from the repository root by default) until the block ends (SIGINT, then kill)."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
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
    *command: str, timeout: float = TIMEOUT, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _cli_has(command: str) -> bool:
    """Whether `mcptasks <command>` is a registered subcommand."""
    return run(str(BIN / "mcptasks"), command, "--help").returncode == 0


async def _hello_through(client: Client) -> str:
    from mcptasks.client import start_tool_call

    handle = await start_tool_call(client, "hello", {"name": "Ada"})
    return sdk_text(await handle.result())


ACTIVATE = "source .venv/bin/activate"
"""The line the tutorial and the README show to put the environment's commands on `PATH`."""
ACTIVATED = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
"""The environment of a shell that ran `ACTIVATE` (for commands inside a command line, `--stdio`)."""


def test_tutorial_setup_activates_the_environment_in_a_new_shell(tmp_path: Path) -> None:
    """The setup block makes the directory and the venv and activates it; in a new shell that starts
    with a bare `PATH`, `source .venv/bin/activate` is what makes `mcptasks` and `python` the venv's."""
    (setup,) = [block for block in blocks(TUTORIAL) if block.section.startswith("Before you start")]
    lines = [line.partition("#")[0].strip() for line in setup.code.splitlines()]
    assert lines[:2] == ["mkdir ci-tutorial && cd ci-tutorial", "python3 -m venv .venv"]
    assert lines[2].startswith(".venv/bin/pip install ") and lines[3] == ACTIVATE, lines
    bash = shutil.which("bash")
    if bash is None or sys.prefix == sys.base_prefix:
        pytest.skip("needs bash and a virtual environment to run in")
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    bare = {"PATH": os.defpath, "HOME": str(tmp_path)}
    before = subprocess.run(
        [bash, "-c", "command -v mcptasks"], cwd=tmp_path, env=bare, capture_output=True, text=True
    )
    assert before.returncode != 0  # `mcptasks: command not found` without the activation
    after = subprocess.run(
        [bash, "-c", f"{ACTIVATE} && command -v mcptasks && command -v python && mcptasks --version"],
        cwd=tmp_path,
        env=bare,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert after.returncode == 0, after.stderr
    found_mcptasks, found_python, version = after.stdout.splitlines()
    assert Path(found_mcptasks).resolve() == (BIN / "mcptasks").resolve()
    assert Path(found_python).parent.resolve() == BIN.resolve()
    assert version.startswith("mcptasks ")


@exercises()
@pytest.mark.slow
async def test_tutorial_step_1_commands(tmp_path: Path) -> None:
    """The commands of step 1, run as shown next to the reader's hello.py: both serve commands
    (called by the SDK), `mcptasks call` against the HTTP one, and `mcptasks call --stdio`."""
    from mcp import StdioServerParameters

    from mcptasks.client import TasksClient

    write_file(TUTORIAL, "hello.py", tmp_path, through="Step 1")
    port = _free_port()
    stdio, http, call, stdio_call = _shown_commands("Step 1", port)
    assert stdio[1:] == ["serve", "hello.py"] and http[1:3] == ["serve", "hello.py"]
    assert call[1:] == ["call", f"http://127.0.0.1:{port}/mcp", "hello", "name=Ada"]
    assert stdio_call[1:3] == ["call", "--stdio"]
    (shown,) = _shown_output("Step 1")
    fast = TasksClient(max_poll_interval=0.05)
    params = StdioServerParameters(command=stdio[0], args=stdio[1:], cwd=str(tmp_path))
    async with Client(params, extensions=[fast]) as client:
        assert await _hello_through(client) == "Hello, Ada!"
    with running(*http, port=port, cwd=tmp_path):
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[fast]) as client:
            assert await _hello_through(client) == "Hello, Ada!"
        called = run(*call, cwd=tmp_path)
        assert called.returncode == 0, called.stdout + called.stderr
        _assert_started_as_shown(shown[0], called.stderr)
        assert called.stdout.splitlines() == shown[1:] == ["Hello, Ada!"]
    via_stdio = run(*stdio_call, cwd=tmp_path, env=ACTIVATED)
    assert via_stdio.returncode == 0, via_stdio.stdout + via_stdio.stderr
    assert via_stdio.stdout.splitlines() == ["Hello, Ada!"]


def _assert_started_as_shown(shown: str, stderr: str) -> None:
    """`mcptasks call`'s first line on stderr is the one the page shows (with another task id)."""
    pattern = re.escape(shown).replace(re.escape(shown.split()[2]), r"[A-Za-z0-9_-]{43}", 1)
    assert re.match(pattern + "\n", stderr), (shown, stderr)


def _read_until(process: subprocess.Popen[str], wanted: Callable[[str], bool], seen: list[str]) -> str:
    """Read `process`'s output lines (appending them to `seen`) until one is `wanted`; that line.

    Reads the pipe's file descriptor directly (a text stream's buffer would hide lines from select),
    so do not mix it with `_readline` on the same process; call it while the process's `running`
    block is open (the pipe is closed after it)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    pending = getattr(process, "_unread", b"")
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode(errors="replace")
                seen.append(line)
                if wanted(line):
                    return line
            with selectors.DefaultSelector() as selector:
                selector.register(fd, selectors.EVENT_READ)
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    raise AssertionError(f"no wanted line from {process.args}; it printed: {seen}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"{process.args} ended; it printed: {seen}")
            pending += chunk
    finally:
        process._unread = pending  # type: ignore[attr-defined]


def _serving_again(process: subprocess.Popen[str], port: int, seen: list[str]) -> None:
    """Wait until the `--reload` server has restarted (its banner after the restart) and listens."""
    _read_until(process, lambda line: line.endswith("changed; restarting the server"), seen)
    _read_until(process, lambda line: "serving 'ci'" in line, seen)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after the restart")


def _save(path: Path, source: str) -> None:
    """Save `source` as the reader's editor would, a new modification time included."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(source)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


@exercises()
@pytest.mark.slow
def test_tutorial_steps_2_to_4_commands_on_one_reloading_server(tmp_path: Path) -> None:
    """Steps 2 to 4 as the page tells them: one `mcptasks serve ... --reload` kept running while
    ci.py grows, each step's `mcptasks call` printing what the page shows, and step 4's
    cancellation showing the `finally:` clean-up in the server's log."""
    port = _free_port()
    serve, step_2_call = _shown_commands("Step 2", port)
    assert serve[1:] == ["serve", "ci.py", "--transport", "http", "--port", str(port), "--reload"]
    ci = tmp_path / "ci.py"
    _save(ci, build_file(TUTORIAL, "ci.py", through="Step 2"))
    seen: list[str] = []
    with running(*serve, port=port, cwd=tmp_path) as server:
        # step 2: the report
        (shown,) = _shown_output("Step 2")
        called = run(*step_2_call, cwd=tmp_path)
        assert called.returncode == 0, called.stdout + called.stderr
        _assert_started_as_shown(shown[0], called.stderr)
        report = json.loads(called.stdout)
        assert report.pop("seconds") > 0
        expected = json.loads("\n".join(shown[1:]))
        expected.pop("seconds")
        assert report == expected

        # step 3: saved, reloaded; the question answered with --answer, as the page says scripts do
        _save(ci, build_file(TUTORIAL, "ci.py", through="Step 3"))
        _serving_again(server, port, seen)
        (call,) = _shown_commands("Step 3", port)
        (shown,) = _shown_output("Step 3")
        assert shown[1] == "? The build pipeline passed. Publish the artifacts?"
        called = run(*call, "--answer", "publish=true", cwd=tmp_path)
        assert called.returncode == 0, called.stdout + called.stderr
        _assert_started_as_shown(shown[0], called.stderr)
        assert json.loads(called.stdout) == json.loads("\n".join(shown[3:]))

        # step 4: saved, reloaded; the minute-long pipeline detached, then cancelled by id
        _save(ci, build_file(TUTORIAL, "ci.py", through="Step 4"))
        _serving_again(server, port, seen)
        interactive, detach, cancel = _shown_commands("Step 4", port)
        assert interactive[1:] == ["call", f"http://127.0.0.1:{port}/mcp", "run_pipeline", "kind=integration"]
        assert detach == [*interactive, "--detach"]
        detached = run(*detach, cwd=tmp_path)
        assert detached.returncode == 0, detached.stderr
        task_id = detached.stdout.strip()
        _read_until(server, lambda line: f"task {task_id} created" in line, seen)
        cancelled = run(*[task_id if word == "TASK_ID" else word for word in cancel], cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == f"cancellation requested; task {task_id} is cancelled"
        stopping = _read_until(server, lambda line: line.startswith("ci: stopping process group"), seen)
        group = int(stopping.split()[-1])
        _read_until(server, lambda line: line == f"ci: process group {group} ended", seen)
        assert any(f"task {task_id} cancelled (tool run_pipeline)" in line for line in seen), seen
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
    (shown_log,) = [
        block.code
        for block in blocks(TUTORIAL)
        if block.section.startswith("Step 4") and block.lang == "text"
    ]
    assert re.search(r"ci: stopping process group (\d+)\nci: process group \1 ended\n$", shown_log), shown_log


@exercises()
@pytest.mark.slow
def test_tutorial_step_4_ctrl_c_cancels_as_shown(tmp_path: Path) -> None:
    """Step 4's interactive cancellation in a terminal: Ctrl-C, the menu, `c`, the lines shown."""
    pexpect = pytest.importorskip("pexpect")
    write_file(TUTORIAL, "ci.py", tmp_path, through="Step 4")
    port = _free_port()
    (shown,) = _shown_output("Step 4")
    started, interrupt, running_line, menu, ended = shown
    assert interrupt == "^C" and menu.endswith("? [w] c"), shown
    shown_id = started.split()[2]
    serve = [str(BIN / "mcptasks"), "serve", "ci.py", "--transport", "http", "--port", str(port)]
    with running(*serve, port=port, cwd=tmp_path):
        interactive = _shown_commands("Step 4", port)[0]
        child = pexpect.spawn(
            interactive[0], interactive[1:], cwd=str(tmp_path), encoding="utf-8", timeout=TIMEOUT
        )
        try:
            child.expect(r"mcptasks: task (\S+) started \(Ctrl-C to cancel or detach\)")
            task_id = child.match.group(1)
            assert started == f"mcptasks: task {shown_id} started (Ctrl-C to cancel or detach)"
            child.expect("integration test 2/60 passed")
            child.sendintr()
            child.expect_exact(running_line.replace(shown_id, task_id))
            child.expect_exact(menu.removesuffix(" c"))
            child.sendline("c")
            child.expect_exact(ended.replace(shown_id, task_id))
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 4  # cancelled


def _shown_commands(step: str, port: int) -> list[list[str]]:
    """The commands a tutorial step shows (bash blocks and `$` lines), for a server on `port`.

    `source .venv/bin/activate` is left out: these commands run the environment's programs."""
    commands = []
    for block in blocks(TUTORIAL):
        if not block.section.startswith(step) or block.lang not in ("bash", "console"):
            continue
        for line in block.code.splitlines():
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line.strip() == ACTIVATE:
                continue
            words = shlex.split(line.replace("8000", str(port)))
            program = {"mcptasks": str(BIN / "mcptasks"), "python": sys.executable}[words[0]]
            commands.append([program, *words[1:]])
    return commands


def _shown_output(step: str) -> list[list[str]]:
    """For each `$ mcptasks call` line of a step's console blocks, the lines shown after it."""
    outputs: list[list[str]] = []
    for block in blocks(TUTORIAL):
        if not block.section.startswith(step) or block.lang != "console":
            continue
        current: list[str] | None = None
        for line in block.code.splitlines():
            if line.startswith("$ "):
                current = [] if line.startswith("$ mcptasks call ") else None
                if current is not None:
                    outputs.append(current)
            elif current is not None:
                current.append(line)
    return outputs


@exercises()
@pytest.mark.slow
def test_readme_quick_start_commands_run_as_shown() -> None:
    """The README's quick start: its serve command (after the install), and the second terminal's
    block, which activates the environment before calling (no terminal here: `--decline`)."""
    install, second = [block.code for block in blocks(ROOT / "README.md") if block.lang == "bash"][:2]
    port = _free_port()
    serve = shlex.split(install.replace("\\\n", " ").split("&&")[-1].replace("8000", str(port)))
    assert serve[0] == ".venv/bin/mcptasks" and serve[1:3] == ["serve", "examples/job_runner.py"]
    lines = [line.partition("#")[0].strip() for line in second.splitlines()]
    assert lines[0] == ACTIVATE, lines
    (call,) = [shlex.split(line.replace("8000", str(port))) for line in lines[1:] if line]
    assert call[:2] == ["mcptasks", "call"]
    with running(str(BIN / "mcptasks"), *serve[1:], port=port):
        called = run(str(BIN / "mcptasks"), *call[1:], "--decline", timeout=120)
    assert called.returncode == 0, called.stdout + called.stderr
    assert json.loads(called.stdout)["published"] is False
    assert "Publish the artifacts?" in called.stderr


@exercises()
@pytest.mark.slow
def test_tutorial_step_5_commands(tmp_path: Path) -> None:
    """The commands of step 5, run as shown in a directory holding the reader's ci.py and client.py,
    including the restart: the server stopped (Ctrl-C) while a task waits for approval, started
    again with the same command, the question answered by id and the task followed to its end."""
    write_file(TUTORIAL, "ci.py", tmp_path, through="Step 5")
    write_file(TUTORIAL, "client.py", tmp_path)
    port = _free_port()
    shown = _shown_commands("Step 5", port)
    serve, client_script, call, detach, get, cancel, detach_again, get_again, serve_again, answer, resume = (
        shown
    )
    assert serve[1:3] == ["serve", "ci.py"] and "sqlite:///ci-tasks.db" in serve
    assert serve_again == serve and detach_again == detach and get_again == get
    assert resume[1:4] == ["call", f"http://127.0.0.1:{port}/mcp", "run_pipeline"]
    assert resume[4] == "--resume=TASK_ID"

    def with_id(words: list[str], task_id: str) -> list[str]:
        return [word.replace("TASK_ID", task_id) for word in words]

    seen: list[str] = []
    with running(*serve, port=port, cwd=tmp_path) as server:
        assert (tmp_path / "ci-tasks.db").is_file()
        client = run(*client_script, cwd=tmp_path)
        assert client.returncode == 0, client.stdout + client.stderr
        assert "server asks: The build pipeline passed. Publish the artifacts?  -> yes" in client.stdout
        assert "'published': True" in client.stdout

        called = run(*call, cwd=tmp_path)  # no terminal and no --answer: the question stops it
        assert called.returncode == 2, called.stdout + called.stderr
        assert "has no answer and there is no terminal to ask on" in called.stderr

        detached = run(*detach, cwd=tmp_path)
        assert detached.returncode == 0, detached.stderr
        task_id = detached.stdout.strip()
        assert "--resume" in detached.stderr
        got = run(*with_id(get, task_id), cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["taskId"] == task_id
        cancelled = run(*with_id(cancel, task_id), cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.startswith("cancellation requested;")

        # the restart: a build detached, looked at until it waits for approval, the server stopped
        detached = run(*detach_again, cwd=tmp_path)
        assert detached.returncode == 0, detached.stderr
        task_id = detached.stdout.strip()
        deadline = time.monotonic() + TIMEOUT
        while True:
            got = run(*with_id(get_again, task_id), cwd=tmp_path)
            assert got.returncode == 0, got.stderr
            waiting = json.loads(got.stdout)
            if waiting["status"] == "input_required" or time.monotonic() > deadline:
                break
        assert waiting["status"] == "input_required", waiting
        (key,) = waiting["inputRequests"]
        _read_until(server, lambda line: f"task {task_id} input_required" in line, seen)
        server.send_signal(signal.SIGINT)  # Ctrl-C in the server's terminal: it hands the task over
        _read_until(server, lambda line: f"task {task_id} requeued (tool run_pipeline)" in line, seen)
        assert server.wait(timeout=TIMEOUT) == 130  # the exit status of Ctrl-C
    assert not [line for line in seen if f"task {task_id} failed" in line], seen
    with running(*serve_again, port=port, cwd=tmp_path) as server:
        _read_until(server, lambda line: f"task {task_id} input_required" in line, seen)
        got = run(*with_id(get_again, task_id), cwd=tmp_path)
        assert json.loads(got.stdout)["inputRequests"] == waiting["inputRequests"]  # the same key
        answered = run(*with_id(answer, task_id), cwd=tmp_path)
        assert answered.returncode == 0, answered.stdout + answered.stderr
        assert answered.stdout.strip() == f"answered {key}; task {task_id} is working"
        followed = run(*with_id(resume, task_id), cwd=tmp_path)
        assert followed.returncode == 0, followed.stdout + followed.stderr
        (shown_output,) = [out for out in _shown_output("Step 5") if out and out[0] == "{"]
        assert json.loads(followed.stdout) == json.loads("\n".join(shown_output))
        _read_until(server, lambda line: f"task {task_id} completed (tool run_pipeline)" in line, seen)
    # the logs the page shows are the servers' lines (less the time, level and logger, the task id
    # shortened, and a long line cut at "…")
    shown_logs = [b.code for b in blocks(TUTORIAL) if b.section.startswith("Step 5") and b.lang == "text"]
    shown = [line.split(" ", 3)[3] for log in shown_logs for line in log.splitlines()]
    logged = [line.split(f"task {task_id} ", 1)[1] for line in seen if f"task {task_id} " in line]
    assert len(shown) == 3 and len(logged) == 5, logged  # created, the three shown, completed
    assert logged[0] == "created (tool run_pipeline)" and logged[4].startswith("completed"), logged
    for shown_line, logged_line in zip(shown, logged[1:4], strict=True):
        assert logged_line.startswith(shown_line.removesuffix("…")), (shown_line, logged_line)


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
            lambda: client.send("tasks/get", get),
            lambda r: r.result["status"] in TERMINAL_STATUSES,
            what="the end",
        )
        assert_documented(done, "tasks_get_completed.result.json")

        ledger = await client.send(
            "tools/call",
            {**documented_params("tools_call.request.json"), "name": "sync_ledger", "arguments": {}},
        )
        ledger_get = documented_params("tasks_get.request.json", taskId=ledger.result["taskId"])
        failed = await poll(
            lambda: client.send("tasks/get", ledger_get),
            lambda r: r.result["status"] in TERMINAL_STATUSES,
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


def _shown_curl(page: Path) -> list[str]:
    """The one `curl` command shown on `page`, as words (continuation lines joined)."""
    (command,) = [block.code for block in blocks(page) if block.lang == "bash" and "curl " in block.code]
    return shlex.split(command.replace("\\\n", " "))


@exercises()
@pytest.mark.slow
def test_the_hand_written_http_request_works_as_shown() -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    port = _free_port()
    words = [
        word.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for word in _shown_curl(DOCS / "concepts.md")
    ]
    assert words[0] == "curl" and "MCP-Protocol-Version: 2026-07-28" in words
    serve = (str(BIN / "mcptasks"), "serve", "docs/snippets/concepts_reports.py", "--transport", "http")
    with running(*serve, "--port", str(port), port=port):
        shown = run(curl, "-sS", *words[1:], cwd=WIRE)
        assert shown.returncode == 0, shown.stderr
        answer = json.loads(shown.stdout)
        assert answer["result"]["resultType"] == "task" and answer["result"]["status"] == "working", answer

        header = words.index("MCP-Protocol-Version: 2026-07-28")
        without = [*words[1 : header - 1], *words[header + 1 :]]
        refused = run(curl, "-sS", "-o", os.devnull, "-w", "%{http_code}", *without, cwd=WIRE)
        assert refused.stdout == "400", refused.stdout + refused.stderr


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


@exercises("howto_webhooks.py")
async def test_howto_webhooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook_helpers import SECRET, arrive, receiving

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCPTASKS_WEBHOOK_SECRET", SECRET)
    snippet = load_snippet("howto_webhooks.py")
    assert snippet.app.config.webhooks == ("https://hooks.example.com/mcptasks",)
    with receiving() as receiver:  # the page's endpoint, on loopback
        moved = dataclasses.replace(snippet.app.config, webhooks=(receiver.url,), webhook_allow_private=True)
        snippet.app.configure(moved)
        async with connect(snippet.app) as tasks:
            task_id = (await tasks.start("deploy", {"service": "api"}))["taskId"]
            key, _ = the_input_request(await tasks.wait_input(task_id, count=1))
            await tasks.update(task_id, {key: {"action": "accept", "content": {"approve": True}}})
            assert (await tasks.finish(task_id))["status"] == "completed"
            await arrive(lambda: len(receiver.unique()) == 2, "both events")
    first, second = receiver.unique().values()
    assert [snippet.receive(d.body, d.headers) for d in (first, second)] == [200, 200]
    assert snippet.receive(first.body, first.headers) == 200  # a duplicate, taken once
    assert snippet.receive(first.body, {**first.headers, "webhook-signature": "v1,AAAA"}) == 401
    out = capsys.readouterr().out
    assert "deploy asks: [{'method': 'elicitation/create'" in out
    assert "deploy completed: deployed api" in out
    assert out.count("deploy asks") == 1


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
    snippet.app.configure(dataclasses.replace(snippet.app.config, immediate_results=False))  # all tasks
    async with connect(snippet.app) as tasks:
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


@exercises("concepts_delegate.py")
async def test_concepts_delegate() -> None:
    snippet = load_snippet("concepts_delegate.py")
    async with connect(snippet.app, **BY_HAND) as tasks:
        task_id = (await tasks.start("migrate_all", {"tables": ["users", "logs"]}))["taskId"]
        key, request = the_input_request(await tasks.wait_input(task_id))
        assert request["params"]["message"] == "Migrate users?"
        await tasks.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        second = await tasks.wait(
            task_id,
            lambda t: t["status"] == "input_required" and key not in t["inputRequests"],
            what="the second question",
        )
        key2, request2 = the_input_request(second)
        assert request2["params"]["message"] == "Migrate logs?"
        await tasks.update(task_id, {key2: {"action": "decline"}})
        assert text((await tasks.finish(task_id))["result"]) == "moved 5 rows"


@exercises("concepts_inputs.py")
async def test_concepts_inputs() -> None:
    snippet = load_snippet("concepts_inputs.py")
    async with connect(snippet.app, **BY_HAND) as tasks:
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


@exercises("concepts_capabilities.py")
async def test_concepts_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = load_snippet("concepts_capabilities.py")
    snippet.app.configure(dataclasses.replace(snippet.app.config, immediate_results=False))  # all tasks
    async with connect(snippet.app, elicitation_callback=None) as cannot_answer:
        release = await cannot_answer.start("release", {"version": "1.2"})
        unsupported = await cannot_answer.finish(release["taskId"])
        assert text(unsupported["result"]) == "1.2 not released: this client cannot approve it"
        refused = await mcp_error(cannot_answer.call("summarize", {"text": "logs"}))
        assert refused.error.code == -32021
        assert refused.error.data == {"requiredCapabilities": {"sampling": {}}}
        wiped = await cannot_answer.finish((await cannot_answer.start("wipe", {"device": "sda"}))["taskId"])
        assert wiped["status"] == "failed"
        assert wiped["error"]["code"] == -32021
        assert wiped["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
    async with connect(snippet.app) as can_answer:
        task_id = (await can_answer.start("release", {"version": "1.3"}))["taskId"]
        key, _ = the_input_request(await can_answer.wait_input(task_id))
        await can_answer.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        assert text((await can_answer.finish(task_id))["result"]) == "1.3 released"

    deployed: list[str] = []
    monkeypatch.setattr(snippet, "deploy_to", lambda env: deployed.append(env) or f"deployed to {env}")

    async def announce(context: Any, params: Any) -> Any:
        return ElicitResult(action="accept", content={"confirm": True})

    async with Client(snippet.app.mcp, elicitation_callback=announce) as inline:  # no tasks: rounds
        result = await inline.call_tool("deploy", {"env": "prod"})
    assert sdk_text(result) == "announced"
    assert deployed == ["prod"]  # once, although the call took two rounds


# -- how-to guides ---------------------------------------------------------------------------------


@exercises("howto_stores.py")
def test_howto_stores() -> None:
    from mcptasks import MemoryTaskStore, SqliteTaskStore
    from mcptasks.stores.postgres import PostgresTaskStore
    from mcptasks.stores.redis import RedisTaskStore

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
        serving.configure(dataclasses.replace(serving.config, run_tasks=False))  # --enqueue-only
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
                from mcptasks.client import TasksClient, start_tool_call

                async with Client(
                    f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient(max_poll_interval=0.05)]
                ) as client:
                    handle = await start_tool_call(client, "warm_cache", {"region": "ap-south"})
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


@exercises("operate_dashboard.py")
async def test_operate_dashboard_mounted_behind_the_servers_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the snippet's sqlite:///tasks.db
    monkeypatch.setenv("OPS_PASSWORD", "pw")
    monkeypatch.setenv("OPS_TOKEN", "tok")
    snippet = load_snippet("operate_dashboard.py")
    async with serve_http(snippet.http_app) as url:
        base = url.removesuffix("/mcp") + "/ops/"
        login = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            assert (await http.get(base)).status_code == 401
            assert (await http.get(base, headers={"Authorization": "Basic b3BzOm5v"})).status_code == 401
            engine = snippet.app.extension.engine
            record = await engine.start(snippet.run_pipeline, {"kind": "test"}, owner="alice")
            page = await http.get(base, headers=login)
            assert page.status_code == 200
            assert f'data-task-id="{record.task_id}"' in page.text and 'data-base="/ops/"' in page.text
            assert (await http.get(f"{base}static/dashboard.js", headers=login)).status_code == 200
            cancel = f"{base}api/tasks/{record.task_id}/cancel"
            assert (await http.post(cancel, headers=login)).status_code == 401
            done = await http.post(cancel, headers={**login, "X-Operator-Token": "tok"})
            assert done.json() == {"taskId": record.task_id, "status": "cancelled", "changed": True}


@exercises("operate_admin.py")
def test_operate_admin_queries_and_purges_a_store(tmp_path: Path) -> None:
    from mcptasks.stores import TaskRecord

    week_ago = time.time() - 8 * 86400
    records = [
        TaskRecord(
            task_id="t-failed", owner="o", tool="build", status="failed", error={"code": 1, "message": "x"}
        ),
        TaskRecord(task_id="t-old", owner="o", tool="build", status="completed", created_at=week_ago),
        TaskRecord(task_id="t-new", owner="o", tool="lint", status="completed"),
    ]

    seeded_sqlite(tmp_path / "tasks.db", *records)
    done = subprocess.run(
        [sys.executable, str(SNIPPETS / "operate_admin.py"), "sqlite:///tasks.db"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "t-failed {'code': 1, 'message': 'x'}",
        "{'completed': 2, 'failed': 1}",
        "purged 1 completed task(s)",
    ]


@exercises("operate_telemetry.py")
def test_operate_telemetry_prints_linked_task_spans_and_correlated_logs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SNIPPETS / "operate_telemetry.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
    )
    assert done.returncode == 0, done.stderr
    decoder = json.JSONDecoder()
    objects, position = [], 0
    while (start := done.stdout.find("{", position)) != -1:
        value, position = decoder.raw_decode(done.stdout, start)
        objects.append(value)
    spans = {o["name"]: o for o in objects if "name" in o and "context" in o}
    call, execute = spans["tools/call run_pipeline"], spans["task.execute run_pipeline"]
    assert execute["parent_id"] is None
    assert [link["context"]["span_id"] for link in execute["links"]] == [call["context"]["span_id"]]
    task_id = execute["attributes"]["mcp.task.id"]
    assert call["attributes"]["mcp.task.id"] == task_id
    assert execute["attributes"]["mcp.task.status"] == "completed"
    metric_names = re.findall(r'"name": "(mcptasks\.[a-z_.]+)"', done.stdout)
    assert {"mcptasks.tasks.created", "mcptasks.tasks.ended", "mcptasks.task.duration"} <= set(metric_names)
    trace_id = execute["context"]["trace_id"].removeprefix("0x")
    assert f"INFO ci task={task_id} trace={trace_id} starting test" in done.stderr


@exercises("howto_fallback.py")
async def test_howto_fallback_two_tools() -> None:
    snippet = load_snippet("howto_fallback.py")
    async with Client(snippet.app.mcp) as client:  # a host without the extension
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["export_table", "task_status", "task_answer", "task_cancel"]
        started = await client.call_tool("export_table", {"table": "orders"})
        assert started.structured_content is not None
        task_id = started.structured_content["taskId"]
        assert sdk_text(started) == (
            f"Started background task {task_id} (export_table). It keeps running after this reply. "
            f'Call task_status with taskId="{task_id}" about every 5 s until it is completed; '
            "answer its questions with task_answer; stop it with task_cancel."
        )
        assert started.structured_content == {
            "guidance": sdk_text(started),
            "taskId": task_id,
            "status": "working",
            "pollIntervalMs": 5000,
        }

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
        assert asking.structured_content is not None
        assert asking.structured_content["guidance"] == sdk_text(asking)
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
async def test_howto_extension_on_your_own_mcpserver(capsys: pytest.CaptureFixture[str]) -> None:
    from mcptasks.cli.main import load_target
    from mcptasks.server.extension import extension_of

    snippet = load_snippet("howto_extension.py")
    task_log = logging.getLogger("mcptasks.tasks")
    snippet.show_task_log()  # its handler writes to this test's captured stderr
    try:
        async with connect(snippet.server) as tasks:
            names = {tool.name for tool in (await tasks.client.list_tools()).tools}
            assert names == {"stock", "recount", "greet"}
            result = await tasks.client.call_tool("stock", {"sku": "ABC-1"})
            assert result.structured_content == {"result": 7}
            assert sdk_text(await tasks.client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
            task_id = (await tasks.start("recount", {"warehouse": "main"}))["taskId"]
            task = await tasks.finish(task_id)
            assert text(task["result"]) == "main: 1,204 items"
    finally:
        for handler in task_log.handlers[:]:
            task_log.removeHandler(handler)
        task_log.setLevel(logging.NOTSET)
    log = capsys.readouterr().err
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    for event in ("created", "completed"):
        line = rf"{stamp} INFO mcptasks.tasks: task {re.escape(task_id[:8])}\S* {event} \(tool recount\)"
        assert re.search(line, log), log
    target = load_target(str(SNIPPETS / "howto_extension.py") + ":server")
    assert extension_of(target) is not None


@exercises("howto_robust.py")
async def test_howto_robust_bodies() -> None:
    snippet = load_snippet("howto_robust.py")
    limits = snippet.app.extension.engine.limits
    assert (limits.max_active_per_owner, limits.threads, limits.blocking_threshold) == (20, 8, 0.5)
    async with connect(snippet.app) as tasks:
        done = await tasks.finish((await tasks.start("transcode", {"name": "a.mov"}))["taskId"])
        assert text(done["result"]) == "a.mov: transcoded"
        assembled = await tasks.finish((await tasks.start("assemble", {"parts": 3}))["taskId"])
        assert assembled["result"]["structuredContent"] == {"parts": 3, "checksum": 30}
        task_id = (await tasks.start("publish", {"name": "v2"}))["taskId"]
        waiting = await tasks.wait_input(task_id, count=1)
        assert waiting["statusMessage"] == "checking v2"
        key, request = the_input_request(waiting)
        assert request["params"]["message"] == "Publish v2?"
        await tasks.update(task_id, {key: {"action": "accept", "content": {"go": True}}})
        assert text((await tasks.finish(task_id))["result"]) == "v2: published"
        cancelled = (await tasks.start("transcode", {"name": "b.mov"}))["taskId"]
        await tasks.cancel(cancelled)
        assert (await tasks.get(cancelled))["status"] == "cancelled"


@exercises("howto_durable.py")
async def test_howto_durable_bodies(tmp_path: Path) -> None:
    """The durable how-to: `bill` handed over while it waits for confirmation and replayed by the
    next engine on the same SQLite file (the same question key, one charge); the other tools."""
    from mcptasks import EngineConfig
    from mcptasks.lowlevel import TaskEngine

    snippet = load_snippet("howto_durable.py")
    url = f"sqlite:///{tmp_path / 'billing.db'}"
    config = EngineConfig(immediate_results=False)
    tools = list(snippet.app.extension.task_tools.values())

    async def record(engine: TaskEngine, task_id: str, wanted: str) -> Any:
        return await poll(lambda: engine.get(task_id, owner="o"), lambda r: r.status == wanted, what=wanted)

    async with TaskEngine(url, config=config, tools=tools) as first:
        task_id = (await first.start(snippet.bill, {"customer": "ada", "cents": 1250}, owner="o")).task_id
        asked = await record(first, task_id, "input_required")
    (key,) = asked.input_requests
    assert asked.input_requests[key]["params"]["message"] == "Charge ada 12.50?"
    async with TaskEngine(url, config=config, tools=tools) as second:  # the server started again
        again = await record(second, task_id, "input_required")
        assert again.input_requests == asked.input_requests
        await second.update(task_id, {key: {"action": "accept", "content": {"ok": True}}}, owner="o")
        done = await record(second, task_id, "completed")
    billed = done.result["structuredContent"]
    assert billed["charged"] is True and billed["charge"] == f"ch_{task_id}-charge"
    assert billed["receipt"] == f"receipt for ch_{task_id}-charge sent to ada" and billed["seconds"] >= 0
    charges: dict[str, int] = snippet.CHARGES
    assert charges == {f"{task_id}-charge": 1250}  # one charge, under the task's key

    async with connect(snippet.app) as tasks:
        ordered = await tasks.run("order", {"sku": "sold-out"})
        assert ordered["result"]["isError"] is True
        assert text(ordered["result"]) == "cannot order sold-out: sold-out is not in stock"
        ordered = await tasks.run("order", {"sku": "lamp"})
        assert text(ordered["result"]) == "reservation of lamp"
        found = await tasks.run("rates", {"day": "2026-12-01"})
        assert found["result"]["structuredContent"] == {"day": "2026-12-01", "eur_usd": 1.08}
        migrated = await tasks.run("migrate", {"table": "orders"})
        assert migrated["result"]["structuredContent"] == {
            "table": "orders",
            "rows": 1204,
            "version": 2,
            "analyzed": "orders: statistics updated",
        }


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


def _pytest(path: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider", timeout=300, cwd=cwd)


@exercises("howto_custom_store.py", "test_custom_store.py")
@pytest.mark.slow
def test_howto_custom_store_passes_the_store_contract() -> None:
    completed = _pytest("docs/snippets/test_custom_store.py")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert re.search(r"\b\d{2} passed", completed.stdout), completed.stdout


@exercises("test_my_tools.py")
@pytest.mark.slow
def test_howto_testing_example_passes(tmp_path: Path) -> None:
    """The page's test file, next to the tutorial's ci.py (as the reader has it after step 3)."""
    write_file(TUTORIAL, "ci.py", tmp_path, through="Step 3")
    shutil.copy(SNIPPETS / "test_my_tools.py", tmp_path)
    completed = _pytest("test_my_tools.py", cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "6 passed" in completed.stdout, completed.stdout


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
    from mcptasks.cli.main import build_parser

    page = (DOCS / "reference" / "cli.md").read_text()
    missing = []
    for path, option in _options(build_parser()):
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


# -- executors: the same durable body on a durable execution engine's workers ---------------------


async def _release_via(tasks: Tasks, version: str) -> str:
    """Call the how-to's `release`, say go when asked, and return the result's text."""
    started = await tasks.start("release", {"version": version})
    asking = await tasks.wait_input(started["taskId"])
    key, request = the_input_request(asking)
    assert request["params"]["message"] == f"Publish releases-{version}.tar.gz?"
    await tasks.update(started["taskId"], {key: {"action": "accept", "content": {"go": True}}})
    return text((await tasks.finish(started["taskId"]))["result"])


@exercises("howto_executors.py")
async def test_howto_executors_in_code_on_temporal(tmp_path: Path) -> None:
    """The how-to's server configured in code: it serves and is the executor's worker too."""
    with TemporalDevServer() as temporal:
        snippet = load_snippet("howto_executors.py")
        server = snippet.release_server(f"sqlite:///{tmp_path / 'releases.db'}", temporal.address)
        async with connect(server) as tasks:
            assert await _release_via(tasks, "1.2.3") == "releases-1.2.3.tar.gz is live"
