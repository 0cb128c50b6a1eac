"""Task metrics in the Prometheus text format: `metrics_app(server)`, or `mcptasks serve --metrics-port`.

`metrics_app` installs a `TaskMetrics` observer on the engine (beside telemetry's, if any) and
returns an ASGI app answering every GET with the metrics of `METRICS`: counters and a duration
histogram kept by the observer, gauges read from the engine and `TaskStore.stats()` when scraped.
prometheus-client (the `metrics` extra) writes the exposition from a registry of the app's own;
no OpenTelemetry is needed. Every label value comes from a set the server defines (tool names,
statuses, methods, and `FAILURE_LABELS` for a failure's `reason`): nothing a client or a body
sends becomes a label. The app answers only to loopback `Host` values unless given others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mcptasks._guard import LOOPBACK_HOSTS, HostGuard
from mcptasks._runtime.failures import FAILURE_LABELS, failure_label
from mcptasks._runtime.observer import add_observer
from mcptasks.stores.admin import TaskStats
from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.stores.extras import MissingExtra
from mcptasks.wire import TERMINAL_STATUSES

try:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra(
        "metrics", "prometheus-client", "metrics", what="the metrics endpoint (mcptasks.metrics)"
    ) from exc

__all__ = ["CONTENT_TYPE", "DURATION_BUCKETS", "FAILURE_LABELS", "METRICS", "TaskMetrics", "metrics_app"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The content type of the Prometheus text exposition format that `generate_latest` writes."""

DURATION_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Upper bounds (s) of the `mcptasks_task_duration_seconds` buckets (plus `+Inf`)."""

METRICS: dict[str, tuple[str, str]] = {
    "mcptasks_tasks_created_total": ("counter", "Tasks created by this process, by tool."),
    "mcptasks_tasks_completed_total": ("counter", "Tasks that completed (tool errors included), by tool."),
    "mcptasks_tasks_tool_errors_total": ("counter", "Completed tasks whose result is a tool error, by tool."),
    "mcptasks_tasks_failed_total": (
        "counter",
        "Tasks that failed, by tool and reason: the server's own reason (worker_lost, timeout, ...), "
        "client_error (the client answered a question with an error), a standard JSON-RPC code, "
        "or other.",
    ),
    "mcptasks_tasks_cancelled_total": ("counter", "Tasks cancelled, by tool."),
    "mcptasks_task_duration_seconds": ("histogram", "Creation to final status (s), by tool and status."),
    "mcptasks_task_requests_total": (
        "counter",
        "tasks/get, tasks/update, tasks/cancel served, by method and tool.",
    ),
    "mcptasks_tasks_running": ("gauge", "Task bodies running in this process."),
    "mcptasks_tasks_waiting_for_input": (
        "gauge",
        "Tasks in input_required (as this process wrote them), by tool.",
    ),
    "mcptasks_listen_streams_open": (
        "gauge",
        "Task listen streams (subscriptions/listen) open on this process.",
    ),
    "mcptasks_store_tasks": ("gauge", "Unexpired records in the task store, by status."),
    "mcptasks_store_queued": ("gauge", "Active records in the store no runner has claimed yet."),
    "mcptasks_store_runners": ("gauge", "Runners with a live heartbeat in the store."),
    "mcptasks_store_up": ("gauge", "1 when the store's statistics could be read for this scrape, else 0."),
    "mcptasks_webhook_deliveries_total": (
        "counter",
        "Webhook delivery attempts by this process, by outcome: delivered, retried, gave_up, dropped "
        "(413, or an endpoint no process knew for an hour), gone (410).",
    ),
    "mcptasks_webhook_failures_total": (
        "counter",
        "Failed webhook attempts by reason: connection_refused, timeout, tls_error, refused_address, "
        "http_3xx, http_4xx, http_5xx, other.",
    ),
    "mcptasks_webhook_outbox_depth": (
        "gauge",
        "Webhook deliveries pending in the store's outbox at this process's last sweep.",
    ),
}
"""Every metric the endpoint exposes: its type and help text."""

Labels = tuple[tuple[str, str], ...]


class _Histogram:
    """Bucket counts, sum and count of one label set."""

    def __init__(self) -> None:
        self.buckets = [0] * len(DURATION_BUCKETS)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(DURATION_BUCKETS):
            if value <= bound:
                self.buckets[index] += 1
        self.total += value
        self.count += 1


class TaskMetrics:
    """An `EngineObserver` that counts tasks in plain dicts for `metrics_app` (no OpenTelemetry).

    Its label values are tool names, statuses, request methods and `failure_label`s: a closed
    set, so the number of series stays bounded whatever clients and bodies send."""

    follows_runs = False
    """Bodies waiting for input may leave their task (park): nothing here follows a run."""

    def __init__(self) -> None:
        self.counters: dict[str, dict[Labels, float]] = {
            name: {} for name, (kind, _) in METRICS.items() if kind == "counter"
        }
        self.waiting: dict[str, int] = {}
        """Tasks in input_required by tool, from the transitions this process wrote."""
        self.durations: dict[Labels, _Histogram] = {}

    def _add(self, name: str, labels: Labels, amount: float = 1) -> None:
        values = self.counters[name]
        values[labels] = values.get(labels, 0) + amount

    def _wait(self, tool: str, amount: int) -> None:
        self.waiting[tool] = max(0, self.waiting.get(tool, 0) + amount)

    # -- EngineObserver ------------------------------------------------------------------------

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """The store itself (nothing is timed)."""
        return store

    def creating(self, record: TaskRecord) -> None:
        """Nothing."""

    def created(self, record: TaskRecord) -> None:
        """Count the task."""
        self._add("mcptasks_tasks_created_total", (("tool", record.tool),))
        if record.status == "input_required":
            self._wait(record.tool, 1)

    @contextmanager
    def executing(self, record: TaskRecord) -> Iterator[object]:
        """Nothing around the body (the engine counts its running bodies)."""
        yield None

    def settled(self, task_id: str) -> None:
        """Nothing."""

    def changed(self, before: TaskRecord, after: TaskRecord) -> None:
        """Input waits, and the final status with the task's duration."""
        if before.status != after.status:
            if before.status == "input_required":
                self._wait(after.tool, -1)
            if after.status == "input_required":
                self._wait(after.tool, 1)
        if after.status not in TERMINAL_STATUSES or before.status in TERMINAL_STATUSES:
            return
        tool = (("tool", after.tool),)
        if after.status == "completed":
            self._add("mcptasks_tasks_completed_total", tool)
            if after.result and after.result.get("isError") is True:
                self._add("mcptasks_tasks_tool_errors_total", tool)
        elif after.status == "failed":
            self._add("mcptasks_tasks_failed_total", (*tool, ("reason", failure_label(after.error))))
        else:
            self._add("mcptasks_tasks_cancelled_total", tool)
        key = (*tool, ("status", after.status))
        histogram = self.durations.get(key) or self.durations.setdefault(key, _Histogram())
        histogram.observe(max(0.0, after.updated_at - after.created_at))

    def claimed(self, record: TaskRecord) -> None:
        """Nothing."""

    def requested(self, method: str, record: TaskRecord) -> None:
        """Count the request."""
        self._add("mcptasks_task_requests_total", (("method", method), ("tool", record.tool)))


