"""`accept_missing_mcp_name`: a `tasks/*` request over HTTP without `Mcp-Name` is refused by
default (-32020 naming the switch) and accepted with the switch on, warned about once per
client; a mismatched `Mcp-Name` is refused either way. Raw POSTs on a real server, through the
fast path and the SDK's path, and through `mcptasks serve`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from processes import ROOT, clean_env, free_port, serving_http
from sdk_helpers import TIMEOUT, HostApp, RawClient, serve_http

from mcptasks.wire import HEADER_MISMATCH, INVALID_PARAMS

pytestmark = pytest.mark.anyio

CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
WRONG = "sep-2663-wrong-task-id-for-routing-header-mismatch"
EXAMPLE = ROOT / "examples" / "hello.py"


@pytest.fixture
def anyio_backend() -> str:
    """uvicorn runs on asyncio."""
    return "asyncio"


@asynccontextmanager
async def raw_server(fast_path: bool, **options: Any) -> AsyncIterator[tuple[HostApp, RawClient]]:
    host = HostApp(**options)
    async with (
        serve_http(host.app.streamable_http_app(fast_path=fast_path)) as url,
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
    ):
        yield host, RawClient(http, url)


def task_requests(task_id: str, client: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    meta = {} if client is None else {"_meta": {CLIENT_INFO: client}}
    return [
        ("tasks/get", {"taskId": task_id, **meta}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}, **meta}),
        ("tasks/cancel", {"taskId": task_id, **meta}),
    ]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcptasks" and r.levelno == logging.WARNING and "Mcp-Name" in r.getMessage()
    ]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_a_missing_mcp_name_is_refused_by_default_naming_the_switch(fast_path: bool) -> None:
    async with raw_server(fast_path) as (_, raw):
        task_id = (await raw.call("quick", {"n": 1})).result["taskId"]
        for method, params in task_requests(task_id):
            missing = await raw.send(method, params, headers={"Mcp-Name": None})
            assert (missing.status, missing.error["code"]) == (400, HEADER_MISMATCH), method
            message = missing.error["message"]
            assert "accept_missing_mcp_name" in message and "--accept-missing-mcp-name" in message
            assert "clients-tested" in message


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_the_switch_accepts_a_missing_mcp_name_but_never_a_mismatched_one(
    fast_path: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcptasks")
    async with raw_server(fast_path, accept_missing_mcp_name=True) as (host, raw):
        task_id = (await raw.call("gated", {"label": "lenient"})).result["taskId"]
        for method, params in task_requests(task_id):
            mismatched = await raw.send(method, params, headers={"Mcp-Name": WRONG})
            assert (mismatched.status, mismatched.error["code"]) == (400, HEADER_MISMATCH), method
            assert "accept_missing_mcp_name" not in mismatched.error["message"]
        assert (await raw.get(task_id))["status"] == "working"  # nothing above reached the task

        got = await raw.send("tasks/get", {"taskId": task_id}, headers={"Mcp-Name": None})
        assert (got.status, got.result["status"]) == (200, "working")
        update = {"taskId": task_id, "inputResponses": {}}
        assert (await raw.send("tasks/update", update, headers={"Mcp-Name": None})).status == 200
        cancelled = await raw.send("tasks/cancel", {"taskId": task_id}, headers={"Mcp-Name": None})
        assert cancelled.status == 200
        assert (await raw.get(task_id))["status"] == "cancelled"

        # accepted, then checked as usual: an unknown task is still -32602
        unknown = await raw.send("tasks/get", {"taskId": "no-such-task"}, headers={"Mcp-Name": None})
        assert unknown.error["code"] == INVALID_PARAMS
        # the Mcp-Method check still applies
        wrong_method = await raw.send(
            "tasks/get", {"taskId": task_id}, headers={"Mcp-Name": None, "Mcp-Method": "tasks/cancel"}
        )
        assert wrong_method.error["code"] == HEADER_MISMATCH
        host.release("lenient")

    warned = warnings_of(caplog)
    assert len(warned) == 1, warned  # one client (the harness's clientInfo), many requests
    assert "conformance-test-client 1.0.0" in warned[0]


async def test_one_warning_per_client(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcptasks")
    async with raw_server(True, accept_missing_mcp_name=True) as (_, raw):
        task_id = (await raw.call("quick", {"n": 1})).result["taskId"]
        hostile = {"name": "other\x1b[2J\u202e", "version": "2.0"}  # the client's text: logged escaped
        for client in ({"name": "fastmcp", "version": "4.1.4"}, hostile):
            for _ in range(3):
                for method, params in task_requests(task_id, client):
                    answer = await raw.send(method, params, headers={"Mcp-Name": None})
                    assert answer.status == 200, (method, answer.message)
    warned = warnings_of(caplog)
    assert len(warned) == 2, warned
    assert "fastmcp 4.1.4" in warned[0] and "from client other\\x1b[2J\\u202e 2.0 (" in warned[1]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["environment", "flag"])
async def test_mcptasks_serve_turns_the_switch_on(how: str, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    env = clean_env(MCPTASKS_ACCEPT_MISSING_MCP_NAME="on") if how == "environment" else clean_env()
    extra = ("--accept-missing-mcp-name",) if how == "flag" else ()
    with serving_http(EXAMPLE, port=port, log=log, extra=extra, env=env):
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            raw = RawClient(http, f"http://127.0.0.1:{port}/mcp")
            for _ in range(2):
                # accepted, so the unknown id is what is refused
                missing = await raw.send("tasks/get", {"taskId": "no-such-task"}, headers={"Mcp-Name": None})
                assert missing.error["code"] == INVALID_PARAMS, missing.message
            mismatched = await raw.send("tasks/get", {"taskId": "no-such-task"}, headers={"Mcp-Name": WRONG})
            assert (mismatched.status, mismatched.error["code"]) == (400, HEADER_MISMATCH)
    output = log.read_text()
    assert output.count("without an Mcp-Name header") == 1, output
