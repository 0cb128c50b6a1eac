"""A server whose task tools misbehave in every way we know of (served by `mcptasks serve` in
tests/host/test_containment.py), plus a well-behaved control tool and a plain tool.

Each hostile body must end only its own task with a readable status; the process keeps serving.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import types
from typing import Any

import anyio

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup

from mcptasks import Elicit, EngineConfig, Inputs, Limits, Result, TaskContext, TaskServer
from mcptasks.authoring import InputRequest, Status

LIMITS = Limits(
    max_result_bytes=100_000,
    max_status_length=50,
    max_input_requests=4,
    blocking_threshold=0.3,
    cancel_grace=0.5,
    max_active_per_owner=200,
)

app = TaskServer("mcptasks-hostile", config=EngineConfig(limits=LIMITS, immediate_results=False))


@app.tool()
def ping() -> str:
    """A plain tool: answers at once."""
    return "pong"


@app.task_tool()
async def ping_task():
    """A task tool that finishes at once."""
    yield Result("pong")


@app.task_tool()
async def control(label: str):
    """Well behaved: waits for one answer, then completes."""
    yield f"{label} waiting"
    answer = yield Elicit(f"continue {label}?")
    yield Result(f"{label} done ({answer.action})")


async def _fail_soon() -> None:
    await anyio.sleep(0.01)
    raise ValueError("the child task failed")


@app.task_tool()
async def child_fails_while_parked():
    """A child of the body's own task group raises while the body waits at a yield."""
    async with anyio.create_task_group() as group:
        group.start_soon(_fail_soon)
        yield Elicit("never answered")
    yield Result("unreachable")


@app.task_tool()
async def cancels_a_helper():
    """`helper = asyncio.create_task(...); helper.cancel(); await helper`."""
    helper = asyncio.create_task(asyncio.sleep(10))
    helper.cancel()
    await helper
    yield Result("unreachable")


@app.task_tool()
async def cancels_itself():
    """Cancels its own asyncio task, then awaits."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)
    yield Result("unreachable")


@app.task_tool()
async def cancels_itself_and_returns():
    """Requests its own task's cancellation and returns without awaiting again."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    yield Result("returned anyway")


@app.task_tool()
async def raises(kind: str):
    """Raises the named BaseException."""
    errors: dict[str, BaseException] = {
        "GeneratorExit": GeneratorExit(),
        "cancelled": anyio.get_cancelled_exc_class()(),
        "KeyboardInterrupt": KeyboardInterrupt(),
        "SystemExit": SystemExit(),
        "SystemExit3": SystemExit(3),
        "ExceptionGroup": ExceptionGroup("two failures", [ValueError("a"), KeyError("b")]),
        "BaseExceptionGroup": BaseExceptionGroup("mixed", [ValueError("a"), KeyboardInterrupt()]),
        "huge": RuntimeError("x" * 5_000_000),
    }
    yield "about to raise"
    raise errors[kind]


@app.task_tool()
async def coroutine_raises(ctx: TaskContext) -> str:
    """A coroutine body (no yield) raising SystemExit after a status."""
    await ctx.status("about to exit")
    raise SystemExit(0)


@app.task_tool()
async def bad_value(kind: str):
    """Yields a value that is not JSON."""
    if kind == "result":
        yield Result({"content": [{"type": "text", "text": object()}]})
    elif kind == "status":
        yield Status(object())  # type: ignore[arg-type]
    elif kind == "input":
        yield InputRequest("elicitation/create", {"message": "hi", "extra": object()})
    elif kind == "nan":
        yield Result({"value": float("nan")})
    elif kind == "block":
        yield Result([{"type": "image", "data": 42, "mimeType": "image/png"}])
    elif kind == "too_big":
        yield Result("x" * 200_000)
    elif kind == "inputs":
        yield Inputs(*(Elicit(f"q{i}") for i in range(5)))
    yield Result("unreachable")


@app.task_tool()
async def status_flood(count: int):
    """Yields `count` statuses in a tight loop, then a long one."""
    for i in range(count):
        yield f"step {i}"
    yield "y" * 1000
    yield Result(f"flooded {count}")


@app.task_tool()
async def blocks_the_loop(seconds: float):
    """Calls time.sleep in an async body (the watchdog names it)."""
    time.sleep(seconds)  # noqa: ASYNC251 - the point of this body
    yield Result("slept on the loop")


@app.task_tool()
def sleeps_in_a_thread(seconds: float, ctx: TaskContext) -> str:
    """A `def` body: blocking is fine here."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.01)
    return f"slept {seconds} s"


@app.task_tool()
def asks_from_a_thread(who: str):
    """A `def` generator: status and input from a worker thread."""
    yield f"asking {who}"
    answer = yield Elicit(f"hello {who}?")
    yield Result(f"{who}: {answer.action}")


@app.task_tool()
async def ignores_cancellation(seconds: float):
    """Catches the cancellation and keeps going for `seconds` (then ends)."""
    yield "spinning"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            await anyio.sleep(0.01)
        except anyio.get_cancelled_exc_class():
            pass
    yield Result("finally stopped")


@app.task_tool()
async def yields_in_own_scope():
    """PEP 789: yields inside its own cancel scope, which expires while the body is parked."""
    with anyio.move_on_after(0.05):
        yield Elicit("never answered")
    yield Result("moved on")


@app.task_tool()
async def never_yields():
    """An async generator that ends without yielding."""
    if False:
        yield


@app.task_tool()
async def yields_after_result():
    """Tries to keep going after its Result."""
    try:
        yield Result("first")
    finally:
        yield "after the result"


@app.task_tool()
async def closes_itself():
    """Closes its own generator while it runs."""
    frame = sys._getframe()
    (me,) = [g for g in gc.get_referrers(frame) if isinstance(g, types.AsyncGeneratorType)]
    await me.aclose()
    yield Result("unreachable")


def _recurse(depth: int) -> int:
    return _recurse(depth + 1) + 1


@app.task_tool()
async def recurses():
    """Unbounded recursion."""
    yield Result(_recurse(0))


def tools() -> dict[str, Any]:
    """The hostile tools by name (for the test's own listing check)."""
    return dict(app.extension.task_tools)
