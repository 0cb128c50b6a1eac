"""A failed task's `statusMessage` says what failed, without repeating `error.message`."""

from __future__ import annotations

from typing import Any

import pytest

from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.recovery import lost_outcome
from mcptasks.stores.base import TaskRecord


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"code": -32603, "message": "ran too long", "data": {"reason": "timeout"}}, "Failed: timeout"),
        ({"code": -32603, "message": "gone", "data": {"reason": "worker_lost"}}, "Failed (worker lost)"),
        (
            {"code": -32603, "message": "x", "data": {"reason": "aborted", "exception": "SystemExit"}},
            "Failed: SystemExit",
        ),
        (
            {"code": -32603, "message": "x", "data": {"reason": "result_too_large"}},
            "Failed: result too large",
        ),
        ({"code": -32603, "message": "x", "data": {"reason": "something_new"}}, "Failed: something new"),
        ({"code": -32050, "message": "Ledger service unavailable"}, "Failed: error -32050"),
        ({"code": -32603, "message": "The task body was stopped."}, "Failed: internal error"),
        ({"message": "no code"}, "Failed"),
    ],
)
def test_the_status_names_the_failure_not_its_message(error: dict[str, Any], status: str) -> None:
    assert Outcome("failed", error=error).message == status


def test_tool_errors_keep_their_text() -> None:
    result = {"content": [{"type": "text", "text": "disk full"}], "isError": True}
    assert Outcome("completed", result=result).message == "disk full"


@pytest.mark.parametrize(
    ("shutdown", "status"), [(False, "Failed (worker lost)"), (True, "Failed (server shut down)")]
)
def test_lost_tasks(shutdown: bool, status: str) -> None:
    record = TaskRecord(task_id="t", owner="o", tool="job", status="working", created_at=0.0, updated_at=0.0)
    outcome = lost_outcome(record, shutdown=shutdown)
    assert outcome.message == status
    assert outcome.error is not None and outcome.error["message"] not in status
