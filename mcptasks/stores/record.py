"""The task record: one task as every store keeps it, and the shapes shared with it.

A record is a value: the engine builds changed copies with `TaskRecord.evolve` and writes them
through a store's compare-and-set `replace`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from mcptasks.wire import TERMINAL_STATUSES, TaskState, shared_json

MAX_TRANSITIONS = 50
"""Most entries a record's `transitions` keeps (the first, then the latest)."""

MAX_STATUS_HISTORY = 20
"""Most entries a record's `status_history` keeps (the latest)."""


EMPTY_DICT: dict[str, Any] = shared_json({})
"""The empty dict a record's dict fields start with, one object for every record (records are
values: it is never changed, and changing it in place raises `TypeError`)."""

EMPTY_LIST: list[Any] = shared_json([])
"""The same for `transitions` (an empty list, shared, read-only)."""


_SHARED_EMPTIES: dict[str, Any] = {
    "arguments": EMPTY_DICT,
    "input_requests": EMPTY_DICT,
    "input_responses": EMPTY_DICT,
    "transitions": EMPTY_LIST,
    "status_history": EMPTY_LIST,
    "related_task_ids": EMPTY_LIST,
    "outbox": EMPTY_LIST,
    "answer_log": EMPTY_DICT,
    "input_deadlines": EMPTY_DICT,
}
"""The fields whose empty value is the shared one, however a record is built or evolved."""


def _is_empty(value: object) -> bool:
    """An empty plain dict or list (what `_SHARED_EMPTIES` stands in for)."""
    return (type(value) is dict or type(value) is list) and not value


def _empty_dict() -> dict[str, Any]:
    return EMPTY_DICT


def _empty_list() -> list[Any]:
    return EMPTY_LIST


