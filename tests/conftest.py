"""Fixtures shared by the test suite (each directory's conftest picks the anyio backends)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import opted_in_meta


@pytest.fixture
def meta() -> dict[str, Any]:
    """The `_meta` of a request that opted in to the tasks extension (a fresh copy per test)."""
    return opted_in_meta()
