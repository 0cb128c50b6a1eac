"""Executor adapters against real engines (a Temporal dev server), in process and as real processes."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """temporalio, the SDK's transports and asyncpg run on asyncio only."""
    return "asyncio"
