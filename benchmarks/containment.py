"""Containment benchmarks: how long a control poller waits while bodies misbehave, and what the
containment machinery costs per create next to another checkout (say, the main branch).

Run from the repository root:

    python benchmarks/containment.py                          # event-loop stalls only
    python benchmarks/containment.py --compare PATH [--rounds 3]   # + creates/s next to PATH

Stalls: an engine on the memory store in process (asyncio), one control task parked on an input
request, and a poller that every 5 ms asks `tasks/get` for it through `TasksProtocol.handle`. A
poll's lag is how much later than its 5 ms sleep it completed: the time the event loop was not
free. Each scenario reports the worst, p99 and median lag and the number of polls. Scenarios: idle;
four `def` bodies each running `time.sleep(1)`; one `async def` body yielding 200,000 statuses in a
tight loop; and, for contrast, an `async def` body calling `time.sleep(0.3)` (blocking the loop:
the case the watchdog reports). Target: worst poll <= 50 ms for the `def` sleep and the status flood.

`--compare PATH` runs `benchmarks/engine.py --store memory --bench creates` of PATH (with PATH on
`PYTHONPATH`) and of this checkout alternately, `--rounds` times each, in fresh interpreters, and
prints the medians side by side with their ratio. Target: creates/s within 10 % of PATH's. Make PATH
with `git worktree add ../mcptasks-main main` or `git archive main | tar -x -C DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from mcptasks import Elicit, EngineConfig, Limits, Result, task_tool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol
from mcptasks.wire import EXTENSION_ID

ROOT = Path(__file__).resolve().parent.parent
META: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}, "elicitation": {}}
}
"""Opted in, declaring elicitation (so the control task really waits for its answer)."""
POLL_EVERY = 0.005


@task_tool
async def control():
    """Parks on an input request: the task the poller reads."""
    yield Elicit("continue?")
    yield Result("ok")


@task_tool
def def_sleep(seconds: float) -> str:
    """A `def` body blocking in its worker thread."""
    time.sleep(seconds)
    return "slept"


@task_tool
async def status_flood(count: int):
    """An `async def` body yielding statuses in a tight loop."""
    for i in range(count):
        yield f"step {i}"
    yield Result(count)


@task_tool
async def async_sleep(seconds: float):
    """An `async def` body that blocks the event loop (what not to do)."""
    time.sleep(seconds)  # noqa: ASYNC251 - the point of this body
    yield Result("slept on the loop")


TOOLS = [control, def_sleep, status_flood, async_sleep]

SCENARIOS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "idle (1 s)": [],
    "4 def bodies, time.sleep(1)": [("def_sleep", {"seconds": 1.0})] * 4,
    "async body, 200,000 statuses": [("status_flood", {"count": 200_000})],
    "async body, time.sleep(0.3) (contrast)": [("async_sleep", {"seconds": 0.3})],
}


async def _call(protocol: TasksProtocol, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await protocol.handle(method, {**params, "_meta": META}, owner=ANONYMOUS_OWNER)


async def stall(load: list[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    config = EngineConfig(limits=Limits(blocking_threshold=None), immediate_results=False)
    engine = TaskEngine("memory://", config=config)
    protocol = TasksProtocol(engine, TOOLS)
    lags: list[float] = []
    async with engine:
        created = await protocol.call_tool("control", {}, meta=META)
        control_id = created["taskId"]
        done = anyio.Event()

        async def poll() -> None:
            while not done.is_set():
                started = time.perf_counter()
                await anyio.sleep(POLL_EVERY)
                task = await _call(protocol, "tasks/get", {"taskId": control_id})
                assert task["status"] in ("working", "input_required"), task
                lags.append(time.perf_counter() - started - POLL_EVERY)

        async def drive() -> None:
            ids = [(await protocol.call_tool(name, args, meta=META))["taskId"] for name, args in load]
            if not ids:
                await anyio.sleep(1.0)
            for task_id in ids:
                status = "working"
                while status != "completed":
                    await anyio.sleep(0.05)
                    status = (await _call(protocol, "tasks/get", {"taskId": task_id}))["status"]
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(poll)
            group.start_soon(drive)
        await _call(protocol, "tasks/cancel", {"taskId": control_id})
    ordered = sorted(lags)
    return {
        "worst_ms": ordered[-1] * 1000,
        "p99_ms": ordered[int(len(ordered) * 0.99)] * 1000,
        "p50_ms": statistics.median(ordered) * 1000,
        "polls": len(ordered),
    }


def creates(checkout: Path) -> dict[str, float]:
    """One `engine.py --bench creates` run of `checkout` (memory store), in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "creates.json"
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        command = [sys.executable, str(checkout / "benchmarks" / "engine.py"), "--store", "memory"]
        command += ["--bench", "creates", "--json", str(out)]
        subprocess.run(command, cwd=checkout, env=env, check=True, capture_output=True)
        figures = json.loads(out.read_text())["results"]["memory"]["creates"]
    keys = ("creates_k1", "creates_k64", "creates_start_k64", "sustained_k64", "creates_default_k64")
    return {key: float(figures[key]) for key in keys}


def compare(other: Path, rounds: int) -> None:
    runs: dict[str, list[dict[str, float]]] = {"other": [], "this": []}
    for index in range(rounds):
        for name, checkout in (("other", other), ("this", ROOT)):
            print(f"creates round {index + 1}/{rounds}: {name} ...", flush=True)
            runs[name].append(creates(checkout))
    print(f"\ncreates/s, memory store, medians of {rounds} alternating runs (each a median of 5)")
    print(f"{'figure':<22}{'other':>12}{'this':>12}{'this/other':>12}")
    for key in runs["this"][0]:
        theirs = statistics.median(r[key] for r in runs["other"])
        ours = statistics.median(r[key] for r in runs["this"])
        print(f"{key:<22}{theirs:>12,.0f}{ours:>12,.0f}{ours / theirs:>12.2f}")
    print(f"(other: {other})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, help="another checkout to compare creates/s with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-stalls", action="store_true")
    options = parser.parse_args()
    print(f"1-min load average: {os.getloadavg()[0]:.1f}")
    if not options.skip_stalls:
        print(f"\ncontrol poller lag (poll every {POLL_EVERY * 1000:.0f} ms; memory store; asyncio)")
        print(f"{'scenario':<42}{'worst ms':>10}{'p99 ms':>10}{'p50 ms':>10}{'polls':>8}")
        for name, load in SCENARIOS.items():
            figures = anyio.run(stall, load)
            print(
                f"{name:<42}{figures['worst_ms']:>10.1f}{figures['p99_ms']:>10.1f}"
                f"{figures['p50_ms']:>10.2f}{figures['polls']:>8.0f}",
                flush=True,
            )
    if options.compare is not None:
        compare(options.compare.resolve(), options.rounds)


if __name__ == "__main__":
    main()
