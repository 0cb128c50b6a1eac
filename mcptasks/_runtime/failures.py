"""The closed set of names a failed task is counted under, and `failure_label` that picks one.

A failed task's error object is the body's, the client's or the server's: its `data.reason` and
`code` may be anything a client or a body sent (a megabyte of text, a new value per task). A
metric label must come from a set the server defines, so the Prometheus `reason` label and
OpenTelemetry's `error.type` use `failure_label`, which answers one of `FAILURE_LABELS`:

- `client_error`: the client answered an input request with a JSON-RPC error object
  (`ClientRefusal`) and the body let it end the task;
- one of `SERVER_FAILURE_REASONS` (`worker_lost`, `timeout`, ...) when `data.reason` is one;
- its code, as a string, when JSON-RPC defines it (`-32700`, `-32600` to `-32603`) or it is in
  JSON-RPC's range for implementation-defined server errors (`-32099` to `-32000`, where MCP's
  codes such as `-32042` live): `JSONRPC_CODES`, at most 105 values;
- `other` for anything else.

The record does not say who wrote an error object, so a body raising a `ProtocolError` whose
`data.reason` is a server reason is counted under that reason: bounded, if misattributed. The
client's refusal is told apart in the process that records the failure (where the observers
run): its error object is a `ClientErrorObject`, a plain dict on the wire and in every store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcptasks._runtime.outages import STORE_REJECTED, STORE_UNAVAILABLE
from mcptasks.errors import ProtocolError
from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

__all__ = [
    "CLIENT_ERROR",
    "FAILURE_LABELS",
    "JSONRPC_CODES",
    "SERVER_ERROR_CODES",
    "OTHER",
    "SERVER_FAILURE_REASONS",
    "ClientErrorObject",
    "ClientRefusal",
    "failure_label",
]

SERVER_FAILURE_REASONS: frozenset[str] = frozenset(
    {
        "aborted",  # the body was ended by a BaseException (KeyboardInterrupt, a foreign cancel)
        "executor_ended",  # the executor's workflow ended without recording the task's end
        "invalid_result",  # the body returned a value that is not a valid result
        "invalid_value",  # the body yielded a value that cannot be sent
        "journal_diverged",  # a durable body's steps differ from its journal
        "journal_full",  # a durable body's journal reached its bound
        "no_worker_for_tool",  # no live worker offered the queued task's tool (`offers.NO_WORKER_REASON`)
        "result_too_large",  # the result is over the limit
        "shutdown",  # the server shut down while the body ran
        STORE_REJECTED,  # the store refused the end of the task for good
        STORE_UNAVAILABLE,  # the store could not be reached to record it
        "timeout",  # the tool's timeout elapsed
        "worker_lost",  # the process that ran the body stopped heartbeating
    }
)
"""Every `data.reason` with which the server itself fails a task."""

CLIENT_ERROR = "client_error"
"""The label of a task ended by the JSON-RPC error object a client gave as an answer."""

OTHER = "other"
"""The label of any other failure (a non-standard code, an unknown reason, no error at all)."""

SERVER_ERROR_CODES = range(-32099, -31999)
"""JSON-RPC's codes for implementation-defined server errors (MCP's own codes among them)."""

JSONRPC_CODES: frozenset[int] = frozenset(
    {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR, *SERVER_ERROR_CODES}
)
"""The codes a failure without a server reason is labelled with (as a string): the ones JSON-RPC
2.0 defines and its server-error range; any other code is `other`."""

FAILURE_LABELS: frozenset[str] = (
    SERVER_FAILURE_REASONS | {CLIENT_ERROR, OTHER} | {str(code) for code in JSONRPC_CODES}
)
"""Every value `failure_label` can answer."""


class ClientErrorObject(dict[str, Any]):
    """The error object a client sent as its answer to an input request: a dict like any other
    (stores and the wire see one), whose type says where it came from to this process."""


class ClientRefusal(ProtocolError):
    """A JSON-RPC error object a client sent as its answer, raised into the body that asked; if
    it ends the task, the task fails with the client's error object."""

    def to_error(self) -> dict[str, Any]:
        """The client's error object, marked as the client's (`ClientErrorObject`)."""
        return ClientErrorObject(super().to_error())


def failure_label(error: Mapping[str, Any] | None) -> str:
    """The label (one of `FAILURE_LABELS`) a task failed with `error` is counted under."""
    if isinstance(error, ClientErrorObject):
        return CLIENT_ERROR
    if not isinstance(error, Mapping):
        return OTHER
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, Mapping) else None
    if isinstance(reason, str) and reason in SERVER_FAILURE_REASONS:
        return reason
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and code in JSONRPC_CODES:
        return str(code)
    return OTHER
