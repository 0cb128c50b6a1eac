"""OpenTelemetry for task engines: spans, metrics and log correlation (the `otel` extra).

`instrument(server)` attaches a `Telemetry` observer to the engine of a `TaskServer`,
`TasksExtension` or `TaskEngine`. Without it the engine does no telemetry work at all. It follows
the OpenTelemetry semantic conventions for MCP where they speak (`mcp.method.name`,
`gen_ai.tool.name`, `gen_ai.operation.name`, `error.type`) and the SEP-2663 reference pattern where
they do not yet:

- The SDK's own `tools/call` span is enriched with `mcp.task.id`, and its context is stored with
  the task (`TaskRecord.trace`), so whichever process runs the task can link to it.
- Each run of a body is a root span `task.execute {tool}` linked to the creating span, with
  `mcp.task.id` and `mcp.task.attempt` at start, events for status changes and input requests,
  and `mcp.task.status` (plus `error.type`) at the end.
- The SDK's `tasks/get|update|cancel` spans get `mcp.task.id` and a link to the creating span.

Metrics go through the OTel metrics API; see `METRICS` for the list.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Collection, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, cast

try:
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import Link, SpanContext, SpanKind, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("mcptasks.telemetry needs OpenTelemetry: pip install 'mcptasks[otel]'") from exc

from mcptasks._runtime.failures import failure_label
from mcptasks._runtime.observer import add_observer
from mcptasks._version import __version__
from mcptasks.stores.admin import TaskPage, TaskQuery, TaskStats
from mcptasks.stores.base import (
    KeepsOffers,
    KeepsOutbox,
    RunnerOffer,
    StoreBase,
    TaskRecord,
    TaskStore,
    combined_replace,
)
from mcptasks.stores.foreign import adopt_store
from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES

__all__ = ["METRICS", "TaskLogFilter", "Telemetry", "current_task", "instrument"]

METRICS: dict[str, str] = {
    "mcptasks.tasks.created": "Counter: tasks created, by gen_ai.tool.name.",
    "mcptasks.tasks.ended": "Counter: tasks that reached a final status, by gen_ai.tool.name, mcp.task.status "
    "and error.type (tool_error, or a failure's label: the server's reason such as worker_lost or timeout, "
    "client_error, a standard JSON-RPC code, or other).",
    "mcptasks.tasks.active": "UpDownCounter: tasks working or input_required, by gen_ai.tool.name and "
    "mcp.task.status (sum it over replicas).",
    "mcptasks.queue.depth": "UpDownCounter: tasks queued for a worker (no runner yet), by gen_ai.tool.name.",
    "mcptasks.task.duration": "Histogram (s): creation to final status, by gen_ai.tool.name and mcp.task.status.",
    "mcptasks.task.input_wait": "Histogram (s): time a finished task that asked for input spent in "
    "input_required, by gen_ai.tool.name.",
    "mcptasks.task.claim_latency": "Histogram (s): queued until claimed by a worker, by gen_ai.tool.name.",
    "mcptasks.task.requests": "Counter: tasks/get, tasks/update, tasks/cancel served, by mcp.method.name and "
    "gen_ai.tool.name (polls per task = tasks/get count / tasks created).",
    "mcptasks.stores.operations": "Counter: store calls, by db.operation.name and error.type (failed calls).",
    "mcptasks.stores.operation.time": "Counter (s): time spent in store calls, by db.operation.name; divided by "
    "mcptasks.stores.operations it is the mean latency.",
}
"""Every metric `Telemetry` records, with its instrument and attributes."""

_TOOL = "gen_ai.tool.name"
_STATUS = "mcp.task.status"
_TASK_ID = "mcp.task.id"
_PROPAGATOR = TraceContextTextMapPropagator()
_LINK_CACHE = 4096
"""Creating-span contexts remembered per task id, so a poll does not re-parse the traceparent."""
_SPAN_TEXT = 256
"""At most this many characters of a failure's own reason and message go on its span."""

Attributes = tuple[tuple[str, str], ...]
_OPERATION_KEYS: dict[str, Attributes] = {}


class _Tally:
    """Sums kept in a plain dict and read by an observable instrument when metrics are collected:
    a per-request event costs a dict update, not an OTel SDK measurement."""

    def __init__(self) -> None:
        self.values: dict[Attributes, float] = {}

    def add(self, amount: float, attributes: Attributes) -> None:
        self.values[attributes] = self.values.get(attributes, 0) + amount

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        # list() copies the items in one step (under the GIL) while the event loop may add keys
        return [Observation(value, dict(key)) for key, value in list(self.values.items())]


