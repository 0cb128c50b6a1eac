"""Webhook delivery: latency from a task's transition to its event's arrival, and throughput.

    python benchmarks/webhooks.py [--tasks 1000] [--store memory|sqlite|all] [--json out.json]

A `TaskEngine` runs in this process with one webhook endpoint: a receiver in a child process
(uvicorn, on a free 127.0.0.1 port) that verifies every signature with `standardwebhooks` and
writes, per event, the time it arrived. Both processes read the same clock.

- latency: `--tasks` zero-work tasks created one after the other (each waits for its event
  before the next starts, so nothing queues); per event, arrival time minus the event's
  `timestamp` (the `updated_at` of the write that made it: the transition written, in ms
  precision). p50, p99, max.
- throughput: `--tasks` zero-work tasks created from 64 concurrent callers; events per second
  from the first create until the last event arrived, and how long the last one took after its
  task ended (the backlog the sender worked through).
"""

from __future__ import annotations

import sys

# Run as `python benchmarks/webhooks.py`, this directory comes first on sys.path and `http.py` here
# would shadow the standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import json
import os
import platform
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CONCURRENCY = 64


def receiver_main(port: int, out: str) -> None:
    """The child process: an ASGI receiver that verifies and records each event."""
    import uvicorn
    from standardwebhooks.webhooks import Webhook

    verifier = Webhook(SECRET)
    log = open(out, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        arrived = time.time()
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        try:
            event = verifier.verify(body, headers)
            status = 200
            log.write(f"{arrived!r} {headers['webhook-id']} {event['timestamp']} {event['type']}\n")
        except Exception:
            status = 401
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def read_arrivals(path: Path) -> list[tuple[float, str, float]]:
    found = []
    for line in path.read_text().splitlines():
        arrived, event_id, stamp, _ = line.split(" ")
        written = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        found.append((float(arrived), event_id, written))
    return found


def start_receiver(port: int, out: Path) -> subprocess.Popen[bytes]:
    """The receiver child process (`--receiver PORT FILE`)."""
    out.touch()
    return subprocess.Popen([sys.executable, __file__, "--receiver", str(port), str(out)])


@asynccontextmanager
async def receiver(workdir: Path) -> AsyncIterator[tuple[str, Path]]:
    port = free_port()
    out = workdir / f"arrivals-{port}.txt"
    child = start_receiver(port, out)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/hooks", out
    finally:
        child.terminate()
        child.wait(10)


def count_lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


async def wait_lines(path: Path, n: int, bound: float = 600.0) -> None:
    deadline = time.monotonic() + bound
    while count_lines(path) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count_lines(path)} of {n} events arrived")
        await anyio.sleep(0.002)


async def burst(protocol: Any, tasks: int, meta: dict[str, Any]) -> None:
    """Create `tasks` zero-work tasks from `CONCURRENCY` concurrent callers."""
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def create(n: int) -> None:
        async with limiter:
            await protocol.call_tool("done", {"n": n}, meta=meta)

    async with anyio.create_task_group() as group:
        for n in range(tasks):
            group.start_soon(create, n)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_store(kind: str, tasks: int, workdir: Path) -> dict[str, Any]:
    from mcptasks import EngineConfig, MemoryTaskStore, Result, SqliteTaskStore, task_tool
    from mcptasks.lowlevel import TaskEngine, TasksProtocol
    from mcptasks.wire import EXTENSION_ID

    @task_tool
    async def done(n: int = 0) -> Any:
        yield Result(f"done {n}")

    meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}}}
    figures: dict[str, Any] = {"store": kind, "tasks": tasks}
    for phase in ("latency", "throughput"):
        async with receiver(workdir) as (url, arrivals):
            store = MemoryTaskStore() if kind == "memory" else SqliteTaskStore(workdir / f"{phase}.db")
            config = EngineConfig(
                webhooks=(url,),
                webhook_secret=SECRET,
                webhook_allow_private=True,
                immediate_results=False,
            )
            engine = TaskEngine(store, config=config)
            protocol = TasksProtocol(engine, [done])
            async with engine:
                if phase == "latency":
                    for n in range(tasks):
                        await protocol.call_tool("done", {"n": n}, meta=meta)
                        await wait_lines(arrivals, n + 1)
                    seen = read_arrivals(arrivals)
                    latencies = [(arrived - written) * 1000 for arrived, _, written in seen]
                    figures["latency_ms"] = {
                        "p50": round(percentile(latencies, 0.50), 2),
                        "p99": round(percentile(latencies, 0.99), 2),
                        "max": round(max(latencies), 2),
                    }
                else:
                    started = time.time()
                    await burst(protocol, tasks, meta)
                    created = time.time()
                    await wait_lines(arrivals, tasks)
                    seen = read_arrivals(arrivals)
                    last = max(arrived for arrived, _, _ in seen)
                    figures["throughput"] = {
                        "events_per_s": round(tasks / (last - started), 1),
                        "creates_per_s": round(tasks / (created - started), 1),
                        "last_event_after_last_create_s": round(last - created, 3),
                        "latency_ms_p50": round(percentile([(a - w) * 1000 for a, _, w in seen], 0.5), 1),
                        "latency_ms_p99": round(percentile([(a - w) * 1000 for a, _, w in seen], 0.99), 1),
                    }
                    stats = engine.webhooks.stats
                    for _ in range(6000):  # the last answers may still be being noted
                        if stats.deliveries["delivered"] >= tasks:
                            break
                        await anyio.sleep(0.01)
                    figures["attempts"] = dict(stats.deliveries)
            assert len({event_id for _, event_id, _ in seen}) == tasks, "an event is missing"
    return figures


async def main(options: argparse.Namespace) -> dict[str, Any]:
    stores = ["memory", "sqlite"] if options.store == "all" else [options.store]
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as directory:
        for kind in stores:
            figures = await run_store(kind, options.tasks, Path(directory))
            results["runs"].append(figures)
            print(json.dumps(figures))
    results["load_after"] = os.getloadavg()[0]
    print(f"load average {results['load_before']:.2f} -> {results['load_after']:.2f}")
    return results


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--receiver":
        receiver_main(int(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(description="webhook delivery latency and throughput")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--store", choices=("memory", "sqlite", "all"), default="all")
    parser.add_argument("--json")
    options = parser.parse_args()
    results = anyio.run(main, options)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2))
