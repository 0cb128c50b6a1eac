"""Inline `input_required` rounds: the body is kept suspended between rounds in the process that
asked, so its code before a question runs once per call; replay (or -32021 for tools that are not
replay-safe) when the retry cannot reach it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import accept, text_of

from mcptasks import (
    Accepted,
    Elicit,
    EngineConfig,
    MemoryTaskStore,
    ProtocolError,
    Result,
    TaskContext,
    task_tool,
)
from mcptasks.lowlevel import TaskEngine, TasksProtocol
from mcptasks.wire import (
    CLIENT_CAPABILITIES_META,
    EXTENSION_ID,
    INTERNAL_ERROR,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)

pytestmark = pytest.mark.anyio

ELICITING = {CLIENT_CAPABILITIES_META: {"elicitation": {}}}
"""An inline call (no tasks extension) from a client that can answer elicitations."""
SECRET = "shared-between-replicas"
TIMEOUT = 30.0


class Counter:
    """Counts how often each tool's code before its first question ran; records closed bodies."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.closed = anyio.Event()
        self.started = anyio.Event()

    def ran(self, name: str) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1
        self.started.set()


def tools(counter: Counter) -> list[Any]:
    @task_tool
    async def deploy(target: str):
        """Two questions; side effect before the first."""
        counter.ran("deploy")
        first = yield Elicit(f"Deploy to {target}?")
        second = yield Elicit("Notify the team?")
        yield Result(f"{first.action}/{second.action}")

    @task_tool(replay_safe=False)
    async def launch():
        """Not safe to replay."""
        counter.ran("launch")
        try:
            answer = yield Elicit("Launch?")
            yield Result(answer.action)
        finally:
            counter.closed.set()

    @task_tool
    async def typed(ctx: TaskContext) -> str:
        """A coroutine body asking through its context."""
        counter.ran("typed")
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        return f"hi {answer.data['n'] if isinstance(answer, Accepted) else '?'}"

    @task_tool
    async def slow():
        """Works before asking (the round waits for it)."""
        counter.ran("slow")
        try:
            await anyio.sleep_forever()
            yield Result(None)  # pragma: no cover
        finally:
            counter.closed.set()

    return [deploy, launch, typed, slow]


@asynccontextmanager
async def replicas(counter: Counter, count: int = 1, **options: Any) -> AsyncIterator[list[TasksProtocol]]:
    """`count` protocols on separate engines sharing one store and one state secret."""
    store = MemoryTaskStore()
    config = EngineConfig(secret=SECRET, **options)
    engines = [TaskEngine(store, config=config) for _ in range(count)]
    protocols = [TasksProtocol(engine, tools(counter)) for engine in engines]
    async with engines[0]:
        if count == 1:
            yield protocols
        else:
            async with engines[1]:
                yield protocols


async def call(protocol: TasksProtocol, name: str, **params: Any) -> dict[str, Any]:
    arguments = params.pop("arguments", {})
    owner = params.pop("owner", "anonymous")
    with anyio.fail_after(TIMEOUT):
        return await protocol.call_tool(name, arguments, meta=ELICITING, owner=owner, **params)


async def test_the_code_before_a_question_runs_once_per_call() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        first = await call(server, "deploy", arguments={"target": "prod"})
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["input-1"]
        assert len(server.parked) == 1
        second = await call(
            server,
            "deploy",
            arguments={"target": "prod"},
            input_responses={"input-1": accept({})},
            request_state=first["requestState"],
        )
        assert list(second["inputRequests"]) == ["input-2"]
        done = await call(
            server,
            "deploy",
            arguments={"target": "prod"},
            input_responses={"input-2": {"action": "decline"}},
            request_state=second["requestState"],
        )
    assert text_of(done) == "accept/decline"
    assert counter.runs == {"deploy": 1}
    assert len(server.parked) == 0


async def test_a_coroutine_body_is_kept_too() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        first = await call(server, "typed")
        done = await call(
            server,
            "typed",
            input_responses={"input-1": accept({"n": "Ada"})},
            request_state=first["requestState"],
        )
    assert text_of(done) == "hi Ada"
    assert counter.runs == {"typed": 1}


async def test_an_invalid_answer_is_asked_again_without_rerunning() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        first = await call(server, "deploy", arguments={"target": "t"})
        again = await call(
            server,
            "deploy",
            arguments={"target": "t"},
            input_responses={"input-1": {"action": "maybe"}},
            request_state=first["requestState"],
        )
        assert list(again["inputRequests"]) == ["input-1"]
        assert "Previous answer rejected" in again["inputRequests"]["input-1"]["params"]["message"]
    assert counter.runs == {"deploy": 1}


