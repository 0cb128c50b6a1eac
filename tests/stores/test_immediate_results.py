"""Immediate results follow one rule on every store: a body that ends at once is answered inline.

A body that returns without waiting on real work gets its result as the `tools/call` answer, even
when it yields statuses first; one that sleeps or asks a question first gets a task, whatever the
store (memory, an SQLite file, PostgreSQL, Redis).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import opted_in_meta, serve, wait_for
from operator_stores import store_url

from mcptasks import Elicit, Result, Status, task_tool
from mcptasks.stores.url import store_from_url

__all__ = ["store_url"]

pytestmark = pytest.mark.anyio


@task_tool(task_support="optional")
async def instant(n: int) -> int:
    """No work at all."""
    return n * 2


@task_tool(task_support="optional")
async def reports_first(n: int) -> Any:
    """Yields a status before its result."""
    yield Status("on it")
    yield Result(n)


@task_tool(task_support="optional")
async def asks_first(n: int) -> Any:
    """Asks a question before its result."""
    yield Elicit("go on?")
    yield Result(n)


@task_tool(task_support="optional")
async def sleeps_first(n: int) -> int:
    """Waits on the clock before its result."""
    await anyio.sleep(0.2)
    return n


async def answers(url: str) -> dict[str, str]:
    """The `resultType` each tool's opted-in call gets on the store at `url`."""
    seen: dict[str, str] = {}
    async with serve(
        instant, reports_first, asks_first, sleeps_first, store=store_from_url(url), immediate_results=True
    ) as (
        _,
        protocol,
    ):
        for name in ("instant", "reports_first", "asks_first", "sleeps_first"):
            answer = await protocol.call_tool(name, {"n": 21}, meta=opted_in_meta())
            seen[name] = answer["resultType"]
            if name in ("instant", "reports_first"):
                assert answer["structuredContent"] == {"result": 42 if name == "instant" else 21}
    return seen


@task_tool(task_support="optional")
async def reports_then_waits(n: int) -> Any:
    """Yields a status, then waits until the server stops."""
    yield Status(f"halfway to {n}")
    await anyio.sleep_forever()
    yield Result(n)  # pragma: no cover


async def held_status_is_written(url: str) -> None:
    """A status held while the call waited for an immediate result reaches the record."""
    async with serve(reports_then_waits, store=store_from_url(url), immediate_results=True) as (_, protocol):
        created = await protocol.call_tool("reports_then_waits", {"n": 7}, meta=opted_in_meta())
        assert created["resultType"] == "task"
        seen = await wait_for(
            protocol,
            created["taskId"],
            lambda task: task.get("statusMessage") == "halfway to 7",
            what="the status",
        )
        assert seen["status"] == "working"


EXPECTED = {"instant": "complete", "reports_first": "complete", "asks_first": "task", "sleeps_first": "task"}


async def test_immediate_results_on_memory() -> None:
    assert await answers("memory://") == EXPECTED


async def test_a_held_status_is_written_on_memory() -> None:
    await held_status_is_written("memory://")


class TestSharedStores:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    async def test_immediate_results_on_shared_stores(self, store_url: str) -> None:
        assert await answers(store_url) == EXPECTED

    async def test_a_held_status_is_written_on_shared_stores(self, store_url: str) -> None:
        await held_status_is_written(store_url)
