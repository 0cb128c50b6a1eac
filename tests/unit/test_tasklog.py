"""One INFO record per task transition on the `mcptasks.tasks` logger, for library users too.

The records are checked as a user's own handler sees them: the text, and the fields as record
attributes (`event`, `task_id`, `tool`, `status`, `code`, `reason`, `detail`).
"""

from __future__ import annotations

import json
import logging
import re
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
    assert re.fullmatch(
        rf"task {record.task_id} completed \(tool fine\) in \d+\.\d\ds", completed.getMessage()
    )
    assert (completed.tool, completed.status) == ("fine", "completed")  # type: ignore[attr-defined]
    stored = await engine.store.get(record.task_id)
    assert stored is not None
    assert completed.duration == round(stored.updated_at - stored.created_at, 3)  # type: ignore[attr-defined]
    assert created.duration is None  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_tool_error_and_a_failure_say_why(captured: Capture) -> None:
    async with serve(tool_error, protocol_error) as (engine, _):
        errored = await engine.start(tool_error, {}, owner="o")
        failed = await engine.start(protocol_error, {}, owner="o")
        await wait_for_status(engine, errored.task_id, "completed", owner="o")
        await wait_for_status(engine, failed.task_id, "failed", owner="o")
        await wait_idle(engine)
    (*_, last) = captured.of(errored.task_id)
    assert re.fullmatch(
        rf"task {errored.task_id} completed with a tool error \(tool tool_error\) in \d+\.\d\ds: "
        "disk quota exceeded",
        last.getMessage(),
    )
    (*_, fail) = captured.of(failed.task_id)
    assert re.fullmatch(
        rf"task {failed.task_id} failed \(tool protocol_error\) in \d+\.\d\ds: backend unavailable "
        r"\(code -32603, reason backend_down\)",
        fail.getMessage(),
    )
    assert isinstance(fail.duration, float)  # type: ignore[attr-defined]
    assert (fail.event, fail.code, fail.reason) == ("failed", -32603, "backend_down")  # type: ignore[attr-defined]


@task_tool
async def hostile_error() -> AsyncIterator[Any]:
    yield "calling the backend"
    raise ProtocolError(-32000, "refused\x1b]0;owned\x07\x9b2J\u202e by the client")


@pytest.mark.anyio
async def test_a_message_with_terminal_escapes_is_logged_escaped(captured: Capture) -> None:
    """For a library user's own handler too: the message escapes client- and body-supplied text,
    the `detail` attribute keeps it as it was."""
    async with serve(hostile_error) as (engine, _):
        failed = await engine.start(hostile_error, {}, owner="o")
        await wait_for_status(engine, failed.task_id, "failed", owner="o")
        await wait_idle(engine)
    (*_, fail) = captured.of(failed.task_id)
    assert fail.getMessage().endswith(": refused\\x1b]0;owned\\x07\\x9b2J\\u202e by the client (code -32000)")
    assert fail.detail == "refused\x1b]0;owned\x07\x9b2J\u202e by the client"  # type: ignore[attr-defined]


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
    assert re.search(
        r"\(tool waits\) in \d+\.\d\ds: Cancelled by the client\.$",
        captured.of(waiting.task_id)[-1].getMessage(),
    )


@pytest.mark.anyio
async def test_a_cancel_written_elsewhere_is_logged_by_the_runner(captured: Capture) -> None:
    # What `mcptasks admin cancel` or the dashboard do from another process: write the record and
    # announce it; the engine running the body learns of it through the store's notification.
    async with serve(waits) as (engine, _):
        record = await engine.start(waits, {}, owner="o")
        await wait_for_status(engine, record.task_id, "working", owner="o")
        written = False
        while not written:  # the body may still be writing its own status
            stored = await engine.store.get(record.task_id)
            assert stored is not None
            cancelled = stored.evolve(status="cancelled", status_message="Cancelled by an operator.")
            written = await engine.store.replace(cancelled, expected_version=stored.version)
        await engine.store.publish(record.task_id)
        with anyio.fail_after(10):
            while captured.events(record.task_id)[-1] != "cancelled":  # noqa: ASYNC110 (a log record)
                await anyio.sleep(0.01)
        await wait_idle(engine)
    assert captured.events(record.task_id) == ["created", "cancelled"]
    last = captured.of(record.task_id)[-1]
    assert last.getMessage().endswith(": Cancelled by an operator.")
    assert isinstance(last.duration, float)  # type: ignore[attr-defined]


@task_tool
async def ticks() -> AsyncIterator[Any]:
    for n in range(10_000):
        yield f"tick {n}"
        await anyio.sleep(0.02)
    yield Result("never")  # pragma: no cover


@pytest.mark.anyio
async def test_an_unannounced_cancel_is_logged_when_the_body_writes(captured: Capture) -> None:
    # On SQLite another process's announcement does not arrive: the runner learns of the cancel
    # when the body's next status write finds the task ended.
    async with serve(ticks) as (engine, _):
        record = await engine.start(ticks, {}, owner="o")
        await wait_for_status(engine, record.task_id, "working", owner="o")
        written = False
        while not written:
            stored = await engine.store.get(record.task_id)
            assert stored is not None
            cancelled = stored.evolve(status="cancelled", status_message="Cancelled by an operator.")
            written = await engine.store.replace(cancelled, expected_version=stored.version)
        with anyio.fail_after(10):
            while captured.events(record.task_id)[-1] != "cancelled":  # noqa: ASYNC110 (a log record)
                await anyio.sleep(0.01)
    assert captured.events(record.task_id) == ["created", "cancelled"]
    assert captured.of(record.task_id)[-1].getMessage().endswith(": Cancelled by an operator.")


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
        "duration": 1.25,
    }.items():
        setattr(record, name, value)
    line = JsonFormatter().format(record)
    data = json.loads(line)
    assert "\n" not in line
    assert data["level"] == "info" and data["logger"] == "mcptasks.tasks"
    assert data["message"] == "task X failed"
    assert (data["task_id"], data["tool"], data["status"], data["reason"]) == ("X", "t", "failed", "timeout")
    assert data["duration"] == 1.25
    assert "code" not in data and "detail" not in data  # unset fields are left out
    assert data["time"].endswith("Z")


def test_configure_logging_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="log level must be one of debug, info, warning, error"):
        configure_logging("loud")
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        configure_logging("info", "xml")  # type: ignore[arg-type]
