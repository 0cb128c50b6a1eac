"""Drive examples/conformance_server.py with LangChain's `langchain.mcp.MCPAdapter`, as its users' code would.

Run by tests/interop/test_agent_clients.py with the Python of a virtual environment that has the
pinned `langchain[mcp]`, `fastmcp`, `fastmcp-tasks` and `mcp` installed (never with this
project's environment):

    python langchain_driver.py URL DATABASE all     # the inline cases, then the task cases
    python langchain_driver.py URL DATABASE tasks   # the task cases only

LangChain has no Tasks code of its own: `MCPAdapter` wraps a FastMCP `Client`, and a FastMCP
client drives the tasks extension only once `fastmcp_tasks` has been imported (that import
registers the client half for every `Client` made after it). So the inline cases run first, with
`fastmcp_tasks` never imported; the task cases run after importing it. No model is involved: the
cases get the adapter's LangChain tools (`list_tools()`) and invoke them with a tool call, as an
agent's tool node does, and answer LangChain's elicitation interrupts by resuming a one-node
LangGraph graph. DATABASE is the server's SQLite store, read (never written) to see whether a
task outlives a cancelled caller. The last line printed is one JSON object, case name -> what
that case observed (or {"error": ..., "code": ..., "trace": ...} when the case raised); the test
asserts on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sqlite3
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from fastmcp import Client
from langchain_core._api import suppress_langchain_beta_warning
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

with suppress_langchain_beta_warning():  # `langchain.mcp` warns on import that it is in beta
    from langchain.mcp import MCPAdapter

PINS = ("langchain", "fastmcp", "fastmcp-tasks", "mcp")
DEADLINE = 120.0
"""Seconds any one wait may take (generous: the machine may be loaded)."""

asked: list[str] = []
"""Every elicitation message the handler was given, in order."""

progress: list[str] = []
"""Every progress message the progress handler was given, in order."""

protocol_versions: set[str] = set()
"""The protocol version each connected client negotiated."""


async def answer(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    """A FastMCP elicitation handler: answers by the question, the way a user would."""
    asked.append(message)
    if message.startswith("Delete "):
        return {"confirm": "keep" not in message}
    if message in ("Your name?", "What is your name?"):
        return {"name": "LangChain"}
    return {"confirm": True}


async def on_progress(value: float, total: float | None, message: str | None) -> None:
    progress.append(message or "")


def error_of(exc: BaseException) -> dict[str, Any]:
    """The exception: its type and text, and the JSON-RPC error code when it carries one."""
    code = getattr(getattr(exc, "error", None), "code", None)
    return {
        "error": f"{type(exc).__name__}: {exc}",
        "code": code if isinstance(code, int) else None,
        "trace": traceback.format_exc(),
    }


def summary(message: ToolMessage) -> dict[str, Any]:
    """What the model would be handed: the ToolMessage's text blocks and its status."""
    content = message.content if isinstance(message.content, list) else [message.content]
    texts = [block["text"] if isinstance(block, dict) else str(block) for block in content]
    return {"texts": texts, "status": message.status}


async def tools_of(adapter: MCPAdapter) -> dict[str, BaseTool]:
    async with adapter:
        tools = {tool.name: tool for tool in await adapter.list_tools()}
        client = adapter.client
        if isinstance(client, Client) and client.protocol_version is not None:
            protocol_versions.add(str(client.protocol_version))
    return tools


