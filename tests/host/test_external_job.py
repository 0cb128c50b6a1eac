"""`examples/external_job.py` end to end: a real `mcptasks serve` on SQLite starts an external job,
is killed with SIGKILL while following it, and the restarted server re-attaches to the same job
(the job id was saved with `ctx.checkpoint`) instead of starting another one."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from processes import clean_env, free_port, serving_http
from sdk_helpers import RawClient

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external_job.py"
TIMEOUT = 90.0
"""Upper bound of every wait (a restart on a loaded 2-core machine takes seconds); never a sync."""


async def poll_task(url: str, task_id: str, predicate: Any, what: str) -> dict[str, Any]:
    last: dict[str, Any] | None = None
    async with httpx2.AsyncClient(timeout=30) as http:
        client = RawClient(http, url)
        try:
            with anyio.fail_after(TIMEOUT):
                while True:
                    last = await client.get(task_id)
                    if predicate(last):
                        return last
                    await anyio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}") from None


async def test_a_killed_server_re_attaches_to_its_running_job_after_restart(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    db = tmp_path / "tasks.db"
    env = clean_env(JOBS_DIR=str(jobs))
    extra = ("--store", f"sqlite:///{db}")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving_http(EXAMPLE, port=port, log=tmp_path / "first.log", extra=extra, env=env) as first:
        async with httpx2.AsyncClient(timeout=30) as http:
            created = (await RawClient(http, url).call("run_job", {"steps": 30, "interval": 0.2})).result
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        running = await poll_task(
            url, task_id, lambda t: "step 2 of 30" in (t.get("statusMessage") or ""), "progress"
        )
        assert running["status"] == "working"
        (job_id,) = [p.name for p in jobs.iterdir()]
        job_pid = int((jobs / job_id / "pid").read_text())
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    os.kill(job_pid, 0)  # the job outlived the server (it may finish while no server runs: fine)

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving_http(EXAMPLE, port=port, log=tmp_path / "second.log", extra=extra, env=env):
        final = await poll_task(url, task_id, lambda t: t["status"] in ("completed", "failed"), "the end")
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"] == {"job": job_id, "steps": 30, "output": "all steps passed"}
    assert [p.name for p in jobs.iterdir()] == [job_id]  # no second job was started
