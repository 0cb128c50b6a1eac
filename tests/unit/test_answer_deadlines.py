"""Deadlines on a person's answer (`Elicit(timeout=..., on_timeout=...)`, `ctx.elicit`), what
`Elicit` refuses, a deadline answered by the engine's sweep, and a durable question that changed
after it was answered (the replay diverges rather than take the old answer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import Client, accept, serve
from pydantic import BaseModel
from sdk_helpers import poll

from mcptasks import (
    Accepted,
    Cancelled,
    Declined,
    Elicit,
    EngineConfig,
    Result,
    SqliteTaskStore,
    TaskContext,
    task_tool,
)
from mcptasks.lowlevel import TaskEngine

pytestmark = pytest.mark.anyio


class Canary(BaseModel):
    percent: int


def test_elicit_checks_its_deadline_when_it_is_made() -> None:
    asked = Elicit("Canary size?", Canary, timeout=600, on_timeout=Canary(percent=5))
    assert (asked.timeout, asked.timeout_answer) == (600.0, {"action": "accept", "content": {"percent": 5}})
    assert Elicit("Go?", timeout=1.5).timeout_answer == {"action": "decline"}
    assert Elicit("Go?", timeout=1, on_timeout="cancel").timeout_answer == {"action": "cancel"}
    assert Elicit("Go?").timeout is None and Elicit("Go?").to_wire() == Elicit("Go?", timeout=9).to_wire()
    with pytest.raises(ValueError, match="does not fit the schema: percent"):
        Elicit("Canary size?", Canary, timeout=60, on_timeout={"percent": "five"})
    with pytest.raises(ValueError, match="positive number of seconds"):
        Elicit("Go?", timeout=0)
    with pytest.raises(ValueError, match="positive number of seconds"):
        Elicit("Go?", timeout=True)
    with pytest.raises(ValueError, match="on_timeout must be 'decline', 'cancel'"):
        Elicit("Go?", timeout=5, on_timeout="later")  # type: ignore[arg-type]
    # an invalid answer's retry keeps the deadline it asks with
    again = asked.retry_with("percent: not an integer")
    assert (again.timeout, again.timeout_answer) == (asked.timeout, asked.timeout_answer)


async def test_ctx_elicit_takes_a_deadline_and_a_default() -> None:
    @task_tool
    async def tool(ctx: TaskContext) -> dict[str, Any]:
        first = await ctx.elicit("Go?", timeout=0.2, on_timeout="cancel")
        second = await ctx.elicit("Size?", Canary, timeout=0.2, on_timeout={"percent": 7})
        third = await ctx.elicit("Sure?", timeout=0.2)
        assert isinstance(second, Accepted)
        return {
            "first": isinstance(first, Cancelled),
            "second": second.data.percent,
            "third": isinstance(third, Declined),
        }

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        done = await client.finish(task_id)
        record = await engine.store.get(task_id)
    assert done["result"]["structuredContent"] == {"first": True, "second": 7, "third": True}, done
    assert record is not None
    assert [entry["by"] for entry in record.answer_log.values()] == ["deadline"] * 3, record.answer_log


async def test_an_answer_before_the_deadline_wins_and_the_deadline_goes() -> None:
    @task_tool
    async def tool():
        answer = yield Elicit("Go?", timeout=3600)
        yield Result({"action": answer.action})

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (key,) = await client.input(task_id, count=1)
        waiting = await engine.store.get(task_id)
        assert waiting is not None and set(waiting.input_deadlines) == {key}
        assert waiting.input_deadlines[key]["at"] - waiting.updated_at == pytest.approx(3600, abs=60)
        await client.update(task_id, {key: accept({})})
        done = await client.finish(task_id)
        record = await engine.store.get(task_id)
    assert done["result"]["structuredContent"] == {"action": "accept"}
    assert (
        record is not None
        and record.answer_log[key]["by"] == "client"
        and "deadline" not in record.answer_log[key]
    )


async def test_the_sweep_answers_a_deadline_whose_body_runs_elsewhere(tmp_path: Path) -> None:
    """A record waiting past its deadline with no body here (its runner is another engine, alive):
    the recovery pass answers it as the author chose and leaves the task to its runner."""

    @task_tool
    async def tool():
        answer = yield Elicit("Go?", timeout=3600, on_timeout="cancel")
        yield Result({"action": answer.action})

    store = SqliteTaskStore(tmp_path / "t.db")
    # the run re-reads its record only every 10 s: what answers it first is the other's sweep
    async with serve(tool, store=store, input_poll_interval=10) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (key,) = await client.input(task_id, count=1)
        waiting = await store.get(task_id)
        assert waiting is not None
        # the deadline passed (as if an hour went by), as another engine sees it
        late = waiting.evolve(input_deadlines={key: {**waiting.input_deadlines[key], "at": 1.0}})
        assert await store.replace(late, expected_version=waiting.version)
        config = EngineConfig(run_tasks=False, immediate_results=False)
        async with TaskEngine(SqliteTaskStore(tmp_path / "t.db"), config=config) as other:
            await other.recover()
        swept = await store.get(task_id)
        assert (
            swept is not None
            and swept.status == "working"
            and swept.input_responses == {key: {"action": "cancel"}}
        )
        done = await client.finish(task_id, timeout=60)
        record = await store.get(task_id)
    assert done["result"]["structuredContent"] == {"action": "cancel"}, done
    assert record is not None and record.answer_log[key]["by"] == "deadline"
    assert record.answer_log[key]["deadline"] == 1.0


async def test_a_durable_question_changed_after_its_answer_diverges(tmp_path: Path) -> None:
    """The journal holds the answer to a question the code now asks differently: the replay
    does not take that answer for the new question; it stops as diverged."""
    wording = {"text": "Deploy v1?"}

    @task_tool(durable=True)
    async def deploy():
        answer = yield Elicit(wording["text"])
        yield "answered"
        yield Elicit("And then?")
        yield Result({"action": answer.action})

    url = f"sqlite:///{tmp_path / 'd.db'}"
    config = EngineConfig(immediate_results=False)
    async with TaskEngine(url, config=config, tools=[deploy]) as first:
        task_id = (await first.start(deploy, {}, owner="o")).task_id
        record = await _waiting(first, task_id, count=1)
        (key,) = record.input_requests
        await first.update(task_id, {key: accept({})}, owner="o")
        await _waiting(first, task_id, count=1, excluding=key)
    wording["text"] = "Deploy v1 to production?"  # the code changed before the next start
    async with TaskEngine(url, config=config, tools=[deploy]) as second:
        done = await _ended(second, task_id)
    assert done.status == "failed", done
    assert done.error is not None and done.error["data"]["reason"] == "journal_diverged", done.error
    assert "is asked differently from the one answered there" in done.error["message"], done.error


async def _waiting(engine: TaskEngine, task_id: str, *, count: int, excluding: str | None = None) -> Any:

    def ready(record: Any) -> bool:
        keys = set(record.input_requests)
        return record.status == "input_required" and len(keys) == count and excluding not in keys

    return await poll(lambda: engine.get(task_id, owner="o"), ready, what="input_required")


async def _ended(engine: TaskEngine, task_id: str) -> Any:

    return await poll(lambda: engine.get(task_id, owner="o"), lambda r: r.terminal, what="the end")
