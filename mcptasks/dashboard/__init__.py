"""A small live web dashboard over a task store, as an ASGI app or `mcptasks dashboard`.

Every asset ships in this package (no CDN); pages are server-rendered and refreshed by a few
kilobytes of script polling a JSON API.
"""

from __future__ import annotations

from mcptasks.dashboard.app import TOKEN_HEADER, dashboard_app

__all__ = ["TOKEN_HEADER", "dashboard_app"]
