"""Start-up with a backlog of orphans: how soon a restarted `mcptasks serve` listens, and how soon
every task its dead predecessor left behind is settled.

A SQLite file is filled with N active tasks (default 20,000) whose runner is a process that no
longer exists on this machine (a real child process, started and killed, made the id). Then
`mcptasks serve benchmarks/http_app.py --transport http --store sqlite:///FILE` starts, and the
benchmark records, from the moment the process was spawned:

- listen: when the port accepts a TCP connection;
- first answer: when a `server/discover` POST is answered;
- settled: when no active task is left in the file (every orphan failed as worker_lost).

The same server with an empty file is measured side by side; the difference (backlog - empty) is
what the backlog costs before the server listens. Run:

    python benchmarks/recovery.py                 # N = 20,000, 3 rounds
    python benchmarks/recovery.py --tasks 2000 --rounds 1
"""

from __future__ import annotations

import sys

# Run as `python benchmarks/recovery.py`, this directory comes first on sys.path and `http.py` here
# would shadow the standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

from mcptasks import SqliteTaskStore
from mcptasks.lowlevel import ANONYMOUS_OWNER
from mcptasks.stores import TaskRecord

ROOT = Path(__file__).resolve().parent.parent
PRINT_ID = "from mcptasks._runtime.instances import new_instance_id; print(new_instance_id(), flush=True)"
DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "recovery-bench", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


def dead_runner_id() -> str:
    """The instance id of a real process of this machine that has exited."""
    out = subprocess.run([sys.executable, "-c", PRINT_ID], capture_output=True, check=True, cwd=ROOT)
    return out.stdout.decode().strip()


async def seed(path: Path, count: int, runner: str) -> None:
    store = SqliteTaskStore(path)
    await store.open()
    try:
        await store.heartbeat(runner, 3600.0)  # its lease has not expired: only the pid says it is gone

        async def create(start: int) -> None:
            for n in range(start, min(start + 500, count)):
                await store.create(
                    TaskRecord(
                        task_id=f"orphan-{n:06d}",
                        owner=ANONYMOUS_OWNER,
                        tool="task_sleep",
                        status="working",
                        status_message="half way",
                        ttl_ms=86_400_000,
                        poll_interval_ms=50,
                        runner=runner,
                    )
                )

        async with anyio.create_task_group() as group:
            for start in range(0, count, 500):
                group.start_soon(create, start)
    finally:
        await store.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def active_left(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT count(*) FROM tasks WHERE status IN ('working', 'input_required')"
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


def measure(path: Path) -> dict[str, float]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPTASKS_")}
    command = [sys.executable, "-m", "mcptasks", "serve", "benchmarks/http_app.py", "--transport", "http"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--store", f"sqlite:///{path}"]
    spawned = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    figures: dict[str, float] = {}
    try:
        deadline = spawned + 300
        while "listen" not in figures:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode() if process.stderr else "server exited")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                figures["listen"] = time.perf_counter() - spawned
            except OSError:
                if time.perf_counter() > deadline:
                    raise RuntimeError("the server did not listen") from None
                time.sleep(0.01)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "server/discover",
        }
        reply = httpx2.post(f"http://127.0.0.1:{port}/mcp", json=DISCOVER, headers=headers, timeout=60)
        if reply.status_code != 200 or "capabilities" not in reply.text:
            raise RuntimeError(f"server/discover failed: {reply.status_code} {reply.text[:500]}")
        figures["first_answer"] = time.perf_counter() - spawned
        figures["left_at_first_answer"] = active_left(path)
        while active_left(path):
            if time.perf_counter() > deadline:
                raise RuntimeError("orphans were not settled")
            time.sleep(0.05)
        figures["settled"] = time.perf_counter() - spawned
    finally:
        process.terminate()
        process.wait(timeout=60)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"empty": [], "backlog": []}
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for kind in ("empty", "backlog"):
                path = Path(tmp) / f"{kind}-{round_}.db"
                anyio.run(seed, path, args.tasks if kind == "backlog" else 0, dead_runner_id())
                rows[kind].append(measure(path))
                print(kind, json.dumps({k: round(v, 3) for k, v in rows[kind][-1].items()}), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n{args.tasks} orphans; medians of {args.rounds} rounds; seconds from spawning the server")
    print(f"{'':24}{'empty':>10}{'backlog':>10}{'difference':>12}")
    for figure in ("listen", "first_answer", "settled"):
        empty = statistics.median(r[figure] for r in rows["empty"])
        backlog = statistics.median(r[figure] for r in rows["backlog"])
        print(f"{figure:24}{empty:10.3f}{backlog:10.3f}{backlog - empty:12.3f}")
    left = statistics.median(r["left_at_first_answer"] for r in rows["backlog"])
    print(f"orphans still active at the first answer (median): {left:.0f}")
    if args.json:
        args.json.write_text(json.dumps({"tasks": args.tasks, "rounds": rows}, indent=2))


if __name__ == "__main__":
    main()
