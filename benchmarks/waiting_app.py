"""The task tool `benchmarks/waiting.py` runs: a durable approval gate.

    mcptasks worker benchmarks/waiting_app.py --store URL --concurrency 2 [--executor URL]

`approval` runs one step, asks a yes/no question, and returns the wall-clock time at which its
body went on past the answer (a replay from the journal, on whichever worker claimed it again).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

from pydantic import BaseModel

from mcptasks import Elicit, Result, TaskContext, TaskServer

app = TaskServer("mcptasks-waiting-bench")  # no config: the environment's


class Confirm(BaseModel):
    confirm: bool


async def prepare(n: int) -> str:
    """The step before the question (journalled: a replay does not run it again)."""
    return f"plan-{n}"


@app.task_tool(durable=True)
async def approval(ctx: TaskContext, n: int = 0) -> AsyncGenerator[Any, Any]:
    """A step, a question, then the time the body went on past the answer."""
    plan = await ctx.step(prepare, n)
    yield Elicit(f"Apply {plan}?", schema=Confirm)
    yield Result({"plan": plan, "resumed_at": time.time()})
