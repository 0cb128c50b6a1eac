# --8<-- [start:head]
"""How a task body ends, and what the client sees (the Concepts page, "Outcomes")."""

from mcptasks import ProtocolError, Result, TaskContext, TaskServer, ToolError

app = TaskServer("outcomes")
# --8<-- [end:head]


# --8<-- [start:result]
@app.task_tool
async def with_result(n: int):
    """`yield Result(value)` ends the task; value converts like a plain tool's return value."""
    yield f"squaring {n}"
    yield Result({"square": n * n})  # structuredContent + its JSON as text
    # nothing after a Result runs: the generator is closed


@app.task_tool
async def without_result():
    """Ending without a Result completes the task with empty content."""
    yield "doing something with no answer"


@app.task_tool
async def coroutine(ctx: TaskContext, n: int) -> str:
    """A plain coroutine: its return value is the result; `ctx` gives status and input."""
    await ctx.status(f"counting to {n}")
    return f"counted to {n} in task {ctx.task_id is not None}"


# --8<-- [end:result]


# --8<-- [start:errors]
@app.task_tool
async def tool_error():
    """A ToolError (or any other exception): the task completes with isError: true."""
    yield "checking the disk"
    raise ToolError("disk quota exceeded")


@app.task_tool
async def protocol_error():
    """A ProtocolError: the task fails with that JSON-RPC error object."""
    yield "calling the backend"
    raise ProtocolError(-32050, "backend unavailable", {"retryable": True})


if __name__ == "__main__":
    app.run()
# --8<-- [end:errors]
