"""Fixtures shared by the test suite."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import opted_in_meta


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every anyio test runs on asyncio and on trio (a module may override this)."""
    return str(request.param)


@pytest.fixture
def meta() -> dict[str, Any]:
    """The `_meta` of a request that opted in to the tasks extension (a fresh copy per test)."""
    return opted_in_meta()
