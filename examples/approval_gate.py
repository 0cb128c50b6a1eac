"""An approval gate: a durable tool builds a release, waits for a person to approve it, then ships it.

The question has a deadline (`APPROVAL_TIMEOUT` seconds, default one hour): unanswered by then, it
is declined and nothing ships. The task survives restarts of the server while it waits (the tool
is durable: the build is not done again), and anyone with access to the store can answer it:

    mcptasks serve examples/approval_gate.py --transport http --store sqlite:///approvals.db
    mcptasks call http://127.0.0.1:8000/mcp release version=1.4.2 --detach    # prints the task id
    mcptasks admin list --store sqlite:///approvals.db --status input_required
    mcptasks admin answer TASK_ID --store sqlite:///approvals.db --answer approve=true --answer note=LGTM
    mcptasks call http://127.0.0.1:8000/mcp release --resume=TASK_ID           # shipped app-1.4.2.tar.gz

`mcptasks admin answer TASK_ID --decline` says no; `mcptasks admin show TASK_ID` shows who answered
and when. The how-to "Approval gates" adds a webhook that tells a person the question is waiting.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import Any

from pydantic import BaseModel, Field

from mcptasks import Accepted, Answer, Elicit, Result, TaskContext, TaskServer

app = TaskServer("approval-gate", store="sqlite:///approvals.db")


class Approval(BaseModel):
    approve: bool = Field(description="ship this release")
    note: str = Field(default="", description="why, for the record")


def build(version: str) -> dict[str, str]:
    """The work before the gate (a step: done once, whatever happens to the server)."""
    return {"version": version, "artifact": f"app-{version}.tar.gz", "checks": "passed"}


def ship(artifact: str, note: str) -> str:
    """The approved work (a step: done once)."""
    return f"shipped {artifact}" + (f" ({note})" if note else "")


def approval_timeout() -> float:
    """Seconds a person has to answer (`APPROVAL_TIMEOUT`, default one hour)."""
    return float(os.environ.get("APPROVAL_TIMEOUT", "3600"))


@app.task_tool(durable=True)
async def release(ctx: TaskContext, version: str) -> AsyncGenerator[Any, Any]:
    """Build `version`, ask for approval (declined when nobody answers in time), ship it."""
    built = await ctx.step(build, version)
    yield f"built {built['artifact']}; waiting for approval"
    answer: Answer[Approval] = yield Elicit(
        f"Ship {built['artifact']} (checks {built['checks']})?",
        Approval,
        key="approve",
        timeout=approval_timeout(),
        on_timeout="decline",
    )
    if not (isinstance(answer, Accepted) and answer.data.approve):
        yield Result({"version": version, "shipped": False, "answer": answer.action})
        return
    shipped = await ctx.step(ship, built["artifact"], answer.data.note)
    yield Result({"version": version, "shipped": True, "detail": shipped})
