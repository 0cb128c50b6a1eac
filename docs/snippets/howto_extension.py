# --8<-- [start:head]
"""The Tasks extension on your own `MCPServer` (no `TaskServer`).

Run it:  mcptasks serve docs/snippets/howto_extension.py:server --transport http --port 8000
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from mcptasks import EngineConfig, TaskContext, TasksExtension
from mcptasks.cli.logsetup import TEXT_FORMAT, EscapingFormatter

# --8<-- [end:head]


# --8<-- [start:server]
tasks = TasksExtension(store="memory://", config=EngineConfig(poll_limit="delay"))


@asynccontextmanager
async def app_lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
    """Your own lifespan: open connections here; the task engine runs around it."""
    yield {"greeting": "Hello"}


server = MCPServer("inventory", extensions=[tasks], lifespan=tasks.lifespan(app_lifespan))


@server.tool()
def stock(sku: str) -> int:
    """An ordinary tool: answered synchronously, never a task."""
    return 7 if sku == "ABC-1" else 0


@tasks.task_tool(poll_interval=1.0)
async def recount(ctx: TaskContext, warehouse: str) -> str:
    """A task tool registered on the extension."""
    await ctx.status(f"recounting {warehouse}")
    await anyio.sleep(0.2)
    return f"{warehouse}: 1,204 items"


# --8<-- [end:server]


# --8<-- [start:lifespan-state]
@server.tool()
def greet(name: str, ctx: Context) -> str:
    """Ordinary tools see your lifespan's state as before."""
    return f"{ctx.request_context.lifespan_context['greeting']}, {name}!"


# --8<-- [end:lifespan-state]


# --8<-- [start:task-log]
def show_task_log() -> None:
    """One line per task transition on stderr, escaped and formatted as `mcptasks serve` writes them."""
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(TEXT_FORMAT))
    task_log = logging.getLogger("mcptasks.tasks")
    task_log.addHandler(handler)
    task_log.setLevel(logging.INFO)


if __name__ == "__main__":
    show_task_log()
    server.run()
# --8<-- [end:task-log]
