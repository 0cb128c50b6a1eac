"""Durable bodies (`durable=True`): steps and questions journalled, replayed by the next run.

A hand-over is real here: the first engine stops (a graceful shutdown, which releases its
durable tasks) while the body waits, and a second engine on the same store claims the task and
replays the body from its journal. The process-level proofs (SIGTERM, kill -9, replicas on
PostgreSQL and Redis) are in tests/durable.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import Client, accept, opted_in_meta, serve, wait_for, wait_for_status

from mcptasks import (
    Elicit,
    EngineConfig,
    Limits,
    MemoryTaskStore,
    ProtocolError,
    Result,
    SqliteTaskStore,
    Step,
    StepFailed,
    TaskContext,
    ToolError,
    Yields,
    task_tool,
)
from mcptasks.authoring import TaskTool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine
from mcptasks.stores import TaskStore

pytestmark = pytest.mark.anyio

QUICK = EngineConfig(claim_interval=0.05, immediate_results=False)


class Calls:
    """Counts how often each step function really ran."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def __call__(self, name: str) -> str:
        self.made.append(name)
        return f"did {name}"


class Stores:
    """One task store as each engine (each server) opens it: the same object for memory, a new
    store over the same file for SQLite (an engine closes its store when it stops)."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self.path = path
        self.memory = MemoryTaskStore()

    def new(self) -> TaskStore:
        return self.memory if self.kind == "memory" else SqliteTaskStore(self.path)

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[Any]:
        if self.kind == "memory":
            yield self.memory
            return
        store = SqliteTaskStore(self.path)
        await store.open()
        try:
            yield store
        finally:
            await store.close()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    return Stores(request.param, tmp_path / "tasks.db")


@asynccontextmanager
async def engine_on(
    stores: Stores, *tools: TaskTool, config: EngineConfig = QUICK
) -> AsyncIterator[TaskEngine]:
    async with TaskEngine(stores.new(), config=config, tools=tools) as engine:
        yield engine


async def journal_of(stores: Stores, task_id: str) -> list[dict[str, Any]]:
    async with stores.opened() as store:
        return [json.loads(entry) for entry in await store.read_journal(task_id)]


def approval_tool(calls: Calls) -> TaskTool:
    @task_tool(durable=True)
    async def approve(ctx: TaskContext) -> Yields:
        before = await ctx.step(calls, "before")
        yield "asking"
        answer = yield Elicit("ship it?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        after = await ctx.step(calls, "after")
        yield Result({"before": before, "after": after, "ok": answer.data["ok"]})

    return approve


async def test_a_handed_over_body_replays_its_steps_and_keeps_the_open_question_key(store: Stores) -> None:
    calls = Calls()
    tool = approval_tool(calls)
    async with engine_on(store, tool) as first:
        task_id = (await first.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        asked = await wait_for_status(first, task_id, "input_required")
    released = await fresh_get(store, task_id)
    assert released.runner is None and released.status == "input_required"  # handed over, not failed
    assert list(released.input_requests) == list(asked.input_requests) == ["input-1"]
    done = await answered_after_restart(store, tool, task_id, {"input-1": accept({"ok": True})})
    assert done.result["structuredContent"] == {"before": "did before", "after": "did after", "ok": True}
    assert calls.made == ["before", "after"]  # the first step did not run again
    kinds = [(entry["kind"], entry["name"]) for entry in await journal_of(store, task_id)]
    assert kinds == [
        ("step", "Calls"),
        ("ask", "elicitation/create"),
        ("answer", "elicitation/create"),
        ("step", "Calls"),
    ]


async def asking_then_stopped(stores: Stores, tool: TaskTool) -> str:
    """Start `tool` on an engine, wait until its body asks, stop the engine (a graceful stop,
    which hands the durable task over); the task's id."""
    async with engine_on(stores, tool) as first:
        task_id = (await first.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        await wait_for_status(first, task_id, "input_required")
    return task_id


async def answered_after_restart(
    stores: Stores, tool: TaskTool, task_id: str, answers: dict[str, Any]
) -> Any:
    """A second engine claims the task and replays it; answer it; its completed record."""
    async with engine_on(stores, tool) as second:
        await claimed(second, task_id)
        await second.update(task_id, answers, owner=ANONYMOUS_OWNER)
        return await wait_for_status(second, task_id, "completed")


async def claimed(engine: TaskEngine, task_id: str) -> None:
    """Wait until `engine` claimed the handed-over task."""
    await wait_for(engine, task_id, lambda record: record.runner == engine.instance_id, what="the claim")


async def fresh_get(stores: Stores, task_id: str) -> Any:
    async with stores.opened() as store:
        record = await store.get(task_id)
    assert record is not None
    return record


async def test_an_answer_sent_while_no_server_runs_the_body_is_taken_by_the_replay(store: Stores) -> None:
    calls = Calls()
    tool = approval_tool(calls)
    task_id = await asking_then_stopped(store, tool)
    # answered between the two servers (another replica answers from the store)
    async with engine_on(store, config=EngineConfig(run_tasks=False)) as front:
        await front.update(task_id, {"input-1": accept({"ok": False})}, owner=ANONYMOUS_OWNER)
    async with engine_on(store, tool) as second:
        done = await wait_for_status(second, task_id, "completed")
    assert done.result["structuredContent"]["ok"] is False
    assert calls.made == ["before", "after"]


async def test_statuses_said_again_by_a_replay_are_not_written_again(store: Stores) -> None:
    calls = Calls()

    @task_tool(durable=True)
    async def chatty(ctx: TaskContext) -> Yields:
        yield "one"
        await ctx.step(calls, "a")
        yield "two"
        yield Elicit("go?", {"type": "object", "properties": {}})
        yield "three"
        yield Result("done")

    task_id = await asking_then_stopped(store, chatty)
    done = await answered_after_restart(
        store, chatty, task_id, {"input-1": {"action": "accept", "content": {}}}
    )
    assert [message for _, message in done.status_history] == ["one", "two", "three"]
    assert calls.made == ["a"]


async def test_a_failed_step_raises_step_failed_live_and_on_replay_without_running_again(
    store: Stores,
) -> None:
    runs: list[int] = []

    def flaky() -> None:
        runs.append(1)
        raise ConnectionError("the build farm said no")

    seen: list[tuple[str, str, str]] = []

    @task_tool(durable=True)
    async def build(ctx: TaskContext) -> Yields:
        try:
            await ctx.step(flaky)
        except StepFailed as exc:
            seen.append((exc.step, exc.type, exc.message))
        answer = yield Elicit("go on?", {"type": "object", "properties": {}})
        yield Result(answer.action)

    task_id = await asking_then_stopped(store, build)
    await answered_after_restart(store, build, task_id, {"input-1": {"action": "decline"}})
    failure = (
        "test_a_failed_step_raises_step_failed_live_and_on_replay_without_running_again.<locals>.flaky",
    )
    assert runs == [1]
    assert seen == [(failure[0], "ConnectionError", "the build farm said no")] * 2


async def test_a_step_value_that_is_not_json_fails_the_step_naming_the_type() -> None:
    @task_tool(durable=True)
    async def odd(ctx: TaskContext) -> str:
        try:
            await ctx.step(lambda: {1, 2})
        except StepFailed as exc:
            return f"{exc.type}: {exc.message}"
        return "no error"

    async with serve(odd) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("odd"))
    text = final["result"]["content"][0]["text"]
    assert text.startswith("TypeError: step '") and "returned a set, which is not plain JSON" in text


