"""Integrity-protected `requestState` for multi-round-trip (MRTR) exchanges.

The state travels through the client, so it is signed with HMAC-SHA256: a tampered, expired or
foreign state is rejected with -32602 instead of being trusted. Replicas that must accept each
other's states share the secret (`EngineConfig.secret`, from `MCPTASKS_SECRET`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from mcptasks.errors import ProtocolError
from mcptasks.wire import INVALID_PARAMS


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def arguments_digest(tool: str, arguments: Any) -> str:
    """A digest binding a state to one tool and its exact arguments."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class RequestStateCodec:
    """Signs and verifies request states. `secret` defaults to a random key (per process)."""

    def __init__(self, secret: str | bytes | None = None, *, max_age: float = 900.0) -> None:
        if secret is None:
            secret = secrets.token_bytes(32)
        self._key = secret.encode() if isinstance(secret, str) else secret
        self.max_age = max_age

    def _sign(self, payload: bytes) -> str:
        return _b64(hmac.new(self._key, payload, hashlib.sha256).digest())

    def encode(self, state: dict[str, Any]) -> str:
        """Serialize and sign `state` (it gets an expiry stamp)."""
        body = json.dumps({**state, "exp": time.time() + self.max_age}, separators=(",", ":")).encode()
        return f"{_b64(body)}.{self._sign(body)}"

    def decode(self, token: object) -> dict[str, Any]:
        """Verify and parse a state; `ProtocolError(-32602)` when it is malformed, forged or expired."""
        if not isinstance(token, str) or token.count(".") != 1:
            raise ProtocolError(INVALID_PARAMS, "Invalid requestState: malformed")
        body_text, signature = token.split(".")
        try:
            body = _unb64(body_text)
        except ValueError:
            raise ProtocolError(INVALID_PARAMS, "Invalid requestState: malformed") from None
        if not hmac.compare_digest(signature, self._sign(body)):
            raise ProtocolError(INVALID_PARAMS, "Invalid requestState: integrity check failed")
        state = json.loads(body)
        if not isinstance(state, dict) or float(state.get("exp", 0)) < time.time():
            raise ProtocolError(INVALID_PARAMS, "Invalid requestState: expired")
        return state
