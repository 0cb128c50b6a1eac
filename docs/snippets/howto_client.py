# --8<-- [start:head]
"""Calling task tools from Python with `mcptasks.client` (run against docs/snippets/concepts_reports.py).

mcptasks serve docs/snippets/concepts_reports.py --transport http --port 8000
python docs/snippets/howto_client.py http://127.0.0.1:8000/mcp
"""

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult

from mcptasks.client import (
    TaskCancelled,
    TaskFailed,
    TaskHandle,
    TaskLedger,
    TaskPolicy,
    TasksClient,
    server_identity,
    start_tool_call,
)


async def include_drafts(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"include_drafts": True})


# --8<-- [end:head]


# --8<-- [start:transparent]
async def transparent(server: Any) -> CallToolResult:
    """`call_tool` polls the task, answers its questions, and returns the final result."""
    async with Client(server, extensions=[TasksClient()], elicitation_callback=include_drafts) as client:
        return await client.call_tool("monthly_report", {"month": "2026-10"})


# --8<-- [end:transparent]


# --8<-- [start:explicit]
async def explicit(server: Any) -> list[str]:
    """`start_tool_call` hands back a TaskHandle: watch it, cancel it, or wait for the result."""
    seen: list[str] = []
    async with Client(server, extensions=[TasksClient()], elicitation_callback=include_drafts) as client:
        handle = await start_tool_call(client, "monthly_report", {"month": "2026-11"})
        async with handle.watch() as updates:  # each change of status, statusMessage or input keys
            async for task in updates:
                seen.append(task.status)
        result = await handle.result()  # returns at once: the task has ended (or never existed)
        assert result.structured_content is not None
    return seen


# --8<-- [end:explicit]


# --8<-- [start:errors]
async def outcomes(server: Any) -> list[str]:
    """Failed and cancelled tasks raise; an isError result is returned like any result."""
    happened = []
    async with Client(server, extensions=[TasksClient()]) as client:
        try:
            await client.call_tool("sync_ledger", {})
        except TaskFailed as failure:  # carries the task's JSON-RPC error (also an MCPError)
            happened.append(f"failed: {failure.code} {failure.message}")

        handle = await start_tool_call(client, "monthly_report", {"month": "2026-12"})
        await handle.cancel()
        try:
            await handle.result()
        except TaskCancelled as cancelled:
            happened.append(f"cancelled: {cancelled.task.status_message}")
    return happened


# --8<-- [end:errors]


# --8<-- [start:resume]
async def start_and_leave(server: Any, ledger_path: Path) -> str:
    """Start a task, record it in a ledger on disk, and return without waiting."""
    tasks = TasksClient(ledger=TaskLedger(ledger_path))
    # The task may only ask what this call declares, so declare `elicitation` for the client that
    # will resume it and answer.
    async with Client(server, extensions=[tasks], elicitation_callback=include_drafts) as client:
        handle = await start_tool_call(client, "monthly_report", {"month": "2027-01"})
        assert handle.task_id is not None  # None only when the server answered without a task
        return handle.task_id


async def resume_pending(server: Any, ledger_path: Path) -> dict[str, CallToolResult]:
    """After a restart: follow every task the ledger does not know to be finished."""
    ledger = TaskLedger(ledger_path)
    results = {}
    async with Client(
        server, extensions=[TasksClient(ledger=ledger)], elicitation_callback=include_drafts
    ) as client:
        for entry in ledger.pending(server_identity(server)):  # this server's unfinished tasks
            handle = TaskHandle.resume(client, entry.task_id, tool=entry.tool)
            results[entry.task_id] = await handle.result()  # the ledger is updated as it ends
    return results


# --8<-- [end:resume]


# --8<-- [start:policy]
patient = TaskPolicy(
    poll_interval=2.0,  # when the server suggests no pollIntervalMs
    max_poll_interval=30.0,  # never wait longer than this between polls
    max_retries=8,  # transient tasks/* errors tolerated in a row
    stuck_after=600.0,  # no change for 10 minutes: cancel the task and raise TaskStuck
)
client_extension = TasksClient(patient)  # or TasksClient(stuck_after=600.0, ...)


async def main(server: Any) -> None:
    print((await transparent(server)).structured_content)
    print(await explicit(server))
    print(await outcomes(server))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp")
# --8<-- [end:policy]
