"""Telemetry cost: create and `tasks/get` throughput with telemetry off and on, side by side.

    python benchmarks/telemetry.py            # 5 rounds, about a minute on 2 cores
    python benchmarks/telemetry.py --quick    # 1 round, small N
    python benchmarks/telemetry.py --json out.json

Requests go through `TasksProtocol` in process (memory store, `immediate_results=False`). Each
measurement runs in a fresh child interpreter (a global tracer provider can be set only once),
and the modes alternate round by round so machine load hits them alike. Modes:

- `off`: the default install, nothing configured (no observer on the engine).
- `api-only`: `instrument(engine)` but no OpenTelemetry SDK configured (no-op tracer and meter).
- `sdk-baseline`: the OTel SDK configured (tracer provider with a batch processor and a dropping
  exporter, meter provider with a reader), every request wrapped in a server span as the MCP SDK
  does, the engine not instrumented: what OTel costs before mcptasks adds anything.
- `sdk-on`: the same, with `instrument(engine)`: the cost of mcptasks telemetry is sdk-on vs
  sdk-baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

MODES = ("off", "api-only", "sdk-baseline", "sdk-on")
K = 64


def _sdk_tracer() -> Any:
    """Install an OpenTelemetry SDK that drops its spans; return the tracer a host SDK would use."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return trace.get_tracer("mcp-python-sdk")


async def _spread(
    call: Callable[[str, dict[str, Any]], Awaitable[Any]], n: int, method: str, params: dict[str, Any]
) -> float:
    """`n` calls of `method` by `K` concurrent workers; return calls per second."""

    async def worker(count: int) -> None:
        for _ in range(count):
            await call(method, params)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(K):
            tg.start_soon(worker, n // K + (1 if i < n % K else 0))
    return n / (time.perf_counter() - start)


def child(mode: str, creates: int, gets: int) -> dict[str, float]:
    """One measurement in this (fresh) interpreter."""
    from mcptasks import EngineConfig, Limits, MemoryTaskStore, Result, task_tool
    from mcptasks.lowlevel import TaskEngine, TasksProtocol
    from mcptasks.wire import EXTENSION_ID

    meta: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}}}
    tracer: Any = _sdk_tracer() if mode.startswith("sdk") else None

    @task_tool
    async def noop():
        yield Result("ok")

    async def main() -> dict[str, float]:
        # Limits that never refuse the creates (bodies may not have finished yet), still checked
        roomy = Limits(max_active_per_owner=10**9, max_active=10**9)
        engine = TaskEngine(MemoryTaskStore(), config=EngineConfig(immediate_results=False, limits=roomy))
        if mode in ("api-only", "sdk-on"):
            from mcptasks.telemetry import instrument

            instrument(engine)
        proto = TasksProtocol(engine, [noop])

        async def send(method: str, params: dict[str, Any]) -> Any:
            if method == "tools/call":
                return await proto.call_tool("noop", {}, meta=meta)
            return await proto.handle(method, params)

        async def call(method: str, params: dict[str, Any]) -> Any:
            if tracer is None:
                return await send(method, params)
            from opentelemetry.trace import SpanKind

            with tracer.start_as_current_span(
                method, kind=SpanKind.SERVER, attributes={"mcp.method.name": method}
            ):
                return await send(method, params)

        async with engine:
            first = await call("tools/call", {})
            await _spread(call, 500, "tools/call", {})  # warm-up
            created = await _spread(call, creates, "tools/call", {})
            params = {"taskId": first["taskId"], "_meta": meta}
            await _spread(call, 500, "tasks/get", params)
            got = await _spread(call, gets, "tasks/get", params)
        return {"creates_per_s": created, "gets_per_s": got}

    return anyio.run(main)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    creates, gets = (2000, 5000) if args.quick else (10000, 30000)
    if args.child:
        print(json.dumps(child(args.child, creates, gets)))
        return 0
    rounds = args.rounds or (1 if args.quick else 5)
    samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    load_before = os.getloadavg()[0]
    for _ in range(rounds):
        for mode in MODES:
            command = [sys.executable, __file__, "--child", mode] + (["--quick"] if args.quick else [])
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            samples[mode].append(json.loads(out.strip().splitlines()[-1]))
    medians = {
        mode: {key: statistics.median(s[key] for s in runs) for key in ("creates_per_s", "gets_per_s")}
        for mode, runs in samples.items()
    }
    print(
        f"load average {load_before:.2f} -> {os.getloadavg()[0]:.2f}; {rounds} round(s), K={K}, memory store"
    )
    print(f"{'mode':<14}{'creates/s':>12}{'tasks/get/s':>14}")
    for mode in MODES:
        print(f"{mode:<14}{medians[mode]['creates_per_s']:>12,.0f}{medians[mode]['gets_per_s']:>14,.0f}")

    def cost(mode: str, base: str, key: str) -> float:
        return 1 - medians[mode][key] / medians[base][key]

    ratios = {
        f"{mode} vs {base}": {key: cost(mode, base, key) for key in ("creates_per_s", "gets_per_s")}
        for mode, base in (("api-only", "off"), ("sdk-on", "sdk-baseline"), ("sdk-on", "off"))
    }
    for name, figures in ratios.items():
        print(
            f"cost {name:<24} creates {figures['creates_per_s']:+.1%}  tasks/get {figures['gets_per_s']:+.1%}"
        )
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                {"samples": samples, "medians": medians, "cost": ratios, "rounds": rounds}, file, indent=2
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
