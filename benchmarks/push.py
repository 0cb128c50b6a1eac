"""Push (`subscriptions/listen` + `notifications/tasks`) against polling, over real Streamable HTTP.

    python benchmarks/push.py [--backends memory,redis,postgres] [--quick] [--json out.json]

Servers are `mcptasks serve benchmarks/http_app.py --transport http --store URL` processes on free
127.0.0.1 ports, driven by raw JSON-RPC (`Wire` from `benchmarks/http.py`) and a raw SSE reader.

- latency: a `ticker` task sets its status every 20 ms, each status carrying the wall-clock time
  the body set it; a listen stream reads each `notifications/tasks` and records receipt time
  minus that time. "one server": the listener is on the server running the body. "across
  replicas" (Redis, PostgreSQL): the task is created on replica A (its body runs there) and the
  listener is on replica B, so every change travels through the store's pub/sub.
- cpu: 1,000 `ticker` tasks that change status every `--change-every` seconds (default 5) on one
  server (memory store); for `--window` seconds (default 10) they are followed by push (streams
  of 100 task ids each) or by polling every task with `tasks/get` once a second. The figure is the
  server process's CPU time (user + system) over the window, next to the same window with nobody
  following (the bodies' own cost). When the client (on the same machine) cannot issue one poll
  per task per second, polling's cost is extrapolated: measured server CPU per poll times the
  polls due. Target: push costs <= 20 % of polling.

- streams (`--streams 1000,10000`, memory store): that many idle listen streams (raw sockets, one
  connection each, all on one task) are opened on a fresh server; the figure is the server's RSS
  growth per open stream, the RSS once they closed, and after a second flood of the same size
  closed again (memory returned, or at least flat across floods). With the largest flood open,
  the task sets its status a few times: the fan-out latency of one change to every listener
  (receipt time minus the time the body set it; p50, p99, max over all listeners; a listener's
  first state, the task as it was when its stream opened, is not counted: opening 10,000 streams
  can take longer than the first change, whose state a late stream then gets seconds later). The benchmark
  raises its own file-descriptor limit (`resource.setrlimit`, inherited by the server it starts).

Targets (issue): push latency p50 <= 5 ms on one server, <= 25 ms across replicas; an idle listen
stream <= 16 KB of RSS; fan-out to 10,000 listeners p99 <= 250 ms.
"""

from __future__ import annotations

import sys

# Run as `python benchmarks/push.py`, this directory comes first on sys.path and `http.py` here
# would shadow the standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import importlib.util
import json
import platform
import resource
import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx2

BENCH = Path(__file__).resolve().parent


