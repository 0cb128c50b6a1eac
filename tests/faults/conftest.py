"""Faults injected under real `mcptasks serve` processes and real stores: PostgreSQL backends
terminated, Redis killed and restarted (with and without persistence), SQLite on a full disk."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The SDK's transports, redis-py and asyncpg run on asyncio (module scope: the module-scoped
    async fixtures share its loop)."""
    return "asyncio"
