"""The engine, authoring and protocol layers in process, on asyncio and trio: no SDK, no network."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every anyio test here runs on asyncio and on trio."""
    return str(request.param)
