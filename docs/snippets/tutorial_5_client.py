"""Tutorial step 5: call the pipeline from Python and follow its task to the end.

Start a server:  mcptasks serve docs/snippets/tutorial_4_cancel.py --transport http --port 8000
Then run:        python docs/snippets/tutorial_5_client.py http://127.0.0.1:8000/mcp build
"""

import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from mcptasks.client import DetailedTask, TasksClient


async def approve(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    """Answer the server's questions (here: always publish)."""
    print(f"server asks: {params.message}  -> yes")
    return ElicitResult(action="accept", content={"publish": True})


def show(task: DetailedTask) -> None:
    """Called with every new state of the task."""
    print(f"[{task.status}] {task.status_message or ''}")


async def main(server: Any, kind: str) -> dict[str, Any] | None:
    tasks = TasksClient(on_status=show)  # declares the extension; follows tasks for you
    async with Client(server, extensions=[tasks], elicitation_callback=approve) as client:
        result = await client.call_tool("run_pipeline", {"kind": kind})  # returns when the task ends
    print(result.structured_content)
    return result.structured_content


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"
    anyio.run(main, url, sys.argv[2] if len(sys.argv) > 2 else "test")
