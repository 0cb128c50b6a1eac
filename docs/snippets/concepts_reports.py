"""The server behind the wire examples on the Concepts page.

Run it:  mcptasks serve docs/snippets/concepts_reports.py --transport http --port 8000
"""

import anyio
from pydantic import BaseModel, Field

from mcptasks import Accepted, Elicit, ProtocolError, Result, TaskServer

app = TaskServer("reports")


class Drafts(BaseModel):
    include_drafts: bool = Field(description="Include figures that are not signed off yet?")


class Confirm(BaseModel):
    confirm: bool


@app.task_tool(poll_interval=2.0, ttl=3600)
async def monthly_report(month: str):
    """Build the report for `month` (YYYY-MM)."""
    yield f"collecting figures for {month}"
    await anyio.sleep(0.5)  # stands in for real work
    answer = yield Elicit(f"Include draft figures in the {month} report?", schema=Drafts, key="drafts")
    drafts = isinstance(answer, Accepted) and answer.data.include_drafts
    yield "rendering"
    yield Result({"month": month, "pages": 12, "drafts": drafts})


@app.task_tool(task_support="required", poll_interval=2.0)
async def sync_ledger():
    """Copy the ledger from the accounting system."""
    yield "connecting to the ledger service"
    raise ProtocolError(-32050, "Ledger service unavailable", {"retryAfterSeconds": 30})


# --8<-- [start:close_month]
@app.task_tool(task_support="required", input_before_task=True, poll_interval=2.0)
async def close_month(month: str):
    """Close the books for `month`, after a confirmation asked on the call itself."""
    answer = yield Elicit(f"Close the books for {month}?", schema=Confirm, key="confirm", before_task=True)
    if not (isinstance(answer, Accepted) and answer.data.confirm):
        yield Result(f"{month} left open")
    yield f"closing {month}"
    await anyio.sleep(0.2)
    yield Result(f"{month} closed")


# --8<-- [end:close_month]


if __name__ == "__main__":
    app.run()
