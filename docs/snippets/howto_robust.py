# --8<-- [start:head]
"""Writing robust task bodies: `def` bodies for blocking code, task groups inside the body,
cancellation, and limits."""

import time

import anyio
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, EngineConfig, Limits, Result, TaskContext, TaskServer

# --8<-- [end:head]

# --8<-- [start:limits]
app = TaskServer(
    "media",
    config=EngineConfig(
        limits=Limits(
            max_active_per_owner=20,  # a 21st running task of one client: error -32000, retryAfterMs
            max_result_bytes=1_000_000,  # a bigger result fails the task, saying so
            threads=8,  # worker threads shared by all `def` bodies
            blocking_threshold=0.5,  # warn when an `async def` body holds the loop longer
        )
    ),
)
# --8<-- [end:limits]


# --8<-- [start:def-function]
@app.task_tool()
def transcode(name: str, ctx: TaskContext) -> str:
    """Blocking work in a plain `def`: it runs in a worker thread, the server stays responsive."""
    for _ in range(20):
        ctx.check_cancelled()  # raises CancelRequested once the task is cancelled
        time.sleep(0.01)  # stands for a blocking library call
    return f"{name}: transcoded"


# --8<-- [end:def-function]


# --8<-- [start:def-generator]
class Go(BaseModel):
    go: bool


@app.task_tool()
def publish(name: str):
    """A `def` generator: each step runs in a worker thread; no thread is held while it waits."""
    yield f"checking {name}"
    time.sleep(0.01)
    answer = yield Elicit(f"Publish {name}?", schema=Go)
    if not (isinstance(answer, Accepted) and answer.data.go):
        yield Result(f"{name}: not published")
    yield Result(f"{name}: published")


# --8<-- [end:def-generator]


# --8<-- [start:async-body]
def checksum(data: bytes) -> int:
    time.sleep(0.01)  # blocking: keep it off the event loop
    return sum(data) % 65521


async def fetch(part: int) -> bytes:
    await anyio.sleep(0.01)
    return bytes([part]) * 10


async def fetch_all(parts: int) -> list[bytes]:
    """The task group lives in a helper: it opens and closes between two yields."""
    found: list[bytes] = [b""] * parts

    async def one(index: int) -> None:
        found[index] = await fetch(index)

    async with anyio.create_task_group() as group:
        for index in range(parts):
            group.start_soon(one, index)
    return found


@app.task_tool()
async def assemble(parts: int):
    """An `async def` body: concurrency in a task group, blocking calls in a thread."""
    yield f"fetching {parts} parts"
    chunks = await fetch_all(parts)
    yield "checksumming"
    total = await anyio.to_thread.run_sync(checksum, b"".join(chunks))
    yield Result({"parts": parts, "checksum": total})


# --8<-- [end:async-body]
