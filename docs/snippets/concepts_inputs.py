# --8<-- [start:head]
"""Asking the client for input from inside a task (the Concepts page, "Input")."""

from pydantic import BaseModel, Field

from mcptasks import Elicit, Inputs, ListRoots, Result, Sample, TaskContext, TaskServer

app = TaskServer("inputs")


class Port(BaseModel):
    port: int = Field(ge=1, le=65535, description="TCP port to open")


class Confirm(BaseModel):
    confirm: bool


# --8<-- [end:head]


# --8<-- [start:inputs]
@app.task_tool
async def open_port():
    """Ask for a port; an answer that does not validate is asked for again."""
    answer = yield Elicit("Which port should I open?", schema=Port, key="port")
    if not answer.accepted:  # the user declined or cancelled
        yield Result("nothing opened")
    yield Result(f"opened port {answer.data.port}")


@app.task_tool
async def plan_release(version: str):
    """Several questions at once, a completion from the client's model, and the client's roots."""
    notes, go = yield Inputs(
        Sample(f"Write one line of release notes for {version}.", max_tokens=100),
        Elicit(f"Release {version} today?", schema=Confirm),
    )
    roots = yield ListRoots()
    decision = "go" if go.accepted and go.data.confirm else "wait"
    yield Result({"notes": notes.text, "decision": decision, "roots": [root.uri for root in roots]})


@app.task_tool
async def imperative(ctx: TaskContext, path: str) -> str:
    """The same through `TaskContext`, from a plain coroutine."""
    await ctx.status(f"inspecting {path}")
    answer = await ctx.elicit(f"Delete {path}?", Confirm)
    return f"deleted {path}" if answer.accepted and answer.data.confirm else f"kept {path}"


if __name__ == "__main__":
    app.run()
# --8<-- [end:inputs]
