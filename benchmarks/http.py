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
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

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


class RawPool:
    """Keep-alive HTTP/1.1 connections to one server, spoken by hand: far less client CPU per
    request than an HTTP library, so one client core can outpace one server core."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self._idle: list[tuple[Any, bytearray]] = []
        self._open: list[Any] = []

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """POST `body`; (status, lower-cased headers, body) of the answer."""
        head = f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head += f"Content-Length: {len(body)}\r\n\r\n"
        data = head.encode() + body
        while self._idle:  # the server closes idle keep-alive connections (uvicorn: after 5 s)
            connection = self._idle.pop()
            try:
                return await self._exchange(connection, data)
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                continue
        return await self._exchange(await self._connect(), data)

    async def _exchange(
        self, connection: tuple[Any, bytearray], data: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        stream, buffer = connection
        await stream.send(data)
        answer = await _read_response(stream, buffer)
        self._idle.append(connection)
        return answer

    async def _connect(self) -> tuple[Any, bytearray]:
        stream = await anyio.connect_tcp(self.host, self.port)
        self._open.append(stream)
        return stream, bytearray()

    async def aclose(self) -> None:
        for stream in self._open:
            await stream.aclose()


async def _read_response(stream: Any, buffer: bytearray) -> tuple[int, dict[str, str], bytes]:
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive()
    end = buffer.index(b"\r\n\r\n")
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    headers = dict((k.strip().lower(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(stream, buffer)
    else:
        body = await _read_exactly(stream, buffer, int(headers.get("content-length", "0")))
    return int(lines[0].split()[1]), headers, body


async def _read_exactly(stream: Any, buffer: bytearray, length: int) -> bytes:
    while len(buffer) < length:
        buffer += await stream.receive()
    body = bytes(buffer[:length])
    del buffer[:length]
    return body


async def _read_chunked(stream: Any, buffer: bytearray) -> bytes:
    body = b""
    while True:
        while b"\r\n" not in buffer:
            buffer += await stream.receive()
        end = buffer.index(b"\r\n")
        size = int(bytes(buffer[:end]).split(b";")[0], 16)
        del buffer[: end + 2]
        chunk = await _read_exactly(stream, buffer, size + 2)
        if size == 0:
            return body
        body += chunk[:-2]


class Wire:
    """Raw JSON-RPC over Streamable HTTP with the 2026-07-28 envelope and routing headers."""

    def __init__(self, pool: RawPool) -> None:
        self.pool = pool

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
        _, response_headers, raw = await self.pool.post(json.dumps(body).encode(), headers)
        text = raw.decode()
        if response_headers.get("content-type", "").startswith("text/event-stream"):
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

    async def update(self, task_id: str) -> dict[str, Any]:
        params = {"taskId": task_id, "inputResponses": {}, "_meta": _meta(True)}
        return await self.request("tasks/update", params, task_id)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/cancel", {"taskId": task_id, "_meta": _meta(True)}, task_id)


async def _sequential(n: int, op: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await op()
        samples.append(time.perf_counter() - start)
    return samples


TURN = 50
"""Requests in a row to one server when two take turns (see `_alternating`)."""


async def _alternating(
    n: int, op: Callable[[], Awaitable[Any]], beside: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    """n requests of `op` and n of `beside`, one in flight, `TURN` in a row to each in turn: both
    see the same machine (a p50 ratio of two runs minutes apart moves with whatever else the
    machine did), and each server answers mostly with its code and data still in the core's
    caches (single requests taking turns would measure two cold servers)."""
    ours: list[float] = []
    theirs: list[float] = []
    for done in range(0, n, TURN):
        for call, samples in ((op, ours), (beside, theirs)):
            samples.extend(await _sequential(min(TURN, n - done), call))
    return ours, theirs


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux `/proc/<pid>/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Figures:
    """Measures one operation: p50/p99 at one in flight, throughput and server CPU per request.

    With `beside` (a request to the limit server, process `beside_pid`), each one-in-flight sample
    takes turns with the limit's (`_alternating`), and the limit's throughput and CPU per request
    are measured again right before the operation's, so every ratio divides two figures taken
    within seconds of each other (on a shared machine the speed of a core can change from one
    minute to the next, and a limit measured once at the start would move every ratio with it).
    """

    def __init__(
        self,
        pid: int,
        n: int,
        concurrency: int,
        beside: Callable[[], Awaitable[Any]] | None = None,
        beside_pid: int | None = None,
    ) -> None:
        self.pid = pid
        self.n = n
        self.concurrency = concurrency
        self.beside = beside
        self.beside_pid = beside_pid
        self.out: dict[str, float] = {}

    async def run(self, name: str, op: Callable[[], Awaitable[Any]]) -> None:
        if self.beside is None:
            samples = await _sequential(self.n, op)
        else:
            samples, limit = await _alternating(self.n, op, self.beside)
            self.out[f"{name}_limit_p50_ms"] = _pct(limit, 0.5)
        self.out[f"{name}_p50_ms"] = _pct(samples, 0.5)
        self.out[f"{name}_p99_ms"] = _pct(samples, 0.99)
        if self.beside is not None and self.beside_pid is not None:
            rate, cpu_ms = await self._throughput(self.beside_pid, self.beside)
            self.out[f"{name}_limit_per_s"], self.out[f"{name}_limit_cpu_ms"] = rate, cpu_ms
        self.out[f"{name}_per_s"], self.out[f"{name}_cpu_ms"] = await self._throughput(self.pid, op)

    async def _throughput(self, pid: int, op: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
        """Requests per second over 2n requests, and the server's CPU ms per request meanwhile."""
        before = cpu_seconds(pid)
        rate = await _throughput(self.n * 2, self.concurrency, op)
        return rate, (cpu_seconds(pid) - before) * 1000.0 / (self.n * 2)


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