async def test_a_replay_that_asks_for_another_step_fails_naming_the_position(store: Stores) -> None:
    calls = Calls()
    old = approval_tool(calls)

    def renamed(name: str) -> str:
        return name

    @task_tool(name="approve", durable=True)
    async def changed(ctx: TaskContext) -> Yields:
        await ctx.step(renamed, "before")  # the code changed while the task was in flight
        yield Result("unreachable")

    task_id = await asking_then_stopped(store, old)
    async with engine_on(store, changed) as second:
        failed = await wait_for_status(second, task_id, "failed")
    assert failed.error["data"] == {"reason": "journal_diverged", "position": 0}
    message = failed.error["message"]
    assert message.startswith("Task tool 'approve' diverged from its journal at position 0: the journal ")
    assert "holds step 'Calls', this run asked for step " in message
    assert calls.made == ["before"]


async def test_a_replay_that_ends_before_its_journal_does_fails_too(store: Stores) -> None:
    calls = Calls()
    old = approval_tool(calls)

    @task_tool(name="approve", durable=True)
    async def shorter(ctx: TaskContext) -> str:
        return "done early"

    task_id = await asking_then_stopped(store, old)
    async with engine_on(store, shorter) as second:
        failed = await wait_for_status(second, task_id, "failed")
    assert failed.error["data"]["reason"] == "journal_diverged"
    assert "this run ended there, but the journal holds 2 entries" in failed.error["message"]


