"""Shared helpers of the engine-level tests (no MCP SDK involved).

Nothing here synchronises by sleeping: every wait polls the task's state and is bounded by a
generous `anyio.fail_after`, so a slow, loaded machine only makes a test slower, never wrong.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio

from mcptasks import EngineConfig, MemoryTaskStore, Result, task_tool
from mcptasks.authoring import TaskTool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol
from mcptasks.stores import TaskRecord, TaskStore
from mcptasks.wire import EXTENSION_ID, TERMINAL_STATUSES

DEFAULT_TIMEOUT = 10.0
"""Upper bound of every wait; never a synchronisation delay."""

OPTED_IN_META: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {EXTENSION_ID: {}},
        "elicitation": {},
        "sampling": {},
        "roots": {},
    }
}
"""The `_meta` of a request that declares the tasks extension and every input capability (a
client that answers whatever a task asks)."""


ISO_8601 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def opted_in_meta() -> dict[str, Any]:
    """A fresh copy of the opted-in `_meta` (tests may mutate it)."""
    return copy.deepcopy(OPTED_IN_META)


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 timestamp of the wire (asserting the format first)."""
    assert isinstance(value, str) and ISO_8601.match(value), f"not an ISO 8601 timestamp: {value!r}"
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class RecordingStore(MemoryTaskStore):
    """A memory store that keeps a copy of every record it accepted (create and each replace)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[TaskRecord] = []

    async def create(self, record: TaskRecord) -> TaskRecord:
        stored = await super().create(record)
        if stored.task_id == record.task_id:
            self.history.append(dataclasses.replace(record))
        return stored

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        accepted = await super().replace(record, expected_version=expected_version)
        if accepted:
            self.history.append(dataclasses.replace(record))
        return accepted

    def of(self, task_id: str) -> list[TaskRecord]:
        """Every accepted version of one task, oldest first."""
        return [r for r in self.history if r.task_id == task_id]

    def statuses(self, task_id: str) -> list[str]:
        """The task's status sequence with repeats collapsed."""
        seen: list[str] = []
        for record in self.of(task_id):
            if not seen or seen[-1] != record.status:
                seen.append(record.status)
        return seen


def split_config(options: dict[str, Any]) -> tuple[EngineConfig, dict[str, Any]]:
    """The `EngineConfig` built from the options naming its fields, and the other options."""
    names = {spec.name for spec in dataclasses.fields(EngineConfig)}
    config = EngineConfig(**{k: v for k, v in options.items() if k in names})
    return config, {k: v for k, v in options.items() if k not in names}


@asynccontextmanager
async def serve(
    *tools: TaskTool,
    store: TaskStore | None = None,
    immediate_results: bool = False,
    **engine_options: Any,
) -> AsyncIterator[tuple[TaskEngine, TasksProtocol]]:
    """A running engine (memory store unless given) and a protocol serving `tools`.

    `immediate_results` is off by default here, so an opted-in call always answers with a task
    whatever the scheduler did (the immediate-result shortcut has its own tests).
    """
    config, rest = split_config({"immediate_results": immediate_results, **engine_options})
    engine = TaskEngine(store if store is not None else MemoryTaskStore(), config=config, **rest)
    protocol = TasksProtocol(engine, tools)
    async with engine:
        yield engine, protocol


def _status_of(snapshot: Any) -> str:
    return snapshot["status"] if isinstance(snapshot, Mapping) else snapshot.status


async def snapshot(target: TasksProtocol | TaskEngine, task_id: str, *, owner: str = ANONYMOUS_OWNER) -> Any:
    """One look at the task: the `tasks/get` dict (protocol) or the stored `TaskRecord` (engine)."""
    if isinstance(target, TasksProtocol):
        return await target.handle("tasks/get", {"taskId": task_id, "_meta": opted_in_meta()}, owner=owner)
    return await target.get(task_id, owner=owner)


async def wait_for(
    target: TasksProtocol | TaskEngine,
    task_id: str,
    predicate: Callable[[Any], bool],
    *,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    owner: str = ANONYMOUS_OWNER,
    what: str = "the condition",
) -> Any:
    """Poll the task until `predicate(snapshot)` holds; return that snapshot.

    Yields to the event loop between looks (a zero-length sleep at first, then a tiny one so a
    loaded machine is not spun). Fails with the last snapshot seen after `timeout` seconds.
    """
    last: Any = None
    looks = 0
    try:
        with anyio.fail_after(timeout):
            while True:
                last = await snapshot(target, task_id, owner=owner)
                if predicate(last):
                    return last
                looks += 1
                await anyio.sleep(0 if looks < 100 else 0.002)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; last seen: {last!r}") from None


