"""Opening and closing a task body, and the outcome of one the engine stopped."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Coroutine
from typing import Any

import anyio

from mcptasks._authoring.context import BodyChannel, TaskContext, rebind
from mcptasks._authoring.related import RelatedTasks
from mcptasks._authoring.threaded import OwnerThreads
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.driver import InlineChannel, Outcome, Parked, Pending, run_body
from mcptasks._runtime.engine.records import HALTED
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.run import TaskRun
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import INTERNAL_ERROR


async def open_body(
    tool: TaskTool,
    args: dict[str, Any],
    run: TaskRun,
    channel: BodyChannel,
    prepared: StartedBody | Parked | None,
    threads: OwnerThreads,
    related: RelatedTasks | None = None,
) -> tuple[Any, Pending | None]:
    """The body to run and the yield it stopped at (a body handed over from input rounds, or
    one resumed at its question)."""
    if isinstance(prepared, Parked):
        return prepared.question.body, Pending(prepared)
    owner = run.owner
    if run.journal is not None:
        run.threads = threads.share(owner)
    if prepared is None:
        context = TaskContext(channel, owner=owner, tool=tool.name, related=related)
        return tool.open_body(args, context, threads.share(owner) if tool.threaded else None), None
    body, context, pending, entries = prepared
    carried = context.saved  # saved during the input rounds before the task
    rebind(context, channel)
    if carried is not None:
        await run.save(carried)
    if entries:
        await run.carry(entries)
    return body, pending


async def run_inline(
    tool: TaskTool,
    arguments: dict[str, Any],
    owner: str,
    channel: BodyChannel | None,
    threads: OwnerThreads | None,
    max_result_bytes: int,
) -> Outcome:
    """Run a body to completion in the caller's task, without a task record (see
    `TaskEngine.run_inline`; `threads`: None while the engine is not running)."""
    channel = channel if channel is not None else InlineChannel(tool.name)
    context = TaskContext(channel, owner=owner, tool=tool.name)
    share = threads.share(owner) if threads is not None and tool.threaded else None
    body = tool.open_body(arguments, context, share)
    return await run_body(body, channel, tool.name, max_result_bytes=max_result_bytes)


async def close_body(body: Any) -> None:
    """Close a body that will not run (an async generator's `finally:` runs)."""
    if isinstance(body, AsyncGenerator):
        await body.aclose()


async def observed(observer: EngineObserver, record: TaskRecord, body: Coroutine[Any, Any, None]) -> None:
    """Run `body` inside `EngineObserver.executing` (its span)."""
    with observer.executing(record):
        await body


def timeout_outcome(tool: TaskTool) -> Outcome:
    """The failure recorded for a body stopped by its tool's timeout."""
    timeout_ms = tool.timeout_ms
    message = f"The task ran longer than its timeout ({timeout_ms} ms) and was stopped."
    data = {"reason": "timeout", "timeoutMs": timeout_ms}
    return Outcome("failed", error={"code": INTERNAL_ERROR, "message": message, "data": data})


def stopped_outcome(run: TaskRun, tool: TaskTool, scope: anyio.CancelScope, closing: bool) -> Outcome | None:
    """The outcome of a body this engine cancelled (None: shutting down)."""
    if run.stop_outcome is not None:
        return run.stop_outcome
    if anyio.current_time() >= scope.deadline:
        return timeout_outcome(tool)
    if closing:
        return None
    return HALTED  # stopped because the record ended or vanished: nothing left to write
