"""`MissingExtra`: a store backend's client library is not installed.

The Redis and PostgreSQL stores import their drivers (`redis`, `asyncpg`) only when such a store
is built, and raise this error, naming the `pip install 'mcptasks[...]'` command, when the driver
is missing. It lives apart from `mcptasks.stores.url` so the backends and the URL parser that
loads them on demand do not import each other.
"""

from __future__ import annotations

from mcptasks.errors import MCPTasksError


class MissingExtra(MCPTasksError, ImportError):
    """A store backend's (or another optional part's) library is not installed; the message names
    the pip command. `what` names the part when it is no store (`the metrics endpoint`)."""

    def __init__(self, backend: str, package: str, extra: str, *, what: str | None = None) -> None:
        super().__init__(
            f"{what or f'the {backend} store'} needs the {package!r} package, which is not installed: "
            f"pip install 'mcptasks[{extra}]'",
            name=package,
        )
        self.extra = extra