@dataclass(slots=True)
class TaskRecord:
    """One task as stored. Treat it as a value: build changed copies with `evolve`."""

    task_id: str
    owner: str
    tool: str
    status: TaskState = "working"
    status_message: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    arguments: dict[str, Any] = field(default_factory=_empty_dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=_empty_dict)
    """Outstanding input requests, key -> `{method, params}`."""
    input_responses: dict[str, Any] = field(default_factory=_empty_dict)
    """Answers received for keys the body has not consumed yet."""
    input_key_counter: int = 0
    """How many input keys this task has issued; keys are never reused."""
    runner: str | None = None
    """Identity of the engine instance that runs the body; None while queued for a worker."""
    attempt: int = 1
    """How many times the body has been started (re-runs after a lost worker raise it)."""
    idempotency_key: str | None = None
    """Client-chosen key: a second create with the same (owner, key) returns the first task."""
    checkpoint: Any = None
    """JSON state the body saved with `ctx.checkpoint(...)`; a re-run starts with it (`ctx.saved`)."""
    client_capabilities: dict[str, Any] | None = None
    """The input capabilities (`elicitation`, `sampling`, `roots`) the creating request declared;
    the body may only ask for input through these. None: not restricted."""
    version: int = 0
    # -- operator fields ---------------------------------------------------------------------
    transitions: list[list[Any]] = field(default_factory=_empty_list)
    """Status changes after creation, `[at, status, statusMessage]` each, oldest first (at most
    `MAX_TRANSITIONS`: the first change and the latest ones). `evolve` appends to it."""
    status_history: list[list[Any]] = field(default_factory=_empty_list)
    """The latest `statusMessage` values, `[at, statusMessage]` each, oldest first (at most
    `MAX_STATUS_HISTORY`); `evolve` appends to it when the message changes."""
    related_task_ids: list[str] = field(default_factory=_empty_list)
    """Earlier tasks of the same owner the call named in `_meta["io.modelcontextprotocol/relatedTaskIds"]`
    (each checked as `tasks/get` would for the caller when the task was created)."""
    trace: dict[str, str] | None = None
    """W3C trace context (`traceparent`, `tracestate`) of the request that created the task, so
    telemetry in any process can link the task's spans to it; None without telemetry."""
    outbox: list[dict[str, Any]] = field(default_factory=_empty_list)
    """Webhook events of this task not delivered yet (one entry per event and endpoint), written
    by the same compare-and-set as the change that produced them; see `mcptasks._runtime.webhooks`.
    Unlike every other field it may change after the task ended (`KeepsOutbox.replace_outbox`)."""
    answer_log: dict[str, dict[str, Any]] = field(default_factory=_empty_dict)
    """Who answered each input key and when, key -> `{by, at, answer, question, ...}` (`by`:
    `client`, `operator` or `deadline`; `answer` and `question`: digests of the answer and of the
    request it answered). Kept after the body took the answer: a key takes one answer only."""
    input_deadlines: dict[str, dict[str, Any]] = field(default_factory=_empty_dict)
    """When an outstanding request is answered for the person who did not, key -> `{at, answer}`
    (`at`: epoch seconds; `answer`: the wire answer the request's author chose)."""

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at
        for name, empty in _SHARED_EMPTIES.items():
            if _is_empty(getattr(self, name)):
                setattr(self, name, empty)

    @property
    def terminal(self) -> bool:
        """Whether the task reached `completed`, `failed` or `cancelled`."""
        return self.status in TERMINAL_STATUSES

    @property
    def expires_at(self) -> float | None:
        """Epoch seconds after which the record may be deleted (`None`: never)."""
        if self.ttl_ms is None:
            return None
        return self.created_at + self.ttl_ms / 1000.0

    def expired(self, now: float) -> bool:
        """Whether the record's TTL has elapsed at `now`."""
        expires_at = self.expires_at
        return expires_at is not None and now >= expires_at

    def evolve(self, **changes: Any) -> TaskRecord:
        """A copy with `changes` applied and `updated_at` moved to now (never backwards)."""
        changes.setdefault("updated_at", max(time.time(), self.updated_at))
        status = changes.get("status", self.status)
        if status != self.status and "transitions" not in changes:
            entry = [changes["updated_at"], status, changes.get("status_message", self.status_message)]
            kept = self.transitions
            if len(kept) >= MAX_TRANSITIONS:
                kept = [kept[0], *kept[len(kept) - MAX_TRANSITIONS + 2 :]]
            changes["transitions"] = [*kept, entry]
        message = changes.get("status_message", self.status_message)
        if message != self.status_message and message is not None and "status_history" not in changes:
            history = self.status_history
            if len(history) >= MAX_STATUS_HISTORY:
                history = history[len(history) - MAX_STATUS_HISTORY + 1 :]
            changes["status_history"] = [*history, [changes["updated_at"], message]]
        copy = self.copy()
        for name, value in changes.items():
            if name not in _FIELD_NAMES:
                raise TypeError(f"TaskRecord has no field {name!r}")
            if name in _SHARED_EMPTIES and _is_empty(value):
                value = _SHARED_EMPTIES[name]
            setattr(copy, name, value)
        return copy

    def copy(self) -> TaskRecord:
        """A shallow copy (nested dicts are shared: records are values, never mutated in place)."""
        copy: TaskRecord = _copy_record(self)
        return copy

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field (what serialising stores write)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        """Rebuild a record from `to_dict` output, ignoring unknown keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


RECORD_COLUMNS: tuple[str, ...] = (
    "task_id",
    "owner",
    "tool",
    "status",
    "version",
    "created_at",
    "updated_at",
    "runner",
    "idempotency_key",
)
"""The record fields SQL stores keep in columns of their own (the rest goes into a JSON body)."""


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(TaskRecord))


def _compile_copier() -> Any:
    # dataclasses.replace re-runs __init__ and costs ~10x a plain field-by-field copy; records
    # are copied several times per transition, so the copy is generated once, field by field.
    lines = ["def copy(record):", "    new = _new(_cls)"]
    lines += [f"    new.{name} = record.{name}" for name in sorted(_FIELD_NAMES)]
    lines.append("    return new")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": TaskRecord}
    exec("\n".join(lines), namespace)
    return namespace["copy"]


_copy_record = _compile_copier()
