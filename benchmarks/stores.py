"""Compare the task stores over real Streamable HTTP, and mcptasks on Redis with fastmcp-tasks on Redis.

    python benchmarks/stores.py [--backends memory,sqlite,redis,postgres,fastmcp-redis] [--quick]
                                [--fastmcp-python PATH] [--json out.json]

For each mcptasks backend, starts `mcptasks serve benchmarks/http_app.py --transport http --store
URL` on a free 127.0.0.1 port; for `fastmcp-redis`, starts `benchmarks/fastmcp_tasks_app.py` (a
`FastMCP` server with fastmcp-tasks' `TasksExtension` on Redis) with the interpreter given by
`--fastmcp-python` (fastmcp-tasks lives in its own virtualenv). Every server is driven by the same
raw JSON-RPC client (`Wire` from `benchmarks/http.py`, 2026-07-28 envelope and routing headers)
and measured the same way:

- create/s: `tools/call` of `task_park` (a task tool whose body sleeps 200 ms, so every call is
  answered with a task, never inline) with `--concurrency` requests in flight; median of
  `--repeats` runs;
- create p50: the same call, sequential on one keep-alive connection;
- tasks/get/s: `tasks/get` (with `Mcp-Name: <taskId>`) on one completed task, `--concurrency` in
  flight; median of `--repeats` runs;
- plain/s: an ordinary `tools/call` (no task) with `--concurrency` in flight: the HTTP stack's
  ceiling on that server, for reading the other figures;
- cpu/create, cpu/get: the server process's CPU time (user + system, from /proc) during the
  create/s and tasks/get/s runs, divided by the requests (median of the runs). It includes task
  bodies and workers running in that process but not Redis or PostgreSQL, and it moves far less
  than the wall-clock rates when the machine is busy.

Target (issue): mcptasks on Redis creates >= 2.5x as many tasks per second as fastmcp-tasks on Redis.
Redis keys go to database 13 under a per-run prefix and PostgreSQL tables to a fresh schema; both
are removed at the end.
"""

from __future__ import annotations

import sys

# Run as `python benchmarks/stores.py`, this directory comes first on sys.path and `http.py` here
# would shadow the standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
ALL_BACKENDS = ("memory", "sqlite", "redis", "postgres", "fastmcp-redis")
TARGET_RATIO = 2.5


