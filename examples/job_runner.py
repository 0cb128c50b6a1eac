"""A CI job runner done properly: real subprocesses, live status, a durable approval, clean cancellation.

Run it:

    mcptasks serve examples/job_runner.py --transport http --port 8000   # Streamable HTTP
    python examples/job_runner.py                                         # stdio
    mcptasks serve examples/job_runner.py --transport http --port 8000 --store sqlite:///job_runner.db

One task tool, `run_pipeline(kind)`, shows the whole Tasks extension at work:

1. Every command of the pipeline runs as a real subprocess in its own process group
   (`start_new_session=True`); stdout and stderr are merged and read line by line.
2. The latest output line becomes the task's `statusMessage` (`await ctx.status(...)`), written at
   most every `STATUS_INTERVAL` seconds and only when it changed, so a chatty build does not hammer
   the task store.
3. A command that exits nonzero ends the task with a tool error (`isError: true`) carrying the tail
   of the output: the task itself is `completed` (a tool error is not a task failure).
4. When every command passed, the task asks for approval (`yield Elicit(..., schema=Approval)`; the
   task is `input_required` until the client answers through `tasks/update`) and runs the
   `publish` commands only if the user said yes. A client that did not declare `elicitation` is
   never asked: the answer is `Unsupported`, and the pipeline ends without publishing.
5. It ends with a structured result (`PipelineReport`: exit code, duration, the last
   `TAIL_LINES` lines of output, whether it published).
6. `tasks/cancel` (or a server shutdown, which then hands the task over: see 7) cancels the body
   at its current `await`; the running command's `async with` then sends SIGTERM to the whole
   process group, waits `KILL_GRACE_SECONDS`, and sends SIGKILL, so no grandchild outlives the
   run.
7. The tool is durable (`durable=True`): each command runs as a step (`ctx.step(run_command, ...)`),
   whose small JSON report (exit code, duration, output tail) is journalled with the task before
   the body goes on, and the approval question is journalled too. With a persistent store
   (`--store sqlite:///job_runner.db`, Redis, PostgreSQL), stopping the server (Ctrl-C, SIGTERM, a
   rolling deploy) while the task waits for approval keeps the task: the next start, or another
   replica, replays the body from its journal without running the finished commands again and
   asks the same question under the same `inputRequests` key, so the client's answer is accepted
   after the restart. A command interrupted while it ran (the server stopped mid-build) runs
   again from its start: steps run at least once, so make real commands safe to repeat. Time is
   read with `await ctx.now()` and the command list is read in a step too, so a replay sees the
   pipeline the first run saw. On the default `memory://` store the tasks end with the process.
8. The tool is declared `replay_safe=False`: its commands must never run twice for one call.
   Called without the tasks extension by a client that can answer elicitations, it runs inline,
   where there is no journal: the approval question becomes an `input_required` round, and the
   body waits for the retry in this process. A retry that cannot reach it (another replica, a
   restart) is refused with -32021 (call it as a task) instead of running the commands again.

Pipelines
---------
`PIPELINES` maps `test`, `build` and `publish` (run after approval, for either kind) to a list of
commands. A command is an argv list (run directly) or a string (run by the system shell). The
defaults are stand-ins, slow on purpose (a few seconds of printing) so you can watch the status
move; the status shows each by a short label (`build 1/2: compile (stand-in)`), and a command of
yours as typed (`test 1/2: $ pytest -q`).

Override any of them with an environment variable holding a JSON list of commands, read when the
pipeline starts (so a running server picks up a change on the next call; a task replayed after a
restart keeps the commands it started with):

    JOB_RUNNER_STEPS_TEST='["pytest -q", ["ruff", "check", "."]]'
    JOB_RUNNER_STEPS_BUILD='["python -m build"]'
    JOB_RUNNER_STEPS_PUBLISH='["twine upload dist/*"]'

Python children run with `PYTHONUNBUFFERED=1` so their lines arrive as they are printed; other
programs may need their own flag to stop buffering output written to a pipe. POSIX only (process
groups and `os.killpg`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import deque
from types import TracebackType
from typing import Literal, TypedDict

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, Field

from mcptasks import (
    Accepted,
    Answer,
    Elicit,
    Result,
    TaskContext,
    TaskServer,
    ToolError,
    Unsupported,
    Yields,
)

Kind = Literal["test", "build"]
Command = str | list[str]

STATUS_INTERVAL = 0.2
"""Seconds between two `statusMessage` writes at most."""

KILL_GRACE_SECONDS = 2.0
"""How long a step's process group gets between SIGTERM and SIGKILL."""

TAIL_LINES = 20
"""How many trailing output lines the result (or the error) carries."""

STATUS_MAX_CHARS = 200
"""Longer output lines are shortened in `statusMessage` (the tail keeps them whole)."""

ENV_PREFIX = "JOB_RUNNER_STEPS_"


STAND_INS: dict[str, str] = {}
"""The default commands' scripts -> the short label shown for them (not the interpreter's path)."""


