"""The dashboard's request guards (defined in `mcptasks._guard`, shared with the metrics endpoint):
the Host and Origin check against DNS rebinding, and the operator login."""

from __future__ import annotations

from mcptasks._guard import (
    ANY_HOST,
    LOOPBACK_HOSTS,
    SESSION_COOKIE,
    SESSION_SECONDS,
    HostGuard,
    bearer_token,
    host_matches,
    hosts_for,
    token_matches,
)

__all__ = [
    "ANY_HOST",
    "LOOPBACK_HOSTS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "HostGuard",
    "bearer_token",
    "host_matches",
    "hosts_for",
    "token_matches",
]