def _load_module(name: str, file: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stores = _load_module("mcptasks_bench_stores", "stores.py")
hb = stores.hb

LATENCY_TARGETS_MS = {"one server": 5.0, "across replicas": 25.0}
STREAM_RSS_TARGET_KB = 16.0
FANOUT_P99_TARGET_MS = 250.0
CPU_TARGET = 0.20


async def _listen_frames(url: str, task_ids: list[str], on_task: Any, ready: anyio.Event) -> None:
    """Open a listen stream for `task_ids`; call `on_task(params, received_at)` per notification."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": task_ids}, "_meta": hb._meta(True)},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": hb.VERSION,
        "Mcp-Method": "subscriptions/listen",
    }
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as client,
        client.stream("POST", url, json=body, headers=headers) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            received = time.time()
            message = json.loads(line[5:])
            if message.get("method") == "notifications/subscriptions/acknowledged":
                ready.set()
            elif message.get("method") == "notifications/tasks":
                on_task(message["params"], received)
            elif "result" in message or "error" in message:
                return


async def latency(create_url: str, listen_url: str, *, ticks: int) -> list[float]:
    """Milliseconds from a status change in the body to its notification on the listener."""
    samples: list[float] = []
    async with hb.wire_to(create_url) as wire:
        # start the body after the listener is up: a long first sleep, then ticks every 20 ms
        warmup = await wire.request(
            "tools/call",
            {"name": "ticker", "arguments": {"count": 1, "interval": 0.5}, "_meta": hb._meta(True)},
            "ticker",
        )
        await wire.get(warmup["taskId"])
        created = await wire.request(
            "tools/call",
            {"name": "ticker", "arguments": {"count": ticks, "interval": 0.02}, "_meta": hb._meta(True)},
            "ticker",
        )
    seen: set[int] = set()

    def on_task(params: dict[str, Any], received: float) -> None:
        message = params.get("statusMessage") or ""
        if message.startswith("tick "):
            _, index, sent = message.split()
            if int(index) not in seen:
                seen.add(int(index))
                samples.append((received - float(sent)) * 1000.0)

    ready = anyio.Event()
    with anyio.fail_after(60 + ticks * 0.1):
        await _listen_frames(listen_url, [created["taskId"]], on_task, ready)
    return samples[1:]  # the first may predate the stream (sent as the current state)


async def _start_tickers(wire: Any, tasks: int, count: int, change_every: float) -> list[str]:
    """Start `tasks` ticker tasks that change status every `change_every` s; return their ids."""
    ids: list[str] = []

    async def create(_: int) -> None:
        created = await wire.request(
            "tools/call",
            {
                "name": "ticker",
                "arguments": {"count": count, "interval": change_every},
                "_meta": hb._meta(True),
            },
            "ticker",
        )
        ids.append(created["taskId"])

    async with anyio.create_task_group() as group:
        for i in range(tasks):
            group.start_soon(create, i)
    return ids


class _Followers:
    """The ways of following the tasks `ids`: nobody, push streams, 1 s polling (counting each)."""

    def __init__(self, url: str, wire: Any, ids: list[str]) -> None:
        self.url = url
        self.wire = wire
        self.ids = ids
        self.received = 0
        self.polls = 0

    async def nobody(self) -> None:
        await anyio.sleep_forever()

    async def push(self) -> None:
        def on_task(params: dict[str, Any], at: float) -> None:
            self.received += 1

        async with anyio.create_task_group() as group:
            for start in range(0, len(self.ids), 100):
                group.start_soon(
                    _listen_frames, self.url, self.ids[start : start + 100], on_task, anyio.Event()
                )

    async def poll(self) -> None:
        semaphore = anyio.Semaphore(32)

        async def one(task_id: str) -> None:
            async with semaphore:
                await self.wire.get(task_id)
                self.polls += 1

        while True:
            started = anyio.current_time()
            async with anyio.create_task_group() as group:
                for task_id in self.ids:
                    group.start_soon(one, task_id)
            await anyio.sleep(max(0.0, 1.0 - (anyio.current_time() - started)))


async def cpu(url: str, pid: int, *, tasks: int, change_every: float, window: float) -> dict[str, float]:
    """Server CPU seconds over `window` for `tasks` running tasks: unfollowed, pushed, polled."""
    count = int((window * 3 + 30) / change_every) + 2
    async with hb.wire_to(url) as wire:
        ids = await _start_tickers(wire, tasks, count, change_every)
        await anyio.sleep(change_every)  # let creation settle before measuring

        async def measured(follow: Any) -> float:
            before = stores._cpu_seconds(pid)
            with anyio.move_on_after(window):
                await follow()
            return float(stores._cpu_seconds(pid) - before)

        followers = _Followers(url, wire, ids)
        idle = await measured(followers.nobody)
        pushed = await measured(followers.push)
        polled = await measured(followers.poll)
    polls = followers.polls
    # The client shares the machine: it may issue fewer than one poll per task per second. The
    # server's cost of full-rate polling is then its measured cost per poll times the polls due.
    due = tasks * window
    per_poll = (polled - idle) / polls if polls else float("nan")
    full_rate = idle + per_poll * due
    return {
        "tasks": tasks,
        "window_s": window,
        "change_every_s": change_every,
        "cpu_idle_s": idle,
        "cpu_push_s": pushed,
        "cpu_poll_s": polled,
        "notifications": followers.received,
        "polls": polls,
        "polls_due": due,
        "cpu_ms_per_poll": per_poll * 1000.0,
        "cpu_poll_full_rate_s": full_rate,
        "push_over_poll": pushed / polled if polled else float("nan"),
        "push_over_poll_full_rate": pushed / full_rate if full_rate else float("nan"),
    }


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _raise_fd_limit(needed: int) -> int:
    """Raise this process's open-file limit (children inherit it) towards `needed`; the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class _RawListeners:
    """Many listen streams on one task, each a bare socket (a client as cheap as possible)."""

    def __init__(self, port: int, task_id: str) -> None:
        self.port = port
        self.task_id = task_id
        self.latencies: dict[int, list[float]] = {}
        self.acked = 0
        self.refused = 0

    def _request(self, request_id: int) -> bytes:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "subscriptions/listen",
                "params": {"notifications": {"taskIds": [self.task_id]}, "_meta": hb._meta(True)},
            }
        ).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {hb.VERSION}\r\n"
            f"Mcp-Method: subscriptions/listen\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def one(self, request_id: int, opened: Any) -> None:
        stream = await anyio.connect_tcp("127.0.0.1", self.port)
        async with stream:
            await stream.send(self._request(request_id))
            buffer = b""
            counted = False
            while True:
                try:
                    chunk = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                received = time.time()
                buffer += chunk
                while b"\r\n\r\n" in buffer or b"\n\n" in buffer:
                    cut = buffer.find(b"\r\n\r\n")
                    frame, buffer = (
                        (buffer[:cut], buffer[cut + 4 :]) if cut >= 0 else buffer.split(b"\n\n", 1)
                    )
                    if b'"error"' in frame and not counted:
                        self.refused += 1
                        opened()
                        return
                    # the first state is the task as it was when the stream opened (a change the
                    # ticker made while the flood was still opening): not a change's fan-out
                    current_state = b"notifications/tasks" in frame and not counted
                    if current_state:
                        counted = True
                        self.acked += 1
                        opened()
                    at = frame.find(b"tick ")
                    if at >= 0 and not current_state:
                        _, index, sent = frame[at:].split(b'"', 1)[0].decode().split()
                        self.latencies.setdefault(int(index), []).append((received - float(sent)) * 1000.0)


