"""Every fixture tool the official conformance suite's tasks scenarios call, with the public API only.

Run it:  mcptasks serve examples/conformance_server.py --transport http --port 8000
It doubles as a feature tour: a plain tool, a cancellable long task, a tool error, a protocol
error, elicitation, several inputs at once, and input gathered before the task exists. The tools
that wait for people are durable (`durable=True`): with a persistent store (`--store
sqlite:///tasks.db`) their questions survive a restart of the server, under the same keys.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel, Field

from mcptasks import Accepted, Elicit, Inputs, ProtocolError, Result, TaskServer, ToolError

app = TaskServer("mcptasks-conformance")


@app.tool()
def greet(name: str = "World") -> str:
    """Say hello (an ordinary tool: always answered synchronously)."""
    return f"Hello, {name}!"


@app.task_tool(poll_interval=0.2)
async def slow_compute(seconds: float = 1.0, label: str = "compute"):
    """Work for `seconds`, reporting progress; a task when the client supports tasks."""
    if seconds < 0:
        raise ToolError("seconds must not be negative")
    yield f"{label}: started"
    elapsed = 0.0
    while elapsed < seconds:
        step = min(0.5, seconds - elapsed)
        await anyio.sleep(step)
        elapsed += step
        yield f"{label}: {elapsed:.1f}/{seconds:g} s"
    yield Result(f"{label}: finished after {seconds:g} s")


@app.task_tool(task_support="required", poll_interval=0.2)
async def failing_job():
    """A job that fails with a tool error (the task still ends `completed`, with isError)."""
    yield "working on it"
    await anyio.sleep(1)
    raise ToolError("the job failed: disk quota exceeded")


@app.task_tool(poll_interval=0.2)
async def protocol_error_job():
    """A job that fails with a JSON-RPC error (the task ends `failed`)."""
    yield "calling the backend"
    await anyio.sleep(0.2)
    raise ProtocolError(-32603, "backend unavailable", {"retryable": True})


class Confirm(BaseModel):
    confirm: bool = Field(description="Delete the file?")


@app.task_tool(poll_interval=0.2, durable=True)
async def confirm_delete(filename: str):
    """Ask the user before deleting `filename`."""
    answer = yield Elicit(f"Delete {filename}?", schema=Confirm)
    if isinstance(answer, Accepted) and answer.data.confirm:
        yield Result(f"deleted {filename}")
    else:
        yield Result(f"kept {filename}")


class Name(BaseModel):
    name: str


@app.task_tool(poll_interval=0.2, durable=True)
async def multi_input():
    """Ask two questions at once; finish when both are answered (in any order)."""
    name, go = yield Inputs(Elicit("Your name?", schema=Name), Elicit("Go ahead?", schema=Confirm))
    who = name.data.name if isinstance(name, Accepted) else "someone"
    decision = "go" if isinstance(go, Accepted) and go.data.confirm else "stop"
    yield Result(f"{who} says {decision}")


@app.task_tool(task_support="required", poll_interval=0.2, input_before_task=True, durable=True)
async def test_tool_with_task():
    """Ask for a name on the call itself (before the task exists), then greet in a task."""
    answer = yield Elicit("What is your name?", schema=Name, key="user_name", before_task=True)
    name = answer.data.name if isinstance(answer, Accepted) else "stranger"
    yield f"greeting {name}"
    await anyio.sleep(0.1)
    yield Result(f"Hello, {name}!")


if __name__ == "__main__":
    app.run()
