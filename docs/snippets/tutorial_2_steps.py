"""Tutorial step 2: run real commands and stream their output into the task's status.

Run it:  mcptasks serve docs/snippets/tutorial_2_steps.py --transport http --port 8000
"""

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Literal

import anyio
from anyio.abc import Process
from pydantic import BaseModel

from mcptasks import Result, TaskServer, ToolError


# --8<-- [start:pipelines]
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
}
"""Each pipeline is a list of commands (argv lists), run in order."""
# --8<-- [end:pipelines]


# --8<-- [start:lines]
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


# --8<-- [end:lines]


# --8<-- [start:tool]
class Report(BaseModel):
    kind: str
    steps: int
    seconds: float
    last_line: str


app = TaskServer("ci")


@app.task_tool(poll_interval=0.5, ttl=3600)
async def run_pipeline(kind: Literal["test", "build"]):
    """Run the `kind` pipeline and report how it went."""
    yield f"starting the {kind} pipeline"
    started = time.monotonic()
    commands = PIPELINES[kind]
    last_line = ""
    for number, command in enumerate(commands, 1):
        process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        async with process:
            async for line in output_lines(process):
                last_line = line
                yield f"{kind} {number}/{len(commands)}: {line}"  # one statusMessage per line
            exit_code = await process.wait()
        if exit_code != 0:  # a tool error: the task still ends `completed`, with isError
            raise ToolError(f"{kind} step {number} exited with {exit_code}: {last_line}")
    seconds = round(time.monotonic() - started, 2)
    yield Result(Report(kind=kind, steps=len(commands), seconds=seconds, last_line=last_line))


# --8<-- [end:tool]


if __name__ == "__main__":
    app.run()
