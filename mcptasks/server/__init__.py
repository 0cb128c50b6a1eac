"""The adapters onto the official `mcp` SDK's `MCPServer`: `TasksExtension` and `TaskServer`.

The only package of the server side that imports the SDK.
"""

from mcptasks.server.app import TaskServer
from mcptasks.server.extension import TasksExtension

__all__ = ["TaskServer", "TasksExtension"]