async def _flood(port: int, task_id: str, count: int, hold: Any) -> _RawListeners:
    """Open `count` listen streams; once all answered, await `hold(listeners)`; then close them."""
    listeners = _RawListeners(port, task_id)
    answered = anyio.Event()
    done = 0

    def opened() -> None:
        nonlocal done
        done += 1
        if done == count:
            answered.set()

    async with anyio.create_task_group() as group:
        for i in range(count):
            group.start_soon(listeners.one, i + 100, opened)
            if i % 200 == 199:
                await anyio.sleep(0.05)  # let the server keep up with the accepts
        with anyio.fail_after(120 + count / 50):
            await answered.wait()
        await hold(listeners)
        group.cancel_scope.cancel()
    return listeners


async def streams(url: str, pid: int, sizes: list[int]) -> dict[str, Any]:
    """RSS per idle listen stream at each of `sizes`, after closing, after a second flood; the
    fan-out latency of one status change to the largest flood."""
    port = int(url.split(":")[2].split("/")[0])
    largest = max(sizes)
    ticks = 4
    pool = hb.RawPool(url)
    try:
        idle = await hb.Wire(pool).request(
            "tools/call",
            {"name": "ticker", "arguments": {"count": 1, "interval": 3600}, "_meta": hb._meta(True)},
            "ticker",
        )
    finally:
        await pool.aclose()
    await anyio.sleep(1.0)
    figures: dict[str, Any] = {"baseline_rss_kb": _rss_kb(pid), "floods": []}

    for size in sizes:
        for round_ in (1, 2):
            sample: dict[str, Any] = {"streams": size, "round": round_}

            async def measure(listeners: _RawListeners, sample: dict[str, Any] = sample) -> None:
                await anyio.sleep(2.0)
                sample["open_rss_kb"] = _rss_kb(pid)
                sample["acked"], sample["refused"] = listeners.acked, listeners.refused

            before = _rss_kb(pid)
            await _flood(port, idle["taskId"], size, measure)
            await anyio.sleep(3.0)
            sample["before_rss_kb"] = before
            sample["closed_rss_kb"] = _rss_kb(pid)
            sample["kb_per_stream"] = (sample["open_rss_kb"] - before) / size
            figures["floods"].append(sample)
            print(
                f"  {size} streams (flood {round_}): {sample['acked']} open, RSS {before / 1024:.1f} -> "
                f"{sample['open_rss_kb'] / 1024:.1f} MB ({sample['kb_per_stream']:.1f} KB each), "
                f"{sample['closed_rss_kb'] / 1024:.1f} MB after closing",
                flush=True,
            )

    pool = hb.RawPool(url)
    try:
        tick = await hb.Wire(pool).request(
            "tools/call",
            {"name": "ticker", "arguments": {"count": ticks, "interval": 4.0}, "_meta": hb._meta(True)},
            "ticker",
        )
    finally:
        await pool.aclose()

    async def wait_ticks(listeners: _RawListeners) -> None:
        await anyio.sleep(4.0 * ticks + 5.0)  # every change delivered (or late: then counted late)

    fan = await _flood(port, tick["taskId"], largest, wait_ticks)
    samples = [ms for index, values in fan.latencies.items() if index > 0 for ms in values]
    if samples:
        ordered = sorted(samples)
        figures["fanout"] = {
            "listeners": fan.acked,
            "changes": ticks - 1,
            "n": len(ordered),
            "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[int(0.99 * (len(ordered) - 1))],
            "max_ms": ordered[-1],
        }
    figures["final_rss_kb"] = _rss_kb(pid)
    return figures


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered),
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))],
        "max_ms": ordered[-1],
    }