def _family(name: str, values: dict[Labels, float]) -> CounterMetricFamily | GaugeMetricFamily:
    """The family of the counter or gauge `METRICS[name]`, one sample per label set of `values`."""
    kind, text = METRICS[name]
    names = [key for key, _ in next(iter(values), ())]
    family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    family = family_type(name, text, labels=names)
    for labels, value in sorted(values.items()):
        family.add_metric([text for _, text in labels], value)
    return family


_BOUNDS = tuple(repr(bound) for bound in DURATION_BUCKETS)


class _Counted:
    """The collector of what a `TaskMetrics` counted: its counters and the duration histogram."""

    def __init__(self, metrics: TaskMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """The counters, then the histogram (copies, read in one step each)."""
        for name, values in self.metrics.counters.items():
            yield _family(name, dict(values))
        histogram = HistogramMetricFamily(
            "mcptasks_task_duration_seconds",
            METRICS["mcptasks_task_duration_seconds"][1],
            labels=["tool", "status"],
        )
        for labels, counts in sorted(dict(self.metrics.durations).items()):
            buckets = [*zip(_BOUNDS, counts.buckets, strict=True), ("+Inf", counts.count)]
            histogram.add_metric([text for _, text in labels], buckets, counts.total)
        yield histogram


class _ReadAtScrape:
    """The collector of the gauges read when Prometheus scrapes: from the engine, its listen
    streams and the store's statistics (read by `refresh` before each exposition)."""

    def __init__(self, engine: Any, metrics: TaskMetrics, push: Any) -> None:
        self.engine = engine
        self.metrics = metrics
        self.push = push
        self.stats: TaskStats | None = None
        """The store's statistics as last read (None: unreadable, or the engine is not running)."""

    async def refresh(self) -> None:
        """Read the store's statistics for the next exposition."""
        if not self.engine.running:
            self.stats = None
            return
        try:
            self.stats = await self.engine.store.stats()
        except Exception:
            self.stats = None

    def collect(self) -> Iterator[Metric]:
        """The engine's gauges, and the store's while the engine runs."""
        yield _family("mcptasks_tasks_running", {(): self.engine.active_runs})
        waiting: dict[Labels, float] = {
            (("tool", tool),): count for tool, count in dict(self.metrics.waiting).items()
        }
        yield _family("mcptasks_tasks_waiting_for_input", waiting)
        streams = self.push.open_streams if self.push is not None else 0
        yield _family("mcptasks_listen_streams_open", {(): streams})
        if not self.engine.running:
            return
        stats = self.stats
        if stats is not None:
            by_status: dict[Labels, float] = {
                (("status", status),): n for status, n in stats.by_status.items()
            }
            yield _family("mcptasks_store_tasks", by_status)
            yield _family("mcptasks_store_queued", {(): stats.queued})
            yield _family("mcptasks_store_runners", {(): len(stats.runners)})
        yield _family("mcptasks_store_up", {(): 0 if stats is None else 1})
        yield from _webhook_families(getattr(self.engine, "webhooks", None))


def _webhook_families(delivery: Any) -> Iterator[Metric]:
    """The webhook counters and the outbox depth, every label value listed (zeros included), when
    webhooks are configured."""
    if delivery is None:
        return
    from mcptasks._runtime.webhooks.delivery import OUTCOMES
    from mcptasks._runtime.webhooks.targets import FAILURE_REASONS

    stats = delivery.stats
    outcomes: dict[Labels, float] = {(("outcome", o),): stats.deliveries[o] for o in OUTCOMES}
    yield _family("mcptasks_webhook_deliveries_total", outcomes)
    reasons: dict[Labels, float] = {(("reason", r),): stats.failures[r] for r in FAILURE_REASONS}
    yield _family("mcptasks_webhook_failures_total", reasons)
    yield _family("mcptasks_webhook_outbox_depth", {(): stats.outbox_depth})


class _Exposition:
    """What one scrape shows for an engine (and its listen streams): a registry of its own."""

    def __init__(self, engine: Any, metrics: TaskMetrics, push: Any) -> None:
        self.gauges = _ReadAtScrape(engine, metrics, push)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Counted(metrics))
        self.registry.register(self.gauges)

    async def text(self) -> bytes:
        """The whole exposition."""
        await self.gauges.refresh()
        return generate_latest(self.registry)


