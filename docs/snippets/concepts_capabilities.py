# --8<-- [start:head]
"""Input only through declared client capabilities, and replay safety (the Concepts page)."""

from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, Sample, TaskServer, Unsupported

app = TaskServer("capabilities")


class Confirm(BaseModel):
    confirm: bool


def deploy_to(env: str) -> str:
    return f"deployed to {env}"


# --8<-- [end:head]


# --8<-- [start:capabilities]
@app.task_tool
async def release(version: str):
    """Ask for approval if the client can answer; otherwise do not release."""
    answer = yield Elicit(f"Release {version}?", schema=Confirm)
    if isinstance(answer, Unsupported):  # the client did not declare `elicitation`: never asked
        yield Result(f"{version} not released: this client cannot approve it")
    if isinstance(answer, Accepted) and answer.data.confirm:
        yield Result(f"{version} released")
    yield Result(f"{version} not released")


@app.task_tool(required_capabilities=["sampling"])
async def summarize(text: str):
    """Cannot work without the client's model: -32021 before any work when it is not declared."""
    reply = yield Sample(f"Summarize in one line: {text}", max_tokens=60)
    yield Result(reply.text)


@app.task_tool
async def wipe(device: str):
    """The question may not be skipped: without `elicitation` the call fails with -32021."""
    answer = yield Elicit(f"Erase {device}?", schema=Confirm, required=True)
    yield Result(f"erased {device}" if isinstance(answer, Accepted) and answer.data.confirm else "kept")


# --8<-- [end:capabilities]


# --8<-- [start:replay]
@app.task_tool(replay_safe=False)
async def deploy(env: str):
    """Deploys first, then asks: the deployment must never run twice for one call."""
    done = deploy_to(env)
    answer = yield Elicit(f"{done}. Announce it?", schema=Confirm)
    yield Result("announced" if isinstance(answer, Accepted) and answer.data.confirm else "not announced")


# --8<-- [end:replay]


# --8<-- [start:run]
if __name__ == "__main__":
    app.run()
# --8<-- [end:run]
