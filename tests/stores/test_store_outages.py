"""A store outage is not a crash: private Redis and PostgreSQL servers are killed for ~6 s while a
task waits for input and while a body finishes. Requests during the outage get a clear JSON-RPC
error at once; the tasks carry on and end normally once the store is back.

The servers are private (own port, own directory; see `private_servers.py`): the shared ones are
never touched. The 6 s pause is the outage being simulated, not a synchronisation: every wait for
an effect polls observable state under a generous bound.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from helpers import Client, accept, serve, wait_idle
from private_servers import private_postgres, private_redis
from processes import clean_env, free_port, serving_http
from sdk_helpers import RawClient, RawResponse, poll

from mcptasks import Elicit, ProtocolError, Result, TaskContext, task_tool
from mcptasks.authoring import TaskTool
from mcptasks.lowlevel import StoreRetry
from mcptasks.stores.url import store_from_url

pytestmark = pytest.mark.anyio

APP = Path(__file__).resolve().parents[1] / "robustness_app.py"
OUTAGE = 6.0
"""Seconds the store stays down."""
BOUND = 60.0
"""Upper bound of any wait for an effect (a loaded 2-core machine); never a synchronisation."""
QUICK = 10.0
"""A request during the outage must be answered within this (no hang on a dead connection)."""


@pytest.fixture(scope="module", params=["redis", "postgres"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "redis":
        pytest.importorskip("redis")
        with private_redis() as redis:
            yield redis
    else:
        pytest.importorskip("asyncpg")
        with private_postgres() as postgres:
            yield postgres


@task_tool(poll_interval=0.1)
async def ask(ctx: TaskContext):
    await ctx.checkpoint({"asked": True})
    answer = yield Elicit("value?")
    yield Result({"answer": answer.data, "saved": ctx.saved})


def finishing_tool(text: str) -> tuple[TaskTool, anyio.Event, anyio.Event]:
    """A tool that reports "working", waits for `release`, then ends with `text`; `ended` is set
    once the body is over (its end may not be recorded yet)."""
    release, ended = anyio.Event(), anyio.Event()

    @task_tool(poll_interval=0.1)
    async def finisher():
        yield "working"
        await release.wait()
        try:
            yield Result(text)
        finally:
            ended.set()

    return finisher, release, ended


async def test_a_task_waiting_for_input_rides_out_an_outage(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcptasks")
    async with serve(ask, store=store_from_url(server.url), input_poll_interval=0.2) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("ask")
        await client.input(task_id, count=1)
        server.kill()
        try:
            with anyio.fail_after(QUICK):
                with pytest.raises(ProtocolError) as refused:
                    await client.get(task_id)
            assert refused.value.code == -32603
            assert "task store could not serve this request" in refused.value.message
            assert refused.value.data["reason"] == "store_unavailable"
            assert refused.value.data["retryAfterMs"] > 0
            with (
                anyio.fail_after(QUICK),
                pytest.raises(ProtocolError, match="task store could not serve this request"),
            ):
                await client.call("ask")
            await anyio.sleep(OUTAGE)  # the outage itself
            assert engine.active_runs == 1  # the body still waits; nothing was failed
        finally:
            server.start()
        with anyio.fail_after(BOUND):
            key = await _retrying(lambda: client.answer_only(task_id, accept({"v": 1})))
        assert key
        final = await _retrying(lambda: client.finish(task_id, timeout=BOUND))
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"] == {"answer": {"v": 1}, "saved": {"asked": True}}
    assert "task store failed while waiting for input" in caplog.text


async def test_a_body_finishing_during_an_outage_keeps_its_result(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcptasks")
    finisher, release, ended = finishing_tool("finished while the store was down")
    async with serve(finisher, store=store_from_url(server.url)) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("finisher")
        await client.wait(task_id, "working")
        server.kill()
        try:
            release.set()
            with anyio.fail_after(BOUND):
                await ended.wait()  # the body is over; its end cannot be written yet
            await anyio.sleep(OUTAGE)
            assert engine.active_runs == 1  # still trying to record the end
        finally:
            server.start()
        final = await _retrying(lambda: client.finish(task_id, timeout=BOUND))
    assert final["status"] == "completed", final
    assert final["result"]["content"][0]["text"] == "finished while the store was down"
    assert f"task store failed while recording the end of task {task_id}" in caplog.text


async def test_an_end_that_outlasts_the_retry_budget_is_written_when_the_store_is_back(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcptasks")
    finisher, release, _ = finishing_tool("kept in memory")
    retry = StoreRetry(budget=0.5, initial=0.1, maximum=0.2)
    async with serve(finisher, store=store_from_url(server.url), store_retry=retry, lease_ttl=2.0) as (
        engine,
        protocol,
    ):
        client = Client(protocol)
        task_id = await client.start("finisher")
        await client.wait(task_id, "working")
        server.kill()
        try:
            release.set()
            await wait_idle(engine, BOUND)  # the budget runs out; the end is kept
            await anyio.sleep(OUTAGE)
        finally:
            server.start()
        final = await _retrying(lambda: client.finish(task_id, timeout=BOUND))
    assert final["status"] == "completed", final  # not failed as worker_lost
    assert final["result"]["content"][0]["text"] == "kept in memory"
    assert "it is kept and written once the store answers" in caplog.text


async def test_a_body_fails_saying_so_when_the_store_stays_down_past_the_budget(server: Any) -> None:
    retry = StoreRetry(budget=0.5, initial=0.1, maximum=0.2)
    async with serve(
        ask, store=store_from_url(server.url), store_retry=retry, input_poll_interval=0.1, lease_ttl=2.0
    ) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("ask")
        await client.input(task_id, count=1)
        server.kill()
        try:
            await wait_idle(engine, BOUND)
        finally:
            server.start()
        final = await _retrying(lambda: client.finish(task_id, timeout=BOUND))
    assert final["status"] == "failed", final
    assert final["error"]["data"]["reason"] == "store_unavailable"
    assert "kept failing" in final["error"]["message"]
    assert "waiting for input" in final["error"]["message"]


async def test_over_http_requests_during_an_outage_get_a_clear_error_and_the_task_goes_on(
    server: Any, tmp_path: Path
) -> None:
    """The same through a real `mcptasks serve` process and the Streamable HTTP transport."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = clean_env(MCPTASKS_INPUT_POLL_INTERVAL="0.2")
    extra = ("--store", server.url)
    with serving_http(APP, port=port, log=tmp_path / "server.log", extra=extra, env=env):
        async with httpx2.AsyncClient(timeout=BOUND) as http:
            client = RawClient(http, url)
            created = (await client.call("ask")).result
            task_id = created["taskId"]
            await poll(lambda: client.get(task_id), lambda t: t["status"] == "input_required", what="input")
            (key,) = (await client.get(task_id))["inputRequests"]
            server.kill()
            try:
                with anyio.fail_after(QUICK):
                    refused = await client.send("tasks/get", {"taskId": task_id})
                error = refused.message["error"]
                assert error["code"] == -32603
                assert "task store could not serve this request" in error["message"]
                assert error["data"]["reason"] == "store_unavailable"
                assert error["data"]["retryAfterMs"] == 1000
                assert refused.headers.get("retry-after") == "1", refused.headers
                await anyio.sleep(OUTAGE)
            finally:
                server.start()

            async def answer() -> RawResponse:
                return await client.send(
                    "tasks/update", {"taskId": task_id, "inputResponses": {key: accept({"v": 2})}}
                )

            answered = await poll(answer, lambda r: "result" in r.message, what="the store back")
            assert answered.message["result"]["resultType"] == "complete"

            async def state() -> dict[str, Any]:
                # Just after a restart a request may still meet a connection the old server closed:
                # that is a clear store_unavailable error, and the next poll is answered.
                response = await client.send("tasks/get", {"taskId": task_id})
                if "result" in response.message:
                    return dict(response.message["result"])
                assert response.message["error"]["data"]["reason"] == "store_unavailable", response.message
                return {"status": "unknown: the store is reconnecting"}

            final = await poll(state, lambda t: t["status"] in ("completed", "failed"), what="the end")
    assert final["status"] == "completed", final
    assert final["result"]["structuredContent"] == {"answer": {"v": 2}}


async def _retrying(call: Any) -> Any:
    """`call()` until the store answers (just after a restart the first requests may still fail)."""
    with anyio.fail_after(BOUND):
        while True:
            try:
                return await call()
            except ProtocolError as exc:
                if (exc.data or {}).get("reason") != "store_unavailable":
                    raise
            await anyio.sleep(0.1)
