"""How a client polls, retries and gives up: `TaskPolicy`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from mcp import MCPError

from mcptasks.client.state import DetailedTask
from mcptasks.wire import INTERNAL_ERROR, PARSE_ERROR

_SERVER_ERROR = -32000
"""Also the SDK's CONNECTION_CLOSED, and the code of a poll rejected as too fast."""
_REQUEST_TIMEOUT = -32001

TRANSIENT_ERROR_CODES: frozenset[int] = frozenset(
    {INTERNAL_ERROR, PARSE_ERROR, _SERVER_ERROR, _REQUEST_TIMEOUT}
)
"""JSON-RPC error codes of `tasks/*` requests that are retried with back-off."""


@dataclass(frozen=True)
class TaskPolicy:
    """How a client polls, retries and gives up (seconds throughout)."""

    poll_interval: float = 1.0
    """Delay between polls when the server suggests no `pollIntervalMs`."""
    min_poll_interval: float = 0.05
    """Floor applied to the server's `pollIntervalMs`."""
    max_poll_interval: float | None = None
    """Optional ceiling applied to the server's `pollIntervalMs`."""
    request_timeout: float | None = 30.0
    """Read timeout of each `tasks/*` request (a timeout counts as a transient error)."""
    max_retries: int = 5
    """Consecutive transient failures tolerated per request before `TaskUnreachable`."""
    retry_backoff: float = 0.5
    """First back-off delay; doubles per consecutive failure."""
    max_retry_backoff: float = 10.0
    """Cap of the back-off delay."""
    stuck_after: float | None = None
    """Raise `TaskStuck` after this long without a change (None: never)."""
    cancel_on_stuck: bool = True
    """Send `tasks/cancel` before raising `TaskStuck`."""
    cancel_on_input_error: bool = True
    """Send `tasks/cancel` before raising `TaskInputError`."""
    cancel_on_abandon: bool = True
    """A transparent `call_tool` that is cancelled cancels its task."""

    def __post_init__(self) -> None:
        for name in ("poll_interval", "min_poll_interval", "retry_backoff", "max_retry_backoff"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"TaskPolicy.{name} must not be negative")
        for name in ("max_poll_interval", "request_timeout", "stuck_after"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"TaskPolicy.{name} must be positive or None")
        if self.max_retries < 0:
            raise ValueError("TaskPolicy.max_retries must not be negative")

    def interval(self, task: DetailedTask | None) -> float:
        """The delay before the next poll of `task`."""
        delay = self.poll_interval
        if task is not None and task.poll_interval_ms is not None:
            delay = task.poll_interval_ms / 1000.0
        delay = max(self.min_poll_interval, delay)
        if self.max_poll_interval is not None:
            delay = min(self.max_poll_interval, delay)
        return delay

    def backoff(self, attempt: int, error: MCPError) -> float:
        """The delay before retry number `attempt` (1-based); honours a `retryAfterMs` hint."""
        delay = min(self.max_retry_backoff, self.retry_backoff * 2.0 ** (attempt - 1))
        data = error.data
        if isinstance(data, dict):
            hint = data.get("retryAfterMs")
            if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint > 0:
                delay = max(delay, min(float(hint) / 1000.0, self.max_retry_backoff))
        return delay


class PolicyOptions(TypedDict, total=False):
    """Keyword overrides of `TaskPolicy` fields accepted by `TasksClient`."""

    poll_interval: float
    min_poll_interval: float
    max_poll_interval: float | None
    request_timeout: float | None
    max_retries: int
    retry_backoff: float
    max_retry_backoff: float
    stuck_after: float | None
    cancel_on_stuck: bool
    cancel_on_input_error: bool
    cancel_on_abandon: bool
