"""Immediate results follow one rule on every store: a body that ends at once is answered inline.

A body that returns without yielding anything and without waiting on real work gets its result
as the `tools/call` answer; one that yields a status or sleeps first gets a task, whatever the
store (memory, an SQLite file, PostgreSQL, Redis).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import opted_in_meta, serve
from operator_stores import store_url

from mcptasks import Status, task_tool
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
    yield n


@task_tool(task_support="optional")
async def sleeps_first(n: int) -> int:
    """Waits on the clock before its result."""
    await anyio.sleep(0.2)
    return n


async def answers(url: str) -> dict[str, str]:
    """The `resultType` each tool's opted-in call gets on the store at `url`."""
    seen: dict[str, str] = {}
    async with serve(
        instant, reports_first, sleeps_first, store=store_from_url(url), immediate_results=True
    ) as (
        _,
        protocol,
    ):
        for name in ("instant", "reports_first", "sleeps_first"):
            answer = await protocol.call_tool(name, {"n": 21}, meta=opted_in_meta())
            seen[name] = answer["resultType"]
            if name == "instant":
                assert answer["structuredContent"] == {"result": 42}
    return seen


EXPECTED = {"instant": "complete", "reports_first": "task", "sleeps_first": "task"}


async def test_immediate_results_on_memory() -> None:
    assert await answers("memory://") == EXPECTED


class TestSharedStores:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    async def test_immediate_results_on_shared_stores(self, store_url: str) -> None:
        assert await answers(store_url) == EXPECTED
