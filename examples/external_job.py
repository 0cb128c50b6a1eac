"""A task tool that wraps an external job system, and re-attaches to its job after a server restart.

The job system here is deliberately small but real: a job is a detached process (its own session,
so it outlives the server) that writes its progress and its result to files under
`$JOBS_DIR/<job id>/`. Real systems (CI, batch schedulers, cloud builds) look the same from the
tool's side: you submit, get a job id, and follow it.

The tool saves the job id with its task (`ctx.checkpoint`). If the server is killed while it
follows the job, the restarted server re-runs the task (`retry_on_crash=True`), and the re-run
finds the id in `ctx.saved`: it follows the job that is already running instead of starting a
second one.

    mcptasks serve examples/external_job.py --transport http --store sqlite:///tasks.db
    mcptasks call http://127.0.0.1:8000/mcp run_job steps=20
    # kill -9 the server, start it again with the same command: the call's task completes
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from mcptasks import Result, TaskContext, TaskServer, ToolError

app = TaskServer("external-jobs", store="sqlite:///tasks.db")


# -- the external job system ---------------------------------------------------------------------


def jobs_dir() -> Path:
    """Where jobs keep their files (`JOBS_DIR`, default `./jobs`)."""
    return Path(os.environ.get("JOBS_DIR", "jobs")).resolve()


JOB = """
import json, os, sys, time
from pathlib import Path

folder, steps, interval = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

def write(name, text):  # readers never see a half-written file
    (folder / (name + ".partial")).write_text(text)
    (folder / (name + ".partial")).replace(folder / name)

write("pid", str(os.getpid()))
for step in range(1, steps + 1):
    time.sleep(interval)  # the "work"
    write("progress", f"step {step} of {steps}")
write("result.json", json.dumps({"job": folder.name, "steps": steps, "output": "all steps passed"}))
"""
"""The job itself: a small script run by its own interpreter, in its own session."""

_children: dict[str, subprocess.Popen[bytes]] = {}
"""Jobs this server process started (collected when they exit; a restarted server has none)."""


def submit_job(steps: int, interval: float) -> str:
    """Start a job in a detached process and return its id (the process outlives this server)."""
    job_id = secrets.token_hex(8)
    folder = jobs_dir() / job_id
    folder.mkdir(parents=True)
    _children[job_id] = subprocess.Popen(
        [sys.executable, "-c", JOB, str(folder), str(steps), str(interval)],
        start_new_session=True,  # not in the server's process group: a kill of the server spares it
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return job_id


def job_state(job_id: str) -> tuple[str, Any]:
    """("done", result), ("running", progress text) or ("lost", why) for a job."""
    child = _children.get(job_id)
    if child is not None and child.poll() is not None:
        del _children[job_id]
    folder = jobs_dir() / job_id
    result = folder / "result.json"
    if result.exists():
        return "done", json.loads(result.read_text())
    progress = folder / "progress"
    text = progress.read_text() if progress.exists() else "queued"
    pid_file = folder / "pid"
    if pid_file.exists() and not _running(int(pid_file.read_text())):
        if result.exists():  # it finished between the two looks
            return "done", json.loads(result.read_text())
        return "lost", f"job {job_id} stopped without a result (last progress: {text})"
    return "running", text


def _running(pid: int) -> bool:
    # A job this process started is collected above as soon as it exits; any other job is not
    # our child, so it never lingers as a zombie here: a signal-0 probe tells whether it runs.
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# -- the task tool -------------------------------------------------------------------------------


# --8<-- [start:tool]
@app.task_tool(poll_interval=0.5, retry_on_crash=True, max_attempts=3)
async def run_job(ctx: TaskContext, steps: int = 10, interval: float = 0.5):
    """Run an external job of `steps` steps and report its progress; survives server restarts."""
    saved = ctx.saved or {}
    job_id = saved.get("job")
    if job_id is None:
        job_id = await anyio.to_thread.run_sync(submit_job, steps, interval)
        await ctx.checkpoint({"job": job_id})
        yield f"started job {job_id}"
    else:
        yield f"re-attached to job {job_id} (run {ctx.attempt})"
    last = None
    while True:
        state, detail = await anyio.to_thread.run_sync(job_state, job_id)
        if state == "done":
            yield Result(detail)
        if state == "lost":
            raise ToolError(detail)
        if detail != last:
            last = detail
            yield f"job {job_id}: {detail}"
        await anyio.sleep(0.2)


# --8<-- [end:tool]


if __name__ == "__main__":
    app.run()