async def test_def_generators_run_steps_with_yield_step(store: Stores) -> None:
    calls = Calls()

    @task_tool(durable=True)
    def threaded(ctx: TaskContext) -> Any:
        first = yield Step(calls, "one")
        answer = yield Elicit("more?", {"type": "object", "properties": {}})
        second = yield Step(calls, "two")
        yield Result([first, answer.action, second])

    task_id = await asking_then_stopped(store, threaded)
    done = await answered_after_restart(
        store, threaded, task_id, {"input-1": {"action": "accept", "content": {}}}
    )
    assert done.result["structuredContent"] == {"result": ["did one", "accept", "did two"]}
    assert calls.made == ["one", "two"]


async def test_now_and_random_are_the_same_on_a_replay(store: Stores) -> None:
    seen: list[tuple[float, float]] = []

    @task_tool(durable=True)
    async def stamped(ctx: TaskContext) -> Yields:
        seen.append((await ctx.now(), await ctx.random()))
        yield Elicit("wait", {"type": "object", "properties": {}})
        yield Result("ok")

    task_id = await asking_then_stopped(store, stamped)
    await answered_after_restart(store, stamped, task_id, {"input-1": {"action": "cancel"}})
    assert len(seen) == 2 and seen[0] == seen[1]


async def test_steps_run_one_at_a_time() -> None:
    @task_tool(durable=True)
    async def racing(ctx: TaskContext) -> str:
        errors: list[str] = []

        async def slow() -> int:
            await anyio.sleep(0.05)
            return 1

        async def second() -> None:
            try:
                await ctx.step(slow)
            except Exception as exc:
                errors.append(str(exc))

        async with anyio.create_task_group() as group:
            group.start_soon(ctx.step, slow)
            await anyio.sleep(0.01)
            group.start_soon(second)
        return errors[0]

    async with serve(racing) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("racing"))
    assert "the steps of a durable body run one at a time" in final["result"]["content"][0]["text"]


async def test_a_full_journal_fails_the_task_naming_the_bound() -> None:
    @task_tool(durable=True)
    async def chatty(ctx: TaskContext) -> str:
        for n in range(10):
            await ctx.step(str, n)
        return "never"

    limits = Limits(max_journal_entries=3)
    async with serve(chatty, limits=limits) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("chatty"))
    assert final["status"] == "failed"
    assert final["error"]["data"] == {"reason": "journal_full"}
    assert "3 entries, the most `Limits.max_journal_entries` allows" in final["error"]["message"]


async def test_a_step_value_over_the_entry_bound_fails_the_step() -> None:
    @task_tool(durable=True)
    async def big(ctx: TaskContext) -> str:
        try:
            await ctx.step(lambda: "x" * 5000)
        except StepFailed as exc:
            return exc.type + ": " + exc.message
        return "no error"

    async with serve(big, limits=Limits(max_journal_entry_bytes=1000)) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("big"))
    text = final["result"]["content"][0]["text"]
    assert text.startswith("ValueError: step '") and "returned 5002 bytes of JSON, over the 1000" in text


