"""One INFO record per task transition on the `mcptasks.tasks` logger, for library users too.

The records are checked as a user's own handler sees them: the text, and the fields as record
attributes (`event`, `task_id`, `tool`, `status`, `code`, `reason`, `detail`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from helpers import serve, wait_for_input, wait_for_status, wait_idle
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, ProtocolError, Result, ToolError, task_tool
from mcptasks.cli.logsetup import JsonFormatter, configure_logging


class Capture(logging.Handler):
    """Keeps the `mcptasks.tasks` records of one test."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def of(self, task_id: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "task_id", None) == task_id]

    def events(self, task_id: str) -> list[str]:
        return [r.event for r in self.of(task_id)]  # type: ignore[attr-defined]


@pytest.fixture
def captured() -> Iterator[Capture]:
    logger = logging.getLogger("mcptasks.tasks")
    handler = Capture()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class Confirm(BaseModel):
    ok: bool


@task_tool
async def fine(n: int = 1) -> AsyncIterator[Any]:
    yield "working"
    yield Result(f"done {n}")


@task_tool
async def tool_error() -> AsyncIterator[Any]:
    yield "about to fail"
    raise ToolError("disk quota\nexceeded")


@task_tool
async def protocol_error() -> AsyncIterator[Any]:
    yield "calling the backend"
    raise ProtocolError(-32603, "backend unavailable", {"reason": "backend_down"})


@task_tool
async def asks() -> AsyncGenerator[Any, Any]:
    answer = yield Elicit("Proceed?", schema=Confirm)
    yield Result(f"accepted={isinstance(answer, Accepted)}")


@task_tool
async def waits() -> AsyncIterator[Any]:
    yield "waiting"
    await anyio.sleep_forever()
    yield Result("never")  # pragma: no cover


@pytest.mark.anyio
async def test_a_completed_task_logs_created_then_completed(captured: Capture) -> None:
    async with serve(fine) as (engine, _):
        record = await engine.start(fine, {"n": 2}, owner="o")
        await wait_for_status(engine, record.task_id, "completed", owner="o")
        await wait_idle(engine)
    assert captured.events(record.task_id) == ["created", "completed"]
    created, completed = captured.of(record.task_id)
    assert created.levelno == completed.levelno == logging.INFO
    assert created.getMessage() == f"task {record.task_id} created (tool fine)"
    assert completed.getMessage() == f"task {record.task_id} completed (tool fine)"
    assert (completed.tool, completed.status) == ("fine", "completed")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_tool_error_and_a_failure_say_why(captured: Capture) -> None:
    async with serve(tool_error, protocol_error) as (engine, _):
        errored = await engine.start(tool_error, {}, owner="o")
        failed = await engine.start(protocol_error, {}, owner="o")
        await wait_for_status(engine, errored.task_id, "completed", owner="o")
        await wait_for_status(engine, failed.task_id, "failed", owner="o")
        await wait_idle(engine)
    (*_, last) = captured.of(errored.task_id)
    assert last.getMessage() == (
        f"task {errored.task_id} completed with a tool error (tool tool_error): disk quota exceeded"
    )
    (*_, fail) = captured.of(failed.task_id)
    assert fail.getMessage() == (
        f"task {failed.task_id} failed (tool protocol_error): backend unavailable "
        "(code -32603, reason backend_down)"
    )
    assert (fail.event, fail.code, fail.reason) == ("failed", -32603, "backend_down")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_input_required_and_cancelled(captured: Capture) -> None:
    async with serve(asks, waits) as (engine, protocol):
        asking = await engine.start(asks, {}, owner="o")
        task = await wait_for_input(protocol, asking.task_id, owner="o")
        (key,) = task["inputRequests"]
        waiting = await engine.start(waits, {}, owner="o")
        await engine.cancel(waiting.task_id, owner="o")
        await engine.cancel(waiting.task_id, owner="o")  # already terminal: no second record
        await engine.cancel(asking.task_id, owner="o")
        await wait_idle(engine)
    assert captured.events(asking.task_id) == ["created", "input_required", "cancelled"]
    assert captured.of(asking.task_id)[1].getMessage().endswith(f"waiting for {key}")
    assert captured.events(waiting.task_id) == ["created", "cancelled"]
    assert captured.of(waiting.task_id)[-1].getMessage().endswith("(tool waits): Cancelled by the client.")


@pytest.mark.anyio
async def test_a_shutdown_failure_is_logged_with_its_reason(captured: Capture) -> None:
    async with serve(waits) as (engine, _):
        record = await engine.start(waits, {}, owner="o")
        await wait_for_status(engine, record.task_id, "working", owner="o")
    (*_, last) = captured.of(record.task_id)
    assert (last.event, last.reason) == ("failed", "shutdown")  # type: ignore[attr-defined]


def test_json_lines_carry_the_task_fields() -> None:
    record = logging.LogRecord("mcptasks.tasks", logging.INFO, __file__, 1, "task X failed", None, None)
    for name, value in {
        "event": "failed",
        "task_id": "X",
        "tool": "t",
        "status": "failed",
        "reason": "timeout",
    }.items():
        setattr(record, name, value)
    line = JsonFormatter().format(record)
    data = json.loads(line)
    assert "\n" not in line
    assert data["level"] == "info" and data["logger"] == "mcptasks.tasks"
    assert data["message"] == "task X failed"
    assert (data["task_id"], data["tool"], data["status"], data["reason"]) == ("X", "t", "failed", "timeout")
    assert "code" not in data and "detail" not in data  # unset fields are left out
    assert data["time"].endswith("Z")


def test_configure_logging_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="log level must be one of debug, info, warning, error"):
        configure_logging("loud")
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        configure_logging("info", "xml")  # type: ignore[arg-type]