def _load_http_bench() -> ModuleType:
    """`benchmarks/http.py` as a module (under another name: `http` is the standard library's)."""
    spec = importlib.util.spec_from_file_location("mcptasks_bench_http", BENCH / "http.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hb = _load_http_bench()


def _load() -> float:
    return os.getloadavg()[0]


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of process `pid` so far (Linux /proc; 0 elsewhere or without a pid)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A benchmark server in a child process, its output kept in a log file for error reports."""

    def __init__(self, command: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.log = log
        self._file = log.open("wb")
        self.process = subprocess.Popen(
            command, stdout=self._file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self._tail()}")
            try:
                with httpx2.Client(timeout=2) as client:
                    client.get(self.url)
                return
            except httpx2.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"the server did not start within {timeout} s:\n{self._tail()}")

    def _tail(self) -> str:
        self._file.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._file.close()


def _call(wire: Any, tool: str, opt_in: bool) -> Callable[[], Any]:
    params = {"name": tool, "arguments": {}, "_meta": hb._meta(opt_in)}

    async def call() -> dict[str, Any]:
        result: dict[str, Any] = await wire.request("tools/call", params, tool)
        return result

    return call


async def _end_to_end(wire: Any, tool: str) -> None:
    """An opted-in `tools/call` of a zero-work task tool until its completed result is in hand:
    inline when the server answers so, else through `tasks/get` polled back to back."""
    created = await wire.create(tool)
    if created.get("resultType") != "complete":
        while (await wire.get(created["taskId"]))["status"] != "completed":
            pass


async def measure(
    url: str,
    *,
    n: int,
    concurrency: int,
    repeats: int,
    pid: int | None = None,
    create_tool: str = "task_park",
    reference_url: str | None = None,
) -> dict[str, Any]:
    """Every figure against the server at `url` (the same for mcptasks and fastmcp-tasks); `pid`, the
    server's process, for its CPU time per request. With `reference_url` (an mcptasks server on the
    memory store), the zero-work end-to-end samples take turns with samples against it."""
    cpu: dict[str, list[float]] = {"create": [], "get": []}

    async def timed(kind: str, op: Callable[[], Any]) -> float:
        before = _cpu_seconds(pid)
        rate = await hb._throughput(n * 2, concurrency, op)
        cpu[kind].append((_cpu_seconds(pid) - before) / (n * 2) * 1000.0)
        return float(rate)

    async with hb.wire_to(url) as wire, hb.wire_to(reference_url or url) as reference:
        plain = _call(wire, "plain_noop", False)
        call_sleep = _call(wire, create_tool, True)
        inline = 0

        async def create() -> dict[str, Any]:
            nonlocal inline
            result: dict[str, Any] = await call_sleep()
            if "taskId" not in result:
                inline += 1
            return result

        for _ in range(100):  # warm-up (connections, caches, the store's prepared statements)
            await plain()
            await create()
        plain_seq = await hb._sequential(n // 2, plain)
        create_seq = await hb._sequential(n, create)
        plain_tput = [await hb._throughput(n * 2, concurrency, plain) for _ in range(repeats)]
        create_tput = [await timed("create", create) for _ in range(repeats)]
        if inline:
            raise RuntimeError(f"{inline} {create_tool} calls were answered inline, not with a task")
        done = await create()
        task_id = done["taskId"]
        deadline = time.monotonic() + 60
        while (await wire.get(task_id))["status"] != "completed":
            if time.monotonic() > deadline:
                raise RuntimeError(f"task {task_id} did not complete within 60 s")
            await anyio.sleep(0.01)
        get_tput = [await timed("get", lambda: wire.get(task_id)) for _ in range(repeats)]
        zero_work_here = partial(_end_to_end, wire, "task_noop")
        beside: list[float] = []
        if reference_url is None:
            zero_work = await hb._sequential(n // 2, zero_work_here)
        else:  # in turns with the reference, as `http.py` takes turns with its limit server
            zero_work, beside = await hb._alternating(
                n // 2, zero_work_here, partial(_end_to_end, reference, "task_noop")
            )
    return {
        "e2e_p50_ms": hb._pct(zero_work, 0.5),
        "e2e_p99_ms": hb._pct(zero_work, 0.99),
        **({"e2e_memory_p50_ms": hb._pct(beside, 0.5)} if beside else {}),
        "create_per_s": statistics.median(create_tput),
        "create_p50_ms": hb._pct(create_seq, 0.5),
        "create_p99_ms": hb._pct(create_seq, 0.99),
        "tasks_get_per_s": statistics.median(get_tput),
        "plain_per_s": statistics.median(plain_tput),
        "server_cpu_ms_per_create": statistics.median(cpu["create"]),
        "server_cpu_ms_per_get": statistics.median(cpu["get"]),
        "plain_p50_ms": hb._pct(plain_seq, 0.5),
        "runs": {
            "create_per_s": create_tput,
            "tasks_get_per_s": get_tput,
            "plain_per_s": plain_tput,
            "server_cpu_ms_per_create": cpu["create"],
            "server_cpu_ms_per_get": cpu["get"],
        },
    }


# --- backends -----------------------------------------------------------------------------------


def _check_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url, socket_connect_timeout=2).ping()


def _clean_redis(url: str, prefix: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    keys = [*client.scan_iter(match=f"{prefix}:*", count=1000), *client.scan_iter(match=prefix)]
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])
    return len(keys)


async def _postgres(url: str, statement: str | None = None) -> None:
    import asyncpg

    connection = await asyncpg.connect(url, timeout=5)
    try:
        if statement:
            await connection.execute(statement)
    finally:
        await connection.close()


class Backend:
    def __init__(self, name: str, args: argparse.Namespace, scratch: Path) -> None:
        self.name = name
        self.args = args
        self.scratch = scratch
        self.tag = f"{os.getpid()}_{int(time.time())}"
        self.redis_prefix = f"mcptasks-bench-{self.tag}"
        self.docket_name = f"fastmcp-bench-{self.tag}"
        self.pg_schema = f"mcptasks_bench_{self.tag}"

    def store_url(self) -> str:
        if self.name == "memory":
            return "memory://"
        if self.name == "sqlite":
            return f"sqlite:///{self.scratch / 'bench.db'}"
        if self.name == "redis":
            return f"{self.args.redis}?prefix={self.redis_prefix}"
        if self.name == "postgres":
            return f"{self.args.postgres}?schema={self.pg_schema}"
        raise ValueError(self.name)

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (None: it can)."""
        try:
            if self.name in ("redis", "fastmcp-redis"):
                _check_redis(self.args.redis)
            if self.name == "postgres":
                anyio.run(_postgres, self.args.postgres)
        except Exception as exc:
            return f"cannot connect: {exc!r}"
        if self.name == "fastmcp-redis":
            python = self.args.fastmcp_python
            if not python:
                return "no --fastmcp-python given (the interpreter of a venv with fastmcp[tasks])"
            check = subprocess.run(
                [python, "-c", "import fastmcp, fastmcp_tasks; print(fastmcp_tasks.__version__)"],
                capture_output=True,
                text=True,
                cwd=self.scratch,
            )
            if check.returncode != 0:
                return f"{python} cannot import fastmcp_tasks: {check.stderr.strip().splitlines()[-1:]}"
            self.fastmcp_version = check.stdout.strip()
        return None

    def start(self) -> Server:
        port = hb._free_port()
        log = self.scratch / f"{self.name}.log"
        if self.name == "fastmcp-redis":
            command = [self.args.fastmcp_python, str(BENCH / "fastmcp_tasks_app.py"), "--port", str(port)]
            env = {"FASTMCP_BENCH_REDIS": self.args.redis, "FASTMCP_BENCH_NAME": self.docket_name}
            return Server(command, port, log, env)
        command = [sys.executable, "-m", "mcptasks", "serve", str(BENCH / "http_app.py")]
        command += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--store", self.store_url()]
        return Server(command, port, log)

    def clean(self) -> None:
        if self.name == "redis":
            _clean_redis(self.args.redis, self.redis_prefix)
        elif self.name == "fastmcp-redis":
            _clean_redis(self.args.redis, self.docket_name)
        elif self.name == "postgres":
            anyio.run(_postgres, self.args.postgres, f'DROP SCHEMA IF EXISTS "{self.pg_schema}" CASCADE')