async def test_a_cancelled_durable_task_is_not_replayed(store: Stores) -> None:
    calls = Calls()
    tool = approval_tool(calls)
    task_id = await asking_then_stopped(store, tool)
    async with engine_on(store, config=EngineConfig(run_tasks=False)) as front:
        await front.cancel(task_id, owner=ANONYMOUS_OWNER)
    async with engine_on(store, tool):
        await anyio.sleep(0.2)  # a claim would have happened by now
    record = await fresh_get(store, task_id)
    assert record.status == "cancelled" and record.runner is None
    assert calls.made == ["before"]


async def test_input_before_the_task_is_journalled_when_the_task_is_created() -> None:
    calls = Calls()

    @task_tool(durable=True, input_before_task=True)
    async def early(ctx: TaskContext) -> Yields:
        name = yield Elicit(
            "name?", {"type": "object", "properties": {"n": {"type": "string"}}}, before_task=True
        )
        greeting = yield Step(
            calls, name.data["n"]
        )  # a yield that is no before_task question: the task starts
        answer = yield Elicit("sure?", {"type": "object", "properties": {}})
        yield Result([greeting, answer.action])

    store = MemoryTaskStore()
    meta = opted_in_meta()
    async with serve(early, store=store, claim_interval=0.05) as (_, protocol):
        first = await protocol.call_tool("early", {}, meta=meta, owner=ANONYMOUS_OWNER)
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        created = await protocol.call_tool(
            "early",
            {},
            meta=meta,
            owner=ANONYMOUS_OWNER,
            input_responses={key: accept({"n": "Ada"})},
            request_state=first["requestState"],
        )
        task_id = created["taskId"]
        asked = await Client(protocol).input(task_id, count=1)
    async with serve(early, store=store, claim_interval=0.05) as (_, protocol):
        client = Client(protocol)
        assert await client.input(task_id, count=1) == asked  # the same question, the same key
        (open_key,) = asked
        await client.update(task_id, {open_key: {"action": "accept", "content": {}}})
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {"result": ["did Ada", "accept"]}
    assert calls.made == ["Ada"]
    kinds = [json.loads(entry)["kind"] for entry in await store.read_journal(task_id)]
    assert kinds == ["ask", "answer", "step", "ask", "answer"]


async def test_a_durable_body_answered_at_once_stores_its_record_before_its_first_step() -> None:
    """With immediate results the record of a body that may end at once is written late (by its
    first write); a step's journal entry needs the record, so the step stores it first."""
    calls = Calls()

    @task_tool(durable=True)
    async def quick(ctx: TaskContext) -> list[str]:
        return [await ctx.step(calls, "one"), await ctx.step(calls, "two")]

    store = MemoryTaskStore()
    async with serve(quick, store=store, immediate_results=True) as (_, protocol):
        client = Client(protocol)
        answered = await client.call("quick")
        if answered["resultType"] == "task":
            answered = (await client.finish(answered["taskId"]))["result"]
    assert answered["structuredContent"] == {"result": ["did one", "did two"]}
    assert calls.made == ["one", "two"]


