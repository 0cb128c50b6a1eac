"""Fast path (stub)."""

from typing import Any


def add_fast_path(app: Any, mcp: Any, extension: Any, *, path: str = "/mcp") -> None:
    """Stub."""
