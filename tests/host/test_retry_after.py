"""Refusals for rate or capacity say when to come back over HTTP too: `Retry-After` in whole
seconds, rounded up from the error's `retryAfterMs`, whether the fast path or the SDK answered.

(A request the failing store could not serve gets it as well: see the HTTP outage test in
`tests/stores/test_store_outages.py`.)
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from sdk_helpers import TIMEOUT, HostApp, RawClient, RawResponse, serve_http
from starlette.applications import Starlette

from mcptasks import Limits

pytestmark = pytest.mark.anyio

PATHS = pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])


@pytest.fixture
def anyio_backend() -> str:
    """uvicorn and the SDK's transports run on asyncio."""
    return "asyncio"


@asynccontextmanager
async def client_of(host: HostApp, fast_path: bool) -> AsyncIterator[tuple[RawClient, Starlette]]:
    """A raw client of `host` served over HTTP, and the app serving it."""
    app = host.app.streamable_http_app(fast_path=fast_path)
    async with serve_http(app) as url, httpx2.AsyncClient(timeout=TIMEOUT) as http:
        yield RawClient(http, url), app


def assert_retry_after(refused: RawResponse, reason_key: str, reason: object) -> int:
    """The refusal's `retryAfterMs`, once its `Retry-After` header is checked against it."""
    data = refused.error["data"]
    assert data[reason_key] == reason, refused.message
    millis = data["retryAfterMs"]
    assert refused.headers.get("retry-after") == str(math.ceil(millis / 1000)), refused.headers
    return int(millis)


@PATHS
async def test_a_create_over_the_limit_says_retry_after_in_whole_seconds(fast_path: bool) -> None:
    host = HostApp(limits=Limits(max_active=1, retry_after=1.2))
    async with client_of(host, fast_path) as (client, _):
        with anyio.fail_after(TIMEOUT):
            running = await client.call("gated", {"label": "a"})
            assert "retry-after" not in running.headers
            refused = await client.call("gated", {"label": "b"})
            host.release("a")
    assert assert_retry_after(refused, "reason", "too_many_tasks") == 1200  # "2": rounded up


@PATHS
async def test_a_poll_that_came_too_fast_says_retry_after(fast_path: bool) -> None:
    host = HostApp(poll_limit="reject")
    async with client_of(host, fast_path) as (client, app):
        with anyio.fail_after(TIMEOUT):
            task_id = (await client.call("gated", {"label": "a"})).result["taskId"]
            # The tool's poll interval is 50 ms: back-to-back polls meet the floor soon enough.
            while True:
                answer = await client.send("tasks/get", {"taskId": task_id})
                if "error" in answer.message:
                    break
                assert "retry-after" not in answer.headers
            host.release("a")
    assert 0 < assert_retry_after(answer, "taskId", task_id) <= 1000  # "1": under a second rounds up
    if fast_path:
        assert app.state.tasks_fast_path.handed_on == 0  # the fast path wrote the refusal itself
