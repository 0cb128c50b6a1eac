"""The `TaskServer` the durable-body proof tests (`tests/durable/`) run as real `mcptasks serve`
processes, stopped (SIGTERM) or killed (SIGKILL) under their tasks and started again.

    mcptasks serve tests/durable_app.py --transport http --port P --store URL

Every tool is `durable=True`. What really ran is counted in `$MCPTASKS_DURABLE_DIR`: each task
has an append-only file `<task>.runs` with one line `<what> <event> <pid>` per event, written
with one small O_APPEND write (lines from several processes never interleave):

- `body start <pid>`: the body began (outside any step: every run and replay writes it);
- `<step> start <pid>` / `<step> end <pid>`: a step's function began / returned (a function that
  is interrupted writes its start only).

`transform` (the 2nd step of `pipeline`; `grind`, its sync twin, with `threaded=True`) sleeps
`seconds` the first time it runs for a task and not at all when it runs again, so a test can
kill the server inside it and the re-run is quick.
`evolving` changes its body with `$MCPTASKS_DURABLE_VARIANT`, read when the body runs: variant
"a" (default) does a step then asks a question, variant "b" does the step then another step, so
a server restarted with the other variant replays a body that diverges from its journal.
`salvage` (a `def` generator) catches the `StepFailed` of two failing steps, then asks.
`timed_gate` is `approve` with a timeout (`GATE_TIMEOUT`).
`gate` is an approval gate: a step, a question (worded differently by variant "b"; with a
deadline when `within` is given), with `confirm` a second question, then the `apply` step.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import AsyncGenerator, Generator
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, Step, StepFailed, TaskContext, TaskServer

COUNTER_DIR = Path(os.environ.get("MCPTASKS_DURABLE_DIR") or tempfile.gettempdir())
VARIANT_ENV = "MCPTASKS_DURABLE_VARIANT"

app = TaskServer("mcptasks-durable")  # no config: the environment's


def counter_path(task_id: str) -> Path:
    """The append-only counter file of one task."""
    return COUNTER_DIR / f"{task_id}.runs"


def note(task_id: str, what: str, event: str) -> None:
    """Append one line `<what> <event> <pid>` to the task's counter file (one O_APPEND write)."""
    line = f"{what} {event} {os.getpid()}\n".encode()
    fd = os.open(counter_path(task_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def events(task_id: str) -> list[tuple[str, str, int]]:
    """Every line of the task's counter file as `(what, event, pid)`."""
    return read_events(counter_path(task_id))


def read_events(path: Path) -> list[tuple[str, str, int]]:
    """The lines of a counter file as `(what, event, pid)` (none when it does not exist yet)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        what, event, pid = line.split()
        rows.append((what, event, int(pid)))
    return rows


# -- steps (each journalled under its function's qualified name) ---------------------------------


def fetch(task_id: str, source: str) -> dict[str, Any]:
    """Step 1 (sync: runs in a worker thread)."""
    note(task_id, "fetch", "start")
    value = {"source": source, "items": [1, 2, 3]}
    note(task_id, "fetch", "end")
    return value


async def transform(task_id: str, items: list[int], seconds: float) -> list[int]:
    """Step 2 (async): slow (`seconds`) the first time it runs for this task, quick after."""
    first = not any(what == "transform" for what, _, _ in events(task_id))
    note(task_id, "transform", "start")
    if first:
        await anyio.sleep(seconds)
    note(task_id, "transform", "end")
    return [item * 10 for item in items]


def grind(task_id: str, items: list[int], seconds: float) -> list[int]:
    """Step 2, sync (it runs in a worker thread, which nothing can cancel): like `transform`."""
    first = not any(what == "grind" for what, _, _ in events(task_id))
    note(task_id, "grind", "start")
    if first:
        time.sleep(seconds)
    note(task_id, "grind", "end")
    return [item * 10 for item in items]


def publish(task_id: str, items: list[int]) -> str:
    """Step 3 (sync)."""
    note(task_id, "publish", "start")
    value = f"published {sum(items)}"
    note(task_id, "publish", "end")
    return value


def prepare(task_id: str) -> str:
    note(task_id, "prepare", "start")
    note(task_id, "prepare", "end")
    return f"plan-{task_id[:8]}"


def apply(task_id: str, plan: str, confirmed: bool) -> str:
    note(task_id, "apply", "start")
    note(task_id, "apply", "end")
    return f"{plan} {'applied' if confirmed else 'skipped'}"


def shortcut(task_id: str) -> str:
    """The step variant "b" of `evolving` does where variant "a" asks its question."""
    note(task_id, "shortcut", "start")
    note(task_id, "shortcut", "end")
    return "no question asked"


def flaky(task_id: str) -> str:
    """A step that raises (its `StepFailed` is journalled like a value)."""
    note(task_id, "flaky", "start")
    raise RuntimeError("the disk is on fire")


def odd(task_id: str) -> set[int]:
    """A step whose value is not JSON (a set): the step fails with a TypeError."""
    note(task_id, "odd", "start")
    note(task_id, "odd", "end")
    return {1, 2}


class Confirm(BaseModel):
    confirm: bool


def _confirmed(answer: Any) -> bool:
    return bool(isinstance(answer, Accepted) and answer.data.confirm)


# -- tools ----------------------------------------------------------------------------------------


@app.task_tool(durable=True, poll_interval=0.1)
async def pipeline(
    ctx: TaskContext, source: str = "inbox", seconds: float = 0.0, threaded: bool = False
) -> AsyncGenerator[Any, Any]:
    """Three steps; the 2nd (`transform`, or `grind` in a thread when `threaded`) sleeps
    `seconds` on its first run."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    fetched = await ctx.step(fetch, task_id, source)
    yield "fetched"
    if threaded:
        items = await ctx.step(grind, task_id, fetched["items"], seconds)
    else:
        items = await ctx.step(transform, task_id, fetched["items"], seconds)
    yield "transformed"
    message = yield Step(publish, task_id, items)
    yield Result({"items": items, "message": message, "pid": os.getpid()})


@app.task_tool(durable=True, poll_interval=0.1)
async def approve(ctx: TaskContext) -> AsyncGenerator[Any, Any]:
    """A step, a yes/no question, another step."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    plan = await ctx.step(prepare, task_id)
    yield f"prepared {plan}"
    answer = yield Elicit(f"Apply {plan}?", schema=Confirm)
    outcome = await ctx.step(apply, task_id, plan, _confirmed(answer))
    yield Result({"outcome": outcome, "pid": os.getpid()})


GATE_TIMEOUT = 8.0
"""The timeout of `timed_gate` (seconds): long enough for its body to reach its question and park."""


@app.task_tool(durable=True, poll_interval=0.1, timeout=GATE_TIMEOUT)
async def timed_gate(ctx: TaskContext) -> AsyncGenerator[Any, Any]:
    """`approve` with a timeout, which keeps counting while the body waits parked."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    plan = await ctx.step(prepare, task_id)
    answer = yield Elicit(f"Apply {plan}?", schema=Confirm)
    outcome = await ctx.step(apply, task_id, plan, _confirmed(answer))
    yield Result({"outcome": outcome, "pid": os.getpid()})


@app.task_tool(durable=True, poll_interval=0.1)
async def evolving(ctx: TaskContext) -> AsyncGenerator[Any, Any]:
    """Variant "a": a step, then a question; variant "b": the step, then another step."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    plan = await ctx.step(prepare, task_id)
    if os.environ.get(VARIANT_ENV, "a") == "b":
        second = await ctx.step(shortcut, task_id)
        yield Result({"plan": plan, "second": second})
        return
    answer = yield Elicit(f"Go on with {plan}?", schema=Confirm)
    yield Result({"plan": plan, "confirmed": _confirmed(answer)})


def _failure(exc: StepFailed) -> dict[str, str]:
    return {"step": exc.step, "type": exc.type, "message": exc.message}


@app.task_tool(durable=True, poll_interval=0.1)
def salvage(ctx: TaskContext) -> Generator[Any, Any, None]:
    """A `def` generator: two steps that fail (one raises, one returns a set), then a question."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    failures = []
    for fn in (flaky, odd):
        try:
            yield Step(fn, task_id)
        except StepFailed as exc:
            failures.append(_failure(exc))
    answer = yield Elicit("Keep what was salvaged?", schema=Confirm)
    yield Result({"failures": failures, "confirmed": _confirmed(answer)})


@app.task_tool(durable=True, poll_interval=0.1)
async def gate(
    ctx: TaskContext, within: float | None = None, on_timeout: str = "decline", confirm: bool = False
) -> AsyncGenerator[Any, Any]:
    """A step, an approval (variant "b" words it differently; `within`: its deadline, answered
    with `on_timeout`: decline, cancel, or "yes", a default accepted answer), then `apply`."""
    task_id = ctx.task_id or ""
    note(task_id, "body", "start")
    plan = await ctx.step(prepare, task_id)
    wording = f"Apply {plan} to production?" if os.environ.get(VARIANT_ENV, "a") == "b" else f"Apply {plan}?"
    chosen: Any = Confirm(confirm=True) if on_timeout == "yes" else on_timeout
    answer = yield Elicit(wording, schema=Confirm, timeout=within, on_timeout=chosen)
    second = None
    if confirm:
        second = yield Elicit("Really?", schema=Confirm)
    approved = _confirmed(answer) and (second is None or _confirmed(second))
    outcome = await ctx.step(apply, task_id, plan, approved)
    yield Result({"outcome": outcome, "action": answer.action, "question": wording, "pid": os.getpid()})
