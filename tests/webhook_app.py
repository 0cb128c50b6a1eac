"""The server of the webhook process tests: `approve` waits for a yes, `quick` ends at once.

mcptasks serve tests/webhook_app.py --store URL --webhook URL --webhook-secret whsec_...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, TaskServer

app = TaskServer("webhooks")


class Confirm(BaseModel):
    confirm: bool


@app.task_tool(poll_interval=0.1)
async def approve(change: str = "deploy") -> AsyncIterator[Any]:
    """Ask for a yes, then say what was done."""
    answer = yield Elicit(f"Apply {change}?", schema=Confirm)
    yes = isinstance(answer, Accepted) and answer.data.confirm
    yield Result(f"{'applied' if yes else 'kept'} {change}")


@app.task_tool(poll_interval=0.1)
async def quick(n: int = 0) -> AsyncIterator[Any]:
    """Finish at once."""
    yield Result(f"quick {n}")
