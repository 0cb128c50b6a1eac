"""What mcptasks relies on from the official `mcp` SDK, one public symbol or behaviour per test.

When an SDK release changes one of them, the failing test names what changed, so the fix starts
in the right place (`mcptasks/server/`). The one private detail mcptasks touches, the SSE
keep-alive interval, has its own test: `test_push_http.py::test_keepalive_comments_at_the_configured_interval`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolRequestParams, CallToolResult, RequestParams, TextContent
from mcp_types import Tool as ListedTool

from mcptasks.server.listing import TaskToolListing

pytestmark = pytest.mark.anyio


def _fields(cls: type) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {spec.name for spec in dataclasses.fields(cls)}
    return set(getattr(cls, "model_fields", {}))


def test_extension_base_class_offers_the_hooks_we_override() -> None:
    for hook in ("settings", "methods", "intercept_tool_call"):
        assert callable(getattr(Extension, hook, None)), f"mcp.server.extension.Extension.{hook} is gone"


def test_method_binding_takes_method_params_handler_and_versions() -> None:
    missing = {"method", "params_type", "handler", "protocol_versions"} - _fields(MethodBinding)
    assert not missing, f"mcp.server.extension.MethodBinding lost the fields {sorted(missing)}"


def test_mcpserver_takes_extensions_lifespan_and_middleware() -> None:
    parameters = inspect.signature(MCPServer).parameters
    missing = {"extensions", "lifespan", "middleware"} - set(parameters)
    assert not missing, f"MCPServer(...) no longer takes {sorted(missing)}"


def test_mcpserver_settings_keep_the_lifespan_passed_in() -> None:
    @asynccontextmanager
    async def lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        yield {}

    server = MCPServer("contract", lifespan=lifespan)
    assert server.settings.lifespan is lifespan, (
        "MCPServer.settings.lifespan is not the lifespan passed in (mcptasks finds a server's "
        "TasksExtension through it)"
    )


def test_request_context_fields_we_read() -> None:
    missing = {"method", "meta", "request", "protocol_version", "session"} - _fields(ServerRequestContext)
    assert not missing, f"mcp.server.context.ServerRequestContext lost {sorted(missing)}"


def test_call_tool_params_carry_mrtr_fields() -> None:
    missing = {"name", "arguments", "input_responses", "request_state"} - _fields(CallToolRequestParams)
    assert not missing, f"mcp_types.CallToolRequestParams lost {sorted(missing)}"


def test_listed_tool_keeps_a_schema_with_defs_exactly() -> None:
    schema = {
        "type": "object",
        "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "required": ["item"],
    }
    tool = ListedTool.model_validate({"name": "order", "inputSchema": schema, "_meta": {"k": 1}})
    dumped = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert dumped["inputSchema"] == schema, "mcp_types.Tool no longer keeps inputSchema as given"
    assert dumped["_meta"] == {"k": 1}, "mcp_types.Tool no longer keeps _meta"


class _Ghost(Extension):
    """Answers `tools/call` for a tool the SDK's registry does not know, and serves one method."""

    identifier = "io.github.mcptasks/contract"

    def methods(self) -> list[MethodBinding]:
        async def echo(ctx: ServerRequestContext[Any, Any], params: RequestParams) -> dict[str, Any]:
            return {"method": ctx.method}

        return [MethodBinding("contract/echo", RequestParams, echo)]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name == "ghost":
            return CallToolResult(content=[TextContent(type="text", text="boo")])
        return await call_next(ctx)


async def test_middleware_added_after_construction_rewrites_tools_list() -> None:
    seen: list[str] = []

    async def spy(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        seen.append(ctx.method)
        return await call_next(ctx)

    listing = TaskToolListing(lambda: [{"name": "ghost", "inputSchema": {"type": "object"}}])
    server = MCPServer("contract", extensions=[_Ghost()])
    server.middleware.extend([spy, listing])  # what TasksExtension.install does, at lifespan entry
    async with Client(server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "ghost" in names, (
            "a middleware appended to MCPServer.middleware after construction no longer sees "
            f"tools/list or cannot replace its result (methods seen: {seen})"
        )
        answer = await client.call_tool("ghost", {})
    assert [block.text for block in answer.content if isinstance(block, TextContent)] == ["boo"], (
        "Extension.intercept_tool_call no longer answers a tools/call for a tool the SDK's registry "
        "does not know"
    )


async def test_mcp_error_carries_code_message_and_data() -> None:
    error = MCPError(code=-32000, message="busy", data={"retryAfterMs": 5})
    assert (error.code, error.message, error.data) == (-32000, "busy", {"retryAfterMs": 5}), (
        "mcp.MCPError(code=, message=, data=) changed"
    )


def test_auth_helpers_we_call_exist() -> None:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import principal_components

    assert get_access_token() is None, "get_access_token() outside a request is no longer None"
    assert callable(principal_components), "mcp.server.auth.provider.principal_components is gone"
