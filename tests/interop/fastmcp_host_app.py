"""The conformance fixture tools on a FastMCP 4 server, for tests/interop/test_fastmcp_host.py.

Run with the Python of an environment that has fastmcp 4 and no fastmcp-tasks:

    python fastmcp_host_app.py serve PORT   serve them over HTTP on 127.0.0.1:PORT
    python fastmcp_host_app.py checks       print one JSON object: whether importing the adapter
                                            loads fastmcp, and what `add_tasks` does next to
                                            another tasks extension and next to `task=True` tools

`greet` is an ordinary FastMCP tool, listed first (a scenario calls the first listed tool with no
arguments); the task tools are those of examples/conformance_server.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import conformance_server as fixtures

import mcptasks.server.fastmcp as adapter

TASK_TOOLS = [
    fixtures.slow_compute,
    fixtures.failing_job,
    fixtures.protocol_error_job,
    fixtures.confirm_delete,
    fixtures.multi_input,
    fixtures.test_tool_with_task,
]


def server() -> Any:
    """The FastMCP server with `greet` and the task tools."""
    from fastmcp import FastMCP

    mcp = FastMCP("mcptasks-on-fastmcp")
    mcp.tool(fixtures.greet)
    adapter.add_tasks(mcp, TASK_TOOLS)
    return mcp


def checks() -> dict[str, Any]:
    """What the JSON line of `checks` reports."""
    seen: dict[str, Any] = {"lazy": "fastmcp" not in sys.modules}
    import anyio
    from fastmcp import Client, FastMCP
    from fastmcp.server.extensions import ServerExtension

    class OtherTasks(ServerExtension):
        """Stands for fastmcp-tasks' `TasksExtension`: the same identifier."""

        identifier = "io.modelcontextprotocol/tasks"

    clashing = FastMCP("clash")
    clashing.add_extension(OtherTasks())
    try:
        adapter.add_tasks(clashing, TASK_TOOLS)
    except ValueError as exc:
        seen["clash"] = str(exc)

    native = FastMCP("task-true")

    @native.tool(task=True)
    async def native_job() -> str:
        """A FastMCP tool for fastmcp-tasks."""
        return "done"

    adapter.add_tasks(native, TASK_TOOLS)

    async def start() -> None:
        async with Client(native):
            pass

    try:
        anyio.run(start)
    except Exception as exc:
        seen["task_true"] = f"{type(exc).__name__}: {exc}"

    hiding = FastMCP("disabled")
    adapter.add_tasks(hiding, TASK_TOOLS)
    hiding.disable(names={"slow_compute"})

    async def call_disabled() -> None:
        async with Client(hiding) as client:
            seen["listed"] = sorted(tool.name for tool in await client.list_tools())
            result = await client.call_tool("slow_compute", {"seconds": 0}, raise_on_error=False)
            seen["disabled"] = [result.is_error, *(block.text for block in result.content)]
        # In process, without a request: inline, through the extension and past it.
        async with Client(hiding):
            through = await hiding.call_tool("multi_input", {})
            past = await hiding.call_tool("confirm_delete", {"filename": "d.txt"}, run_middleware=False)
            seen["in_process"] = [block.text for result in (through, past) for block in result.content]

    anyio.run(call_disabled)
    return seen


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        server().run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        print(json.dumps(checks()))
