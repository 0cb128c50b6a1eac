"""A `tools/call` the fast path already ran, handed to the SDK to answer.

The fast path (`mcptasks.server.fast_path`) runs an opted-in `tools/call` of a task tool itself and
writes the answer when it is a `CreateTaskResult`. Any other outcome (an immediate result, an
invalid-arguments result, an error) is shaped by the SDK's outbound pipeline (the result sieve,
output-schema checks, error mapping), so the fast path hands the request on to the SDK with the
outcome left on the ASGI scope; `TasksExtension.intercept_tool_call` then answers with that outcome
instead of running the tool a second time.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

_SCOPE_KEY = "mcptasks.answered_tool_call"


@dataclass(frozen=True)
class AnsweredCall:
    """The outcome of one task tool call: its result, or the exception it raised."""

    name: str
    result: dict[str, Any] | None = None
    error: Exception | None = None

    def replay(self) -> dict[str, Any]:
        """The result again, or the exception raised again."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def leave_on(scope: MutableMapping[str, Any], call: AnsweredCall) -> None:
    """Leave `call` on the request's ASGI scope for the SDK's path to pick up."""
    scope[_SCOPE_KEY] = call


def take_from(scope: MutableMapping[str, Any] | None, name: str) -> AnsweredCall | None:
    """The call left on `scope` for the tool `name` (removed from it), if any."""
    if scope is None:
        return None
    call = scope.pop(_SCOPE_KEY, None)
    return call if isinstance(call, AnsweredCall) and call.name == name else None
