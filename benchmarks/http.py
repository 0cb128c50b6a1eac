"""Benchmark mcptasks over real Streamable HTTP against a server started by `mcptasks serve`.

    python benchmarks/http.py [--store URL] [--log-level LEVEL] [--quick] [--json out.json]

Starts `mcptasks serve benchmarks/http_app.py --transport http` on a free 127.0.0.1 port and
measures, each next to an ordinary non-task `tools/call` on the same server:

- create p50: one `tools/call` (opted in) of a task tool that suspends for 1 ms, so it is always
  answered with a CreateTaskResult; sequential requests on one keep-alive connection;
- create throughput: the same with `--concurrency` requests in flight;
- create -> result: from sending `tools/call` of a zero-work task tool until its result is in hand
  (the server answers such a body inline: "immediate results"); and, for the 1 ms tool, until a
  `tasks/get` polled back to back shows it completed;
- `tasks/get` throughput on a completed task, `--concurrency` in flight.

Targets (issue 3): create p50 <= 1.3x the plain call's p50; create throughput >= 0.8x the plain
call's; zero-work create -> result <= 3 ms (p50).
"""

from __future__ import annotations

import sys

# Run as `python benchmarks/http.py`, this directory comes first on sys.path and this file would
# shadow the standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import itertools
import json
import os
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
EXT = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
_ids = itertools.count(1)


def _meta(opt_in: bool) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"extensions": {EXT: {}}} if opt_in else {}
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "mcptasks-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


class Wire:
    """Raw JSON-RPC over Streamable HTTP with the 2026-07-28 envelope and routing headers."""

    def __init__(self, client: httpx2.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        response = await self.client.post(self.url, json=body, headers=headers)
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        message = json.loads(text)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        result: dict[str, Any] = message["result"]
        return result

    async def plain_call(self) -> dict[str, Any]:
        return await self.request(
            "tools/call", {"name": "plain_noop", "arguments": {}, "_meta": _meta(False)}, "plain_noop"
        )

    async def create(self, tool: str = "task_brief") -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": {}, "_meta": _meta(True)}, tool)

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id, "_meta": _meta(True)}, task_id)


async def _sequential(n: int, op: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await op()
        samples.append(time.perf_counter() - start)
    return samples


async def _throughput(n: int, concurrency: int, op: Callable[[], Awaitable[Any]]) -> float:
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await op()

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    return n / (time.perf_counter() - start)


async def _create_to_result(wire: Wire, tool: str) -> float:
    start = time.perf_counter()
    created = await wire.create(tool)
    if created.get("resultType") == "complete":  # answered inline (immediate result)
        return time.perf_counter() - start
    task_id = created["taskId"]
    while True:
        task = await wire.get(task_id)
        if task["status"] == "completed":
            return time.perf_counter() - start


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


async def measure(url: str, *, n: int, concurrency: int) -> dict[str, float]:
    """Run every measurement against a server at `url`."""
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(limits=limits, timeout=30) as client:
        wire = Wire(client, url)
        for _ in range(200):  # warm-up
            await wire.plain_call()
            await wire.create()
        plain = await _sequential(n, wire.plain_call)
        create = await _sequential(n, wire.create)
        plain_tput = await _throughput(n * 2, concurrency, wire.plain_call)
        create_tput = await _throughput(n * 2, concurrency, wire.create)
        latency = [await _create_to_result(wire, "task_noop") for _ in range(n // 2)]
        task_latency = [await _create_to_result(wire, "task_brief") for _ in range(n // 2)]
        done = await wire.create()
        while (await wire.get(done["taskId"]))["status"] != "completed":
            pass
        get_tput = await _throughput(n * 2, concurrency, lambda: wire.get(done["taskId"]))
    return {
        "plain_p50_ms": _pct(plain, 0.5),
        "create_p50_ms": _pct(create, 0.5),
        "create_p99_ms": _pct(create, 0.99),
        "plain_per_s": plain_tput,
        "create_per_s": create_tput,
        "create_to_result_p50_ms": _pct(latency, 0.5),
        "create_to_result_p95_ms": _pct(latency, 0.95),
        "brief_task_to_result_p50_ms": _pct(task_latency, 0.5),
        "tasks_get_per_s": get_tput,
        "create_p50_ratio": _pct(create, 0.5) / _pct(plain, 0.5),
        "create_throughput_ratio": create_tput / plain_tput,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(store: str, log_level: str = "info") -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "mcptasks", "serve", str(ROOT / "benchmarks" / "http_app.py")]
    command += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--store", store]
    command += ["--log-level", log_level]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the benchmark server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default="memory://", help="store URL for the server (default memory://)")
    parser.add_argument(
        "--log-level",
        default="info",
        help="the server's --log-level (default info: a log line per task transition, to /dev/null)",
    )
    parser.add_argument("--quick", action="store_true", help="small sample sizes (a smoke run)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    n = 200 if args.quick else 2000
    process, url = _start_server(args.store, args.log_level)
    try:
        figures = anyio.run(lambda: measure(url, n=n, concurrency=args.concurrency))
    finally:
        process.terminate()
        process.wait(timeout=10)
    rows = [
        ("plain tools/call p50", f"{figures['plain_p50_ms']:.2f} ms", ""),
        (
            "task create p50",
            f"{figures['create_p50_ms']:.2f} ms",
            f"ratio {figures['create_p50_ratio']:.2f} (<= 1.30)",
        ),
        ("plain tools/call throughput", f"{figures['plain_per_s']:.0f} /s", ""),
        (
            "task create throughput",
            f"{figures['create_per_s']:.0f} /s",
            f"ratio {figures['create_throughput_ratio']:.2f} (>= 0.80)",
        ),
        ("zero-work create -> result p50", f"{figures['create_to_result_p50_ms']:.2f} ms", "(<= 3 ms)"),
        ("zero-work create -> result p95", f"{figures['create_to_result_p95_ms']:.2f} ms", ""),
        (
            "1 ms task: create -> polled result",
            f"{figures['brief_task_to_result_p50_ms']:.2f} ms",
            "(p50, via tasks/get)",
        ),
        ("tasks/get throughput", f"{figures['tasks_get_per_s']:.0f} /s", ""),
    ]
    print(f"store={args.store} n={n} concurrency={args.concurrency} cpus={os.cpu_count()}")
    for name, value, target in rows:
        print(f"{name:34} {value:>14}  {target}")
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, **figures}, indent=2))


if __name__ == "__main__":
    main()
