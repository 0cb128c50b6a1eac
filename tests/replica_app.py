"""The `TaskServer` that `tests/host/test_replicas.py` serves from several real processes on one shared store.

    mcptasks serve tests/replica_app.py --transport http --port P --store URL --lease-ttl 2
    mcptasks worker tests/replica_app.py --store URL --lease-ttl 2

Every tool puts `os.getpid()` in its result, so a test can tell which process ran a body. Bodies
leave evidence in the directory `$MCPTASKS_REPLICA_DIR` (files named after the task id), which
the test reads to see that a body really started, stopped, or ran more than once:

- `<task>.started.<pid>`: `work` began in process pid;
- `<task>.stopped.<pid>`: `work`'s `finally:` ran in process pid (it ended, normally or cancelled);
- `<task>.run.<attempt>.<pid>`: `idempotent_job` began its attempt in process pid;
- `runs.log`: one line `<task> <i> <pid>` per `noop` body run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, TaskContext, TaskServer

MARKER_DIR = Path(os.environ.get("MCPTASKS_REPLICA_DIR") or tempfile.gettempdir())
MAX_ATTEMPTS = 3

app = TaskServer("mcptasks-replicas")


def _mark(name: str) -> None:
    (MARKER_DIR / name).touch()


def _count(pattern: str) -> int:
    return len(list(MARKER_DIR.glob(pattern)))


def _log_run(line: str) -> None:
    # one small O_APPEND write: lines from concurrent processes do not interleave
    with open(MARKER_DIR / "runs.log", "a", encoding="utf-8") as log:
        log.write(line + "\n")


@app.task_tool(poll_interval=0.1)
async def work(ctx: TaskContext, seconds: float, step: float = 0.1):
    """Sleep `seconds` in small steps, reporting each; leave started/stopped markers."""
    pid = os.getpid()
    _mark(f"{ctx.task_id}.started.{pid}")
    try:
        elapsed = 0.0
        while elapsed < seconds:
            await anyio.sleep(step)
            elapsed += step
            yield f"pid {pid}: {elapsed:.1f}/{seconds:g} s"
        yield Result({"pid": pid, "slept": seconds})
    finally:
        _mark(f"{ctx.task_id}.stopped.{pid}")


class Confirm(BaseModel):
    confirm: bool


@app.task_tool(poll_interval=0.1)
async def ask(ctx: TaskContext, question: str = "Proceed?"):
    """Ask one yes/no question, then report the answer."""
    yield f"asking: {question}"
    answer = yield Elicit(question, schema=Confirm)
    confirmed = bool(isinstance(answer, Accepted) and answer.data.confirm)
    yield Result({"pid": os.getpid(), "confirmed": confirmed, "task": ctx.task_id})


@app.task_tool(poll_interval=0.1, retry_on_crash=True, max_attempts=MAX_ATTEMPTS)
async def idempotent_job(ctx: TaskContext, seconds: float, retry_seconds: float | None = None):
    """Sleep `seconds` (`retry_seconds` on later attempts) in steps; re-run when its process dies."""
    pid = os.getpid()
    # The context does not expose the attempt number: read it from the shared store. A first
    # attempt may find no record yet (an immediate-result candidate is stored by its first write,
    # its end, or after its first scheduler turns); a re-run's record was claimed from the store.
    record = await app.extension.engine.store.get(ctx.task_id or "")
    attempt = record.attempt if record is not None else 1
    _mark(f"{ctx.task_id}.run.{attempt}.{pid}")
    if attempt > 1 and retry_seconds is not None:
        seconds = retry_seconds
    elapsed = 0.0
    while elapsed < seconds:
        yield f"attempt {attempt} of {MAX_ATTEMPTS} (pid {pid}): {elapsed:.1f}/{seconds:g} s"
        await anyio.sleep(0.1)
        elapsed += 0.1
    yield Result({"pid": pid, "attempt": attempt, "runs": _count(f"{ctx.task_id}.run.*")})


@app.task_tool(poll_interval=0.05)
async def noop(ctx: TaskContext, i: int):
    """No work: log the run and return at once (possibly as an immediate result: it names its task)."""
    pid = os.getpid()
    _log_run(f"{ctx.task_id} {i} {pid}")
    yield Result({"i": i, "pid": pid, "task": ctx.task_id})
