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
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

try:
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, SpanKind, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("mcptasks.telemetry needs OpenTelemetry: pip install 'mcptasks[otel]'") from exc

from mcptasks import __version__
from mcptasks.store.admin import TaskPage, TaskQuery, TaskStats
from mcptasks.store.base import TaskRecord, TaskStore
from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES

__all__ = ["METRICS", "TaskLogFilter", "Telemetry", "current_task", "instrument"]

METRICS: dict[str, str] = {
    "mcptasks.tasks.created": "Counter: tasks created, by gen_ai.tool.name.",
    "mcptasks.tasks.ended": "Counter: tasks that reached a final status, by gen_ai.tool.name, mcp.task.status "
    "and error.type (tool_error, a JSON-RPC code, or the failure reason such as worker_lost or ttl).",
    "mcptasks.tasks.active": "UpDownCounter: tasks working or input_required, by gen_ai.tool.name and "
    "mcp.task.status (sum it over replicas).",
    "mcptasks.queue.depth": "UpDownCounter: tasks queued for a worker (no runner yet), by gen_ai.tool.name.",
    "mcptasks.task.duration": "Histogram (s): creation to final status, by gen_ai.tool.name and mcp.task.status.",
    "mcptasks.task.input_wait": "Histogram (s): time a finished task spent in input_required, by gen_ai.tool.name.",
    "mcptasks.task.claim_latency": "Histogram (s): queued until claimed by a worker, by gen_ai.tool.name.",
    "mcptasks.task.requests": "Counter: tasks/get, tasks/update, tasks/cancel served, by mcp.method.name and "
    "gen_ai.tool.name (polls per task = tasks/get count / tasks created).",
    "mcptasks.store.operation.duration": "Histogram (s): store calls, by db.operation.name and error.type.",
}
"""Every metric `Telemetry` records, with its instrument and attributes."""

_TOOL = "gen_ai.tool.name"
_STATUS = "mcp.task.status"
_TASK_ID = "mcp.task.id"
_PROPAGATOR = TraceContextTextMapPropagator()

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
    if record.status == "failed" and record.error:
        data = record.error.get("data")
        if isinstance(data, dict) and isinstance(data.get("reason"), str):
            return str(data["reason"])
        return str(record.error.get("code", "failed"))
    if record.status == "completed" and record.result and record.result.get("isError") is True:
        return "tool_error"
    return None


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


class Telemetry:
    """An `EngineObserver` that records spans and metrics through the OpenTelemetry API.

    `tracer_provider` / `meter_provider` default to the global ones (set by your OTel SDK setup
    or `opentelemetry-instrument`). Spans are never created for a task whose trace is not sampled
    by your sampler, as usual with OTel.
    """

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.tracer = trace.get_tracer("mcptasks", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("mcptasks", __version__, meter_provider=meter_provider)
        self._created = meter.create_counter(
            "mcptasks.tasks.created", unit="{task}", description=METRICS["mcptasks.tasks.created"]
        )
        self._ended = meter.create_counter(
            "mcptasks.tasks.ended", unit="{task}", description=METRICS["mcptasks.tasks.ended"]
        )
        self._active = meter.create_up_down_counter(
            "mcptasks.tasks.active", unit="{task}", description=METRICS["mcptasks.tasks.active"]
        )
        self._queued = meter.create_up_down_counter(
            "mcptasks.queue.depth", unit="{task}", description=METRICS["mcptasks.queue.depth"]
        )
        self._duration = meter.create_histogram(
            "mcptasks.task.duration", unit="s", description=METRICS["mcptasks.task.duration"]
        )
        self._input_wait = meter.create_histogram(
            "mcptasks.task.input_wait", unit="s", description=METRICS["mcptasks.task.input_wait"]
        )
        self._claim_latency = meter.create_histogram(
            "mcptasks.task.claim_latency", unit="s", description=METRICS["mcptasks.task.claim_latency"]
        )
        self._requests = meter.create_counter(
            "mcptasks.task.requests", unit="{request}", description=METRICS["mcptasks.task.requests"]
        )
        self.store_duration = meter.create_histogram(
            "mcptasks.store.operation.duration",
            unit="s",
            description=METRICS["mcptasks.store.operation.duration"],
        )
        self._spans: dict[str, trace.Span] = {}
        """Execution spans of the bodies running in this process, by task id."""

    # -- EngineObserver ------------------------------------------------------------------------

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store, timing every operation (`mcptasks.store.operation.duration`)."""
        if isinstance(store, TimedStore):
            return store
        return TimedStore(store, self.store_duration)

    def creating(self, record: TaskRecord) -> None:
        """Remember the current (creating `tools/call`) span's context on the record; enrich it."""
        span = trace.get_current_span()
        if not span.get_span_context().is_valid:
            return
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        record.trace = carrier or None
        if span.is_recording():
            span.set_attribute(_TASK_ID, record.task_id)

    def created(self, record: TaskRecord) -> None:
        """Count the task; it is active (and queued when no runner took it)."""
        tool = {_TOOL: record.tool}
        self._created.add(1, tool)
        self._active.add(1, {**tool, _STATUS: record.status})
        if record.runner is None:
            self._queued.add(1, tool)

    @contextmanager
    def executing(self, record: TaskRecord) -> Iterator[object]:
        """The run's root span, linked to the creating span, current while the body runs."""
        link = _creating_link(record)
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
        ) as span:
            self._spans[record.task_id] = span
            token = current_task.set((record.task_id, record.tool))
            try:
                yield span
            finally:
                current_task.reset(token)
                self._spans.pop(record.task_id, None)

    def changed(self, before: TaskRecord, after: TaskRecord) -> None:
        """Events on the running span; active/queue gauges; the end-of-task metrics."""
        tool = {_TOOL: after.tool}
        span = self._spans.get(after.task_id)
        if before.status != after.status:
            if before.status in ACTIVE_STATUSES:
                self._active.add(-1, {**tool, _STATUS: before.status})
            if after.status in ACTIVE_STATUSES:
                self._active.add(1, {**tool, _STATUS: after.status})
        if before.runner is not None and after.runner is None and after.status in ACTIVE_STATUSES:
            self._queued.add(1, tool)  # put back in the queue (retry after a lost worker)
        if span is not None and span.is_recording():
            new_keys = sorted(set(after.input_requests) - set(before.input_requests))
            if new_keys:
                span.add_event(
                    "mcp.task.input_required",
                    {
                        "mcp.task.input_keys": new_keys,
                        "mcp.task.input_methods": [
                            str(after.input_requests[k].get("method")) for k in new_keys
                        ],
                    },
                )
            if before.status != after.status or before.status_message != after.status_message:
                event: dict[str, Any] = {_STATUS: after.status}
                if after.status_message is not None:
                    event["mcp.task.status_message"] = after.status_message
                span.add_event("mcp.task.status", event)
        if after.status in TERMINAL_STATUSES and before.status not in TERMINAL_STATUSES:
            error = _error_type(after)
            ended = {**tool, _STATUS: after.status}
            self._ended.add(1, ended if error is None else {**ended, "error.type": error})
            self._duration.record(max(0.0, after.updated_at - after.created_at), ended)
            self._input_wait.record(_input_wait(after), tool)
            if before.runner is None:
                self._queued.add(-1, tool)  # ended (cancelled) before any worker claimed it
            if span is not None and span.is_recording():
                span.set_attribute(_STATUS, after.status)
                if error is not None:
                    span.set_attribute("error.type", error)
                if after.status == "failed":
                    message = after.error.get("message") if after.error else None
                    span.set_status(StatusCode.ERROR, str(message) if message is not None else None)

    def claimed(self, record: TaskRecord) -> None:
        """Claim latency and queue depth."""
        tool = {_TOOL: record.tool}
        self._queued.add(-1, tool)
        self._claim_latency.record(max(0.0, time.time() - record.updated_at), tool)

    def requested(self, method: str, record: TaskRecord) -> None:
        """Count the request; enrich the SDK's span for it with the task id and the creating link."""
        self._requests.add(1, {"mcp.method.name": method, _TOOL: record.tool})
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(_TASK_ID, record.task_id)
            link = _creating_link(record)
            if link is not None:
                span.add_link(link.context)


