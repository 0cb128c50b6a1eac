"""`MissingExtra`: a store backend's client library is not installed.

The Redis and PostgreSQL stores import their drivers (`redis`, `asyncpg`) only when such a store
is built, and raise this error, naming the `pip install 'mcptasks[...]'` command, when the driver
is missing. It lives apart from `mcptasks.stores.url` so the backends and the URL parser that
loads them on demand do not import each other.
"""

from __future__ import annotations

from mcptasks.errors import MCPTasksError


class MissingExtra(MCPTasksError, ImportError):
    """A store backend's client library is not installed; the message names the pip command."""

    def __init__(self, backend: str, package: str, extra: str) -> None:
        super().__init__(
            f"the {backend} store needs the {package!r} package, which is not installed: "
            f"pip install 'mcptasks[{extra}]'",
            name=package,
        )
        self.extra = extra