async def _warm_up(url: str) -> None:
    async with hb.wire_to(url) as wire:
        for _ in range(100):
            await _end_to_end(wire, "task_noop")


def run_backend(
    backend: Backend, *, n: int, concurrency: int, repeats: int, reference_url: str | None = None
) -> dict[str, Any]:
    load_before = _load()
    server = backend.start()
    try:
        server.wait_ready()
        # fastmcp-tasks always creates a task; its worker runs 10 at a time, so 200 ms bodies would
        # leave minutes of backlog before the tasks/get runs: it creates 10 ms ones.
        tool = "task_sleep" if backend.name == "fastmcp-redis" else "task_park"
        figures = anyio.run(
            partial(
                measure,
                server.url,
                n=n,
                concurrency=concurrency,
                repeats=repeats,
                pid=server.process.pid,
                create_tool=tool,
                reference_url=reference_url,
            )
        )
    finally:
        server.stop()
        backend.clean()
    figures["load_before"] = load_before
    figures["load_after"] = _load()
    if backend.name != "fastmcp-redis":
        figures["store_url"] = backend.store_url()
    else:
        figures["fastmcp_tasks_version"] = getattr(backend, "fastmcp_version", None)
    return figures


def _vs_memory(results: dict[str, Any], name: str) -> str:
    """Zero-work end to end p50 as a multiple of the memory store's (target: <= 1.5x): of the
    reference memory server's samples taken in turns with this backend's, when there are some."""
    memory_p50 = results[name].get("e2e_memory_p50_ms")
    if memory_p50 is None and "memory" in results:
        memory_p50 = results["memory"]["e2e_p50_ms"]
    if memory_p50 is None:
        return "-"
    ratio = results[name]["e2e_p50_ms"] / memory_p50
    results[name]["e2e_ratio_vs_memory"] = ratio
    return f"{ratio:.2f}"