def _python(label: str, script: str) -> list[str]:
    """A stand-in command running `script` with this interpreter (no shell, works wherever Python
    does), shown as `label (stand-in)`."""
    STAND_INS[script] = f"{label} (stand-in)"
    return [sys.executable, "-c", script]


PIPELINES: dict[str, list[Command]] = {
    "test": [
        _python(
            "collect tests",
            "import time\n"
            "for i in range(1, 5):\n"
            "    print(f'collecting tests: package {i}/4', flush=True); time.sleep(0.3)\n",
        ),
        _python(
            "run tests",
            "import time\n"
            "for i in range(1, 11):\n"
            "    print(f'tests/test_core.py::test_case_{i:02d} PASSED', flush=True); time.sleep(0.25)\n"
            "print('10 passed', flush=True)\n",
        ),
    ],
    "build": [
        _python(
            "compile",
            "import time\n"
            "for i in range(1, 9):\n"
            "    print(f'compiling module {i}/8', flush=True); time.sleep(0.3)\n",
        ),
        _python(
            "package",
            "import time\n"
            "for part in ('metadata', 'sources', 'wheel'):\n"
            "    print(f'packaging {part}', flush=True); time.sleep(0.4)\n"
            "print('built dist/app-1.0-py3-none-any.whl', flush=True)\n",
        ),
    ],
    "publish": [
        _python(
            "upload",
            "import time\n"
            "for pct in (25, 50, 75, 100):\n"
            "    print(f'uploading artifact: {pct}%', flush=True); time.sleep(0.3)\n",
        ),
    ],
}
"""The default commands of each pipeline; see the module docstring for the env overrides."""


class Approval(BaseModel):
    """The answer to "publish?"."""

    publish: bool = Field(description="Publish the artifacts of this run?")


class StepReport(BaseModel):
    """One finished command (in the result: its tail is in `PipelineReport.output_tail`)."""

    command: str
    exit_code: int
    duration_s: float


class PipelineReport(BaseModel):
    """The task's result (its `structuredContent`)."""

    kind: Kind
    exit_code: int
    duration_s: float
    published: bool
    steps: list[StepReport]
    output_tail: list[str]


def steps_for(pipeline: str) -> list[Command]:
    """The commands of `pipeline`: `JOB_RUNNER_STEPS_<PIPELINE>` when set, else `PIPELINES`."""
    variable = ENV_PREFIX + pipeline.upper()
    raw = os.environ.get(variable)
    if raw is None:
        return list(PIPELINES[pipeline])
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(f"{variable} is not valid JSON: {exc}") from None
    if not isinstance(value, list) or not all(_is_command(c) for c in value):
        raise ToolError(
            f"{variable} must be a JSON list of commands (each a string or a non-empty list of strings)"
        )
    return value


def _is_command(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, list) and bool(value) and all(isinstance(part, str) for part in value)


def _stand_in(command: Command) -> str | None:
    """The label of a default stand-in command (whatever the interpreter's path), else None."""
    if isinstance(command, list) and len(command) == 3 and command[1] == "-c":
        return STAND_INS.get(command[2])
    return None


def describe(command: Command) -> str:
    """The command as a shell-like line, or the label of a default stand-in, for logs and reports."""
    label = _stand_in(command)
    if label is not None:
        return label
    return command if isinstance(command, str) else shlex.join(command)


def heading(command: Command) -> str:
    """The line that opens a step in the status and the output tail: `$ COMMAND`, or a stand-in's
    label (no `$`: it is not a command to type)."""
    label = _stand_in(command)
    return label if label is not None else f"$ {describe(command)}"


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(pgid, signum)


