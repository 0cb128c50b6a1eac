"""`mcptasks serve --metrics-port`: the metrics endpoint (`mcptasks.metrics`) on its own port."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from mcptasks._guard import hosts_for


def metrics_url(host: str, port: int) -> str:
    """Where `metrics_server(extension, host, port)` serves the metrics."""
    return f"http://{host if ':' not in host else f'[{host}]'}:{port}/metrics"


def metrics_server(extension: Any, host: str, port: int) -> Any:
    """A `uvicorn.Server` for the metrics of `extension`'s engine at `metrics_url(host, port)`
    (any path answers). Made before the engine starts, so it counts every task. Raises
    `MissingExtra` without prometheus-client (the `metrics` extra)."""
    import uvicorn

    from mcptasks.metrics import metrics_app

    class Server(uvicorn.Server):
        url = metrics_url(host, port)

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the MCP server handles the signals; this one stops when it does

    app = metrics_app(extension, allowed_hosts=hosts_for(host))
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", log_config=None, log_level="warning", access_log=False
    )
    return Server(config)


async def with_metrics(run: Callable[[], Awaitable[object]], metrics: Any) -> object:
    """Run `run` (the MCP server), serving `metrics` (a `metrics_server`, or None) beside it."""
    if metrics is None:
        return await run()
    async with anyio.create_task_group() as group:
        group.start_soon(metrics.serve)
        try:
            result = await run()
        finally:
            metrics.should_exit = True
    return result