class TimedStore:
    """A `TaskStore` that records the duration (and error type) of every call of another."""

    def __init__(self, store: TaskStore, histogram: Any) -> None:
        self.inner = store
        self._histogram = histogram
        self.durable = store.durable

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"TimedStore({self.inner!r})"

    async def _timed(self, operation: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        error: str | None = None
        try:
            return await call()
        except BaseException as exc:
            error = type(exc).__qualname__
            raise
        finally:
            attributes = {"db.operation.name": operation}
            if error is not None:
                attributes["error.type"] = error
            self._histogram.record(time.perf_counter() - start, attributes)

    async def open(self) -> None:
        await self._timed("open", self.inner.open)

    async def close(self) -> None:
        await self._timed("close", self.inner.close)

    async def create(self, record: TaskRecord) -> TaskRecord:
        result: TaskRecord = await self._timed("create", lambda: self.inner.create(record))
        return result

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        result: TaskRecord | None = await self._timed("get", lambda: self.inner.get(task_id, owner=owner))
        return result

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        result: bool = await self._timed(
            "replace", lambda: self.inner.replace(record, expected_version=expected_version)
        )
        return result

    async def list_active(self) -> list[TaskRecord]:
        result: list[TaskRecord] = await self._timed("list_active", self.inner.list_active)
        return result

    async def delete_expired(self, now: float) -> int:
        result: int = await self._timed("delete_expired", lambda: self.inner.delete_expired(now))
        return result

    async def heartbeat(self, runner: str, ttl: float) -> None:
        await self._timed("heartbeat", lambda: self.inner.heartbeat(runner, ttl))

    async def live_runners(self) -> set[str]:
        result: set[str] = await self._timed("live_runners", self.inner.live_runners)
        return result

    async def claim(self, runner: str, limit: int) -> list[TaskRecord]:
        result: list[TaskRecord] = await self._timed("claim", lambda: self.inner.claim(runner, limit))
        return result

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        result: TaskPage = await self._timed(
            "list_tasks", lambda: self.inner.list_tasks(query, limit=limit, after=after)
        )
        return result

    async def stats(self) -> TaskStats:
        result: TaskStats = await self._timed("stats", self.inner.stats)
        return result

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        result: int = await self._timed("purge", lambda: self.inner.purge(statuses, older_than))
        return result

    async def publish(self, task_id: str) -> None:
        await self._timed("publish", lambda: self.inner.publish(task_id))

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
    engine.observer = telemetry
    return telemetry