current_task: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "mcptasks_current_task", default=None
)
"""`(task_id, tool)` of the task whose body runs in the current context (under `Telemetry`)."""


def _creating_link(record: TaskRecord) -> Link | None:
    if not record.trace:
        return None
    span_context = trace.get_current_span(_PROPAGATOR.extract(record.trace)).get_span_context()
    return Link(span_context) if span_context.is_valid else None


def _error_type(record: TaskRecord) -> str | None:
    """`error.type` of a task that ended: `tool_error`, or a failure's label (one of
    `FAILURE_LABELS`, never a value a client or a body chose); None when it succeeded."""
    if record.status == "failed":
        return failure_label(record.error)
    if record.status == "completed" and record.result and record.result.get("isError") is True:
        return "tool_error"
    return None


def _bounded(value: object) -> str:
    """`value` as text of at most `_SPAN_TEXT` characters."""
    text = str(value)
    return text if len(text) <= _SPAN_TEXT else text[: _SPAN_TEXT - 1] + "…"


def _input_wait(record: TaskRecord) -> float:
    """Seconds `record` spent in input_required, from its transitions."""
    total, since = 0.0, None
    for at, status, _ in record.transitions:
        if status == "input_required" and since is None:
            since = at
        elif status != "input_required" and since is not None:
            total += at - since
            since = None
    return total


class _Instruments:
    """The instruments of one meter provider, shared by every `Telemetry` using it (an
    observable instrument can be registered once per name)."""

    def __init__(self, meter_provider: Any) -> None:
        self.provider = meter_provider  # keeps the registry key's object alive
        meter = metrics.get_meter("mcptasks", __version__, meter_provider=meter_provider)
        self.created, self.ended, self.active, self.queued = _Tally(), _Tally(), _Tally(), _Tally()
        self.requests, self.store_calls, self.store_time = _Tally(), _Tally(), _Tally()
        for name, tally, unit, kind in (
            ("mcptasks.tasks.created", self.created, "{task}", meter.create_observable_counter),
            ("mcptasks.tasks.ended", self.ended, "{task}", meter.create_observable_counter),
            ("mcptasks.tasks.active", self.active, "{task}", meter.create_observable_up_down_counter),
            ("mcptasks.queue.depth", self.queued, "{task}", meter.create_observable_up_down_counter),
            ("mcptasks.task.requests", self.requests, "{request}", meter.create_observable_counter),
            ("mcptasks.stores.operations", self.store_calls, "{operation}", meter.create_observable_counter),
            ("mcptasks.stores.operation.time", self.store_time, "s", meter.create_observable_counter),
        ):
            kind(name, callbacks=[tally.observe], unit=unit, description=METRICS[name])
        self.duration = meter.create_histogram(
            "mcptasks.task.duration", unit="s", description=METRICS["mcptasks.task.duration"]
        )
        self.input_wait = meter.create_histogram(
            "mcptasks.task.input_wait", unit="s", description=METRICS["mcptasks.task.input_wait"]
        )
        self.claim_latency = meter.create_histogram(
            "mcptasks.task.claim_latency", unit="s", description=METRICS["mcptasks.task.claim_latency"]
        )


_REGISTRY: dict[int, _Instruments] = {}


def _instruments(meter_provider: Any) -> _Instruments:
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    found = _REGISTRY.get(id(provider))
    if found is None or found.provider is not provider:
        found = _REGISTRY[id(provider)] = _Instruments(provider)
    return found


