"""The fastmcp-tasks server `benchmarks/stores.py` compares against (run with fastmcp-tasks' own venv).

    FASTMCP_BENCH_REDIS=redis://127.0.0.1:6379/13 FASTMCP_BENCH_NAME=fastmcp-bench \
        python benchmarks/fastmcp_tasks_app.py --port 8123

A `FastMCP` server with `TasksExtension` on Redis (Docket) and the tools of `http_app.py`:
`plain_noop` (no task), `task_noop` (zero work) and `task_sleep` (sleeps 10 ms), the last two with
`TaskConfig(mode="optional")`. Served over Streamable HTTP at `/mcp` on 127.0.0.1.
"""

from __future__ import annotations

import sys

# Run as a script, this directory comes first on sys.path and `benchmarks/http.py` would shadow the
# standard library's `http` package; drop the directory before anything imports it.
if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
    sys.path.pop(0)

import argparse
import asyncio
import os

from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

REDIS_URL = os.environ.get("FASTMCP_BENCH_REDIS", "redis://127.0.0.1:6379/13")
DOCKET_NAME = os.environ.get("FASTMCP_BENCH_NAME", "fastmcp-bench")

mcp = FastMCP("fastmcp-tasks-bench")
mcp.add_extension(TasksExtension(url=REDIS_URL, name=DOCKET_NAME))


@mcp.tool()
async def plain_noop() -> str:
    """An ordinary tool that does nothing (the baseline)."""
    return "ok"


@mcp.tool(task=TaskConfig(mode="optional"))
async def task_noop() -> str:
    """A task tool that does nothing."""
    return "ok"


@mcp.tool(task=TaskConfig(mode="optional"))
async def task_sleep() -> str:
    """A task tool that sleeps 10 ms."""
    await asyncio.sleep(0.01)
    return "ok"


@mcp.tool(task=TaskConfig(mode="optional"))
async def task_park() -> str:
    """A task tool that sleeps 200 ms."""
    await asyncio.sleep(0.2)
    return "ok"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    mcp.run("http", show_banner=False, host=args.host, port=args.port, path="/mcp", log_level="warning")
