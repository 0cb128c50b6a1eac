"""Per-owner shares of the process-wide resources (asyncio and trio): running tasks, inline calls
parked between their rounds, worker threads of `def` bodies. One owner at its share is refused
(or, for threads, waits) while other owners go on; each refusal names the bound it hit."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import anyio
import pytest
from helpers import Client, parked, serve, text_of

from mcptasks import Elicit, EngineConfig, Limits, ProtocolError, Result, task_tool
from mcptasks.errors import TooManyTasks
from mcptasks.lowlevel import TasksProtocol
from mcptasks.wire import CLIENT_CAPABILITIES_META, MISSING_REQUIRED_CLIENT_CAPABILITY

WAIT = 20.0
"""Upper bound of every wait; never a synchronisation delay."""

ELICITING = {CLIENT_CAPABILITIES_META: {"elicitation": {}}}
"""An inline call (no tasks extension) from a client that can answer elicitations."""


def asking() -> list[Any]:
    @task_tool(replay_safe=False)
    async def launch():
        answer = yield Elicit("Launch?")
        yield Result(answer.action)

    @task_tool
    async def deploy():
        answer = yield Elicit("Deploy?")
        yield Result(answer.action)

    return [launch, deploy]


async def ask(protocol: TasksProtocol, name: str, owner: str) -> dict[str, Any]:
    """An inline call that stops at its question (`input_required`)."""
    with anyio.fail_after(WAIT):
        reply = await protocol.call_tool(name, {}, meta=ELICITING, owner=owner)
    assert reply["resultType"] == "input_required", reply
    return reply


# -- the settings ----------------------------------------------------------------------------


def test_the_default_shares_are_fractions_of_their_process_bounds() -> None:
    limits = Limits()
    assert (limits.active_share, limits.thread_share, limits.parked_share(1000)) == (1000, 16, 100)
    assert EngineConfig().limits.parked_share(EngineConfig().parked_limit) == 100
    # A share follows its process bound, also through `replace`, and is at least 1.
    assert dataclasses.replace(limits, max_active=100).active_share == 10
    assert Limits(max_active=5, threads=1).active_share == 1
    assert Limits(threads=1).thread_share == 1
    assert limits.parked_share(0) == 0
    # An unbounded process bound has an unbounded share; None: no per-owner bound.
    assert Limits(max_active=None).active_share is None
    assert Limits(max_active_per_owner=None, threads_per_owner=None).thread_share is None
    assert Limits(max_parked_per_owner=None).parked_share(10) is None
    # Set explicitly, a share may equal its process bound (one owner may then take it all).
    assert Limits(max_active=7, max_active_per_owner=7, threads=3, threads_per_owner=3).thread_share == 3
    assert Limits(max_parked_per_owner=50).parked_share(20) == 20


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_active": 5, "max_active_per_owner": 6}, r"max_active_per_owner \(6\) must not be above"),
        ({"threads": 4, "threads_per_owner": 5}, r"threads_per_owner \(5\) must not be above"),
        ({"threads_per_owner": "half"}, "threads_per_owner must be a positive whole number, None or 'share'"),
        ({"max_parked_per_owner": 0}, "max_parked_per_owner must be positive"),
        ({"max_parked_per_owner": 1.5}, "max_parked_per_owner must be a whole number"),
        ({"max_active_per_owner": True}, "max_active_per_owner must be a finite number"),
    ],
)
def test_invalid_shares_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Limits(**changes)


# -- running tasks ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_owner_at_its_share_of_running_tasks_is_refused_while_others_start() -> None:
    gate = anyio.Event()
    async with serve(parked(gate), limits=Limits(max_active=20, retry_after=1)) as (engine, protocol):
        alice, bob = Client(protocol, owner="alice"), Client(protocol, owner="bob")
        for _ in range(2):  # the default share: a tenth of 20
            await alice.start("park")
        with pytest.raises(TooManyTasks) as refused:
            await alice.call("park")
        error = refused.value.to_error()
        assert error["code"] == -32000
        assert "per-owner limit of 2 running tasks" in error["message"]
        assert error["data"] == {
            "reason": "too_many_tasks",
            "retryAfterMs": 1000,
            "limit": 2,
            "scope": "owner",
        }
        for _ in range(2):
            await bob.start("park")
        assert engine.active_runs == 4
        gate.set()


@pytest.mark.anyio
async def test_the_server_bound_of_running_tasks_is_named_when_it_is_hit() -> None:
    gate = anyio.Event()
    limits = Limits(max_active=3, max_active_per_owner=2)
    async with serve(parked(gate), limits=limits) as (_, protocol):
        alice, bob, carol = (Client(protocol, owner=name) for name in ("alice", "bob", "carol"))
        await alice.start("park")
        await alice.start("park")
        await bob.start("park")
        with pytest.raises(TooManyTasks) as refused:
            await carol.call("park")
        assert "server limit of 3 running tasks" in refused.value.message
        assert refused.value.data["scope"] == "server"
        with pytest.raises(TooManyTasks) as refused:  # both bounds: the owner's is named
            await alice.call("park")
        assert "per-owner limit of 2 running tasks" in refused.value.message
        gate.set()


# -- inline calls parked between rounds ------------------------------------------------------


@pytest.mark.anyio
async def test_an_owner_at_its_share_of_parked_calls_is_refused_while_others_park() -> None:
    async with serve(*asking(), parked_limit=20) as (_, protocol):
        for _ in range(2):  # the default share: a tenth of 20
            await ask(protocol, "launch", "alice")
        assert len(protocol.parked) == 2
        with pytest.raises(ProtocolError) as refused:
            await protocol.call_tool("launch", {}, meta=ELICITING, owner="alice")
        assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert "per-owner limit of 2 inline calls waiting for input" in refused.value.message
        assert refused.value.data is not None
        assert refused.value.data["reason"] == "too_many_parked_calls"
        assert (refused.value.data["scope"], refused.value.data["limit"]) == ("owner", 2)
        assert "requiredCapabilities" in refused.value.data
        # A replay-safe tool is not refused: its retry replays the call instead.
        assert "requestState" in await ask(protocol, "deploy", "alice")
        assert len(protocol.parked) == 2
        await ask(protocol, "launch", "bob")  # another owner still parks
        assert len(protocol.parked) == 3


@pytest.mark.anyio
async def test_the_server_bound_of_parked_calls_is_named_when_it_is_hit() -> None:
    limits = Limits(max_parked_per_owner=2)
    async with serve(*asking(), parked_limit=3, limits=limits) as (_, protocol):
        await ask(protocol, "launch", "alice")
        await ask(protocol, "launch", "alice")
        await ask(protocol, "launch", "bob")
        with pytest.raises(ProtocolError) as refused:
            await protocol.call_tool("launch", {}, meta=ELICITING, owner="carol")
        assert "server limit of 3 inline calls waiting for input" in refused.value.message
        assert refused.value.data is not None
        assert (refused.value.data["scope"], refused.value.data["limit"]) == ("server", 3)
        assert len(protocol.parked) == 3


@pytest.mark.anyio
async def test_a_parked_call_resumed_frees_its_owners_share() -> None:
    async with serve(*asking(), parked_limit=3, limits=Limits(max_parked_per_owner=1)) as (_, protocol):
        first = await ask(protocol, "launch", "alice")
        with anyio.fail_after(WAIT):
            done = await protocol.call_tool(
                "launch",
                {},
                meta=ELICITING,
                owner="alice",
                input_responses={"input-1": {"action": "decline"}},
                request_state=first["requestState"],
            )
        assert text_of(done) == "decline"
        assert len(protocol.parked) == 0
        await ask(protocol, "launch", "alice")  # the share is free again


# -- worker threads of `def` bodies ----------------------------------------------------------


@pytest.mark.anyio
async def test_an_owners_blocking_def_bodies_leave_threads_for_other_owners() -> None:
    release = threading.Event()
    lock = threading.Lock()
    inside: list[str] = []
    two_in = threading.Event()

    def enter(name: str) -> None:
        with lock:
            inside.append(name)
            if len(inside) == 2:
                two_in.set()

    @task_tool
    def hold(name: str) -> str:
        enter(name)
        assert release.wait(WAIT)
        return name

    @task_tool
    def hold_steps(name: str):
        yield "started"
        enter(name)
        assert release.wait(WAIT)
        yield Result(name)

    @task_tool
    def quick() -> str:
        return "quick"

    # 4 threads, a share of 2 per owner by default: without it alice's 4 bodies would hold all 4.
    async with serve(hold, hold_steps, quick, limits=Limits(threads=4)) as (_, protocol):
        alice, bob = Client(protocol, owner="alice"), Client(protocol, owner="bob")
        try:
            held = [
                await alice.start("hold", {"name": "a1"}),
                await alice.start("hold_steps", {"name": "a2"}),
            ]
            assert await anyio.to_thread.run_sync(two_in.wait, WAIT)
            # Admitted as tasks, these wait for one of alice's threads (they do not fail).
            waiting = [
                await alice.start("hold", {"name": "a3"}),
                await alice.start("hold_steps", {"name": "a4"}),
            ]
            # Bob's bodies run meanwhile, as a task and inline.
            assert (await bob.finish(await bob.start("quick")))["status"] == "completed"
            with anyio.fail_after(WAIT):
                inline = await protocol.call_tool("quick", {}, meta=None, owner="bob")
            assert text_of(inline) == "quick"
            for task_id in waiting:
                assert (await alice.get(task_id))["status"] == "working"
            with lock:
                assert sorted(inside) == ["a1", "a2"]  # a3 and a4 got no thread
        finally:
            release.set()
        for task_id in [*held, *waiting]:
            assert (await alice.finish(task_id))["status"] == "completed"
        assert sorted(inside) == ["a1", "a2", "a3", "a4"]


@pytest.mark.anyio
async def test_without_a_per_owner_share_one_owner_may_hold_every_thread() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    @task_tool
    def hold() -> str:
        entered.release()
        assert release.wait(WAIT)
        return "held"

    limits = Limits(threads=2, threads_per_owner=2)
    async with serve(hold, limits=limits) as (_, protocol):
        alice = Client(protocol, owner="alice")
        try:
            ids = [await alice.start("hold") for _ in range(2)]
            for _ in range(2):  # both of alice's bodies hold a thread at once
                assert await anyio.to_thread.run_sync(entered.acquire, True, WAIT)
        finally:
            release.set()
        for task_id in ids:
            assert (await alice.finish(task_id))["status"] == "completed"
