"""Drive an mcptasks example server with Strands Agents' own MCP client, as its users would.

Run by tests/interop/test_agent_clients.py with the Python of a virtual environment that has the
pinned `strands-agents` and `mcp` installed (never with this project's environment):

    python strands_driver.py URL conformance   # examples/conformance_server.py
    python strands_driver.py URL job_runner    # examples/job_runner.py

No model is involved: the cases call `MCPClient`'s public API directly (`call_tool_sync`,
`submit_tool_sync`, `get_task_sync`, `cancel_task_sync`, the elicitation callback). The last line
printed is one JSON object, case name -> what that case observed (or {"error": ...}); the test
asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import mcp.types as mcp_types
from strands.tools.mcp import MCPClient, MCPCreateTaskResult, TasksConfig

TERMINAL = {"completed", "failed", "cancelled"}
DEADLINE = 120.0
"""Seconds any one case may wait for a task (generous: the machine may be loaded)."""

asked: list[str] = []
"""Every elicitation message the callback was given, in order."""


async def answer(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """The elicitation callback: answers by the question, the way a user would."""
    message = params.message
    asked.append(message)
    if message == "Delete stop.txt?":
        # The user stops the call instead of answering: `cancel_signal` is set while the task
        # waits for this answer, so its id is known and Strands sends tasks/cancel for it.
        stop.set()
        await asyncio.sleep(DEADLINE)  # cancelled by Strands along with the call
    if message.startswith("Delete "):
        return mcp_types.ElicitResult(action="accept", content={"confirm": "keep" not in message})
    if message == "Your name?" or message == "What is your name?":
        return mcp_types.ElicitResult(action="accept", content={"name": "Strands"})
    if message == "Go ahead?":
        return mcp_types.ElicitResult(action="accept", content={"confirm": True})
    if "Publish the artifacts?" in message:
        return mcp_types.ElicitResult(action="accept", content={"publish": publish_answer[0]})
    return mcp_types.ElicitResult(action="decline")


publish_answer = [True]
stop = threading.Event()
"""The `cancel_signal` of the `cancel_signal` case."""


def texts(result: Any) -> list[str]:
    """The text blocks of a Strands `MCPToolResult`."""
    return [block["text"] for block in result.get("content", []) if "text" in block]


def summary(result: Any) -> dict[str, Any]:
    return {
        "status": result.get("status"),
        "texts": texts(result),
        "structured": result.get("structuredContent"),
        "cancelled": result.get("cancelled"),
    }


def watch(client: MCPClient, task_id: str, until: Callable[[str], bool]) -> list[list[Any]]:
    """Poll `tasks/get` until `until(status)`; every distinct (status, statusMessage) seen, in order."""
    seen: list[list[Any]] = []
    deadline = time.monotonic() + DEADLINE
    while True:
        state = client.get_task_sync(task_id)
        entry = [state.status, state.status_message]
        if not seen or seen[-1] != entry:
            seen.append(entry)
        if until(state.status):
            if state.status == "completed" and state.result is not None:
                seen[-1].append(
                    [b.text for b in state.result.content if isinstance(b, mcp_types.TextContent)]
                )
            return seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {state.status} after {DEADLINE} s: {seen}")
        time.sleep(0.1)


def conformance_cases(client: MCPClient) -> dict[str, Callable[[], Any]]:
    def statuses() -> Any:
        handle = client.submit_tool_sync("slow_compute", {"seconds": 1.5, "label": "watch"})
        assert isinstance(handle, MCPCreateTaskResult), handle
        return {"handle": handle.status, "seen": watch(client, handle.task_id, lambda s: s in TERMINAL)}

    def cancel() -> Any:
        handle = client.submit_tool_sync("slow_compute", {"seconds": 600, "label": "cancel me"})
        assert isinstance(handle, MCPCreateTaskResult), handle
        watch(client, handle.task_id, lambda s: s == "working")
        acknowledgement = client.cancel_task_sync(handle.task_id)
        seen = watch(client, handle.task_id, lambda s: s in TERMINAL)
        return {"acknowledged": acknowledgement.result_type, "final": seen[-1][0]}

    def cancel_signal() -> Any:
        # The user-facing path: `call_tool_sync(..., cancel_signal=event)`, the event set (by the
        # elicitation callback above) while the task is waiting for input.
        result = client.call_tool_sync("c2", "confirm_delete", {"filename": "stop.txt"}, cancel_signal=stop)
        return summary(result)

    return {
        "quick_plain": lambda: summary(client.call_tool_sync("q1", "greet", {"name": "Strands"})),
        "quick_task": lambda: summary(
            client.call_tool_sync("q2", "slow_compute", {"seconds": 0.2, "label": "quick"})
        ),
        "tool_error": lambda: summary(client.call_tool_sync("e1", "failing_job", {})),
        "statuses": statuses,
        "input_confirm": lambda: summary(
            client.call_tool_sync("i1", "confirm_delete", {"filename": "a.txt"})
        ),
        "input_decline": lambda: summary(
            client.call_tool_sync("i2", "confirm_delete", {"filename": "keep.txt"})
        ),
        "multi_input": lambda: summary(client.call_tool_sync("i3", "multi_input", {})),
        "input_before_task": lambda: summary(client.call_tool_sync("i4", "test_tool_with_task", {})),
        "cancel": cancel,
        "cancel_signal": cancel_signal,
    }


def job_runner_cases(client: MCPClient) -> dict[str, Callable[[], Any]]:
    def run(publish: bool) -> Any:
        publish_answer[0] = publish
        return summary(client.call_tool_sync(f"p{publish}", "run_pipeline", {"kind": "test"}))

    return {"approved": lambda: run(True), "declined": lambda: run(False)}


def main() -> None:
    url, scenario = sys.argv[1], sys.argv[2]
    client = MCPClient(
        url=url,
        elicitation_callback=answer,
        tasks_config=TasksConfig(poll_timeout=timedelta(seconds=DEADLINE)),
        application_name="strands-interop",
        application_version=version("strands-agents"),
    )
    results: dict[str, Any] = {"versions": {p: version(p) for p in ("strands-agents", "mcp")}}
    with client:
        results["tools"] = sorted(tool.tool_name for tool in client.list_tools_sync())
        cases = conformance_cases(client) if scenario == "conformance" else job_runner_cases(client)
        for name, case in cases.items():
            before = len(asked)
            try:
                results[name] = case()
            except Exception as exc:
                results[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            if isinstance(results[name], dict):
                results[name]["asked"] = asked[before:]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
