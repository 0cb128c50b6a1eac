"""Every store backend against real SQLite files, Redis and PostgreSQL, including outages and recovery."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """redis-py and asyncpg run on asyncio only; the SQLite modules parametrize this to trio too
    (the `StoreContract` classes pick their own)."""
    return "asyncio"
