"""Leases and a blocked event loop, with two real `mcptasks serve` processes sharing a SQLite file.

A body that blocks its server's event loop for several leases (`time.sleep`) must not make the
peer fail its task as `worker_lost`: the lease is renewed from a thread. A loop that stays blocked
past `wedge_limit` does lose the lease, and the peer fails the task. The control run renews on the
event loop (the old way) and shows the peer taking the task of a live process.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from processes import clean_env, free_port, serving_http
from sdk_helpers import RawClient

from mcptasks._runtime.recovery import WORKER_LOST_MESSAGE

pytestmark = pytest.mark.anyio

APP = Path(__file__).resolve().parents[1] / "robustness_app.py"
LEASE = "1"
BOUND = 90.0
"""Upper bound of every wait; never a synchronisation delay."""


@contextmanager
def two_servers(tmp_path: Path, **env: str) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """Servers A and B on one SQLite file (lease 1 s); yields their MCP URLs and A's process."""
    extra = ("--store", f"sqlite:///{tmp_path / 'tasks.db'}", "--lease-ttl", LEASE)
    environment = clean_env(**env)
    ports = free_port(), free_port()
    while ports[1] == ports[0]:
        ports = ports[0], free_port()
    with (
        serving_http(APP, port=ports[0], log=tmp_path / "a.log", extra=extra, env=environment) as a,
        serving_http(APP, port=ports[1], log=tmp_path / "b.log", extra=extra, env=environment),
    ):
        yield f"http://127.0.0.1:{ports[0]}/mcp", f"http://127.0.0.1:{ports[1]}/mcp", a


async def start_block(url: str, seconds: float) -> str:
    async with httpx2.AsyncClient(timeout=BOUND) as http:
        created = (await RawClient(http, url).call("block", {"seconds": seconds})).result
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def final_seen_by(url: str, task_id: str) -> dict[str, Any]:
    """Poll `tasks/get` on `url` until the task is terminal."""
    last: dict[str, Any] | None = None
    async with httpx2.AsyncClient(timeout=BOUND) as http:
        client = RawClient(http, url)
        try:
            with anyio.fail_after(BOUND):
                while True:
                    last = await client.get(task_id)
                    if last["status"] in ("completed", "failed", "cancelled"):
                        return last
                    await anyio.sleep(0.1)
        except TimeoutError:
            raise AssertionError(f"no terminal status; last seen {last!r}") from None


async def test_a_body_blocking_the_loop_for_many_leases_keeps_its_task(tmp_path: Path) -> None:
    with two_servers(tmp_path) as (a, b, _):
        task_id = await start_block(a, 8.0)
        final = await final_seen_by(b, task_id)
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"]["blocked"] == 8.0


async def test_control_with_loop_heartbeats_the_peer_fails_the_live_task(tmp_path: Path) -> None:
    with two_servers(tmp_path, MCPTASKS_HEARTBEAT_THREAD="false") as (a, b, _):
        # Longer than the other test: B must get to run a recovery check while A is blocked,
        # which on a loaded machine can take a while.
        task_id = await start_block(a, 12.0)
        final = await final_seen_by(b, task_id)
    assert final["status"] == "failed", final
    assert final["error"]["message"] == WORKER_LOST_MESSAGE


async def test_a_loop_wedged_past_the_limit_loses_its_lease(tmp_path: Path) -> None:
    with two_servers(tmp_path, MCPTASKS_WEDGE_LIMIT="5") as (a, b, wedged):
        task_id = await start_block(a, 3600.0)
        final = await final_seen_by(b, task_id)  # within wedge_limit + lease, well under the bound
        assert wedged.poll() is None  # A is alive all along, only its loop is stuck
        wedged.kill()  # it would not get to handle a SIGTERM for an hour
    assert final["status"] == "failed", final
    assert final["error"]["data"]["reason"] == "worker_lost"
