"""Drive examples/conformance_server.py with Google ADK's `McpToolset`, as its users' code would.

Run by tests/interop/test_agent_clients.py with the Python of a virtual environment that has the
pinned `google-adk[mcp]` and `mcp` installed (never with this project's environment):

    python adk_driver.py URL legacy   # ADK's default handshake: `initialize` (2025-11-25)
    python adk_driver.py URL modern   # ADK_ENABLE_MCP_MODERN_PROTOCOL=1: `server/discover`

ADK has no Tasks support: its tools/call never opts in to the extension, so every task tool takes
the server's fallback (inline by default). No model is involved: the cases get the toolset's tools
(`get_tools()`) and call them with `run_async(args=..., tool_context=...)`, once on a toolset
without an elicitation callback (ADK then declares no `elicitation`) and once on one with
`elicitation_callback=`. ADK turns a JSON-RPC error into `{"error": "MCP tool execution failed:
..."}` and logs the `McpError`; the driver reads the error code from that log record. The last
line printed is one JSON object, case name -> what that case observed (or {"error": ...,
"trace": ...} when the case itself raised); the test asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import traceback
from importlib.metadata import version
from typing import Any

if sys.argv[2:3] == ["modern"]:
    os.environ["ADK_ENABLE_MCP_MODERN_PROTOCOL"] = "1"  # ADK's switch, read when it connects
# No client certificate: keeps ADK from looking for Google credentials for a local server.
os.environ["GOOGLE_API_USE_CLIENT_CERTIFICATE"] = "false"

import httpx2  # the mcp 2.x SDK's HTTP client
import mcp.types as mcp_types
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
from google.adk.tools.mcp_tool.mcp_session_manager import create_mcp_http_client
from google.adk.tools.tool_context import ToolContext

PINS = ("google-adk", "mcp")

asked: list[str] = []
"""Every elicitation message the callback was given, in order."""

codes: list[int] = []
"""The JSON-RPC error code of every `McpError` ADK logged, in order."""

headers_seen: set[tuple[str | None, str | None]] = set()
"""(MCP-Protocol-Version, Mcp-Method) of every HTTP request ADK sent."""


class McpErrorCodes(logging.Handler):
    """Collects the error code of the `McpError` ADK logs when it turns one into an error dict."""

    def emit(self, record: logging.LogRecord) -> None:
        for arg in record.args if isinstance(record.args, tuple) else ():
            code = getattr(getattr(arg, "error", None), "code", None)
            if isinstance(code, int):
                codes.append(code)


async def answer(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """The elicitation callback: answers by the question, the way a user would."""
    asked.append(params.message)
    if params.message.startswith("Delete "):
        return mcp_types.ElicitResult(action="accept", content={"confirm": "keep" not in params.message})
    if params.message == "Your name?":
        return mcp_types.ElicitResult(action="accept", content={"name": "ADK"})
    return mcp_types.ElicitResult(action="accept", content={"confirm": True})


async def record_headers(request: httpx2.Request) -> None:
    headers_seen.add((request.headers.get("mcp-protocol-version"), request.headers.get("mcp-method")))


def http_client(
    headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
) -> httpx2.AsyncClient:
    """ADK's own HTTP client factory, with a hook that notes the protocol headers of each request."""
    client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
    client.event_hooks["request"].append(record_headers)
    return client


def summary(result: Any) -> dict[str, Any]:
    """What a tool's `run_async` returned: the MCP result's text blocks, or ADK's error dict."""
    if not isinstance(result, dict):
        return {"raw": repr(result)}
    return {
        "texts": [block["text"] for block in result.get("content", []) if block.get("type") == "text"],
        "isError": result.get("isError"),
        "adk_error": result.get("error"),
    }


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "quick_plain": ("greet", {"name": "ADK"}),
    "quick_task": ("slow_compute", {"seconds": 0.2, "label": "quick"}),
    "protocol_error": ("protocol_error_job", {}),
    "required": ("failing_job", {}),
    "required_input_before_task": ("test_tool_with_task", {}),
    "input_confirm": ("confirm_delete", {"filename": "a.txt"}),
    "multi_input": ("multi_input", {}),
}
"""Case -> (tool, arguments), on the toolset without an elicitation callback."""

CALLBACK_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "callback_confirm": ("confirm_delete", {"filename": "b.txt"}),
    "callback_multi_input": ("multi_input", {}),
}
"""The same questions on a toolset given `elicitation_callback=`."""


async def run_cases(
    toolset: McpToolset, context: ToolContext, cases: dict[str, tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    tools = {tool.name: tool for tool in await toolset.get_tools()}
    results["tools"] = sorted(tools)
    for name, (tool, arguments) in cases.items():
        before_asked, before_codes = len(asked), len(codes)
        try:
            results[name] = summary(await tools[tool].run_async(args=arguments, tool_context=context))
        except Exception as exc:
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        results[name]["asked"] = asked[before_asked:]
        results[name]["codes"] = codes[before_codes:]
    return results


async def main() -> None:
    url = sys.argv[1]
    logging.getLogger("google_adk").addHandler(McpErrorCodes(level=logging.WARNING))
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="adk-interop", user_id="interop")
    context = ToolContext(
        InvocationContext(session_service=sessions, invocation_id="adk-interop", session=session)
    )
    results: dict[str, Any] = {"versions": {p: version(p) for p in PINS}}
    for callback, cases in [(None, CASES), (answer, CALLBACK_CASES)]:
        params = StreamableHTTPConnectionParams(url=url, httpx_client_factory=http_client)
        toolset = McpToolset(connection_params=params, elicitation_callback=callback)
        try:
            observed = await run_cases(toolset, context, cases)
        finally:
            await toolset.close()
        results["tools"] = observed.pop("tools")
        results.update(observed)
    results["protocol_versions"] = sorted({v for v, _ in headers_seen if v is not None})
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    asyncio.run(main())
