"""`TaskToolListing`: the task tools in `tools/list`, with their exact schema, through public SDK hooks.

The SDK's tool registry derives a tool's input schema from a Python signature, which cannot carry
every schema a task tool has (`$defs` among them), and it takes prebuilt tools only at
construction. So task tools stay out of it: this middleware (on `MCPServer.middleware`) adds
their definitions to every `tools/list` result, replacing a listed tool of the same name. Their
calls never reach the registry either: `TasksExtension.intercept_tool_call` answers them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import ListToolsResult
from mcp_types import Tool as ListedTool

Definitions = Callable[[], Sequence[Mapping[str, Any]]]


class TaskToolListing:
    """A server middleware adding `definitions()` (tool definitions as dicts) to `tools/list`."""

    def __init__(self, definitions: Definitions) -> None:
        self.definitions = definitions

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list":
            return result
        extra = [ListedTool.model_validate(dict(definition)) for definition in self.definitions()]
        if not extra:
            return result
        names = {tool.name for tool in extra}
        if isinstance(result, ListToolsResult):
            kept = [tool for tool in result.tools if tool.name not in names]
            return result.model_copy(update={"tools": [*kept, *extra]})
        if isinstance(result, dict):
            listed = [tool for tool in result.get("tools", []) if tool.get("name") not in names]
            dumped = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in extra]
            return {**result, "tools": [*listed, *dumped]}
        return result
