"""Webhook delivery from an in-process engine to real receivers on 127.0.0.1.

Every event type arrives signed (checked with the `standardwebhooks` package) with the data the
docs promise; a 500 is retried under the same id; 410 stops the endpoint; 413 is not retried; a
redirect is not followed; a name resolving to loopback is refused without the allow flag; a
receiver that does not answer does not hold up task creation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Client, accept, serve
from pydantic import BaseModel
from webhook_helpers import SECRET, Delivery, Receiver, arrive, receiving, self_signed

from mcptasks import Accepted, Elicit, MemoryTaskStore, Result, SqliteTaskStore, task_tool
from mcptasks._runtime.operator import cancel_task, open_store
from mcptasks.lowlevel import TaskEngine
from mcptasks.metrics import metrics_app
from mcptasks.stores import TaskStore

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    confirm: bool


@task_tool
async def ask():
    answer = yield Elicit("Deploy?", schema=Confirm)
    yield Result("deployed" if isinstance(answer, Accepted) and answer.data.confirm else "kept")


@task_tool
async def done(n: int = 0):
    yield Result(f"done {n}")


@task_tool(timeout=0.2)
async def boom():
    yield "about to time out"
    await anyio.sleep_forever()
    yield Result("never")


@task_tool
async def forever():
    yield "waiting"
    await anyio.sleep_forever()
    yield Result("never")


TOOLS = (ask, done, boom, forever)


@asynccontextmanager
async def engine_for(
    *urls: str, store: TaskStore | None = None, allow_private: bool = True, **options: Any
) -> AsyncIterator[tuple[TaskEngine, Client]]:
    settings: dict[str, Any] = {
        "webhooks": urls,
        "webhook_secret": SECRET,
        "webhook_allow_private": allow_private,
        "webhook_timeout": 5.0,
        "webhook_sweep_interval": 0.1,
        **options,
    }
    async with serve(*TOOLS, store=store or MemoryTaskStore(), **settings) as (engine, protocol):
        yield engine, Client(protocol)


def of_type(receiver: Receiver, kind: str) -> list[Delivery]:
    return [d for d in receiver.unique().values() if d.event["type"] == kind]


async def outbox_empty(engine: TaskEngine, task_id: str) -> None:
    async def empty() -> bool:
        record = await engine.store.get(task_id)
        return record is not None and not record.outbox

    deadline = anyio.current_time() + 60
    while not await empty():
        assert anyio.current_time() < deadline, "the outbox did not empty"
        await anyio.sleep(0.05)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_every_event_arrives_signed_with_its_data(tmp_path: Path, backend: str) -> None:
    store = MemoryTaskStore() if backend == "memory" else SqliteTaskStore(tmp_path / "tasks.db")
    with receiving() as receiver:
        async with engine_for(receiver.url, store=store) as (engine, client):
            asked = await client.start("ask")
            questions = await client.input(asked)
            first = await arrive(lambda: of_type(receiver, "task.input_required"), "task.input_required")
            (key,) = questions
            assert await client.update(asked, {key: accept({"confirm": True})}) == {"resultType": "complete"}
            failing = await client.start("boom")
            waiting = await client.start("forever")
            await client.wait(waiting, "working")
            await client.cancel(waiting)
            for task_id in (asked, failing, waiting):
                await client.finish(task_id)
            await arrive(lambda: len(receiver.unique()) == 4, "four events")
            for task_id in (asked, failing, waiting):
                await outbox_empty(engine, task_id)
            stats = engine.webhooks.stats
    assert all(d.verified for d in receiver.deliveries), receiver.deliveries
    (asked_event,) = [e.event for e in first]
    assert asked_event["data"]["taskId"] == asked
    assert asked_event["data"]["tool"] == "ask"
    assert asked_event["data"]["status"] == "input_required"
    assert asked_event["data"]["inputRequests"] == questions  # as the client saw them
    by_type = {d.event["type"]: d for d in receiver.unique().values()}
    assert set(by_type) == {"task.input_required", "task.completed", "task.failed", "task.cancelled"}
    completed = by_type["task.completed"].event
    assert completed["data"]["taskId"] == asked
    assert completed["data"]["result"]["content"][0]["text"] == "deployed"
    failed = by_type["task.failed"].event
    assert failed["data"]["taskId"] == failing and failed["data"]["error"]["message"]
    assert by_type["task.cancelled"].event["data"]["taskId"] == waiting
    for delivery in by_type.values():
        assert delivery.id.startswith("msg_")
        assert set(delivery.event) == {"type", "timestamp", "data"}
        assert delivery.headers["content-type"] == "application/json"
        assert delivery.path == "/hooks"
    assert stats.deliveries["delivered"] == 4


async def test_a_500_is_retried_with_the_same_id_and_body() -> None:
    def flaky(delivery: Delivery) -> tuple[int, dict[str, str]]:
        return (500, {}) if delivery.attempt == 1 else (200, {})

    with receiving(flaky) as receiver:
        async with engine_for(receiver.url) as (engine, client):
            task_id = await client.start("done", {"n": 1})
            await client.finish(task_id)
            await arrive(lambda: len(receiver.events()) == 2, "the event twice")
            await outbox_empty(engine, task_id)
            stats = engine.webhooks.stats
            exposition = await metrics_text(engine)
    first, second = receiver.events()
    assert first.id == second.id and first.body == second.body
    assert second.attempt == 2
    assert stats.deliveries["retried"] == 1 and stats.deliveries["delivered"] == 1
    assert stats.failures["http_5xx"] == 1
    assert 'mcptasks_webhook_deliveries_total{outcome="delivered"} 1.0' in exposition
    assert 'mcptasks_webhook_deliveries_total{outcome="retried"} 1.0' in exposition
    assert 'mcptasks_webhook_deliveries_total{outcome="gone"} 0.0' in exposition
    assert 'mcptasks_webhook_failures_total{reason="http_5xx"} 1.0' in exposition
    assert "mcptasks_webhook_outbox_depth " in exposition


async def metrics_text(engine: TaskEngine) -> str:
    """One scrape of `metrics_app(engine)`, through its ASGI interface."""
    app = metrics_app(engine)
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": [(b"host", b"127.0.0.1")]}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    return b"".join(m.get("body", b"") for m in sent[1:]).decode()


async def test_410_stops_the_endpoint_and_others_go_on() -> None:
    with receiving(lambda _: (410, {})) as gone, receiving() as fine:
        async with engine_for(gone.url, fine.url) as (engine, client):
            first = await client.start("done", {"n": 1})
            await client.finish(first)
            await arrive(lambda: engine.webhooks.gone, "the endpoint to stop")
            await outbox_empty(engine, first)
            second = await client.start("done", {"n": 2})
            await client.finish(second)
            await arrive(lambda: len(fine.unique()) == 2, "both events at the other endpoint")
            await outbox_empty(engine, second)
            stats = engine.webhooks.stats
    assert len(gone.deliveries) == 1  # told once, never again
    assert stats.deliveries["gone"] == 1


async def test_413_is_not_retried() -> None:
    with receiving(lambda _: (413, {})) as receiver:
        async with engine_for(receiver.url) as (engine, client):
            task_id = await client.start("done")
            await client.finish(task_id)
            await arrive(lambda: engine.webhooks.stats.deliveries["dropped"] == 1, "the drop")
            await outbox_empty(engine, task_id)
    assert len(receiver.deliveries) == 1


async def test_a_redirect_is_not_followed() -> None:
    with receiving() as target:

        def redirect(_: Delivery) -> tuple[int, dict[str, str]]:
            return 307, {"location": target.url}

        with receiving(redirect) as receiver:
            async with engine_for(receiver.url) as (engine, client):
                task_id = await client.start("done")
                await client.finish(task_id)
                await arrive(lambda: len(receiver.deliveries) >= 2, "a retry after the redirect")
                failures = engine.webhooks.stats.failures["http_3xx"]
    ids = {d.id for d in receiver.deliveries}
    assert len(ids) == 1 and failures >= 1
    assert target.deliveries == []  # the redirect was never followed


async def test_a_name_resolving_to_loopback_is_refused_without_the_flag() -> None:
    with receiving() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        async with engine_for(url, allow_private=False) as (engine, client):
            task_id = await client.start("done")
            await client.finish(task_id)
            await arrive(lambda: engine.webhooks.stats.failures["refused_address"] >= 1, "a refusal")
    assert receiver.deliveries == []


async def test_a_receiver_that_does_not_answer_does_not_hold_up_tasks() -> None:
    with receiving() as receiver:
        receiver.hold.clear()  # every request waits until released
        async with engine_for(receiver.url, webhook_timeout=60.0) as (engine, client):
            ids = [await client.start("done", {"n": n}) for n in range(40)]
            for task_id in ids:
                await client.finish(task_id)
            # Every task was created and finished while no delivery had been answered.
            assert engine.webhooks.stats.deliveries["delivered"] == 0
            receiver.hold.set()
            await arrive(lambda: len(receiver.unique()) == 40, "every event once released", bound=120)


async def test_https_goes_to_the_checked_address_under_its_name_and_verifies_the_certificate(
    tmp_path: Path,
) -> None:
    """The connection is made to the resolved address, with the host name in SNI (and `Host`),
    and the certificate is verified against that name: an untrusted one fails as `tls_error`."""
    with receiving(tls=self_signed(tmp_path)) as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        async with engine_for(url) as (engine, client):
            task_id = await client.start("done")
            await client.finish(task_id)
            await arrive(lambda: engine.webhooks.stats.failures["tls_error"] >= 1, "a TLS failure")
    assert "localhost" in receiver.sni
    assert receiver.deliveries == []  # nothing was sent over an unverified connection


@task_tool(ttl=1)
async def brief():
    yield Result("gone soon")


async def test_a_pending_event_keeps_its_record_past_its_ttl_until_delivered() -> None:
    """A record whose event is still being retried is kept (its `ttl` extended) until the event
    is delivered, although the task's own `ttl` (1 s) ran out long before."""

    def twice_down(delivery: Delivery) -> tuple[int, dict[str, str]]:
        return (503, {}) if delivery.attempt <= 2 else (200, {})

    with receiving(twice_down) as receiver:
        async with serve(
            brief, webhooks=(receiver.url,), webhook_secret=SECRET, webhook_allow_private=True,
            webhook_sweep_interval=0.1,
        ) as (engine, protocol):  # fmt: skip
            client = Client(protocol)
            task_id = await client.start("brief")
            await client.finish(task_id)
            await arrive(lambda: [d for d in receiver.events() if d.attempt == 3], "the third attempt")
            assert engine.webhooks.stats.deliveries["delivered"] == 1
    (delivered,) = [d for d in receiver.events() if d.attempt == 3]
    assert delivered.event["data"]["taskId"] == task_id


async def test_an_operator_cancel_from_another_process_reaches_every_endpoint(tmp_path: Path) -> None:
    # `mcptasks admin cancel` and the dashboard know no endpoints: the server's sweep addresses
    # their event to each of its own, under one id.
    database = tmp_path / "tasks.db"
    with receiving() as first, receiving() as second:
        async with engine_for(first.url, second.url, store=SqliteTaskStore(database)) as (engine, client):
            task_id = await client.start("forever")
            await client.wait(task_id, "working")
            async with open_store(f"sqlite:///{database}") as operator_store:
                cancelled = await cancel_task(operator_store, task_id)
            assert cancelled is not None and cancelled.status == "cancelled"
            for receiver in (first, second):
                await arrive(lambda r=receiver: of_type(r, "task.cancelled"), "the cancel at each endpoint")
            await outbox_empty(engine, task_id)
            await client.finish(task_id)
    (at_first,), (at_second,) = of_type(first, "task.cancelled"), of_type(second, "task.cancelled")
    assert at_first.id == at_second.id
    assert at_first.event["data"]["taskId"] == task_id
    assert at_first.event["data"]["statusMessage"] == "Cancelled by an operator."
    assert len(first.deliveries) == len(second.deliveries) == 1
