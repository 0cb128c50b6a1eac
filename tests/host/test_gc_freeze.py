"""`mcptasks serve` / `TaskServer.run("http")` freeze the start-up heap once the server has started."""

from __future__ import annotations

import gc

import anyio
import pytest
import uvicorn
from sdk_helpers import HostApp, poll

from mcptasks.server.app import uvicorn_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """uvicorn runs on asyncio."""
    return "asyncio"


async def test_the_start_up_heap_is_frozen_once_serving() -> None:
    host = HostApp()
    config = uvicorn.Config(host.app.streamable_http_app(), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn_server(config, host.app.extension)
    gc.unfreeze()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve)

            async def started() -> bool:
                return bool(server.started)

            await poll(started, bool, what="the server to start")
            assert gc.get_freeze_count() > 0
            server.should_exit = True
    finally:
        gc.unfreeze()
