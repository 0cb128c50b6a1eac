"""Save screenshots of the task dashboard (the ones in the docs) with headless Chromium.

    python examples/dashboard_screenshots.py [--out docs/operating/img] [--chromium PATH]

Fills a fresh SQLite store with an hour of history plus live tasks in every state (a real engine
runs them), serves the dashboard on a free loopback port, and has Chromium save
`dashboard.png` (the overview) and `dashboard-task.png` (a task waiting for input).
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import anyio
import uvicorn

from mcptasks import Elicit, EngineConfig, ProtocolError, Result, SqliteTaskStore, task_tool
from mcptasks.dashboard import dashboard_app
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


@task_tool
async def run_pipeline(kind: str = "test"):
    """A long CI run."""
    yield f"step 3 of 5: running {kind} suite"
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


APPROVAL = {
    "type": "object",
    "properties": {
        "approver": {"type": "string", "title": "Approver", "description": "who signs off"},
        "window": {"type": "string", "enum": ["now", "tonight"], "default": "tonight"},
        "canary_percent": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": ["approver", "window"],
}


@task_tool
async def deploy(env: str = "prod", build: int = 1842, api_token: str = ""):
    """A deployment that asks first (its token argument shows redacted)."""
    for step in (
        f"fetching build {build}",
        "verifying image signature",
        f"waiting for approval to deploy to {env}",
    ):
        yield step
        await anyio.sleep(0.3)  # status writes are coalesced; let each one land
    ok = yield Elicit(f"Deploy build {build} to {env}?", APPROVAL)
    yield Result(f"deployed: {ok}")


@task_tool
async def migrate():
    """A migration that fails."""
    yield "locking tables"
    raise ProtocolError(-32603, "lock timeout on table orders")


@task_tool
async def report(month: str = "2026-11"):
    """A quick report."""
    yield Result(f"report {month}: 42 rows")


TOOL_ERROR_TRACE = "3 tests failed: test_checkout, test_refund, test_invoice_totals\n" + "\n".join(
    f"  tests/test_billing.py:{40 + n}: AssertionError: expected 200, got 500" for n in range(12)
)
"""The status message of a tool error: many lines, of which the table shows the first."""


async def seed_history(path: Path, now: float) -> None:
    """Tasks of the last hour, written as records with their transition timelines."""
    rng = random.Random(7)
    store = SqliteTaskStore(path)
    await store.open()
    try:
        for i in range(60):
            created = now - 3500 + i * 55 + rng.uniform(0, 30)
            tool = rng.choice(["run_pipeline", "deploy", "report", "migrate"])
            end = rng.choices(["completed", "failed", "cancelled"], [8, 2, 1])[0]
            finished = min(now - 5, created + rng.uniform(60, 900))
            transitions: list[list[object]] = [[finished, end, None]]
            if tool == "deploy":
                asked = created + rng.uniform(5, 30)
                transitions = [[asked, "input_required", None], [asked + 60, "working", None], *transitions]
            tool_error = end == "completed" and i % 6 == 5  # the tool reported a failure (isError)
            await store.create(
                TaskRecord(
                    task_id=f"hist-{i:03d}-{rng.getrandbits(64):016x}",
                    owner=rng.choice(["alice", "bob", "carol"]),
                    tool=tool,
                    status=end,  # type: ignore[arg-type]
                    status_message=TOOL_ERROR_TRACE if tool_error else None,
                    result={"content": [{"type": "text", "text": "3 tests failed"}], "isError": True}
                    if tool_error
                    else None,
                    created_at=created,
                    updated_at=finished,
                    transitions=transitions,
                    runner="replica-a",
                )
            )
    finally:
        await store.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def screenshot(chromium: str, url: str, out: Path, profile: Path, height: int) -> None:
    command = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size=1280,{height}",
        "--virtual-time-budget=4000",
        f"--screenshot={out}",
        url,
    ]
    await anyio.run_process(command, check=True)
    print(f"saved {out}")


async def main(out: Path, chromium: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "tasks.db"
        await seed_history(db, time.time())
        engine = TaskEngine(SqliteTaskStore(db), config=EngineConfig(instance_id="replica-a"))
        async with engine:
            owners = ["alice", "bob"]
            for tool, arguments in [
                (run_pipeline, {"kind": "test"}),
                (run_pipeline, {"kind": "build"}),
                (deploy, {"env": "prod", "build": 1842, "api_token": "tok-3f9a"}),
                (migrate, {}),
                (report, {}),
            ]:
                await engine.start(tool, arguments, owner=owners[0])
                owners.reverse()
            waiting = None
            with anyio.fail_after(30):
                while waiting is None:
                    active = await engine.store.list_active()
                    waiting = next((r for r in active if r.status == "input_required"), None)
                    await anyio.sleep(0.05)
            port = free_port()
            app = dashboard_app(
                engine.store, token="screenshot", title="ci-runner tasks", redact_arguments=["api_token"]
            )
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve)
                with anyio.fail_after(30):
                    while not server.started:
                        if server.should_exit:
                            raise RuntimeError("the dashboard server did not start")
                        await anyio.sleep(0.05)
                base = f"http://127.0.0.1:{port}/"
                profile = Path(scratch) / "profile"
                await screenshot(chromium, base, out / "dashboard.png", profile, 1180)
                await screenshot(
                    chromium, f"{base}tasks/{waiting.task_id}", out / "dashboard-task.png", profile, 1320
                )
                server.should_exit = True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("docs/operating/img"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    options = parser.parse_args()
    if not options.chromium:
        sys.exit("no Chromium found: install the Debian package `chromium` or pass --chromium PATH")
    options.out.mkdir(parents=True, exist_ok=True)
    anyio.run(main, options.out, options.chromium)