class CommandRun:
    """One command running in its own process group; `async with` guarantees the group is gone.

        async with CommandRun(command, tail) as run:
            while (line := await run.next_status()) is not None:
                ...                          # publish `line`
            exit_code = await run.wait()

    Every output line is appended to `tail`; `next_status()` returns the newest line at most
    every `interval` seconds, and only when a new line arrived since the last one it returned.
    """

    def __init__(self, command: Command, tail: deque[str], *, interval: float = STATUS_INTERVAL) -> None:
        self.command = command
        self.tail = tail
        self.interval = interval
        self._process: Process | None = None
        self._stdout: ByteReceiveStream | None = None
        self._partial = b""
        self._latest: str | None = None
        self._next_report = 0.0
        self._eof = False

    async def __aenter__(self) -> CommandRun:
        try:
            self._process = await anyio.open_process(
                self.command,
                stdin=subprocess.DEVNULL,  # never the server's stdin: under stdio, that is the MCP session
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # one stream, in the order it was written
                start_new_session=True,  # its own session and process group: killable as a whole
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except OSError as exc:  # e.g. the program does not exist
            raise ToolError(f"cannot start `{describe(self.command)}`: {exc.strerror or exc}") from None
        self._stdout = self._process.stdout
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process = self._process
        if process is None:
            return
        # Runs on success, on error, on cancellation and on generator close alike. The signals go
        # out synchronously; the waits are shielded so a cancelled task still finishes cleaning up.
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(KILL_GRACE_SECONDS):
                await process.wait()
            _signal_group(process.pid, signal.SIGKILL)  # stragglers, and a leader ignoring SIGTERM
            await process.aclose()

    async def next_status(self) -> str | None:
        """The newest output line once it is due, or None when the output has ended."""
        while True:
            fresh = self._latest is not None
            if fresh and (self._eof or anyio.current_time() >= self._next_report):
                line, self._latest = self._latest, None
                self._next_report = anyio.current_time() + self.interval
                return line
            if self._eof:
                return None
            with anyio.move_on_after(self._next_report - anyio.current_time() if fresh else float("inf")):
                await self._read()

    async def wait(self) -> int:
        """Drain the remaining output and return the exit code (negative: killed by that signal)."""
        while not self._eof:
            await self._read()
        assert self._process is not None
        return await self._process.wait()

    async def _read(self) -> None:
        assert self._stdout is not None
        try:
            chunk = await self._stdout.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._eof = True
            if self._partial:
                self._line(self._partial)
                self._partial = b""
            return
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            self._line(line)

    def _line(self, raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip()
        self.tail.append(line)
        if line.strip():
            self._latest = line


app = TaskServer("job-runner")


def _shorten(line: str) -> str:
    return line if len(line) <= STATUS_MAX_CHARS else line[: STATUS_MAX_CHARS - 1] + "…"


class CommandReport(TypedDict):
    """What the step of one command returns (and the journal keeps): small, plain JSON."""

    command: str
    exit_code: int
    duration_s: float
    tail: list[str]
    """The command line (`$ ...`) and the last `TAIL_LINES` lines of its output."""


async def run_command(ctx: TaskContext, prefix: str, command: Command) -> CommandReport:
    """Run `command` to its end, reporting its latest output line as the task's status.

    The step of a durable body: its report is journalled once it returns, so a replay of the body
    does not run the command again. The process group is gone when this returns or raises.
    """
    tail: deque[str] = deque([heading(command)], maxlen=TAIL_LINES)
    await ctx.status(f"{prefix}: {heading(command)}")
    started = time.monotonic()  # inside the step: its duration is journalled with its report
    async with CommandRun(command, tail) as run:
        while (line := await run.next_status()) is not None:
            await ctx.status(f"{prefix}: {_shorten(line)}")
        exit_code = await run.wait()
    return CommandReport(
        command=describe(command), exit_code=exit_code, duration_s=_since(started), tail=list(tail)
    )


async def _run_steps(ctx: TaskContext, pipeline: str, tail: deque[str], reports: list[StepReport]) -> None:
    """Run the commands of `pipeline` in order, one step each.

    The first command that exits nonzero raises `ToolError` with the output tail (decided from
    the step's journalled report, so a replay raises the same error): the task ends `completed`
    with `isError: true`.
    """
    commands: list[Command] = await ctx.step(steps_for, pipeline)  # a replay runs the same list
    for number, command in enumerate(commands, 1):
        done: CommandReport = await ctx.step(
            run_command, ctx, f"{pipeline} {number}/{len(commands)}", command
        )
        tail.extend(done["tail"])
        report = StepReport(
            command=done["command"], exit_code=done["exit_code"], duration_s=done["duration_s"]
        )
        reports.append(report)
        if report.exit_code != 0:
            raise _failure(pipeline, report, tail)


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _failure(pipeline: str, report: StepReport, tail: deque[str]) -> ToolError:
    how = (
        f"was killed by signal {-report.exit_code}"
        if report.exit_code < 0
        else f"exited with {report.exit_code}"
    )
    lines = "\n".join(tail)
    return ToolError(f"{pipeline} step `{report.command}` {how}. Last output:\n{lines}")


@app.task_tool(durable=True, poll_interval=0.5, ttl=3600, replay_safe=False)
async def run_pipeline(
    kind: Kind,
    ctx: TaskContext,
) -> Yields:
    """Run the CI pipeline `kind` (test or build), then publish its artifacts if the user approves.

    Streams the latest output line as the task's status; a failing step ends the task with a
    tool error carrying the last lines of output.
    """
    yield f"starting the {kind} pipeline"
    started = await ctx.now()  # journalled: a replay measures from the same start
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    reports: list[StepReport] = []

    await _run_steps(ctx, kind, tail, reports)

    seconds = await ctx.now() - started
    yield f"{kind} passed ({len(reports)} steps, {seconds:.1f} s); waiting for approval to publish"
    answer: Answer[Approval] = yield Elicit(
        f"The {kind} pipeline passed in {seconds:.1f} s. Publish the artifacts?", schema=Approval
    )
    published = isinstance(answer, Accepted) and answer.data.publish
    if published:
        await _run_steps(ctx, "publish", tail, reports)
    elif isinstance(answer, Unsupported):
        yield "publishing skipped: this client cannot answer the approval question"
    else:
        yield "publishing skipped"

    yield Result(
        PipelineReport(
            kind=kind,
            exit_code=0,  # a nonzero exit has ended the task with a tool error already
            duration_s=round(await ctx.now() - started, 3),
            published=published,
            steps=reports,
            output_tail=list(tail),
        )
    )


if __name__ == "__main__":
    app.run()