class Telemetry:
    """An `EngineObserver` that records spans and metrics through the OpenTelemetry API.

    `tracer_provider` / `meter_provider` default to the global ones (set by your OTel SDK setup
    or `opentelemetry-instrument`). Spans are never created for a task whose trace is not sampled
    by your sampler, as usual with OTel.
    """

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.tracer = trace.get_tracer("mcptasks", __version__, tracer_provider=tracer_provider)
        self._own_tracer_provider = tracer_provider is not None
        shared = _instruments(meter_provider)
        self._created, self._ended, self._active = shared.created, shared.ended, shared.active
        self._queued, self._requests = shared.queued, shared.requests
        self.store_calls, self.store_time = shared.store_calls, shared.store_time
        self._duration, self._input_wait, self._claim_latency = (
            shared.duration,
            shared.input_wait,
            shared.claim_latency,
        )
        self._links: OrderedDict[str, Link | None] = OrderedDict()
        self._spans: dict[str, trace.Span] = {}
        """Execution spans of the bodies running in this process, by task id."""

    # -- EngineObserver ------------------------------------------------------------------------

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store, counting and timing every operation (`mcptasks.stores.*`)."""
        if isinstance(store, TimedStore):
            return store
        return TimedStore(store, self.store_calls, self.store_time)

    def creating(self, record: TaskRecord) -> None:
        """Remember the current (creating `tools/call`) span's context on the record; enrich it."""
        span = trace.get_current_span()
        if not span.get_span_context().is_valid:
            return
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        record.trace = carrier or None
        if record.trace is not None:  # what `_creating_link` would parse back out of the carrier
            here = span.get_span_context()
            there = SpanContext(
                here.trace_id, here.span_id, True, trace_flags=here.trace_flags, trace_state=here.trace_state
            )
            self._remember(record.task_id, Link(there))
        if span.is_recording():
            span.set_attribute(_TASK_ID, record.task_id)

    def created(self, record: TaskRecord) -> None:
        """Count the task; it is active (and queued when no runner took it)."""
        tool = ((_TOOL, record.tool),)
        self._created.add(1, tool)
        self._active.add(1, (*tool, (_STATUS, record.status)))
        if record.runner is None:
            self._queued.add(1, tool)

    def _tracing(self) -> bool:
        """Whether spans would be recorded: a provider was given, or a real one is installed
        globally (checked per run, so an SDK configured after `instrument` still counts)."""
        return self._own_tracer_provider or not isinstance(
            trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        )

    @contextmanager
    def executing(self, record: TaskRecord) -> Iterator[object]:
        """The run's root span, linked to the creating span, current while the body runs."""
        if not self._tracing():  # no tracing configured: only the task for log records
            token = current_task.set((record.task_id, record.tool))
            try:
                yield None
            finally:
                current_task.reset(token)
            return
        link = self._link(record)
        attributes: dict[str, str | int] = {
            _TASK_ID: record.task_id,
            _TOOL: record.tool,
            "gen_ai.operation.name": "execute_tool",
            "mcp.task.attempt": record.attempt,
        }
        with self.tracer.start_as_current_span(
            f"task.execute {record.tool}",
            context=Context(),  # a root span: the task outlives the request that created it
            kind=SpanKind.INTERNAL,
            links=[link] if link is not None else None,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
            end_on_exit=False,  # ended by `settled`, once the run's end is recorded
        ) as span:
            self._spans[record.task_id] = span
            token = current_task.set((record.task_id, record.tool))
            try:
                yield span
            finally:
                current_task.reset(token)

    def settled(self, task_id: str) -> None:
        """End the run's span: its end (and `mcp.task.status`) is recorded by now."""
        span = self._spans.pop(task_id, None)
        if span is not None:
            span.end()

    def changed(self, before: TaskRecord, after: TaskRecord) -> None:
        """Events on the running span; active/queue gauges; the end-of-task metrics."""
        tool = ((_TOOL, after.tool),)
        self._count_active(before, after, tool)
        span = self._spans.get(after.task_id)
        if span is not None and span.is_recording():
            _add_change_events(span, before, after)
        if after.status in TERMINAL_STATUSES and before.status not in TERMINAL_STATUSES:
            self._ended_run(before, after, tool, span)

    def _count_active(self, before: TaskRecord, after: TaskRecord, tool: tuple[tuple[str, str], ...]) -> None:
        if before.status != after.status:
            if before.status in ACTIVE_STATUSES:
                self._active.add(-1, (*tool, (_STATUS, before.status)))
            if after.status in ACTIVE_STATUSES:
                self._active.add(1, (*tool, (_STATUS, after.status)))
        if before.runner is not None and after.runner is None and after.status in ACTIVE_STATUSES:
            self._queued.add(1, tool)  # put back in the queue (retry after a lost worker)

    def _ended_run(
        self,
        before: TaskRecord,
        after: TaskRecord,
        tool: tuple[tuple[str, str], ...],
        span: trace.Span | None,
    ) -> None:
        error = _error_type(after)
        ended = (*tool, (_STATUS, after.status))
        self._ended.add(1, ended if error is None else (*ended, ("error.type", error)))
        self._duration.record(max(0.0, after.updated_at - after.created_at), dict(ended))
        if any(status == "input_required" for _, status, _ in after.transitions):
            self._input_wait.record(_input_wait(after), dict(tool))
        self._links.pop(after.task_id, None)
        if before.runner is None:
            self._queued.add(-1, tool)  # ended (cancelled) before any worker claimed it
        if span is not None and span.is_recording():
            _mark_span_ended(span, after, error)

    def claimed(self, record: TaskRecord) -> None:
        """Claim latency and queue depth."""
        self._queued.add(-1, ((_TOOL, record.tool),))
        self._claim_latency.record(max(0.0, time.time() - record.updated_at), {_TOOL: record.tool})

    def requested(self, method: str, record: TaskRecord) -> None:
        """Count the request; enrich the SDK's span for it with the task id and the creating link."""
        self._requests.add(1, (("mcp.method.name", method), (_TOOL, record.tool)))
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(_TASK_ID, record.task_id)
            link = self._link(record)
            if link is not None:
                span.add_link(link.context)

    def _link(self, record: TaskRecord) -> Link | None:
        """The link to the task's creating span (parsed once per task, then remembered)."""
        try:
            return self._links[record.task_id]
        except KeyError:
            pass
        link = _creating_link(record)
        self._remember(record.task_id, link)
        return link

    def _remember(self, task_id: str, link: Link | None) -> None:
        self._links[task_id] = link
        if len(self._links) > _LINK_CACHE:
            self._links.popitem(last=False)