async def test_a_tool_error_or_protocol_error_in_a_step_is_raised_as_itself_live_and_on_replay(
    store: Stores,
) -> None:
    runs: list[str] = []

    def refuse(kind: str) -> None:
        runs.append(kind)
        if kind == "tool":
            raise ToolError("the registry refused the image")
        raise ProtocolError(-32050, "quota exhausted", {"retryAfterMs": 60000})

    seen: list[tuple[str, str]] = []

    @task_tool(durable=True)
    async def refusing(ctx: TaskContext) -> Yields:
        for kind in ("tool", "protocol"):
            try:
                await ctx.step(refuse, kind)
            except ToolError as exc:
                seen.append(("ToolError", str(exc)))
            except ProtocolError as exc:
                seen.append(("ProtocolError", f"{exc.code} {exc.message} {exc.data}"))
        yield Elicit("again?", {"type": "object", "properties": {}})
        yield Result("done")

    task_id = await asking_then_stopped(store, refusing)
    await answered_after_restart(store, refusing, task_id, {"input-1": {"action": "decline"}})
    assert runs == ["tool", "protocol"]
    assert (
        seen
        == [
            ("ToolError", "the registry refused the image"),
            ("ProtocolError", "-32050 quota exhausted {'retryAfterMs': 60000}"),
        ]
        * 2
    )


def test_a_plain_def_function_cannot_be_durable() -> None:
    def blocking(ctx: TaskContext) -> str:
        return "it cannot await a step"

    with pytest.raises(TypeError, match="durable=True needs a body that can run steps"):
        task_tool(durable=True)(blocking)


async def test_a_step_value_too_deep_to_encode_fails_the_step() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]

    @task_tool(durable=True)
    async def nested(ctx: TaskContext) -> str:
        try:
            await ctx.step(lambda: deep)
        except StepFailed as exc:
            return exc.type
        return "no error"

    async with serve(nested) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("nested"))
    assert final["result"]["content"][0]["text"] == "TypeError"


async def test_a_durable_step_before_a_before_task_question_is_refused_without_running() -> None:
    calls = Calls()

    @task_tool(durable=True, input_before_task=True)
    async def eager(ctx: TaskContext) -> Yields:
        await ctx.step(calls, "reserve")  # before the task exists: would run once per round
        answer = yield Elicit("sure?", {"type": "object", "properties": {}}, before_task=True)
        yield Result(answer.action)

    async with serve(eager) as (engine, protocol):
        for _ in range(3):  # a client re-sending the first round
            with pytest.raises(ProtocolError) as refused:
                await protocol.call_tool("eager", {}, meta=opted_in_meta(), owner=ANONYMOUS_OWNER)
            assert refused.value.data == {"reason": "step_before_task", "step": "Calls"}
            assert "before its task exists" in refused.value.message
        assert await engine.store.list_active() == []
    assert calls.made == []


async def test_the_journals_of_one_owner_are_bounded_together_and_released_when_its_tasks_end() -> None:
    gate = anyio.Event()

    def blob(n: int) -> str:
        return "x" * n

    journalled = {"first": anyio.Event(), "second": anyio.Event()}

    @task_tool(durable=True)
    async def hoard(size: int, ctx: TaskContext, name: str = "") -> Yields:
        await ctx.step(blob, size)
        if name in journalled:
            journalled[name].set()
        await gate.wait()
        yield Result("kept")

    limits = Limits(max_journal_bytes_per_owner=25_000)
    async with serve(hoard, limits=limits) as (engine, _):
        first = await engine.start(hoard, {"size": 10_000, "name": "first"}, owner="alice")
        second = await engine.start(hoard, {"size": 10_000, "name": "second"}, owner="alice")
        with anyio.fail_after(10):
            for event in journalled.values():
                await event.wait()
        over = await engine.start(hoard, {"size": 10_000}, owner="alice")
        refused = await wait_for_status(engine, over.task_id, "failed", owner="alice")
        other = await engine.start(hoard, {"size": 10_000}, owner="bob")  # another owner's room
        gate.set()
        for task in (first, second):
            assert (await wait_for_status(engine, task.task_id, "completed", owner="alice")).result
        assert (await wait_for_status(engine, other.task_id, "completed", owner="bob")).result
        again = await engine.start(hoard, {"size": 10_000}, owner="alice")  # released at their end
        assert (await wait_for_status(engine, again.task_id, "completed", owner="alice")).result
    assert refused.error["data"] == {"reason": "journal_full"}
    assert "max_journal_bytes_per_owner" in refused.error["message"]
