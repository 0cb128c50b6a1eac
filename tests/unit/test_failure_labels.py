"""`failure_label`: every failed task is counted under one of a closed set of labels, whatever its
error object says; and that set names every reason the server itself fails a task with."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcptasks._runtime.failures import (
    FAILURE_LABELS,
    SERVER_FAILURE_REASONS,
    ClientErrorObject,
    ClientRefusal,
    failure_label,
)

ROOT = Path(__file__).resolve().parents[2]
REQUEST_REASONS = {"too_many_tasks", "too_many_parked_calls", "too_many_listen_streams", "step_before_task"}
"""Reasons of errors that refuse a request (a call fails before its task exists); they end no task."""
NO_FAILURE = {"error"}
"""`tasklog.DEFAULT_REASON`: what a log line shows for a failure without a reason."""


@pytest.mark.parametrize(
    ("error", "label"),
    [
        ({"code": -32603, "message": "m", "data": {"reason": "worker_lost"}}, "worker_lost"),
        ({"code": -32603, "message": "m", "data": {"reason": "store_unavailable"}}, "store_unavailable"),
        ({"code": -32603, "message": "m", "data": {"reason": "x" * 100_000}}, "-32603"),
        ({"code": -32602, "message": "m"}, "-32602"),
        ({"code": -32042, "message": "m", "data": {"retryable": True}}, "-32042"),
        ({"code": -32000, "message": "m"}, "-32000"),
        ({"code": 7, "message": "m", "data": {"reason": "my_own"}}, "other"),
        ({"code": -32100, "message": "m"}, "other"),
        ({"code": True, "message": "m"}, "other"),
        ({"code": "-32603", "message": "m"}, "other"),
        ({"message": "m", "data": "worker_lost"}, "other"),
        (None, "other"),
    ],
)
def test_an_error_object_gets_a_label_of_the_closed_set(error: Any, label: str) -> None:
    assert failure_label(error) == label
    assert label in FAILURE_LABELS


def test_the_error_object_a_client_answered_with_is_client_error_whatever_it_says() -> None:
    refusal = ClientRefusal(-32603, "no", {"reason": "worker_lost"})
    error = refusal.to_error()
    assert isinstance(error, ClientErrorObject) and failure_label(error) == "client_error"
    assert error == {"code": -32603, "message": "no", "data": {"reason": "worker_lost"}}
    assert failure_label(dict(error)) == "worker_lost", "a copy no longer says it came from the client"
    assert len(FAILURE_LABELS) < 200


def test_every_reason_the_server_fails_a_task_with_is_in_the_closed_set() -> None:
    # `"reason": "x"`, `reason="x"`, `reason = "x" if ... else "y"`, and `SOME_REASON = "x"`
    literal = re.compile(r"""(?:["']reason["']\s*:\s*|(?<![.\w])reason\s*=\s*)["']([a-z_]+)["']""")
    constant = re.compile(r"""\b[A-Z_]+_REASON = ["']([a-z_]+)["']""")
    either = re.compile(r"""(?<![.\w])reason\s*=\s*["']([a-z_]+)["'] if .* else ["']([a-z_]+)["']""")
    found: set[str] = set()
    for path in (ROOT / "mcptasks").rglob("*.py"):
        text = path.read_text()
        found.update(literal.findall(text), constant.findall(text))
        found.update(reason for pair in either.findall(text) for reason in pair)
    assert {"worker_lost", "timeout", "executor_ended", "journal_full"} <= found  # the scan sees them
    failing = found - REQUEST_REASONS - NO_FAILURE
    assert failing <= SERVER_FAILURE_REASONS, failing - SERVER_FAILURE_REASONS
