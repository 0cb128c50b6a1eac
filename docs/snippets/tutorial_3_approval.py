"""Tutorial step 3: ask for approval before publishing.

Run it:  mcptasks serve docs/snippets/tutorial_3_approval.py --transport http --port 8000
"""

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


# --8<-- [start:steps]
async def run_steps(pipeline: str, log: list[str]) -> AsyncIterator[str]:
    """Run the commands of `pipeline` in order, yielding status lines; ToolError on a failure."""
    commands = PIPELINES[pipeline]
    for number, command in enumerate(commands, 1):
        process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        async with process:
            async for line in output_lines(process):
                log.append(line)
                yield f"{pipeline} {number}/{len(commands)}: {line}"
            exit_code = await process.wait()
        if exit_code != 0:
            raise ToolError(f"{pipeline} step {number} exited with {exit_code}: {log[-1] if log else ''}")


# --8<-- [end:steps]


# --8<-- [start:tool]
class Approval(BaseModel):
    publish: bool = Field(description="Publish the artifacts of this run?")


class Report(BaseModel):
    kind: str
    published: bool
    last_lines: list[str]


app = TaskServer("ci")


@app.task_tool(poll_interval=0.5, ttl=3600)
async def run_pipeline(kind: Literal["test", "build"]):
    """Run the `kind` pipeline, then publish its artifacts if the user approves."""
    yield f"starting the {kind} pipeline"
    log: list[str] = []
    async for status in run_steps(kind, log):
        yield status

    answer = yield Elicit(f"The {kind} pipeline passed. Publish the artifacts?", schema=Approval)
    published = answer.accepted and answer.data.publish
    if published:
        async for status in run_steps("publish", log):
            yield status
    else:
        yield "publishing skipped"

    yield Result(Report(kind=kind, published=published, last_lines=log[-5:]))


# --8<-- [end:tool]


if __name__ == "__main__":
    app.run()
