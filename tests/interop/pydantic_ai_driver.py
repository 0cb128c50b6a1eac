"""Drive examples/conformance_server.py with pydantic-ai's `MCPToolset` (FastMCP 4 + fastmcp-tasks).

Run by tests/interop/test_agent_clients.py with the Python of a virtual environment that has the
pinned `pydantic-ai-slim[mcp-tasks]`, `fastmcp-slim` and `fastmcp-tasks` installed (never with this
project's environment):

    python pydantic_ai_driver.py URL

No model is involved: the cases call the toolset directly (`direct_call_tool`, with and without
`use_task=True`), and `fastmcp_tasks.call_tool_task` on the toolset's own FastMCP client for the
task handle (`status()`, `cancel()`, `wait()`). The last line printed is one JSON object, case
name -> what that case observed (or {"error": ...}); the test asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import fastmcp_tasks
from mcp.client.session import DEFAULT_CLIENT_INFO
from mcp.types import Implementation
from pydantic_ai.mcp import MCPToolset

TERMINAL = {"completed", "failed", "cancelled"}
DEADLINE = 120.0
"""Seconds any one case may wait for a task (generous: the machine may be loaded)."""

PINS = ("pydantic-ai-slim", "fastmcp-slim", "fastmcp-tasks", "mcp")

asked: list[str] = []
"""Every elicitation message the handler was given, in order."""


async def answer(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    """The elicitation handler: answers by the question, the way a user would."""
    asked.append(message)
    if message.startswith("Delete "):
        return {"confirm": "keep" not in message}
    if message == "Your name?":
        return {"name": "pydantic-ai"}
    return {"confirm": True}


def error_of(exc: BaseException) -> dict[str, Any]:
    """The exception and its causes (the JSON-RPC error may sit on a cause): text and error code."""
    parts: list[str] = []
    code: int | None = None
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        parts.append(f"{type(current).__name__}: {current}")
        error_code = getattr(getattr(current, "error", None), "code", None)
        if code is None and isinstance(error_code, int):
            code = error_code
        current = current.__cause__ or current.__context__
    return {"error": " <- ".join(parts), "code": code, "trace": traceback.format_exc()}


def cases(toolset: MCPToolset[Any]) -> dict[str, Callable[[], Awaitable[Any]]]:
    async def statuses() -> Any:
        task = await fastmcp_tasks.call_tool_task(
            toolset.client, "slow_compute", {"seconds": 1.5, "label": "watch"}
        )
        seen: list[list[Any]] = []
        deadline = time.monotonic() + DEADLINE
        while True:
            state = await task.status()
            entry = [state.status, state.status_message]
            if not seen or seen[-1] != entry:
                seen.append(entry)
            if state.status in TERMINAL:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task.task_id} still {state.status} after {DEADLINE} s: {seen}")
            await asyncio.sleep(0.1)
        result = await task.result()
        return {"seen": seen, "result": [getattr(b, "text", None) for b in result.content]}

    async def cancel() -> Any:
        task = await fastmcp_tasks.call_tool_task(
            toolset.client, "slow_compute", {"seconds": 600, "label": "cancel me"}
        )
        await task.wait(state="working", timeout=DEADLINE)
        await task.cancel()
        final = await task.wait(timeout=DEADLINE)
        return {"final": final.status}

    return {
        "quick_plain": lambda: toolset.direct_call_tool("greet", {"name": "pydantic-ai"}),
        "quick_task": lambda: toolset.direct_call_tool(
            "slow_compute", {"seconds": 0.2, "label": "quick"}, use_task=True
        ),
        "quick_ordinary_call": lambda: toolset.direct_call_tool(
            "slow_compute", {"seconds": 0.2, "label": "ordinary"}
        ),
        "statuses": statuses,
        "input_confirm": lambda: toolset.direct_call_tool(
            "confirm_delete", {"filename": "a.txt"}, use_task=True
        ),
        "input_decline": lambda: toolset.direct_call_tool(
            "confirm_delete", {"filename": "keep.txt"}, use_task=True
        ),
        "multi_input": lambda: toolset.direct_call_tool("multi_input", {}, use_task=True),
        "cancel": cancel,
    }


async def main() -> None:
    url = sys.argv[1]
    results: dict[str, Any] = {"versions": {p: version(p) for p in PINS}}
    toolset: MCPToolset[Any] = MCPToolset(url, elicitation_handler=answer, tool_error_behavior="error")
    async with toolset:
        results["tools"] = sorted(tool.name for tool in await toolset.list_tools())
        for name, case in cases(toolset).items():
            before = len(asked)
            try:
                value = await case()
                results[name] = {"value": value}
            except Exception as exc:
                results[name] = error_of(exc)
            results[name]["asked"] = asked[before:]
    # A second client that names itself: the server warns once per client, by its clientInfo.
    named = Implementation(name="pydantic-ai-interop", version=version("pydantic-ai-slim"))
    second: MCPToolset[Any] = MCPToolset(url, client_info=named, tool_error_behavior="error")
    async with second:
        try:
            value = await second.direct_call_tool("slow_compute", {"seconds": 0.2, "label": "named"})
            results["named_client"] = {"value": value}
        except Exception as exc:
            results["named_client"] = error_of(exc)
    results["client_info"] = {
        "default": [DEFAULT_CLIENT_INFO.name, DEFAULT_CLIENT_INFO.version],
        "named": [named.name, named.version],
    }
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    asyncio.run(main())
