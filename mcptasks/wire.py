"""Wire-level names and shapes of the MCP Tasks extension (SEP-2663, MCP 2026-07-28).

Everything here is plain data: constants, JSON-RPC error codes, the pydantic models that
validate the params of `tasks/get`, `tasks/update` and `tasks/cancel`, and read-only JSON values
shared by many holders (`shared_json`). No host SDK is imported.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, StrictStr

EXTENSION_ID = "io.modelcontextprotocol/tasks"
"""The extension identifier advertised under `capabilities.extensions`."""

PROTOCOL_VERSION = "2026-07-28"
"""The MCP revision the extension is defined for; older revisions never see tasks."""

CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
"""The `_meta` key in which a 2026-07-28 request carries the client's capabilities."""

CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
"""The `_meta` key in which a 2026-07-28 request carries the client's name and version."""

RELATED_TASK_META = "io.modelcontextprotocol/related-task"

RELATED_TASK_IDS_META = "io.modelcontextprotocol/relatedTaskIds"
"""The `_meta` key of a `tools/call` naming earlier tasks the new call relates to (a list of task
ids; the ext-tasks draft, not part of 2026-07-28). Honoured with `EngineConfig.related_tasks`."""

IDEMPOTENCY_META = "io.github.mcptasks/idempotencyKey"
"""`_meta` key of a client-chosen idempotency key: retrying a `tools/call` with the same key (and
owner) returns the task the first call created instead of starting a second run."""

CLOSE_REASON_META = "io.github.mcptasks/closeReason"
"""`_meta` key of a closing response sent by the server: `done` (every task ended), `shutdown`
(the server is stopping) or `slow` (the listener did not read for too long)."""

# JSON-RPC error codes used by the extension.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
LEGACY_MISSING_CAPABILITY = -32003
"""The code the extension prose names; accepted from peers, never emitted."""

TaskState = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""The states a task can be in (the wire field is `status`)."""
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
ACTIVE_STATUSES: frozenset[str] = frozenset({"working", "input_required"})

TaskSupport = Literal["optional", "required"]

TASK_METHODS: frozenset[str] = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
REMOVED_TASK_METHODS: frozenset[str] = frozenset({"tasks/list", "tasks/result"})


@lru_cache(maxsize=4096)  # a polled task is rendered again and again with the same timestamps
def iso_timestamp(epoch_seconds: float) -> str:
    """Render an epoch time as the ISO 8601 UTC string the wire uses (millisecond precision)."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def missing_capability_data() -> dict[str, Any]:
    """The `data` of a -32021 error naming the tasks extension as the missing capability."""
    return {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class GetTaskParams(_Params):
    """Params of `tasks/get`."""

    task_id: StrictStr = Field(alias="taskId", min_length=1)


class CancelTaskParams(_Params):
    """Params of `tasks/cancel`."""

    task_id: StrictStr = Field(alias="taskId", min_length=1)


class UpdateTaskParams(_Params):
    """Params of `tasks/update`: answers keyed by the input-request keys the task issued."""

    task_id: StrictStr = Field(alias="taskId", min_length=1)
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def client_opted_in(meta: object) -> bool:
    """Whether a request's `_meta` declares the tasks extension in its client capabilities.

    Opt-in is per request: only this request's envelope counts, never an earlier one.
    """
    if not isinstance(meta, dict):
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES_META)
    if not isinstance(capabilities, dict):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION_ID in extensions


def client_capabilities(meta: object) -> dict[str, Any]:
    """The client capabilities a 2026-07-28 request declared in its `_meta` (empty when absent)."""
    if isinstance(meta, dict):
        capabilities = meta.get(CLIENT_CAPABILITIES_META)
        if isinstance(capabilities, dict):
            return capabilities
    return {}


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        "this JSON value is shared (read-only): change a copy, dict(value) or list(value) "
        "(for a record's field, build a changed record with evolve)"
    )


class _SharedDict(dict[str, Any]):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:
        return (dict, (dict(self),))  # copies (copy, deepcopy, pickle) are plain, mutable dicts


class _SharedList(list[Any]):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __reduce__(self) -> tuple[type, tuple[list[Any]]]:
        return (list, (list(self),))


def shared_json(value: Any) -> Any:
    """A read-only copy of a JSON value (its objects and arrays refuse changes), for one value
    that many holders keep a reference to instead of a copy: the empty fields of every record,
    an elicitation schema. Still a `dict` / `list` to everything that reads or serialises it."""
    if isinstance(value, dict):
        return _SharedDict({key: shared_json(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return _SharedList(shared_json(item) for item in value)
    return value