async def invoke(tool: BaseTool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Invoke `tool` with a tool call, as an agent's tool node does."""
    call = {"type": "tool_call", "id": "call-1", "name": tool.name, "args": arguments}
    return summary(await tool.ainvoke(call))


class State(TypedDict, total=False):
    out: dict[str, Any]


async def through_interrupts(tool: BaseTool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call `tool` in a one-node graph; answer each elicitation interrupt by resuming the run."""

    async def call(state: State) -> State:
        return {"out": await invoke(tool, arguments)}

    builder = StateGraph(State)
    builder.add_node("call", call)
    builder.add_edge(START, "call")
    builder.add_edge("call", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "interop"}}
    rounds: list[list[str]] = []
    state = await graph.ainvoke({}, config)
    while "__interrupt__" in state:
        payload = state["__interrupt__"][0].value
        rounds.append([request["message"] for request in payload["requests"]])
        responses = {}
        for request in payload["requests"]:
            wants_name = "name" in request["requested_schema"].get("properties", {})
            content = {"name": "LangChain"} if wants_name else {"confirm": True}
            responses[request["key"]] = {"action": "accept", "content": content}
        state = await graph.ainvoke(Command(resume={"responses": responses}), config)
    return {**state["out"], "rounds": rounds}


def inline_cases(url: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """`fastmcp_tasks` not imported: no call opts in to the extension."""

    async def default(tool: str, arguments: dict[str, Any]) -> Any:
        return await invoke((await tools_of(MCPAdapter(url)))[tool], arguments)

    async def interrupts(tool: str, arguments: dict[str, Any]) -> Any:
        return await through_interrupts((await tools_of(MCPAdapter(url)))[tool], arguments)

    async def handler(tool: str, arguments: dict[str, Any]) -> Any:
        adapter = MCPAdapter(Client(url, elicitation_handler=answer))
        return await invoke((await tools_of(adapter))[tool], arguments)

    async def legacy_default(tool: str, arguments: dict[str, Any]) -> Any:
        adapter = MCPAdapter(Client(url, mode="legacy"))
        return await through_interrupts((await tools_of(adapter))[tool], arguments)

    async def legacy_handler(tool: str, arguments: dict[str, Any]) -> Any:
        client = Client(url, mode="legacy", elicitation_handler=answer, progress_handler=on_progress)
        before = len(progress)
        result = await invoke((await tools_of(MCPAdapter(client)))[tool], arguments)
        return {**result, "progress": progress[before:]}

    return {
        "quick_plain": lambda: default("greet", {"name": "LangChain"}),
        "quick_task": lambda: default("slow_compute", {"seconds": 0.2, "label": "inline"}),
        "protocol_error": lambda: default("protocol_error_job", {}),
        "required": lambda: default("failing_job", {}),
        "required_input_before_task": lambda: default("test_tool_with_task", {}),
        "interrupt_confirm": lambda: interrupts("confirm_delete", {"filename": "a.txt"}),
        "interrupt_multi_input": lambda: interrupts("multi_input", {}),
        "handler_decline": lambda: handler("confirm_delete", {"filename": "keep.txt"}),
        "legacy_interrupt_confirm": lambda: legacy_default("confirm_delete", {"filename": "b.txt"}),
        "legacy_statuses": lambda: legacy_handler("slow_compute", {"seconds": 1.5, "label": "watch"}),
        "legacy_handler_confirm": lambda: legacy_handler("confirm_delete", {"filename": "c.txt"}),
    }


def task_cases(url: str, database: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """`fastmcp_tasks` imported: every FastMCP client opts in and resolves tasks transparently."""

    async def handler(tool: str, arguments: dict[str, Any]) -> Any:
        adapter = MCPAdapter(Client(url, elicitation_handler=answer))
        return await invoke((await tools_of(adapter))[tool], arguments)

    async def default_adapter() -> Any:
        # MCPAdapter's own client (interrupt-driven elicitation) calls the session directly.
        tools = await tools_of(MCPAdapter(url))
        return await invoke(tools["slow_compute"], {"seconds": 0.2, "label": "interrupt-armed"})

    async def cancel_caller() -> Any:
        tools = await tools_of(MCPAdapter(Client(url, elicitation_handler=answer)))
        call = asyncio.ensure_future(tools["slow_compute"].ainvoke({"seconds": 600, "label": "cancel me"}))
        query = "SELECT status FROM tasks WHERE tool = 'slow_compute' AND body LIKE '%cancel me%'"
        deadline = time.monotonic() + DEADLINE
        while not (rows := read(database, query)):
            if call.done():
                return {"ended_first": repr(call.result())}
            if time.monotonic() > deadline:
                raise TimeoutError(f"no task for the call after {DEADLINE} s")
            await asyncio.sleep(0.1)
        call.cancel()  # as when an agent run is stopped: LangChain has no cancel of its own
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await asyncio.sleep(1.0)  # room for a tasks/cancel, had the client sent one
        return {"while_running": rows[0][0], "after_cancel": read(database, query)[0][0]}

    return {
        "task_default_adapter": default_adapter,
        "task_quick": lambda: handler("slow_compute", {"seconds": 0.2, "label": "tasked"}),
        "task_tool_error": lambda: handler("failing_job", {}),
        "task_protocol_error": lambda: handler("protocol_error_job", {}),
        "task_input_before_task": lambda: handler("test_tool_with_task", {}),
        "task_confirm": lambda: handler("confirm_delete", {"filename": "a.txt"}),
        "task_decline": lambda: handler("confirm_delete", {"filename": "keep.txt"}),
        "task_multi_input": lambda: handler("multi_input", {}),
        "task_cancel_caller": cancel_caller,
    }


def read(database: str, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


async def run(cases: dict[str, Callable[[], Awaitable[Any]]], results: dict[str, Any]) -> None:
    for name, case in cases.items():
        before = len(asked)
        try:
            value = await case()
            results[name] = value if isinstance(value, dict) else {"value": value}
        except Exception as exc:
            results[name] = error_of(exc)
        results[name]["asked"] = asked[before:]


async def main() -> None:
    url, database, which = sys.argv[1], sys.argv[2], sys.argv[3]
    results: dict[str, Any] = {"versions": {p: version(p) for p in PINS}}
    results["tools"] = sorted(await tools_of(MCPAdapter(url)))
    if which == "all":
        await run(inline_cases(url), results)
    importlib.import_module("fastmcp_tasks")  # from here on every FastMCP Client drives tasks
    await run(task_cases(url, database), results)
    results["protocol_versions"] = sorted(protocol_versions)
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    asyncio.run(main())