def _add_change_events(span: trace.Span, before: TaskRecord, after: TaskRecord) -> None:
    """New input requests and a changed status (or status message) as events on the run's span."""
    new_keys = sorted(set(after.input_requests) - set(before.input_requests))
    if new_keys:
        span.add_event(
            "mcp.task.input_required",
            {
                "mcp.task.input_keys": new_keys,
                "mcp.task.input_methods": [str(after.input_requests[k].get("method")) for k in new_keys],
            },
        )
    if before.status != after.status or before.status_message != after.status_message:
        event: dict[str, Any] = {_STATUS: after.status}
        if after.status_message is not None:
            event["mcp.task.status_message"] = after.status_message
        span.add_event("mcp.task.status", event)


def _mark_span_ended(span: trace.Span, after: TaskRecord, error: str | None) -> None:
    """The run's final status (and error) on its span."""
    span.set_attribute(_STATUS, after.status)
    if error is not None:
        span.set_attribute("error.type", error)
    if after.status == "failed":
        data = after.error.get("data") if after.error else None
        reason = data.get("reason") if isinstance(data, dict) else None
        if isinstance(reason, str) and reason != error:  # the error's own reason, shortened
            span.set_attribute("mcp.task.error.reason", _bounded(reason))
        message = after.error.get("message") if after.error else None
        span.set_status(StatusCode.ERROR, _bounded(message) if message is not None else None)


