"""Durable bodies proven with real `mcptasks serve` processes stopped, killed and restarted on
real stores (SQLite, and the shared Redis and PostgreSQL servers)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The SDK's transports, redis-py and asyncpg run on asyncio."""
    return "asyncio"
