"""Build a store from a URL: `memory://`, `sqlite:///relative.db`, `sqlite:////abs/path.db`,
`redis://...`, `postgresql://...`."""

from __future__ import annotations

from urllib.parse import urlsplit

from mcptasks.store.base import TaskStore

SUPPORTED_SCHEMES = (
    "memory://",
    "sqlite:///path.db",
    "sqlite:///:memory:",
    "redis://host:port/db",
    "postgresql://user@host:port/database",
)


def store_from_url(url: str) -> TaskStore:
    """The store a URL names; `ValueError` with the supported forms for anything else."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"store URL must be a non-empty string, got {url!r}")
    url = url.strip()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        if parts.netloc or parts.path not in ("", "/"):
            raise ValueError(f"memory store URL takes no path: {url!r} (use 'memory://')")
        from mcptasks.store.memory import MemoryTaskStore

        return MemoryTaskStore()
    if scheme == "sqlite":
        if parts.netloc:
            raise ValueError(
                f"sqlite URL has a host part {parts.netloc!r}: use 'sqlite:///relative.db' "
                "or 'sqlite:////absolute/path.db'"
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise ValueError(f"sqlite URL names no file: {url!r} (e.g. 'sqlite:///tasks.db')")
        from mcptasks.store.sqlite import SqliteTaskStore

        return SqliteTaskStore(path)
    if scheme in ("redis", "rediss"):
        from mcptasks.store.redis import RedisTaskStore

        return RedisTaskStore(url)
    if scheme in ("postgresql", "postgres"):
        from mcptasks.store.postgres import PostgresTaskStore

        return PostgresTaskStore(url)
    raise ValueError(f"unsupported store URL {url!r}; supported forms: {', '.join(SUPPORTED_SCHEMES)}")
