"""Finding the tasks extension among a client's extensions, for the handles it makes.

`TaskHandle.attach` and `start_tool_call` take their policy, ledger, server id and push router
from the client's `TasksClient`. `TasksClientBase` declares what they read and `tasks_client_of`
finds it, so `mcptasks.client.handle` needs nothing from `mcptasks.client.extension`, which
builds on the handle.
"""

from __future__ import annotations

from mcp import Client, ClientSession
from mcp.client.extension import ClientExtension

from mcptasks.client.ledger import TaskLedger
from mcptasks.client.policy import TaskPolicy
from mcptasks.client.push import PushRouter
from mcptasks.client.state import StatusCallback


class TasksClientBase(ClientExtension):
    """What a `TasksClient` carries for the handles it makes (see `TasksClient` for each field)."""

    policy: TaskPolicy
    ledger: TaskLedger | None
    server_id: str | None
    on_status: StatusCallback | None
    push: bool
    router: PushRouter


def tasks_client_of(client: Client | ClientSession) -> TasksClientBase | None:
    """The `TasksClient` among a client's extensions (None for a bare session or none found)."""
    if isinstance(client, Client):
        for extension in client.extensions or ():
            if isinstance(extension, TasksClientBase):
                return extension
    return None
