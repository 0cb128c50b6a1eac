"""OpenTelemetry for a task server: traces and metrics through the OTel SDK.

Run it:  python docs/snippets/operate_telemetry.py   (one task, its spans printed to the console)
Serve:   call setup_telemetry(app) before app.run("http", port=8000)
"""

import logging

import anyio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from mcptasks import Result, TaskServer
from mcptasks.telemetry import TaskLogFilter, instrument

app = TaskServer("ci-runner", store="sqlite:///tasks.db")


@app.task_tool
async def run_pipeline(kind: str):
    """Run the CI pipeline."""
    logging.getLogger("ci").info("starting %s", kind)
    yield f"running {kind}"
    yield Result(f"{kind} passed")


# --8<-- [start:setup]
def setup_telemetry(server: TaskServer, spans: SpanExporter | None = None) -> None:
    """Ship traces and metrics (console here; an OTLP exporter for a collector in production)."""
    resource = Resource.create({"service.name": "ci-runner"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans or ConsoleSpanExporter()))
    trace.set_tracer_provider(tracer_provider)  # the MCP SDK's request spans use it too
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
    instrument(server)  # task spans, links, events and mcptasks.* metrics

    handler = logging.StreamHandler()
    handler.addFilter(TaskLogFilter())  # task_id, tool, trace_id, span_id on every record
    handler.setFormatter(
        logging.Formatter("%(levelname)s %(name)s task=%(task_id)s trace=%(trace_id)s %(message)s")
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


# --8<-- [end:setup]


async def demo() -> None:
    """Run one task through the engine, as a `tools/call` would."""
    engine = app.extension.engine
    async with engine:
        with trace.get_tracer("demo").start_as_current_span("tools/call run_pipeline"):
            record = await engine.start(run_pipeline, {"kind": "test"}, owner="me")
        for _ in range(3000):  # poll like a client, for up to 30 s
            if (await engine.get(record.task_id, owner="me")).terminal:
                break
            await anyio.sleep(0.01)


if __name__ == "__main__":
    setup_telemetry(app)
    anyio.run(demo)
    trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]
