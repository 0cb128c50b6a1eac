"""Values no store can keep (a string holding a lone surrogate, which UTF-8 cannot encode), on
every store: an answer is refused at `tasks/update` and the task keeps waiting; a step returning
one fails as `StepFailed` naming the reason, is journalled so, and a replay does not run it again.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Client, accept, opted_in_meta, serve, wait_for
from operator_stores import PG_URL, REDIS_URL, _drop_prefix, _drop_schema, listening

from mcptasks import (
    Elicit,
    MemoryTaskStore,
    ProtocolError,
    Result,
    StepFailed,
    TaskContext,
    Yields,
    task_tool,
)
from mcptasks.lowlevel import ANONYMOUS_OWNER
from mcptasks.stores import TaskStore
from mcptasks.stores.url import store_from_url

pytestmark = pytest.mark.anyio

LONE = "\ud800"
"""Half of a UTF-16 surrogate pair: JSON parsers in Python read it from the escape `\\ud800`."""

ANSWER_SCHEMA = {"type": "object", "properties": {"s": {"type": "string"}}}


class Stores:
    """A new store object per engine over the same data (one object for memory)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.memory = MemoryTaskStore()

    def new(self) -> TaskStore:
        return self.memory if self.url == "memory://" else store_from_url(self.url)


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    kind = request.param
    name = f"mcptasks_unstorable_{uuid.uuid4().hex}"
    if kind == "memory":
        yield Stores("memory://")
    elif kind == "sqlite":
        yield Stores(f"sqlite:///{tmp_path / 'tasks.db'}")
    elif kind == "postgresql":
        if not listening(5432):
            pytest.skip("no PostgreSQL on 127.0.0.1:5432")
        yield Stores(f"{PG_URL}?schema={name}")
        await _drop_schema(name)
    else:
        if not listening(6379):
            pytest.skip("no Redis on 127.0.0.1:6379")
        yield Stores(f"{REDIS_URL}?prefix={name}")
        await _drop_prefix(name)


@task_tool(durable=True)
async def ask() -> Yields:
    answer = yield Elicit("Your name?", ANSWER_SCHEMA)
    yield Result(answer.data["s"])


async def test_an_answer_that_cannot_be_stored_is_refused_and_the_task_keeps_waiting(stores: Stores) -> None:
    async with serve(ask, store=stores.new(), claim_interval=0.05) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("ask")
        (key,) = await client.input(task_id, count=1)
        with pytest.raises(ProtocolError) as refused:
            await client.update(task_id, {key: accept({"s": f"Ada{LONE}"})})
        assert refused.value.code == -32602
        assert refused.value.data == {"reason": "invalid_value", "key": key}
        assert f"inputResponses[{key!r}].content.s" in refused.value.message
        assert "lone surrogate" in refused.value.message
        waiting = await client.get(task_id)
        assert waiting["status"] == "input_required" and list(waiting["inputRequests"]) == [key]
        await client.update(task_id, {key: accept({"s": "Ada"})})
        final = await client.finish(task_id)
    assert final["status"] == "completed", final
    assert final["result"]["content"][0]["text"] == "Ada"


class Runs:
    """Counts the runs of the step function."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> dict[str, str]:
        self.count += 1
        return {"name": f"Ada{LONE}"}


async def test_a_step_value_that_cannot_be_stored_fails_the_step_once_and_the_replay_does_not_run_it(
    stores: Stores,
) -> None:
    if stores.url == "memory://":
        pytest.skip("a new memory store shares nothing with the first: there is no hand-over to replay")
    runs = Runs()

    @task_tool(durable=True)
    async def lookup(ctx: TaskContext) -> Yields:
        try:
            await ctx.step(runs)
        except StepFailed as failed:
            failure = f"{failed.type}: {failed.message}"
        answer = yield Elicit("Go on?", ANSWER_SCHEMA)
        yield Result({"failure": failure, "answer": answer.data["s"]})

    async with serve(lookup, store=stores.new(), claim_interval=0.05) as (first, protocol):
        task_id = await Client(protocol).start("lookup")
        await Client(protocol).input(task_id, count=1)
    # the first engine stopped gracefully and handed the task over; the second replays the body
    async with serve(lookup, store=stores.new(), claim_interval=0.05) as (second, protocol):
        await wait_for(second, task_id, lambda record: record.runner == second.instance_id, what="the claim")
        client = Client(protocol)
        (key,) = await client.input(task_id, count=1)
        await client.update(task_id, {key: accept({"s": "yes"})})
        final = await client.finish(task_id)
        journal = await second.store.read_journal(task_id)
    assert final["status"] == "completed", final
    failure = final["result"]["structuredContent"]["failure"]
    assert failure.startswith("ValueError: step 'Runs' returned a value that cannot be stored: value.name")
    assert "lone surrogate" in failure
    assert runs.count == 1  # the step ran once: its failure is journalled and replayed
    assert '"error"' in journal[0] and first.instance_id != second.instance_id


async def test_a_body_yielding_text_that_cannot_be_stored_fails_its_task_saying_why(stores: Stores) -> None:
    @task_tool
    async def say(where: str, ctx: TaskContext) -> Yields:
        if where == "status":
            yield f"working on {LONE}"
        elif where == "checkpoint":
            await ctx.checkpoint({"cursor": LONE})
        elif where == "error":
            raise ProtocolError(-32603, f"broken {LONE}", {"detail": LONE})
        yield Result(f"done {LONE}")

    async with serve(say, store=stores.new()) as (_, protocol):
        client = Client(protocol)
        ended: dict[str, Any] = {}
        for where in ("status", "checkpoint", "error", "result"):
            ended[where] = await client.finish(await client.start("say", {"where": where}))
    assert ended["status"]["error"]["data"] == {"reason": "invalid_value"}
    assert "the status message is not Unicode text" in ended["status"]["error"]["message"]
    assert "checkpoint.cursor is not Unicode text" in ended["checkpoint"]["result"]["content"][0]["text"]
    assert ended["error"]["error"] == {"code": -32603, "message": "broken \\ud800"}
    assert ended["result"]["error"]["data"] == {"reason": "invalid_result"}
    assert "result.content[0].text is not Unicode text" in ended["result"]["error"]["message"]


async def test_an_answer_before_the_task_that_cannot_be_stored_is_refused(stores: Stores) -> None:
    @task_tool(durable=True, input_before_task=True)
    async def confirm() -> Yields:
        answer = yield Elicit("Sure?", ANSWER_SCHEMA, key="sure", before_task=True)
        yield Result(answer.data["s"])

    async with serve(confirm, store=stores.new()) as (engine, protocol):
        first = await protocol.call_tool("confirm", {}, meta=opted_in_meta(), owner=ANONYMOUS_OWNER)
        with pytest.raises(ProtocolError) as refused:
            await protocol.call_tool(
                "confirm",
                {},
                meta=opted_in_meta(),
                owner=ANONYMOUS_OWNER,
                input_responses={"sure": accept({"s": LONE})},
                request_state=first["requestState"],
            )
        assert refused.value.code == -32602 and refused.value.data == {
            "reason": "invalid_value",
            "key": "sure",
        }
        assert await engine.store.list_active() == []  # no task was created
