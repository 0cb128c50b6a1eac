"""The dashboard's operator login, held by the process that serves it: the sessions a login opens
(revoked by logging out), the throttle on wrong tokens per client address, and the rule that a
token guarding a dashboard beyond loopback is strong.

Sessions live in this process's memory, so a restart ends every one, and a logged-out cookie is
refused for good; several dashboard processes behind one name each know only their own sessions
(use sticky sessions or `Authorization: Bearer` there).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from mcptasks._guard import SESSION_SECONDS
from mcptasks.errors import MCPTasksError

__all__ = [
    "FIRST_LOCKOUT",
    "FORGET_FAILURES_AFTER",
    "FREE_FAILURES",
    "MAX_LOCKOUT",
    "MAX_SESSIONS",
    "MIN_TOKEN_LENGTH",
    "TOKEN_ADVICE",
    "Sessions",
    "Throttle",
    "Throttled",
    "weak_token",
]

MAX_SESSIONS = 1000
"""Most open sessions; opening one more ends the one that would expire first."""

FREE_FAILURES = 5
"""Wrong tokens a client address may send before it has to wait."""
FIRST_LOCKOUT = 1.0
"""Seconds the address waits after one more wrong token; each further one doubles the wait..."""
MAX_LOCKOUT = 60.0
"""...up to this, so the operator behind the same address gets in after at most a minute."""
FORGET_FAILURES_AFTER = 900.0
"""Seconds after its last wrong token when an address's count starts again from zero."""
_MAX_CLIENTS = 10_000

MIN_TOKEN_LENGTH = 32
"""Characters a token needs to guard a dashboard beyond loopback (`secrets.token_urlsafe(24)`:
32 characters, 192 bits; 32 hexadecimal digits are 128)."""
_MIN_DISTINCT = 8
TOKEN_ADVICE = "generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def weak_token(token: str) -> str | None:
    """Why `token` is too weak to guard a dashboard reachable beyond loopback, or None."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"it has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}"
    if len(set(token)) < _MIN_DISTINCT:
        return f"it repeats fewer than {_MIN_DISTINCT} different characters"
    return None


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Sessions:
    """The open login sessions: random cookie values (256 bits; only their digests are kept)
    with their expiry. `revoke` ends one, so its cookie is refused afterwards."""

    def __init__(self, *, clock: Callable[[], float] = time.time, limit: int = MAX_SESSIONS) -> None:
        self._clock = clock
        self._limit = limit
        self._expiry: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._expiry)

    def open(self) -> str:
        """A new session's cookie value, valid `SESSION_SECONDS`."""
        now = self._clock()
        self._expiry = {k: until for k, until in self._expiry.items() if until > now}
        while len(self._expiry) >= self._limit:
            del self._expiry[min(self._expiry, key=self._expiry.__getitem__)]
        value = secrets.token_urlsafe(32)
        self._expiry[_digest(value)] = now + SESSION_SECONDS
        return value

    def valid(self, value: str | None) -> bool:
        """Whether `value` is the cookie of an open, unexpired session."""
        if not value or len(value) > 200:
            return False
        until = self._expiry.get(_digest(value))
        return until is not None and until > self._clock()

    def revoke(self, value: str | None) -> None:
        """End the session of cookie `value` (nothing when there is none)."""
        if value and len(value) <= 200:
            self._expiry.pop(_digest(value), None)


class Throttled(MCPTasksError):
    """A client address must wait `retry_after` seconds before its next token is checked."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many wrong operator tokens; retry in {retry_after:.0f} s")
        self.retry_after = retry_after

    @property
    def seconds(self) -> int:
        """The wait in whole seconds, as `Retry-After` says it (at least 1)."""
        return max(1, math.ceil(self.retry_after))


@dataclass
class _Failures:
    count: int
    last: float
    locked_until: float


class Throttle:
    """Counts wrong operator tokens per client address: after `FREE_FAILURES`, each wrong token
    locks the address out for `FIRST_LOCKOUT` seconds, doubling up to `MAX_LOCKOUT`. While locked
    out, no token from it is compared at all (a right one would otherwise tell itself apart); a
    right token clears the count."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._clients: dict[str, _Failures] = {}

    def check(self, client: str) -> None:
        """`Throttled` while `client` must wait."""
        entry = self._clients.get(client)
        if entry is None:
            return
        now = self._clock()
        if now - entry.last > FORGET_FAILURES_AFTER:
            del self._clients[client]
        elif entry.locked_until > now:
            raise Throttled(entry.locked_until - now)

    def failed(self, client: str) -> None:
        """Count a wrong token from `client`."""
        now = self._clock()
        entry = self._clients.pop(client, None) or _Failures(0, now, now)
        entry.count += 1
        entry.last = now
        over = entry.count - FREE_FAILURES
        if over > 0:
            entry.locked_until = now + min(MAX_LOCKOUT, FIRST_LOCKOUT * 2 ** min(over - 1, 16))
        self._clients[client] = entry  # re-inserted: the dict stays ordered by last failure
        if len(self._clients) > _MAX_CLIENTS:
            del self._clients[next(iter(self._clients))]

    def succeeded(self, client: str) -> None:
        """The right token came from `client`: forget its failures."""
        self._clients.pop(client, None)
