"""A CI job runner done properly: real subprocesses, live status, approval, clean cancellation.

Run it:

    mcptasks serve examples/job_runner.py --transport http --port 8000   # Streamable HTTP
    python examples/job_runner.py                                         # stdio
    MCPTASKS_STORE=sqlite:///job_runner.db mcptasks serve examples/job_runner.py   # durable tasks

One task tool, `run_pipeline(kind)`, shows the whole Tasks extension at work:

1. Every step of the pipeline runs as a real subprocess in its own process group
   (`start_new_session=True`); stdout and stderr are merged and read line by line.
2. The latest output line becomes the task's `statusMessage` (`yield "text"`), written at most
   every `STATUS_INTERVAL` seconds and only when it changed, so a chatty build does not hammer the
   task store.
3. A step that exits nonzero ends the task with a tool error (`isError: true`) carrying the tail of
   the output: the task itself is `completed` (a tool error is not a task failure).
4. When every step passed, the task asks for approval (`yield Elicit(..., schema=Approval)`; the
   task is `input_required` until the client answers through `tasks/update`) and runs the
   `publish` steps only if the user said yes. A client that did not declare `elicitation` is
   never asked: the answer is `Unsupported`, and the pipeline ends without publishing.
5. It ends with a structured result (`PipelineReport`: exit code, duration, the last
   `TAIL_LINES` lines of output, whether it published).
6. `tasks/cancel` (or a server shutdown, or the task's TTL) cancels the body at its current
   `await`; the step's `finally:` then sends SIGTERM to the whole process group, waits
   `KILL_GRACE_SECONDS`, and sends SIGKILL, so no grandchild outlives the task.
7. The tool is declared `replay_safe=False`: its steps must never run twice for one call. Called
   without the tasks extension by a client that can answer elicitations, it runs inline and the
   approval question becomes an `input_required` round; the body waits for the retry in this
   process. A retry that cannot reach it (another replica, a restart) is refused with -32021
   (call it as a task) instead of running the steps again.

Pipelines
---------
`PIPELINES` maps `test`, `build` and `publish` (run after approval, for either kind) to a list of
commands. A command is an argv list (run directly) or a string (run by the system shell). The
defaults are slow on purpose (a few seconds of printing) so you can watch the status move.

Override any of them with an environment variable holding a JSON list of commands, read at call
time (so a running server picks up a change on the next call):

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
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Literal

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, Field

from mcptasks import Accepted, Answer, Delegate, Elicit, Result, TaskServer, ToolError, Unsupported, Yields

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


def _python(script: str) -> list[str]:
    """A command running `script` with this interpreter (no shell, works wherever Python does)."""
    return [sys.executable, "-c", script]


PIPELINES: dict[str, list[Command]] = {
    "test": [
        _python(
            "import time\n"
            "for i in range(1, 5):\n"
            "    print(f'collecting tests: package {i}/4', flush=True); time.sleep(0.3)\n"
        ),
        _python(
            "import time\n"
            "for i in range(1, 11):\n"
            "    print(f'tests/test_core.py::test_case_{i:02d} PASSED', flush=True); time.sleep(0.25)\n"
            "print('10 passed', flush=True)\n"
        ),
    ],
    "build": [
        _python(
            "import time\n"
            "for i in range(1, 9):\n"
            "    print(f'compiling module {i}/8', flush=True); time.sleep(0.3)\n"
        ),
        _python(
            "import time\n"
            "for part in ('metadata', 'sources', 'wheel'):\n"
            "    print(f'packaging {part}', flush=True); time.sleep(0.4)\n"
            "print('built dist/app-1.0-py3-none-any.whl', flush=True)\n"
        ),
    ],
    "publish": [
        _python(
            "import time\n"
            "for pct in (25, 50, 75, 100):\n"
            "    print(f'uploading artifact: {pct}%', flush=True); time.sleep(0.3)\n"
        ),
    ],
}
"""The default commands of each pipeline; see the module docstring for the env overrides."""


class Approval(BaseModel):
    """The answer to "publish?"."""

    publish: bool = Field(description="Publish the artifacts of this run?")


class StepReport(BaseModel):
    """One finished step."""

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


def describe(command: Command) -> str:
    """The command as a shell-like line, for logs and reports."""
    return command if isinstance(command, str) else shlex.join(command)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(pgid, signum)


class Step:
    """One command running in its own process group; `async with` guarantees the group is gone.

        async with Step(command, tail) as step:
            while (line := await step.next_status()) is not None:
                ...                          # publish `line`
            exit_code = await step.wait()

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

    async def __aenter__(self) -> Step:
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


async def _run_steps(pipeline: str, tail: deque[str], reports: list[StepReport]) -> AsyncGenerator[str, None]:
    """Run the steps of `pipeline` in order, yielding status lines.

    The first step that exits nonzero raises `ToolError` with the output tail: the task ends
    `completed` with `isError: true`.
    """
    commands = steps_for(pipeline)
    for number, command in enumerate(commands, 1):
        prefix = f"{pipeline} {number}/{len(commands)}"
        tail.append(f"$ {describe(command)}")
        yield f"{prefix}: $ {describe(command)}"
        started = time.monotonic()
        async with Step(command, tail) as step:
            while (line := await step.next_status()) is not None:
                yield f"{prefix}: {_shorten(line)}"
            exit_code = await step.wait()
        report = StepReport(command=describe(command), exit_code=exit_code, duration_s=_since(started))
        reports.append(report)
        if exit_code != 0:
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


@app.task_tool(poll_interval=0.5, ttl=3600, replay_safe=False)
async def run_pipeline(
    kind: Kind,
) -> Yields:
    """Run the CI pipeline `kind` (test or build), then publish its artifacts if the user approves.

    Streams the latest output line as the task's status; a failing step ends the task with a
    tool error carrying the last lines of output.
    """
    yield f"starting the {kind} pipeline"
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    reports: list[StepReport] = []

    # `Delegate` runs the helper generator as part of this body: its status lines are published,
    # and if the task is cancelled the helper is closed at once, so its process group is killed
    # now, not whenever the garbage collector gets to it.
    yield Delegate(_run_steps(kind, tail, reports))

    yield f"{kind} passed ({len(reports)} steps, {_since(started):.1f} s); waiting for approval to publish"
    answer: Answer[Approval] = yield Elicit(
        f"The {kind} pipeline passed in {_since(started):.1f} s. Publish the artifacts?", schema=Approval
    )
    published = isinstance(answer, Accepted) and answer.data.publish
    if published:
        yield Delegate(_run_steps("publish", tail, reports))
    elif isinstance(answer, Unsupported):
        yield "publishing skipped: this client cannot answer the approval question"
    else:
        yield "publishing skipped"

    yield Result(
        PipelineReport(
            kind=kind,
            exit_code=0,  # a nonzero exit has ended the task with a tool error already
            duration_s=_since(started),
            published=published,
            steps=reports,
            output_tail=list(tail),
        )
    )


if __name__ == "__main__":
    app.run()
