"""`MissingExtra`: a store backend's client library is not installed.

The Redis and PostgreSQL stores import their drivers (`redis`, `asyncpg`) only when such a store
is built, and raise this error, naming the `pip install 'mcptasks[...]'` command, when the driver
is missing. It lives apart from `mcptasks.stores.url` so the backends and the URL parser that
loads them on demand do not import each other.
"""

from __future__ import annotations

from mcptasks.errors import MissingExtra as MissingExtra