def _measure_backend(
    backend: Any, args: argparse.Namespace, results: dict[str, Any], ticks: int, tasks: int, window: float
) -> None:
    """Push latency on one server and across two replicas (CPU on memory only) into `results`."""
    name = backend.name
    reason = backend.unavailable()
    if reason:
        print(f"skipping {name}: {reason}", flush=True)
        return
    a = backend.start()
    b = backend.start() if name != "memory" else None
    try:
        a.wait_ready()
        if b is not None:
            b.wait_ready()
        if not args.streams_only:
            print(f"latency on {name} ...", flush=True)
            one = anyio.run(partial(latency, a.url, a.url, ticks=ticks))
            results["latency"][f"{name}, one server"] = _summary(one)
        if b is not None and not args.streams_only:
            across = anyio.run(partial(latency, a.url, b.url, ticks=ticks))
            results["latency"][f"{name}, across replicas"] = _summary(across)
        if name == "memory" and args.streams:
            sizes = [int(n) for n in args.streams.split(",")]
            print(f"idle listen streams on {name}: {sizes} ...", flush=True)
            results["streams"] = anyio.run(partial(streams, a.url, a.process.pid, sizes))
        if name == "memory" and not args.streams_only:
            print(f"cpu on {name} ({tasks} tasks) ...", flush=True)
            following = partial(
                cpu, a.url, a.process.pid, tasks=tasks, change_every=args.change_every, window=window
            )
            results["cpu"] = anyio.run(following)
    finally:
        a.stop()
        if b is not None:
            b.stop()
        backend.clean()


