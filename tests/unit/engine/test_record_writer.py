"""`RecordWriter`: creates, deferred first writes, transitions, ends kept while the store fails."""

from __future__ import annotations

import pytest
from parts_helpers import ME, Parts, record

from mcptasks._runtime import ledger
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine.records import ONCE, same_call
from mcptasks._runtime.run import TaskRun
from mcptasks.errors import ProtocolError


@pytest.mark.anyio
async def test_create_stores_and_a_held_key_returns_its_holder() -> None:
    parts = Parts()
    first = record("t1", idempotency_key="k", arguments={"word": "a"})
    assert await parts.records.create(first) is None
    again = record("t2", idempotency_key="k", arguments={"word": "a"})
    held = await parts.records.create(again)
    assert held is not None and held.task_id == "t1"
    assert same_call(held, again) is held
    with pytest.raises(ProtocolError):
        same_call(held, record("t3", idempotency_key="k", arguments={"word": "other"}))
    assert await parts.store.get("t2") is None


@pytest.mark.anyio
async def test_the_first_write_of_a_deferred_record_creates_it() -> None:
    parts = Parts()
    parts.records.defer(record("t1", runner=None))
    assert parts.records.unwritten("t1") and await parts.store.get("t1") is None
    written = await parts.records.mutate("t1", ledger.waiting("hello"))
    assert written is not None and written.status_message == "hello"
    stored = await parts.store.get("t1")
    assert stored is not None and stored.status_message == "hello"
    assert not parts.records.unwritten("t1")


@pytest.mark.anyio
async def test_an_end_the_store_cannot_take_is_kept_and_written_later() -> None:
    parts = Parts()
    await parts.store.create(record("t1"))
    run = TaskRun(parts.host, "t1", None, owner="alice", tool="quick")
    failing = True
    replace = parts.store.replace

    async def flaky(updated, *, expected_version):  # type: ignore[no-untyped-def]
        if failing:
            raise ConnectionError("down")
        return await replace(updated, expected_version=expected_version)

    parts.store.replace = flaky  # type: ignore[method-assign]
    done = Outcome("completed", result={"content": []})
    assert not await parts.records.record_end(run, done, ONCE, keep=True)
    assert parts.records.keeps_end("t1") and parts.records.kept_ends() == ["t1"]
    failing = False
    await parts.records.write_unsettled()
    assert not parts.records.keeps_end("t1")
    stored = await parts.store.get("t1")
    assert stored is not None and stored.status == "completed" and stored.runner == ME
    assert run.final is done


@pytest.mark.anyio
async def test_an_end_whose_record_vanished_is_remembered_once() -> None:
    parts = Parts()
    run = TaskRun(parts.host, "gone", None, owner="alice", tool="quick")
    assert await parts.records.record_end(run, Outcome("completed", result={}), ONCE, keep=True)
    assert parts.records.take_vanished() == {"gone"}
    assert parts.records.take_vanished() == set()
