# --8<-- [start:app]
"""A release pipeline whose bodies run on a durable execution engine's workers."""

from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, TaskContext, TaskServer

app = TaskServer("releases")  # the store and the executor come from the command line


def build(version: str) -> dict:
    """A step: it runs once per task, on whichever worker gets there first."""
    return {"artifact": f"releases-{version}.tar.gz"}


def publish(artifact: str) -> str:
    return f"{artifact} is live"


class Go(BaseModel):
    go: bool


@app.task_tool(durable=True)
async def release(version: str, ctx: TaskContext):
    """Build, ask for a go, publish. A worker lost mid-way is replaced; finished steps stay done."""
    built = await ctx.step(build, version)
    yield f"built {built['artifact']}"
    answer = yield Elicit(f"Publish {built['artifact']}?", schema=Go)
    if isinstance(answer, Accepted) and answer.data.go:
        yield Result(await ctx.step(publish, built["artifact"]))
    else:
        yield Result(f"{built['artifact']} was not published")


# --8<-- [end:app]


# --8<-- [start:in-code]
def release_server(store: str, temporal: str) -> TaskServer:
    """The same server configured in code: `executor=` takes an executor or its URL."""
    from mcptasks.executors import TemporalExecutor

    server = TaskServer("releases", store=store, executor=TemporalExecutor(temporal, task_queue="releases"))
    server.task_tool(durable=True)(release.fn)
    return server


# --8<-- [end:in-code]
