"""One signed POST of one event to one endpoint, and what its answer means.

A message follows Standard Webhooks: `webhook-id` (the event's stable id), `webhook-timestamp`
(now, so every attempt is signed afresh) and `webhook-signature` (made by the `standardwebhooks`
package over the raw body). The request goes to the checked address (`targets.destination`),
never follows a redirect, ignores proxy settings of the environment (a proxy would connect
where the check did not look) and is bounded by a timeout.

What an answer means (`Attempt.verdict`): any 2xx is delivered; 410 Gone stops the endpoint; 413
drops the event (a body too large stays too large); every other status, a timeout and a
connection error are retried later (Standard Webhooks counts every non-2xx as a failure to retry,
3xx included, since redirects are not followed); 429 and 503 may say when with `Retry-After`.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

import anyio
import httpx2
from standardwebhooks.webhooks import Webhook

from mcptasks._runtime.webhooks.targets import Endpoint, RefusedAddress, destination
from mcptasks._version import __version__

Verdict = Literal["delivered", "retry", "drop", "gone"]
"""What to do with the event after an attempt."""


USER_AGENT = f"mcptasks/{__version__} (webhooks)"


@dataclass(frozen=True)
class Attempt:
    """How one POST went."""

    verdict: Verdict
    reason: str | None = None
    """For a failure: one of `FAILURE_REASONS`."""
    status: int | None = None
    retry_after: float | None = None
    """Seconds the endpoint asked to wait (`Retry-After` on 429 or 503), if it did."""
    detail: str = ""


def body_of(message: dict[str, Any]) -> bytes:
    """The raw body: compact JSON, the exact bytes that are signed."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


class Sender:
    """Signs and posts messages with one HTTP client (open it with `async with`)."""

    def __init__(self, secret: str, *, timeout: float, allow_private: bool) -> None:
        self.signer = Webhook(secret)
        self.timeout = timeout
        self.allow_private = allow_private
        self.client = httpx2.AsyncClient(
            timeout=timeout, follow_redirects=False, trust_env=False, headers={"user-agent": USER_AGENT}
        )

    async def __aenter__(self) -> Sender:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)

    async def post(self, endpoint: Endpoint, message_id: str, body: bytes) -> Attempt:
        """POST `body` to `endpoint` as message `message_id`, signed now."""
        url = httpx2.URL(endpoint.url)
        host = url.host
        port = url.port or (443 if url.scheme == "https" else 80)
        now = datetime.now(tz=timezone.utc)
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(message_id, now, body),
            "host": url.netloc.decode("ascii"),
        }
        try:
            with anyio.fail_after(self.timeout):  # the whole attempt, name resolution included
                address = await destination(host, port, allow_private=self.allow_private)
                target = url.copy_with(host=address)
                extensions = {"sni_hostname": host} if url.scheme == "https" else {}
                response = await self.client.post(
                    target, content=body, headers=headers, extensions=extensions
                )
        except RefusedAddress as exc:
            return Attempt("retry", "refused_address", detail=str(exc))
        except (TimeoutError, httpx2.TimeoutException):
            return Attempt("retry", "timeout", detail=f"no answer within {self.timeout:g} s")
        except (httpx2.ConnectError, OSError) as exc:
            category = "tls_error" if _is_tls(exc) else "connection_refused"
            return Attempt("retry", category, detail=str(exc) or type(exc).__name__)
        except httpx2.HTTPError as exc:
            return Attempt("retry", "tls_error" if _is_tls(exc) else "other", detail=type(exc).__name__)
        return judge(response.status_code, response.headers.get("retry-after"))


def judge(status: int, retry_after: str | None = None) -> Attempt:
    """What an answer with `status` means (see the module docstring)."""
    if 200 <= status < 300:
        return Attempt("delivered", status=status)
    if status == 410:
        return Attempt("gone", "http_4xx", status, detail="410 Gone: the endpoint asked to stop")
    if status == 413:
        return Attempt("drop", "http_4xx", status, detail="413: the endpoint refuses a body this large")
    wait = _seconds(retry_after) if status in (429, 503) else None
    category = "http_3xx" if 300 <= status < 400 else "http_4xx" if status < 500 else "http_5xx"
    return Attempt("retry", category, status, wait, detail=f"HTTP {status}")


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: the backoff decides
    return seconds if seconds >= 0 else None


def _is_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
