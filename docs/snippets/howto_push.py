"""Following a task by push (run against docs/snippets/concepts_reports.py).

mcptasks serve docs/snippets/concepts_reports.py --transport http --port 8000
python docs/snippets/howto_push.py http://127.0.0.1:8000/mcp
"""

import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from mcptasks.client import TasksClient, start_tool_call


async def include_drafts(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"include_drafts": True})


# --8<-- [start:follow]
async def follow(server: Any) -> list[str]:
    """Each state arrives the moment the server pushes it; tasks/get is only the fallback."""
    seen: list[str] = []
    client_extension = TasksClient(push=True)  # the default: listen where the server pushes
    async with Client(server, extensions=[client_extension], elicitation_callback=include_drafts) as client:
        handle = await start_tool_call(client, "monthly_report", {"month": "2026-12"})
        async with handle.watch() as updates:
            async for task in updates:
                seen.append(f"{task.status}: {task.status_message}")
    return seen


# --8<-- [end:follow]

if __name__ == "__main__":
    for line in anyio.run(follow, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"):
        print(line)