async def test_another_replica_replays_a_replay_safe_tool() -> None:
    counter = Counter()
    async with replicas(counter, 2) as (a, b):
        first = await call(a, "deploy", arguments={"target": "x"})
        second = await call(
            b,
            "deploy",
            arguments={"target": "x"},
            input_responses={"input-1": accept({})},
            request_state=first["requestState"],
        )
        # b replayed the body with the answer and kept it at the next question.
        assert list(second["inputRequests"]) == ["input-2"]
        done = await call(
            b,
            "deploy",
            arguments={"target": "x"},
            input_responses={"input-2": accept({})},
            request_state=second["requestState"],
        )
    assert text_of(done) == "accept/accept"
    assert counter.runs == {"deploy": 2}


async def test_another_replica_refuses_a_tool_that_is_not_replay_safe() -> None:
    counter = Counter()
    async with replicas(counter, 2) as (a, b):
        first = await call(a, "launch")
        with pytest.raises(ProtocolError) as info:
            await call(
                b, "launch", input_responses={"input-1": accept({})}, request_state=first["requestState"]
            )
        # The original process still holds the call: the retry there completes it.
        done = await call(
            a, "launch", input_responses={"input-1": accept({})}, request_state=first["requestState"]
        )
    assert info.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}
    assert "launch" in info.value.message
    assert text_of(done) == "accept"
    assert counter.runs == {"launch": 1}


async def test_a_retry_for_another_owner_is_not_resumed() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        first = await call(server, "launch", owner="alice")
        with pytest.raises(ProtocolError):
            await call(
                server,
                "launch",
                owner="mallory",
                input_responses={"input-1": accept({})},
                request_state=first["requestState"],
            )
        assert len(server.parked) == 1
    assert counter.runs == {"launch": 1}


async def test_a_full_registry_replays_or_refuses() -> None:
    counter = Counter()
    async with replicas(counter, parked_limit=0) as (server,):
        first = await call(server, "deploy", arguments={"target": "y"})
        second = await call(
            server,
            "deploy",
            arguments={"target": "y"},
            input_responses={"input-1": accept({})},
            request_state=first["requestState"],
        )
        assert list(second["inputRequests"]) == ["input-2"]
        with pytest.raises(ProtocolError) as info:
            await call(server, "launch")
        with anyio.fail_after(TIMEOUT):
            await counter.closed.wait()  # the body that could not be kept was closed
    assert counter.runs == {"deploy": 2, "launch": 1}
    assert info.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_kept_body_is_cancelled_after_its_time() -> None:
    counter = Counter()
    async with replicas(counter, parked_seconds=0.05) as (server,):
        first = await call(server, "launch")
        with anyio.fail_after(TIMEOUT):
            await counter.closed.wait()
        assert len(server.parked) == 0
        with pytest.raises(ProtocolError) as info:
            await call(
                server, "launch", input_responses={"input-1": accept({})}, request_state=first["requestState"]
            )
    assert info.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert counter.runs == {"launch": 1}


async def test_a_round_cancelled_while_the_body_works_cancels_the_body() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        async with anyio.create_task_group() as group:
            group.start_soon(call, server, "slow")
            with anyio.fail_after(TIMEOUT):
                await counter.started.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(TIMEOUT):
            await counter.closed.wait()
    assert counter.runs == {"slow": 1}


async def test_engine_shutdown_closes_kept_bodies() -> None:
    counter = Counter()
    async with replicas(counter) as (server,):
        await call(server, "launch")
        assert len(server.parked) == 1
    assert counter.closed.is_set()


class Odd(BaseException):
    """Not an Exception: what careless tool code sometimes raises."""


async def test_a_base_exception_from_a_kept_body_fails_the_call_and_the_server_keeps_serving() -> None:
    @task_tool
    async def odd():
        answer = yield Elicit("Go?")
        raise Odd(f"odd after {answer.action}")

    counter = Counter()
    store = MemoryTaskStore()
    engine = TaskEngine(store)
    server = TasksProtocol(engine, [odd, *tools(counter)])
    async with engine:
        first = await call(server, "odd")
        with pytest.raises(ProtocolError) as failed:
            await call(
                server, "odd", input_responses={"input-1": accept({})}, request_state=first["requestState"]
            )
        again = await call(server, "deploy", arguments={"target": "z"})
    # As for a task: a BaseException that is no Exception ends the body with -32603, reason "aborted".
    assert failed.value.code == INTERNAL_ERROR
    assert "raised Odd: odd after accept" in failed.value.message
    assert failed.value.data == {"reason": "aborted", "exception": "Odd"}
    assert again["resultType"] == "input_required"


def test_replay_safe_false_cannot_be_combined_with_input_before_task() -> None:
    with pytest.raises(ValueError, match="replay_safe"):

        @task_tool(replay_safe=False, input_before_task=True)
        async def both():
            yield Result(None)


def test_parking_bounds_are_validated() -> None:
    with pytest.raises(ValueError, match="parked_limit"):
        EngineConfig(parked_limit=-1)
    with pytest.raises(ValueError, match="parked_seconds"):
        EngineConfig(parked_seconds=0)
