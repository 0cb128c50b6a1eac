"""The server the fault-injection tests (`tests/faults/`) and the chaos soak (`benchmarks/chaos.py`)
run as real `mcptasks serve` processes while their store is broken under them.

    mcptasks serve tests/fault_app.py --transport http --port P --store URL

Configured through the environment (`EngineConfig.from_env`: `MCPTASKS_INPUT_POLL_INTERVAL`,
`MCPTASKS_IMMEDIATE_RESULTS`, ...). Every result carries a payload derived from the tool's
arguments (`payload`), so a caller can tell a task's own result from any other. Bodies leave
evidence in `$MCPTASKS_FAULTS_DIR`:

- `<task>.started.<pid>`: a body of `finish` or `ask` began in process pid;
- `<task>.ended`: the body of `finish` reached its end (JSON `{"n", "tag", "payload", "pid",
  "time"}`), written right before it yields its result: from then on the result must never be
  lost (unless its process is killed before the end is written);
- `<gate>` (written by the caller): a `finish` body called with `gate=<gate>` waits until this
  file exists, so a test can hold any number of bodies and release them into a fault at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio

from mcptasks import Accepted, Elicit, Result, TaskContext, TaskServer

FAULTS_DIR = Path(os.environ.get("MCPTASKS_FAULTS_DIR") or tempfile.gettempdir())
GATE_POLL = 0.02
"""Seconds between two looks for a gate file."""

app = TaskServer("mcptasks-faults")  # no config: the environment's


def payload(tag: str, n: int) -> str:
    """The payload `finish(tag, n)` and `ask(tag, n)` return: unique per (tag, n)."""
    return hashlib.sha256(f"mcptasks-faults:{tag}:{n}".encode()).hexdigest()[:24]


def _started(ctx: TaskContext) -> None:
    (FAULTS_DIR / f"{ctx.task_id}.started.{os.getpid()}").touch()


async def _wait_for_gate(gate: str) -> None:
    path = FAULTS_DIR / gate
    while not path.exists():  # noqa: ASYNC110 - the gate is a file another process writes
        await anyio.sleep(GATE_POLL)


@app.task_tool(poll_interval=0.1)
async def finish(
    ctx: TaskContext, tag: str, n: int, seconds: float = 0.0, gate: str | None = None
) -> AsyncGenerator[Any, Any]:
    """Wait for `gate` (if given), report a status, sleep `seconds`, then end with the payload."""
    _started(ctx)
    if gate is not None:
        await _wait_for_gate(gate)
    yield f"{tag} {n}: working"
    await anyio.sleep(seconds)
    value = payload(tag, n)
    evidence = json.dumps({"n": n, "tag": tag, "payload": value, "pid": os.getpid(), "time": time.time()})
    (FAULTS_DIR / f"{ctx.task_id}.ended").write_text(evidence, encoding="utf-8")
    yield Result({"tag": tag, "n": n, "payload": value})


@app.task_tool(poll_interval=0.1)
async def ask(ctx: TaskContext, tag: str, n: int) -> AsyncGenerator[Any, Any]:
    """Ask for a value, then end with the answer and the payload."""
    _started(ctx)
    answer = yield Elicit(f"a value for {tag} {n}?")
    data = answer.data if isinstance(answer, Accepted) else None
    yield Result({"tag": tag, "n": n, "payload": payload(tag, n), "answer": data})
