"""A small live web dashboard over a task store, as an ASGI app or `mcptasks dashboard`.

Every asset ships in this package (no CDN); pages are server-rendered and refreshed by a few
kilobytes of script polling a JSON API.
"""

from __future__ import annotations

from mcptasks.dashboard.app import TOKEN_HEADER, dashboard_app
from mcptasks.dashboard.guard import ANY_HOST, LOOPBACK_HOSTS

__all__ = ["ANY_HOST", "LOOPBACK_HOSTS", "TOKEN_HEADER", "dashboard_app"]
