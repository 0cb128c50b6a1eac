"""Build a store from a URL: `memory://`, `sqlite:///relative.db`, `sqlite:////abs/path.db`,
`redis://...`, `postgresql://...`."""

from __future__ import annotations

import sqlite3
import sys
from urllib.parse import urlsplit

from mcptasks.stores.base import TaskStore
from mcptasks.stores.redaction import redact_url

SUPPORTED_SCHEMES = (
    "memory://",
    "sqlite:///path.db",
    "sqlite:///:memory:",
    "redis://host:port/db",
    "postgresql://user@host:port/database",
)


def describe_store(store: TaskStore) -> str:
    """A URL-like name for `store` without any password (the class name for custom stores)."""
    from mcptasks.stores.memory import MemoryTaskStore
    from mcptasks.stores.sqlite import SqliteTaskStore

    if isinstance(store, MemoryTaskStore):
        return "memory://"
    if isinstance(store, SqliteTaskStore):
        return f"sqlite:///{store.path}"
    # The server stores' modules are loaded only if such a store exists, so look them up there.
    postgres = sys.modules.get("mcptasks.stores.postgres")
    if postgres is not None and isinstance(store, postgres.PostgresTaskStore):
        return f"postgresql://{store.url}?schema={store.schema}"  # `url` has no password
    redis = sys.modules.get("mcptasks.stores.redis")
    if redis is not None and isinstance(store, redis.RedisTaskStore):
        return redact_url(store.url)
    return type(store).__name__


def store_error_hint(exc: BaseException) -> str:
    """What to do about a store (or an SQLite ledger) that failed to open with `exc` (its own
    `store_hint` when it has one)."""
    own = getattr(exc, "store_hint", None)
    if isinstance(own, str):
        return own
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DatabaseError):
        if "readonly" in text or "unable to open" in text or "read-only" in text:
            return "make the file and its directory writable by this user, or choose another path"
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return "it is not an SQLite file written by mcptasks, or it is damaged: choose another path"
    if isinstance(exc, PermissionError):
        return "make the file and its directory writable by this user, or choose another path"
    if isinstance(exc, FileNotFoundError):
        return "create the directory first, or choose another path"
    if isinstance(exc, (ConnectionError, OSError, TimeoutError)):
        return "check that the server is running and that the URL's host, port and credentials are right"
    return "check the store URL"


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
        from mcptasks.stores.memory import MemoryTaskStore

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
        from mcptasks.stores.sqlite import SqliteTaskStore

        return SqliteTaskStore(path)
    if scheme in ("redis", "rediss"):
        from mcptasks.stores.redis import RedisTaskStore

        return RedisTaskStore(url)
    if scheme in ("postgresql", "postgres"):
        from mcptasks.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(url)
    raise ValueError(f"unsupported store URL {url!r}; supported forms: {', '.join(SUPPORTED_SCHEMES)}")