class _MetricsApp:
    """The ASGI app behind the Host guard: the exposition on every GET or HEAD."""

    def __init__(self, exposition: _Exposition) -> None:
        self.exposition = exposition

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] not in ("GET", "HEAD"):
            status, body, kind = 405, b"only GET and HEAD\n", "text/plain; charset=utf-8"
        else:
            status, body, kind = 200, await self.exposition.text(), CONTENT_TYPE
        headers = [
            (b"content-type", kind.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _metrics_of(engine: Any) -> TaskMetrics:
    """The engine's `TaskMetrics`, installed beside its other observers when it has none yet."""
    observer = engine.observer
    for found in (*getattr(observer, "observers", ()), observer):
        if isinstance(found, TaskMetrics):
            return found
    metrics = TaskMetrics()
    engine.observer = add_observer(observer, metrics)
    return metrics


def metrics_app(
    target: Any,
    *,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
) -> Any:
    """An ASGI app serving the task metrics of a `TaskServer`, `TasksExtension` or `TaskEngine`
    in the Prometheus text format, on any path (route it at `/metrics`).

    Call it before the server starts, so every task is counted. `allowed_hosts`: the `Host`
    values it answers to (`name` or `name:*`; default the loopback names on any port); others
    get 421, a foreign `Origin` 403.
    """
    extension = getattr(target, "extension", target)
    engine = getattr(extension, "engine", target)
    if not hasattr(engine, "observer") or not hasattr(engine, "active_runs"):
        raise TypeError(
            f"no metrics for {type(target).__name__}: not a TaskServer, TasksExtension or TaskEngine"
        )
    if isinstance(allowed_hosts, str) or isinstance(allowed_origins, str):
        raise ValueError("allowed_hosts and allowed_origins are sequences of strings, not one string")
    hosts = list(LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts)
    if not hosts:
        raise ValueError("allowed_hosts needs at least one host")
    exposition = _Exposition(engine, _metrics_of(engine), getattr(extension, "push", None))
    setting = "mcptasks serve --metrics-host NAME, or metrics_app(allowed_hosts=...)"
    return HostGuard(
        _MetricsApp(exposition),
        allowed_hosts=hosts,
        allowed_origins=list(allowed_origins),
        name="metrics endpoint",
        setting=setting,
    )