def measure_all(
    names: list[str], args: argparse.Namespace, *, n: int, repeats: int
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each backend in turn: (figures by backend, why a backend was skipped). With `memory` among
    them, a reference memory-store server stays up for the whole run (see `measure`)."""
    scratch = Path(tempfile.mkdtemp(prefix="mcptasks-stores-"))
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    reference: Server | None = None
    try:
        if "memory" in names:
            # The memory-store server the zero-work end-to-end samples of every backend take turns with.
            reference = Backend("memory", args, scratch).start()
            reference.wait_ready()
            anyio.run(_warm_up, reference.url)
        for name in names:
            backend = Backend(name, args, scratch)
            reason = backend.unavailable()
            if reason:
                skipped[name] = reason
                print(f"skipping {name}: {reason}", flush=True)
                continue
            print(f"measuring {name} ...", flush=True)
            try:
                results[name] = run_backend(
                    backend,
                    n=n,
                    concurrency=args.concurrency,
                    repeats=repeats,
                    reference_url=reference.url if reference is not None else None,
                )
            except Exception as exc:  # one backend's failure should not lose the others' figures
                skipped[name] = f"failed: {exc!r}"
                print(f"{name} failed: {exc!r}", flush=True)
    finally:
        if reference is not None:
            reference.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return results, skipped


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends", default=",".join(ALL_BACKENDS), help=f"comma-separated, of {', '.join(ALL_BACKENDS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sample sizes, one run (a smoke run)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight (default 16)")
    parser.add_argument("--repeats", type=int, help="throughput runs per figure, median kept (default 5)")
    parser.add_argument("--fastmcp-python", help="python of a venv with fastmcp[tasks] (for fastmcp-redis)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="Redis URL (keys get a prefix)")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL (a fresh schema is created and dropped)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    names = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = [name for name in names if name not in ALL_BACKENDS]
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {', '.join(ALL_BACKENDS)}")
    n = 200 if args.quick else 1000
    repeats = args.repeats or (1 if args.quick else 5)

    print(
        f"n={n} (creates per throughput run {n * 2}) concurrency={args.concurrency} repeats={repeats} "
        f"cpus={os.cpu_count()} python={platform.python_version()} load={_load():.2f}",
        flush=True,
    )
    results, skipped = measure_all(names, args, n=n, repeats=repeats)

    ratio = None
    if "redis" in results and "fastmcp-redis" in results:
        ratio = results["redis"]["create_per_s"] / results["fastmcp-redis"]["create_per_s"]
        results["redis"]["create_ratio_vs_fastmcp_redis"] = ratio
    print()
    header = (
        f"{'backend':15} {'create/s':>9} {'create p50':>11} {'tasks/get/s':>12} {'plain/s':>8} "
        f"{'cpu/create':>11} {'cpu/get':>8} {'e2e p50':>9} {'x memory':>8}  load"
    )
    print(header)
    print("-" * len(header))
    for name, figures in results.items():
        line = (
            f"{name:15} {figures['create_per_s']:9.0f} {figures['create_p50_ms']:8.2f} ms "
            f"{figures['tasks_get_per_s']:12.0f} {figures['plain_per_s']:8.0f} "
            f"{figures['server_cpu_ms_per_create']:8.2f} ms {figures['server_cpu_ms_per_get']:5.2f} ms "
            f"{figures['e2e_p50_ms']:6.2f} ms {_vs_memory(results, name):>8}  "
            f"{figures['load_before']:.2f}->{figures['load_after']:.2f}"
        )
        if name == "redis" and ratio is not None:
            verdict = "ok" if ratio >= TARGET_RATIO else "MISSED"
            line += f"  create/s {ratio:.2f}x fastmcp-redis (>= {TARGET_RATIO}x: {verdict})"
            cpu_ratio = (
                results["fastmcp-redis"]["server_cpu_ms_per_create"] / figures["server_cpu_ms_per_create"]
            )
            line += f", server CPU per create 1/{cpu_ratio:.2f}"
            figures["cpu_per_create_ratio_fastmcp_over_redis"] = cpu_ratio
        print(line)
    for name, reason in skipped.items():
        print(f"{name:15} skipped: {reason}")
    if args.json:
        environment = {
            "n": n,
            "concurrency": args.concurrency,
            "repeats": repeats,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        }
        document = {"environment": environment, "results": results, "skipped": skipped}
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
