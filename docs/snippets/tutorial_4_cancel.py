"""Tutorial step 4: cancel cleanly, and put a time limit on the run.

Run it:  mcptasks serve docs/snippets/tutorial_4_cancel.py --transport http --port 8000
(POSIX only: process groups and os.killpg.)
"""

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Literal

import anyio
from anyio.abc import Process
from pydantic import BaseModel, Field

from mcptasks import Elicit, Result, TaskServer, ToolError


def python(script: str) -> list[str]:
    """A command that runs `script` with this interpreter (portable stand-in for real tools)."""
    return [sys.executable, "-c", script]


PIPELINES: dict[str, list[list[str]]] = {
    "test": [
        python("import time\nfor i in range(1, 4): print(f'test {i}/3 passed', flush=True); time.sleep(0.2)"),
    ],
    "build": [
        python("import time\nfor i in range(1, 4): print(f'compiling {i}/3', flush=True); time.sleep(0.2)"),
        python("print('built dist/app-1.0-py3-none-any.whl', flush=True)"),
    ],
    "publish": [
        python("import time\nfor pct in (50, 100): print(f'uploading: {pct}%', flush=True); time.sleep(0.2)"),
    ],
}

KILL_GRACE_SECONDS = 2.0


async def output_lines(process: Process) -> AsyncIterator[str]:
    """The process's output, line by line, as it is printed."""
    assert process.stdout is not None
    pending = b""
    async for chunk in process.stdout:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode(errors="replace").rstrip()
    if pending:
        yield pending.decode(errors="replace").rstrip()


# --8<-- [start:group]
def signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(pgid, signum)


@contextlib.asynccontextmanager
async def process_group(command: list[str]) -> AsyncIterator[Process]:
    """Run `command` in its own process group; on the way out, however we leave, end the group."""
    process = await anyio.open_process(
        command,
        stdin=subprocess.DEVNULL,  # never the server's stdin: under stdio that is the MCP session
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a new process group: children and grandchildren die together
    )
    try:
        yield process
    finally:
        signal_group(process.pid, signal.SIGTERM)
        with anyio.CancelScope(shield=True):  # finish cleaning up even when cancelled
            with anyio.move_on_after(KILL_GRACE_SECONDS):
                await process.wait()
            signal_group(process.pid, signal.SIGKILL)
            await process.aclose()


# --8<-- [end:group]


# --8<-- [start:steps]
async def run_steps(pipeline: str, log: list[str]) -> AsyncIterator[str]:
    """Run the commands of `pipeline` in order, yielding status lines; ToolError on a failure."""
    commands = PIPELINES[pipeline]
    for number, command in enumerate(commands, 1):
        async with process_group(command) as process:
            async for line in output_lines(process):
                log.append(line)
                yield f"{pipeline} {number}/{len(commands)}: {line}"
            exit_code = await process.wait()
        if exit_code != 0:
            raise ToolError(f"{pipeline} step {number} exited with {exit_code}: {log[-1] if log else ''}")


# --8<-- [end:steps]


class Approval(BaseModel):
    publish: bool = Field(description="Publish the artifacts of this run?")


class Report(BaseModel):
    kind: str
    published: bool
    last_lines: list[str]


app = TaskServer("ci")


# --8<-- [start:tool]
@app.task_tool(poll_interval=0.5, ttl=3600)  # a run still going after an hour is stopped and failed
async def run_pipeline(kind: Literal["test", "build"]):
    """Run the `kind` pipeline, then publish its artifacts if the user approves."""
    yield f"starting the {kind} pipeline"
    log: list[str] = []
    # aclosing: when the task is cancelled while suspended at a `yield`, the helper generator is
    # closed right away, so its process group is ended now rather than at garbage collection.
    async with contextlib.aclosing(run_steps(kind, log)) as steps:
        async for status in steps:
            yield status

    answer = yield Elicit(f"The {kind} pipeline passed. Publish the artifacts?", schema=Approval)
    published = answer.accepted and answer.data.publish
    if published:
        async with contextlib.aclosing(run_steps("publish", log)) as steps:
            async for status in steps:
                yield status
    else:
        yield "publishing skipped"

    yield Result(Report(kind=kind, published=published, last_lines=log[-5:]))


# --8<-- [end:tool]


if __name__ == "__main__":
    app.run()
