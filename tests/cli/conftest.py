"""The `mcptasks` command line as a user runs it: serve, worker, call, tasks, admin, dashboard."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """uvicorn, the SDK's transports, redis-py and asyncpg run on asyncio (module scope: the
    module-scoped async fixtures share its loop)."""
    return "asyncio"
