"""Webhook delivery against real receivers on 127.0.0.1 (in-process engines and `mcptasks serve`)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The stores of the process tests (Redis, PostgreSQL) run on asyncio only."""
    return "asyncio"