@asynccontextmanager
async def wire_to(url: str) -> AsyncIterator[Wire]:
    """A `Wire` on a `RawPool` to `url` (one connection per request in flight)."""
    pool = RawPool(url)
    try:
        yield Wire(pool)
    finally:
        await pool.aclose()


async def measure_limit(url: str, pid: int, *, n: int, concurrency: int) -> dict[str, float]:
    """The bare-ASGI limit server: `tasks/get`-shaped requests answered with one `json.dumps`."""
    async with wire_to(url) as wire:
        for _ in range(200):
            await wire.get("t")
        figures = Figures(pid, n, concurrency)
        await figures.run("limit", lambda: wire.get("t"))
    return figures.out


async def measure(
    url: str,
    pid: int,
    *,
    n: int,
    concurrency: int,
    limit_url: str | None = None,
    limit_pid: int | None = None,
) -> dict[str, float]:
    """Run every measurement against the mcptasks server at `url` (process `pid`); with
    `limit_url` (process `limit_pid`), one-in-flight samples take turns with requests to the
    limit server there, and its throughput is measured again before each operation's."""
    async with wire_to(url) as wire, wire_to(limit_url or url) as limit:
        for _ in range(200):  # warm-up
            await wire.plain_call()
            await wire.create()
            if limit_url is not None:
                await limit.get("t")
        beside = (lambda: limit.get("t")) if limit_url is not None else None
        figures = Figures(pid, n, concurrency, beside, limit_pid)
        await figures.run("plain", wire.plain_call)
        await figures.run("create", lambda: wire.create("task_park"))
        latency = [await _create_to_result(wire, "task_noop") for _ in range(n // 2)]
        task_latency = [await _create_to_result(wire, "task_brief") for _ in range(n // 2)]
        done = await wire.create()
        while (await wire.get(done["taskId"]))["status"] != "completed":
            pass
        task_id = done["taskId"]
        await figures.run("get", lambda: wire.get(task_id))
        await figures.run("update", lambda: wire.update(task_id))
        await figures.run("cancel", lambda: wire.cancel(task_id))
    return {
        **figures.out,
        "create_to_result_p50_ms": _pct(latency, 0.5),
        "create_to_result_p95_ms": _pct(latency, 0.95),
        "brief_task_to_result_p50_ms": _pct(task_latency, 0.5),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the benchmark server did not start")


def _pinned(command: list[str], core: int | None) -> list[str]:
    return ["taskset", "-c", str(core), *command] if core is not None else command


def start_server(
    store: str,
    log_level: str = "info",
    *,
    fast_path: bool = True,
    core: int | None = None,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """`mcptasks serve benchmarks/http_app.py` on a free port (pinned to `core` if given)."""
    port = _free_port()
    command = [sys.executable, "-m", "mcptasks", "serve", str(ROOT / "benchmarks" / "http_app.py")]
    command += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--store", store]
    command += ["--log-level", log_level, "--fast-path", "on" if fast_path else "off"]
    process = subprocess.Popen(
        _pinned(command, core),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    _wait_listening(process, port)
    return process, f"http://127.0.0.1:{port}/mcp"


def start_limit_server(core: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """The bare-ASGI limit server (`limit_app.py`) under the same uvicorn, on a free port."""
    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "benchmarks"), "limit_app:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    process = subprocess.Popen(_pinned(command, core), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(process, port)
    return process, f"http://127.0.0.1:{port}/mcp"


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=10)


def _cores(pin: bool) -> tuple[int | None, int | None]:
    """(server core, client core): the first two CPUs this process may use, or no pinning."""
    usable = sorted(os.sched_getaffinity(0)) if pin and shutil.which("taskset") else []
    if len(usable) < 2:
        return None, None
    return usable[0], usable[1]


MODES = {
    "on": (True, True),
    "off": (False, True),
    "on-nofreeze": (True, False),
}
"""Server variants: (fast path, gc.freeze() after start-up as `mcptasks serve` does)."""


def _gc_summary(path: Path) -> dict[str, float]:
    """The server's garbage-collector pauses while it was measured (see `http_app.py`)."""
    pauses = json.loads(path.read_text())["pauses"] if path.exists() else []
    durations = [duration for _, duration in pauses]
    full = [duration for generation, duration in pauses if generation == 2]
    return {
        "gc_collections": float(len(durations)),
        "gc_full_collections": float(len(full)),
        "gc_total_ms": sum(durations) * 1000.0,
        "gc_max_ms": max(durations, default=0.0) * 1000.0,
        "gc_full_max_ms": max(full, default=0.0) * 1000.0,
    }


def run_mode(
    args: argparse.Namespace, n: int, mode: str, server_core: int | None, limit: tuple[str, int]
) -> dict[str, float]:
    """Start the server variant `mode`, measure it (beside the limit server at `limit`: its URL
    and process id), stop it; its figures with its GC pauses."""
    fast_path, freeze = MODES[mode]
    with tempfile.TemporaryDirectory() as scratch:
        stats = Path(scratch) / "gc.json"
        env = {"MCPTASKS_BENCH_GC_STATS": str(stats), "MCPTASKS_BENCH_GC_FREEZE": "1" if freeze else "0"}
        process, url = start_server(
            args.store, args.log_level, fast_path=fast_path, core=server_core, env=env
        )
        try:
            figures = anyio.run(
                partial(
                    measure,
                    url,
                    process.pid,
                    n=n,
                    concurrency=args.concurrency,
                    limit_url=limit[0],
                    limit_pid=limit[1],
                )
            )
        finally:
            _stop(process)
        return {**figures, **_gc_summary(stats)}


def run_all(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """The limit server, then each server variant of `--modes`, one after the other (the limit
    server stays up, idle but for the one-in-flight samples that take turns with theirs)."""
    server_core, client_core = _cores(args.pin)
    if client_core is not None:
        os.sched_setaffinity(0, {client_core})
    process, url = start_limit_server(server_core)
    try:
        limit = anyio.run(partial(measure_limit, url, process.pid, n=n, concurrency=args.concurrency))
        figures: dict[str, Any] = {"limit": limit, "pinned": server_core is not None, "modes": {}}
        for mode in args.modes.split(","):
            figures["modes"][mode] = run_mode(args, n, mode, server_core, (url, process.pid))
    finally:
        _stop(process)
    return figures


_OPS = [
    ("limit (bare ASGI + json.dumps)", "limit"),
    ("plain tools/call", "plain"),
    ("task create (durable)", "create"),
    ("tasks/get", "get"),
    ("tasks/update", "update"),
    ("tasks/cancel", "cancel"),
]


def _print(figures: dict[str, Any]) -> None:
    limit = figures["limit"]
    header = f"{'':32} {'req/s':>8} {'x limit':>8} {'p50 ms':>8} {'p50 x':>7} {'p99 ms':>8}"
    print(f"{header} {'cpu ms/req':>10} {'cpu x':>6}")
    for mode, measured in figures["modes"].items():
        print(f"-- fast path {mode}")
        row = {**limit, **measured}
        for label, key in _OPS:
            rate, p50, cpu = row[f"{key}_per_s"], row[f"{key}_p50_ms"], row[f"{key}_cpu_ms"]
            # each ratio to the limit's figure taken beside this operation's (the first one if none)
            limit_p50 = row.get(f"{key}_limit_p50_ms", limit["limit_p50_ms"])
            limit_rate = row.get(f"{key}_limit_per_s", limit["limit_per_s"])
            limit_cpu = row.get(f"{key}_limit_cpu_ms", limit["limit_cpu_ms"])
            print(
                f"{label:32} {rate:8.0f} {rate / limit_rate:8.2f} {p50:8.2f} {p50 / limit_p50:7.2f}"
                f" {row[f'{key}_p99_ms']:8.2f} {cpu:10.3f} {cpu / limit_cpu:6.2f}"
            )
        print(f"{'zero-work create -> result p50':32} {row['create_to_result_p50_ms']:8.2f} ms (inline)")
        print(f"{'1 ms task -> polled result p50':32} {row['brief_task_to_result_p50_ms']:8.2f} ms")
        print(
            f"{'GC pauses':32} {row['gc_collections']:8.0f} collections ({row['gc_full_collections']:.0f} full),"
            f" {row['gc_total_ms']:.1f} ms in all, longest {row['gc_max_ms']:.2f} ms"
        )


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
    parser.add_argument("--n", type=int, help="samples per figure (default 2000; 200 with --quick)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--modes",
        default="on,off,on-nofreeze",
        help="server variants, comma-separated: on / off (the fast path), on-nofreeze (without gc.freeze())",
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin server and client")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    n = args.n or (200 if args.quick else 2000)
    load_before = os.getloadavg()[0]
    figures = run_all(args, n)
    print(
        f"store={args.store} n={n} concurrency={args.concurrency} cpus={os.cpu_count()}"
        f" pinned={figures['pinned']} load={load_before:.2f}->{os.getloadavg()[0]:.2f}"
    )
    _print(figures)
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, "load": os.getloadavg(), **figures}, indent=2))


if __name__ == "__main__":
    main()
