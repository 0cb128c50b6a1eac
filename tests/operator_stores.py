"""Shared stores and a mixed workload for the operator tools (admin CLI, dashboard).

`store_url` is a fixture parametrized over SQLite, PostgreSQL and Redis (the latter two skip when
the server is not running). `workload` runs one task per interesting state in a real engine:
working, input_required, failed, completed (and a tool error, which completes with isError).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from helpers import wait_for_status

from mcptasks import Elicit, EngineConfig, ProtocolError, Result, SqliteTaskStore, task_tool
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord
from mcptasks.stores.url import store_from_url

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/15"


def seeded_sqlite(path: Path, *records: TaskRecord) -> str:
    """Write `records` into a new SQLite store at `path` (from sync code); its URL."""

    async def write() -> None:
        store = SqliteTaskStore(path)
        await store.open()
        try:
            for record in records:
                await store.create(record)
        finally:
            await store.close()

    anyio.run(write)
    return f"sqlite:///{path}"


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def _drop_schema(schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped,unused-ignore]

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _drop_prefix(prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A URL naming an empty shared store of each kind; its data is removed afterwards."""
    kind = request.param
    name = f"mcptasks_op_{uuid.uuid4().hex}"
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    elif kind == "postgresql":
        if not listening(5432):
            pytest.skip("no PostgreSQL on 127.0.0.1:5432")
        yield f"{PG_URL}?schema={name}"
        await _drop_schema(name)
    else:
        if not listening(6379):
            pytest.skip("no Redis on 127.0.0.1:6379")
        yield f"{REDIS_URL}?prefix={name}"
        await _drop_prefix(name)


@dataclass
class Workload:
    """The running engine and the ids of the tasks it holds, by state."""

    engine: TaskEngine
    ids: dict[str, str] = field(default_factory=dict)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    """Set when the `spin` body's cancellation reached it."""


@asynccontextmanager
async def workload(url: str, owner: str = "alice@example.com") -> AsyncIterator[Workload]:
    """A running engine on `url` with a working, an input_required, a failed and a completed task."""
    engine = TaskEngine(store_from_url(url), config=EngineConfig(input_poll_interval=0.5))
    load = Workload(engine)

    @task_tool(poll_interval=1)
    async def spin(label: str = "spin"):
        try:
            yield "<script>alert('spin')</script> & <b>busy</b>"
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            load.stopped.set()
            raise
        yield Result(label)  # pragma: no cover

    @task_tool(poll_interval=1)
    async def ask():
        answer = yield Elicit("Deploy to production?")
        yield Result(str(answer))

    @task_tool
    async def boom():
        yield "about to fail"
        raise ProtocolError(-32603, "disk <full>")

    @task_tool
    async def done(n: int = 1):
        yield Result(f"finished {n}")

    async with engine:
        for name, tool, arguments in (
            ("working", spin, {"label": "x"}),
            ("input_required", ask, {}),
            ("failed", boom, {}),
            ("completed", done, {"n": 7}),
        ):
            record = await engine.start(tool, arguments, owner=owner)
            await wait_for_status(engine, record.task_id, name, owner=owner)
            load.ids[name] = record.task_id
        yield load
