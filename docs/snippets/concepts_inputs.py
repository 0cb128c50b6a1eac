# --8<-- [start:head]
"""Asking the client for input from inside a task (the Concepts page, "Input")."""

from pydantic import BaseModel, Field

from mcptasks import (
    Accepted,
    Answer,
    Cancelled,
    Declined,
    Elicit,
    Inputs,
    ListRoots,
    Result,
    Sample,
    TaskContext,
    TaskServer,
    Unsupported,
    Yields,
)
from mcptasks.authoring import Roots, RootsAnswer, Sampled

app = TaskServer("inputs")


class Port(BaseModel):
    port: int = Field(ge=1, le=65535, description="TCP port to open")


class Confirm(BaseModel):
    confirm: bool


# --8<-- [end:head]


# --8<-- [start:inputs]
@app.task_tool
async def open_port() -> Yields:
    """Ask for a port; an answer that does not validate is asked for again."""
    answer: Answer[Port] = yield Elicit("Which port should I open?", schema=Port, key="port")
    match answer:
        case Accepted(data=port):  # `port` is a validated `Port`
            yield Result(f"opened port {port.port}")
        case Declined() | Cancelled():
            yield Result("nothing opened")
        case Unsupported():  # the client cannot show a form at all
            yield Result("nothing opened: this client cannot be asked")


@app.task_tool
async def plan_release(version: str) -> Yields:
    """Several questions at once, a completion from the client's model, and the client's roots."""
    notes, go = yield Inputs(
        Sample(f"Write one line of release notes for {version}.", max_tokens=100),
        Elicit(f"Release {version} today?", schema=Confirm),
    )
    listed: RootsAnswer = yield ListRoots()
    decision = "go" if isinstance(go, Accepted) and go.data.confirm else "wait"
    roots = [root.uri for root in listed.roots] if isinstance(listed, Roots) else []
    text = notes.text if isinstance(notes, Sampled) else ""
    yield Result({"notes": text, "decision": decision, "roots": roots})


@app.task_tool
async def imperative(ctx: TaskContext, path: str) -> str:
    """The same through `TaskContext`, from a plain coroutine."""
    await ctx.status(f"inspecting {path}")
    answer = await ctx.elicit(f"Delete {path}?", Confirm)  # typed: no annotation needed
    return f"deleted {path}" if isinstance(answer, Accepted) and answer.data.confirm else f"kept {path}"


if __name__ == "__main__":
    app.run()
# --8<-- [end:inputs]