class TimedStore(StoreBase):
    """A store that counts and times the calls of another (and counts failed calls): the record,
    queue, liveness, change-feed and operator calls; the rest goes straight through. A store that
    does not subclass `StoreBase` is adopted first (`adopt_store`)."""

    def __init__(self, store: TaskStore | StoreBase, calls: _Tally, seconds: _Tally) -> None:
        inner = self.inner = adopt_store(store)
        self._calls = calls
        self._seconds = seconds
        self.durable = inner.durable
        self.permanent_errors = inner.permanent_errors
        self._combined = combined_replace(inner) is not None

    def __repr__(self) -> str:
        return f"TimedStore({self.inner!r})"

    async def _timed(self, operation: str, call: Awaitable[Any]) -> Any:
        start = time.perf_counter()
        key = _OPERATION_KEYS.get(operation) or _OPERATION_KEYS.setdefault(
            operation, (("db.operation.name", operation),)
        )
        try:
            result = await call
        except BaseException as exc:
            self._calls.add(1, (*key, ("error.type", type(exc).__qualname__)))
            raise
        finally:
            self._seconds.add(time.perf_counter() - start, key)
        self._calls.add(1, key)
        return result

    async def open(self) -> None:
        await self._timed("open", self.inner.open())

    async def open_existing(self, *, migrate: bool = False) -> None:
        await self.inner.open_existing(migrate=migrate)

    async def close(self) -> None:
        await self._timed("close", self.inner.close())

    async def create(self, record: TaskRecord) -> TaskRecord:
        result: TaskRecord = await self._timed("create", self.inner.create(record))
        return result

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        result: TaskRecord | None = await self._timed("get", self.inner.get(task_id, owner=owner))
        return result

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        result: bool = await self._timed(
            "replace", self.inner.replace(record, expected_version=expected_version)
        )
        return result

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        """The inner store's own `replace_and_publish` timed as a `replace`; for one without
        (see `combined_replace`), a timed `replace` followed by a timed `publish`."""
        if not self._combined:
            return await super().replace_and_publish(
                record, expected_version=expected_version, message=message
            )
        combined = self.inner.replace_and_publish(record, expected_version=expected_version, message=message)
        result: bool = await self._timed("replace", combined)
        return result

    async def list_active(self) -> list[TaskRecord]:
        result: list[TaskRecord] = await self._timed("list_active", self.inner.list_active())
        return result

    async def delete_expired(self, now: float) -> int:
        result: int = await self._timed("delete_expired", self.inner.delete_expired(now))
        return result

    async def count_active(self, owner: str) -> int:
        return await self.inner.count_active(owner)

    async def epoch(self) -> str | None:
        return await self.inner.epoch()

    def twin(self) -> StoreBase | None:
        return self.inner.twin()

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        if tools is None or self.inner.offers() is None:
            await self._timed("heartbeat", self.inner.heartbeat(runner, ttl))
        else:
            await self._timed("heartbeat", self.inner.heartbeat(runner, ttl, tools=tools))

    def offers(self) -> KeepsOffers | None:
        return None if self.inner.offers() is None else cast(KeepsOffers, self)

    def outbox(self) -> KeepsOutbox | None:
        return None if self.inner.outbox() is None else cast(KeepsOutbox, self)

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        result: list[TaskRecord] = await self._timed("outbox_records", self.inner.outbox_records(limit))
        return result

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        written = self.inner.replace_outbox(record, expected_version=expected_version)
        result: bool = await self._timed("replace_outbox", written)
        return result

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        result: dict[str, RunnerOffer] = await self._timed("runner_offers", self.inner.runner_offers())
        return result

    async def live_runners(self) -> set[str]:
        result: set[str] = await self._timed("live_runners", self.inner.live_runners())
        return result

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        if tools is None or self.inner.offers() is None:
            claimed = self.inner.claim(runner, limit)
        else:
            claimed = self.inner.claim(runner, limit, tools=tools)
        result: list[TaskRecord] = await self._timed("claim", claimed)
        return result

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        return await self.inner.append_journal(task_id, position, entry)

    async def read_journal(self, task_id: str) -> list[str]:
        return await self.inner.read_journal(task_id)

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        result: TaskPage = await self._timed(
            "list_tasks", self.inner.list_tasks(query, limit=limit, after=after)
        )
        return result

    async def stats(self) -> TaskStats:
        result: TaskStats = await self._timed("stats", self.inner.stats())
        return result

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        result: int = await self._timed("purge", self.inner.purge(statuses, older_than))
        return result

    async def publish(self, task_id: str) -> None:
        await self._timed("publish", self.inner.publish(task_id))

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self.inner.subscribe()


class TaskLogFilter(logging.Filter):
    """Adds `task_id`, `tool`, `trace_id` and `span_id` to every log record (`-` when none), so
    a handler's format can show them: `%(task_id)s %(trace_id)s`. Attributes a record already
    carries (passed with `extra=`) are kept. Add it to your handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        task = current_task.get()
        if not hasattr(record, "task_id"):
            record.task_id = task[0] if task else "-"
        if not hasattr(record, "tool"):
            record.tool = task[1] if task else "-"
        context = trace.get_current_span().get_span_context()
        if not hasattr(record, "trace_id"):
            record.trace_id = format(context.trace_id, "032x") if context.is_valid else "-"
        if not hasattr(record, "span_id"):
            record.span_id = format(context.span_id, "016x") if context.is_valid else "-"
        return True


def instrument(target: Any, *, tracer_provider: Any = None, meter_provider: Any = None) -> Telemetry:
    """Turn on telemetry for a `TaskServer`, `TasksExtension` or `TaskEngine`; return the observer.

    Call it before the server starts. The store is wrapped for timing when the engine starts, so
    a store set later (`mcptasks serve --store`) is timed too.
    """
    engine = getattr(getattr(target, "extension", target), "engine", target)
    if not hasattr(engine, "observer"):
        raise TypeError(
            f"cannot instrument {type(target).__name__}: not a TaskServer, TasksExtension or TaskEngine"
        )
    telemetry = Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    # other observers (the metrics endpoint's) stay; an earlier `Telemetry` is replaced
    engine.observer = add_observer(engine.observer, telemetry, replaces=Telemetry)
    return telemetry
