"""`EngineConfig`: every setting of the tasks side of a server, as one frozen, validated value.

    config = EngineConfig(lease_ttl=30, fallback="tools", limits=Limits(max_active=100))
    app = TaskServer("ci", store="sqlite:///tasks.db", config=config)

The same value goes through every layer: `TaskServer(config=...)`, `TasksExtension(config=...)`,
`TaskEngine(store, config=...)` (which `TasksProtocol` reads it from). Environment variables map
onto it in `EngineConfig.from_env`, the `mcptasks serve` / `worker` flags in `apply_flags`; nothing
else reads either.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from mcptasks._authoring.tool import FALLBACK_MODES, FallbackMode
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.limits import Limits
from mcptasks._runtime.outages import StoreRetry
from mcptasks._runtime.webhooks.targets import endpoints

PollLimit = Literal["off", "delay", "reject"]

ENV_PREFIX = "MCPTASKS_"
"""Every scalar field `name` is read from the environment variable `MCPTASKS_<NAME>`."""


def _flag(flag: str) -> dict[str, str]:
    return {"flag": flag}


@dataclass(frozen=True)
class EngineConfig:
    """How a server creates, runs and serves tasks (seconds throughout). Invalid values raise
    `ValueError` naming the field and the value; change one with `dataclasses.replace`.

    See the configuration reference for each field's environment variable and CLI flag.
    """

    run_tasks: bool = field(default=True, metadata=_flag("--enqueue-only"))
    """False makes a serving-only replica: tasks are created queued and `mcptasks worker`
    processes claim and run them (a body that already gathered input on its call still runs here)."""
    executor: str | Executor | None = field(default=None, metadata=_flag("--executor"))
    """Where bodies run: None, this process (and `mcptasks worker` processes claiming from the
    store); an `Executor` or its URL (`temporal://HOST:PORT[/NAMESPACE]`, `dbos+postgresql://...`,
    `dbos+sqlite:///PATH`): the executor's workers run them and this engine runs no body itself
    unless `run_tasks` makes it one of those workers."""
    instance_id: str | None = None
    """This instance's id in the store; None: generated (machine, process id, start time)."""
    lease_ttl: float = field(default=15.0, metadata=_flag("--lease-ttl"))
    """How long an instance counts as alive after its last heartbeat (heartbeats every third)."""
    max_concurrent: int | None = field(default=None, metadata=_flag("--concurrency"))
    """The most claimed tasks this instance runs at once (None: no bound)."""
    claim_interval: float = 1.0
    """Seconds between polls of the queue (change notifications wake it sooner)."""
    no_worker_timeout: float = field(default=300.0, metadata=_flag("--no-worker-timeout"))
    """How long a queued task waits while no live worker offers its tool (a rolling deploy)
    before it fails with `no_worker_for_tool`; counted from the store, so restarts do not reset it."""
    sweep_interval: float = 30.0
    """Seconds between deletions of expired records."""
    input_poll_interval: float = 5.0
    """Seconds between re-reads of a task waiting for input (notifications wake it sooner)."""
    park_waiting: bool = False
    """Let a durable body that waits for answers wait in the store instead of on this engine: its
    claim and memory are given up, and the worker that claims it once answered replays it from its
    journal (`mcptasks worker` turns it on unless `MCPTASKS_PARK_WAITING` says otherwise; an
    executor's workers always do it)."""
    poll_limit: PollLimit = "off"
    """What a `tasks/get` sooner than `poll_tolerance` x `pollIntervalMs` after the previous one
    gets: `"off"` (served), `"delay"` (served after a wait) or `"reject"` (-32000)."""
    poll_tolerance: float = 0.5
    """The fraction of `pollIntervalMs` below which a poll counts as too soon; in (0, 1]."""
    adaptive_poll_max: float | None = None
    """When set, the advertised `pollIntervalMs` grows with the task's age up to this."""
    recover_orphans: bool = True
    """Fail (or re-run) the tasks of lost instances at start-up and periodically."""
    heartbeat_thread: bool = True
    """Renew the lease from a thread of its own, so a body blocking the event loop does not lose
    this instance's live tasks to peers."""
    wedge_limit: float = 300.0
    """How long a blocked event loop keeps the lease alive (at least 5)."""
    limits: Limits = field(default_factory=Limits)
    """Bounds on active tasks, results, statuses, threads; the blocked-loop watchdog."""
    store_retry: StoreRetry = field(default_factory=StoreRetry)
    """How a running task's store calls ride out an unreachable store."""
    fallback: FallbackMode = "inline"
    """What task tools do for requests without the extension: `"inline"`, `"tools"`, `"reject"`."""
    status_tool: bool = field(default=False, metadata=_flag("--status-tool"))
    """List the generated `task_status` tool beside the task tools (it is listed anyway with the
    `"tools"` fallback), so a model can read its own tasks' progress in hosts that show
    `statusMessage` only to the user, such as Claude Code."""
    related_tasks: bool = field(default=False, metadata=_flag("--related-tasks"))
    """Keep the ids a `tools/call` names in `_meta["io.modelcontextprotocol/relatedTaskIds"]` (the
    ext-tasks draft) that the caller may see, for its body to read (`TaskContext.related_tasks`)."""
    immediate_results: bool = True
    """Answer a call whose body finished without suspending with its result, not a task."""
    fast_path: bool = field(default=True, metadata=_flag("--fast-path"))
    """Over Streamable HTTP, answer `tasks/get|update|cancel` and opted-in task tool calls below
    the SDK's request machinery (same bytes on the wire; `TaskServer.streamable_http_app` and
    `mcptasks serve`)."""
    accept_missing_mcp_name: bool = field(default=False, metadata=_flag("--accept-missing-mcp-name"))
    """Over Streamable HTTP, accept a `tasks/*` request without an `Mcp-Name` header (a mismatched
    one is still -32020), warning once per client: for clients that never send it (see Tested
    clients in the docs)."""
    header_timeout: float = field(default=10.0, metadata=_flag("--header-timeout"))
    """Over HTTP (`mcptasks serve`, `TaskServer.run("http")`), seconds a request head may take to
    arrive, from the connection's opening (or the next request's first byte); then it is closed."""
    body_timeout: float = field(default=30.0, metadata=_flag("--body-timeout"))
    """Over HTTP, seconds a request body may take to arrive after its head; then it is closed.
    Responses (SSE streams) are not bounded."""
    max_connections: int | None = field(default=None, metadata=_flag("--max-connections"))
    """Over HTTP, the most connections open at once; more wait in the listen backlog (None: three
    quarters of the process's open-file limit)."""
    parked_limit: int = 1000
    """How many inline calls may wait at a question between their rounds at once (of one owner:
    `Limits.max_parked_per_owner`)."""
    parked_seconds: float = 600.0
    """How long such a call waits for its retry before its body is cancelled."""
    push: bool = True
    """Serve `subscriptions/listen` with `taskIds` and announce every task change on the store's
    change feed."""
    keepalive: float | None = None
    """Seconds between SSE keep-alive comments (None: the SDK's 15 s); process-wide."""
    secret: str | bytes | None = field(default=None, repr=False)
    """Signs mcptasks' `requestState`; set the same one on every replica (None: random)."""
    webhooks: tuple[str, ...] = field(default=(), metadata=_flag("--webhook"))
    """URLs that receive task events (`task.input_required`, `task.completed`, `task.failed`,
    `task.cancelled`) as Standard Webhooks messages, at least once, from the store's outbox; the
    environment variable is comma-separated. Give every process that writes records (replicas and
    workers) the same list."""
    webhook_secret: str | None = field(default=None, repr=False, metadata=_flag("--webhook-secret"))
    """The Standard Webhooks signing secret (`whsec_` and 24 to 64 bytes in base64), required with
    `webhooks`."""
    webhook_allow_private: bool = field(default=False, metadata=_flag("--webhook-allow-private"))
    """Deliver to private, loopback and link-local addresses too (refused by default)."""
    webhook_timeout: float = 10.0
    """Seconds one delivery attempt may take, name resolution and connection included."""
    webhook_max_attempts: int = 12
    """Attempts per event and endpoint before it is given up (waits of 2 s doubling, at most 10
    minutes, each times a jitter in [0.5, 1]: twelve attempts span 20 to 40 minutes)."""
    webhook_sweep_interval: float = 5.0
    """Seconds between the sweeps that find undelivered events in the store (any replica's)."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            check = _CHECKS.get(spec.name)
            value = getattr(self, spec.name)
            if check is not None and not check(value):
                shown = "..." if spec.name == "webhook_secret" else repr(value)
                raise ValueError(f"EngineConfig.{spec.name} {_RULES[spec.name]}, got {shown}")
        if isinstance(self.webhooks, list):
            object.__setattr__(self, "webhooks", tuple(self.webhooks))
        endpoints(self.webhooks, self.webhook_secret, self.webhook_allow_private, complete=False)

    @classmethod
    def from_env(
        cls, base: EngineConfig | None = None, environ: Mapping[str, str] | None = None
    ) -> EngineConfig:
        """`base` (default: the defaults) with every `MCPTASKS_<FIELD>` variable that is set.

        Booleans read `1/true/yes/on` and `0/false/no/off`; optional fields read `none` or an empty
        value as None. A value that does not parse raises `ValueError` naming the variable.
        """
        environ = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        for name, hint in _env_fields().items():
            variable = env_var(name)
            if variable in environ:
                try:
                    changes[name] = _parse(hint, environ[variable])
                except ValueError:
                    raise ValueError(f"{variable}={environ[variable]!r}: expected {_kind(hint)}") from None
        try:
            return replace(base if base is not None else cls(), **changes)
        except ValueError as exc:
            raise ValueError(f"{exc} (from the environment)") from None


def env_var(name: str) -> str:
    """The environment variable of the `EngineConfig` field `name`."""
    return ENV_PREFIX + name.upper()


def cli_flag(name: str) -> str | None:
    """The `mcptasks serve` / `worker` flag of the `EngineConfig` field `name`, if it has one."""
    for spec in fields(EngineConfig):
        if spec.name == name:
            return spec.metadata.get("flag")
    raise KeyError(name)


def apply_flags(
    config: EngineConfig,
    *,
    enqueue_only: bool = False,
    lease_ttl: float | None = None,
    concurrency: int | None = None,
    fast_path: bool | None = None,
    accept_missing_mcp_name: bool = False,
    status_tool: bool = False,
    related_tasks: bool = False,
    executor: str | None = None,
    no_worker_timeout: float | None = None,
    header_timeout: float | None = None,
    body_timeout: float | None = None,
    max_connections: int | None = None,
    webhooks: list[str] | None = None,
    webhook_secret: str | None = None,
    webhook_allow_private: bool = False,
) -> EngineConfig:
    """`config` with the `mcptasks serve` / `worker` flags that were given (`--enqueue-only`,
    `--lease-ttl`, `--concurrency`, `--fast-path`, `--accept-missing-mcp-name`, `--status-tool`, `--related-tasks`,
    `--executor`, `--no-worker-timeout`, `--header-timeout`, `--body-timeout`,
    `--max-connections`, `--webhook` (adds to the configured ones), `--webhook-secret`,
    `--webhook-allow-private`); raises
    `ValueError` for an invalid value."""
    given: dict[str, Any] = {
        "run_tasks": False if enqueue_only else None,
        "lease_ttl": lease_ttl,
        "max_concurrent": concurrency,
        "fast_path": fast_path,
        "accept_missing_mcp_name": True if accept_missing_mcp_name else None,
        "status_tool": True if status_tool else None,
        "related_tasks": True if related_tasks else None,
        "executor": executor,
        "no_worker_timeout": no_worker_timeout,
        "header_timeout": header_timeout,
        "body_timeout": body_timeout,
        "max_connections": max_connections,
        "webhooks": (*config.webhooks, *webhooks) if webhooks else None,
        "webhook_secret": webhook_secret,
        "webhook_allow_private": True if webhook_allow_private else None,
    }
    changes = {name: value for name, value in given.items() if value is not None}
    return replace(config, **changes)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: object) -> bool:
    return _number(value) and value > 0  # type: ignore[operator]


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _count(minimum: int) -> Callable[[object], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _flag_value(value: object) -> bool:
    return isinstance(value, bool)


_CHECKS: dict[str, Callable[[object], bool]] = {
    "run_tasks": _flag_value,
    "executor": _optional(
        lambda value: (isinstance(value, str) and value != "") or isinstance(value, Executor)
    ),
    "instance_id": _optional(lambda value: isinstance(value, str) and value != ""),
    "lease_ttl": _positive,
    "max_concurrent": _optional(_count(1)),
    "claim_interval": _positive,
    "no_worker_timeout": _positive,
    "sweep_interval": _positive,
    "input_poll_interval": _positive,
    "poll_limit": lambda value: value in ("off", "delay", "reject"),
    "poll_tolerance": lambda value: _number(value) and 0 < value <= 1,  # type: ignore[operator]
    "adaptive_poll_max": _optional(_positive),
    "recover_orphans": _flag_value,
    "park_waiting": _flag_value,
    "heartbeat_thread": _flag_value,
    "wedge_limit": lambda value: _number(value) and value >= 5,  # type: ignore[operator]
    "limits": lambda value: isinstance(value, Limits),
    "store_retry": lambda value: isinstance(value, StoreRetry),
    "fallback": lambda value: value in FALLBACK_MODES,
    "status_tool": _flag_value,
    "related_tasks": _flag_value,
    "immediate_results": _flag_value,
    "fast_path": _flag_value,
    "accept_missing_mcp_name": _flag_value,
    "header_timeout": _positive,
    "body_timeout": _positive,
    "max_connections": _optional(_count(1)),
    "parked_limit": _count(0),
    "parked_seconds": _positive,
    "push": _flag_value,
    "keepalive": _optional(_positive),
    "secret": _optional(lambda value: isinstance(value, (str, bytes)) and len(value) > 0),
    "webhooks": lambda value: isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value),
    "webhook_secret": _optional(lambda value: isinstance(value, str)),
    "webhook_allow_private": _flag_value,
    "webhook_timeout": _positive,
    "webhook_max_attempts": _count(1),
    "webhook_sweep_interval": _positive,
}

_RULES = {
    "run_tasks": "must be True or False",
    "executor": "must be an Executor, an executor URL or None",
    "instance_id": "must be a non-empty string or None",
    "lease_ttl": "must be a positive number of seconds",
    "max_concurrent": "must be a positive integer or None",
    "claim_interval": "must be a positive number of seconds",
    "no_worker_timeout": "must be a positive number of seconds",
    "sweep_interval": "must be a positive number of seconds",
    "input_poll_interval": "must be a positive number of seconds",
    "poll_limit": "must be 'off', 'delay' or 'reject'",
    "poll_tolerance": "must be a number in (0, 1]",
    "adaptive_poll_max": "must be a positive number of seconds or None",
    "recover_orphans": "must be True or False",
    "park_waiting": "must be True or False",
    "heartbeat_thread": "must be True or False",
    "wedge_limit": "must be at least 5 seconds",
    "limits": "must be a Limits",
    "store_retry": "must be a StoreRetry",
    "fallback": f"must be one of {', '.join(repr(mode) for mode in FALLBACK_MODES)}",
    "status_tool": "must be True or False",
    "related_tasks": "must be True or False",
    "immediate_results": "must be True or False",
    "fast_path": "must be True or False",
    "accept_missing_mcp_name": "must be True or False",
    "header_timeout": "must be a positive number of seconds",
    "body_timeout": "must be a positive number of seconds",
    "max_connections": "must be a positive integer or None",
    "parked_limit": "must be a non-negative integer",
    "parked_seconds": "must be a positive number of seconds",
    "push": "must be True or False",
    "keepalive": "must be a positive number of seconds or None",
    "secret": "must be a non-empty string or bytes, or None",
    "webhooks": "must be a tuple of URL strings",
    "webhook_secret": "must be a whsec_ string or None",
    "webhook_allow_private": "must be True or False",
    "webhook_timeout": "must be a positive number of seconds",
    "webhook_max_attempts": "must be a positive integer",
    "webhook_sweep_interval": "must be a positive number of seconds",
}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _env_fields() -> dict[str, Any]:
    """The fields read from the environment (all but the nested `limits` and `store_retry`)."""
    hints = get_type_hints(EngineConfig)
    return {spec.name: hints[spec.name] for spec in fields(EngineConfig) if spec.name not in _NESTED}


_NESTED = frozenset({"limits", "store_retry"})


def _kinds(hint: Any) -> tuple[list[Any], bool]:
    """The non-None types of `hint` and whether it admits None."""
    args = get_args(hint) if get_origin(hint) is Union or type(hint).__name__ == "UnionType" else (hint,)
    return [arg for arg in args if arg is not type(None)], type(None) in args


def _kind(hint: Any) -> str:
    kinds, optional = _kinds(hint)
    kind = kinds[0]
    if get_origin(kind) is tuple:
        return "comma-separated values"
    if get_origin(kind) is Literal:
        text = "one of " + ", ".join(str(choice) for choice in get_args(kind))
    else:
        text = {bool: "true or false", int: "a whole number", float: "a number"}.get(kind, "a string")
    return f"{text} or none" if optional else text


def _parse(hint: Any, text: str) -> Any:
    kinds, optional = _kinds(hint)
    value = text.strip()
    if optional and value.lower() in ("", "none"):
        return None
    kind = kinds[0]
    if get_origin(kind) is tuple:
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if kind is bool:
        if value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ValueError(value)
    if kind is int:
        return int(value)
    if kind is float:
        return float(value)
    if get_origin(kind) is Literal and value not in get_args(kind):
        raise ValueError(value)
    return value
