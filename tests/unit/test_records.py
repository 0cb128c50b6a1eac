"""`TaskRecord`'s shared empty values, and what the engine shares between the records it creates."""

from __future__ import annotations

import json

import anyio
import pytest
from helpers import serve

from mcptasks import task_tool
from mcptasks.stores import TaskRecord
from mcptasks.stores.base import EMPTY_DICT, EMPTY_LIST


def test_empty_fields_share_one_read_only_value() -> None:
    first, second = TaskRecord("a", "o", "t"), TaskRecord("b", "o", "t")
    assert first.input_requests is second.input_requests is EMPTY_DICT
    assert first.arguments == first.input_responses == {} and first.transitions == []
    assert first.transitions is EMPTY_LIST
    with pytest.raises(TypeError):
        first.input_requests["k"] = {}
    with pytest.raises(TypeError):
        first.arguments.update(x=1)
    with pytest.raises(TypeError):
        first.transitions.append([0.0, "working", None])
    assert EMPTY_DICT == {} and EMPTY_LIST == []
    assert json.loads(json.dumps(first.to_dict()))["input_requests"] == {}


def test_empty_values_given_to_a_record_become_the_shared_ones() -> None:
    built = TaskRecord("a", "o", "t", arguments={}, input_requests={}, transitions=[])
    loaded = TaskRecord.from_dict(TaskRecord("b", "o", "t").to_dict() | {"input_responses": {}})
    evolved = TaskRecord("c", "o", "t", input_requests={"k": {}}).evolve(input_requests={})
    assert built.arguments is built.input_requests is loaded.input_responses is EMPTY_DICT
    assert built.transitions is EMPTY_LIST
    assert evolved.input_requests is EMPTY_DICT


def test_changed_copies_get_their_own_values() -> None:
    record = TaskRecord("a", "o", "t").evolve(status="completed", input_responses={"k": 1})
    record.transitions.append([0.0, "failed", None])  # a new list: not the shared one
    assert len(record.transitions) == 2 and EMPTY_LIST == []
    assert TaskRecord.from_dict(record.to_dict()) == record


@pytest.mark.anyio
async def test_created_records_share_equal_client_capabilities() -> None:
    release = anyio.Event()

    @task_tool
    async def wait() -> None:
        await release.wait()

    async with serve(wait) as (engine, _):
        first = await engine.start(wait, {}, owner="o", client_capabilities={"elicitation": {}})
        second = await engine.start(wait, None, owner="o", client_capabilities={"elicitation": {}})
        other = await engine.start(wait, {}, owner="o", client_capabilities={"sampling": {}})
        release.set()
    assert first.client_capabilities == {"elicitation": {}}
    assert first.client_capabilities is second.client_capabilities
    assert other.client_capabilities == {"sampling": {}}
    assert first.arguments is second.arguments is EMPTY_DICT