async def wait_for_status(
    target: TasksProtocol | TaskEngine,
    task_id: str,
    statuses: str | Iterable[str],
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    *,
    owner: str = ANONYMOUS_OWNER,
) -> Any:
    """Wait until the task's status is one of `statuses`; return the snapshot."""
    wanted = {statuses} if isinstance(statuses, str) else set(statuses)
    return await wait_for(
        target,
        task_id,
        lambda s: _status_of(s) in wanted,
        timeout=timeout,
        owner=owner,
        what=f"status in {sorted(wanted)}",
    )


async def wait_for_input(
    protocol: TasksProtocol,
    task_id: str,
    *,
    count: int | None = None,
    excluding: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    owner: str = ANONYMOUS_OWNER,
) -> dict[str, Any]:
    """Wait until the task is input_required with fresh keys (none of `excluding`); `count` of them if given."""
    old = set(excluding)

    def ready(task: dict[str, Any]) -> bool:
        if task["status"] != "input_required":
            return False
        keys = set(task.get("inputRequests", {}))
        if keys & old:
            return False
        return count is None or len(keys) == count

    return await wait_for(protocol, task_id, ready, timeout=timeout, owner=owner, what="fresh input requests")


async def wait_idle(engine: TaskEngine, timeout: float = DEFAULT_TIMEOUT) -> None:  # noqa: ASYNC109
    """Wait until no body runs on `engine` any more (every finished body has written its outcome)."""
    looks = 0
    try:
        with anyio.fail_after(timeout):
            while engine.active_runs:
                looks += 1
                await anyio.sleep(0 if looks < 100 else 0.002)
    except TimeoutError:
        raise AssertionError(f"{engine.active_runs} bodies still running after {timeout} s") from None


class Client:
    """A thin opted-in client over a `TasksProtocol` (in-process, no headers)."""

    def __init__(self, protocol: TasksProtocol, owner: str = ANONYMOUS_OWNER) -> None:
        self.protocol = protocol
        self.owner = owner

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.protocol.call_tool(
            name, dict(arguments or {}), meta=opted_in_meta(), owner=self.owner
        )

    async def start(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Call the tool as a task and return its id."""
        created = await self.call(name, arguments)
        assert created["resultType"] == "task", created
        return str(created["taskId"])

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.protocol.handle(
            "tasks/get", {"taskId": task_id, "_meta": opted_in_meta()}, owner=self.owner
        )

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        return await self.protocol.handle(
            "tasks/update",
            {"taskId": task_id, "inputResponses": dict(responses), "_meta": opted_in_meta()},
            owner=self.owner,
        )

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.protocol.handle(
            "tasks/cancel", {"taskId": task_id, "_meta": opted_in_meta()}, owner=self.owner
        )

    async def wait(
        self,
        task_id: str,
        statuses: str | Iterable[str],
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    ) -> Any:
        return await wait_for_status(self.protocol, task_id, statuses, timeout, owner=self.owner)

    async def finish(self, task_id: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:  # noqa: ASYNC109
        """Wait for a terminal status; return the final `tasks/get`."""
        return dict(await self.wait(task_id, TERMINAL_STATUSES, timeout))

    async def input(self, task_id: str, **options: Any) -> dict[str, Any]:
        """Wait for (fresh) input requests; return `inputRequests`."""
        task = await wait_for_input(self.protocol, task_id, owner=self.owner, **options)
        return dict(task["inputRequests"])

    async def answer_only(self, task_id: str, response: Any, **options: Any) -> str:
        """Wait for exactly one fresh input request, answer it, and return its key."""
        requests = await self.input(task_id, count=1, **options)
        (key,) = requests
        assert await self.update(task_id, {key: response}) == {"resultType": "complete"}
        return key


def accept(content: dict[str, Any]) -> dict[str, Any]:
    """An accepted elicitation answer."""
    return {"action": "accept", "content": content}


def text_of(result: Mapping[str, Any]) -> str:
    """The text of a `CallToolResult`'s content blocks, joined."""
    return "".join(block.get("text", "") for block in result["content"] if block.get("type") == "text")


def parked(gate: anyio.Event) -> TaskTool:
    """A tool `park` whose body says "parked" and ends with "released" once `gate` is set."""

    @task_tool
    async def park():
        yield "parked"
        await gate.wait()
        yield Result("released")

    return park