def _print_streams(figures: dict[str, Any] | None) -> None:
    if figures is None:
        return
    print(f"\nidle listen streams (baseline RSS {figures['baseline_rss_kb'] / 1024:.1f} MB):")
    for sample in figures["floods"]:
        verdict = "ok" if sample["kb_per_stream"] <= STREAM_RSS_TARGET_KB else "MISSED"
        print(
            f"  {sample['streams']:6d} streams, flood {sample['round']}: {sample['kb_per_stream']:5.1f} KB "
            f"per open stream (<= {STREAM_RSS_TARGET_KB:g}: {verdict}); RSS "
            f"{sample['before_rss_kb'] / 1024:.1f} -> {sample['open_rss_kb'] / 1024:.1f} -> "
            f"{sample['closed_rss_kb'] / 1024:.1f} MB (before, open, closed)"
        )
    fan = figures.get("fanout")
    if fan:
        verdict = "ok" if fan["p99_ms"] <= FANOUT_P99_TARGET_MS else "MISSED"
        print(
            f"  fan-out of one change to {fan['listeners']} listeners ({fan['changes']} changes, "
            f"{fan['n']} deliveries): p50 {fan['p50_ms']:.0f} ms, p99 {fan['p99_ms']:.0f} ms, "
            f"max {fan['max_ms']:.0f} ms (p99 <= {FANOUT_P99_TARGET_MS:g} ms: {verdict})"
        )
    print(f"  RSS at the end {figures['final_rss_kb'] / 1024:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends", default="memory,redis,postgres", help="comma-separated: memory, redis, postgres"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--ticks", type=int, help="status changes per latency run (default 300)")
    parser.add_argument("--tasks", type=int, help="tasks in the CPU run (default 1000)")
    parser.add_argument(
        "--change-every", type=float, default=5.0, help="seconds between a task's status changes"
    )
    parser.add_argument("--window", type=float, help="seconds of each CPU measurement (default 10)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="Redis URL (keys get a prefix)")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--streams", default="", help="comma-separated flood sizes of idle listen streams, e.g. 1000,10000"
    )
    parser.add_argument("--streams-only", action="store_true", help="only the --streams figures")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.streams:
        largest = max(int(n) for n in args.streams.split(","))
        limit = _raise_fd_limit(largest + 1024)
        if limit < largest + 256:
            parser.error(f"--streams {largest} needs {largest + 256} open files; the hard limit is {limit}")
    args.fastmcp_python = None
    ticks = args.ticks or (60 if args.quick else 300)
    tasks = args.tasks or (100 if args.quick else 1000)
    window = args.window or (3.0 if args.quick else 10.0)
    scratch = Path(tempfile.mkdtemp(prefix="mcptasks-push-"))
    results: dict[str, Any] = {"latency": {}, "cpu": None, "streams": None}
    print(
        f"ticks={ticks} tasks={tasks} window={window}s cpus={__import__('os').cpu_count()} "
        f"python={platform.python_version()} load={stores._load():.2f}",
        flush=True,
    )
    try:
        for name in [n.strip() for n in args.backends.split(",") if n.strip()]:
            _measure_backend(stores.Backend(name, args, scratch), args, results, ticks, tasks, window)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print()
    print(f"{'push latency':32} {'n':>5} {'p50':>8} {'p95':>8} {'max':>8}  target")
    for label, figures in results["latency"].items():
        target = LATENCY_TARGETS_MS["across replicas" if "across" in label else "one server"]
        verdict = "ok" if figures["p50_ms"] <= target else "MISSED"
        print(
            f"{label:32} {figures['n']:5d} {figures['p50_ms']:6.2f}ms {figures['p95_ms']:6.2f}ms "
            f"{figures['max_ms']:6.2f}ms  p50 <= {target:g} ms: {verdict}"
        )
    figures = results["cpu"]
    if figures is not None:
        full = figures["polls"] >= figures["polls_due"] * 0.95
        ratio = figures["push_over_poll"] if full else figures["push_over_poll_full_rate"]
        verdict = "ok" if ratio <= CPU_TARGET else "MISSED"
        print(
            f"\nserver CPU over {figures['window_s']:g} s, {figures['tasks']} tasks changing every "
            f"{figures['change_every_s']:g} s: nobody following {figures['cpu_idle_s']:.2f} s, "
            f"push {figures['cpu_push_s']:.2f} s ({figures['notifications']} notifications), "
            f"1 s polling {figures['cpu_poll_s']:.2f} s ({figures['polls']} of {figures['polls_due']:.0f} "
            f"polls due, {figures['cpu_ms_per_poll']:.2f} ms each)"
        )
        if not full:
            print(
                f"the client fell short of 1 poll/s per task; at the full rate polling would cost "
                f"{figures['cpu_poll_full_rate_s']:.2f} s (measured cost per poll x polls due)"
            )
        print(f"push / polling = {ratio:.2f} (<= {CPU_TARGET:g}: {verdict})")
    _print_streams(results["streams"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
