"""`mcptasks serve --metrics-port`: a real server on 127.0.0.1, real tasks through the SDK client,
the metrics endpoint scraped over HTTP while they run and after (exact counter values), label
values bounded whatever clients answer, the Host check (421) of the other HTTP surfaces, and the
one error line without the `metrics` extra."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from doc_blocks import blocks
from helpers import accept
from mcp import Client
from mcp.client.extension import advertise
from processes import ROOT, clean_env, cli_command, free_port, serving_http, wait_accepting
from prometheus_client.parser import text_string_to_metric_families
from sdk_helpers import Tasks, answered_by_hand

from mcptasks._runtime.failures import FAILURE_LABELS

CONFORMANCE = str(ROOT / "examples" / "conformance_server.py")
HELLO = str(ROOT / "examples" / "hello.py")
EXTENSION_ID = "io.modelcontextprotocol/tasks"
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value of every sample line of a Prometheus text exposition."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            found[key] = float(value)
    return found


async def scrape(http: httpx2.AsyncClient, url: str) -> dict[str, float]:
    response = await http.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4"), response.headers
    return samples(response.text)


async def scrape_until(http: httpx2.AsyncClient, url: str, key: str, value: float) -> dict[str, float]:
    """Scrape until `key` shows `value` (bounded)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        found = await scrape(http, url)
        if found.get(key) == value:
            return found
        assert time.monotonic() < deadline, (key, value, found)
        await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_the_metrics_endpoint_counts_tasks_while_they_run_and_after(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    extra = ("--metrics-port", str(metrics_port))
    log = tmp_path / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra, cwd=tmp_path) as server:
        wait_accepting(server, metrics_port, log)
        async with (
            Client(
                f"http://127.0.0.1:{port}/mcp",
                extensions=[advertise(EXTENSION_ID)],
                elicitation_callback=answered_by_hand,  # declares elicitation; answered by tasks/update
            ) as client,
            httpx2.AsyncClient(timeout=TIMEOUT) as http,
        ):
            tasks = Tasks(client)
            slow = (await tasks.start("slow_compute", {"seconds": 60}))["taskId"]
            asking = (await tasks.start("confirm_delete", {"filename": "a.txt"}))["taskId"]
            waiting = await tasks.wait_input(asking, count=1)
            during = await scrape(http, metrics)
            assert during['mcptasks_tasks_created_total{tool="slow_compute"}'] == 1
            assert during['mcptasks_tasks_created_total{tool="confirm_delete"}'] == 1
            assert during["mcptasks_tasks_running"] == 2
            assert during['mcptasks_tasks_waiting_for_input{tool="confirm_delete"}'] == 1
            assert during['mcptasks_store_tasks{status="working"}'] == 1
            assert during['mcptasks_store_tasks{status="input_required"}'] == 1
            assert during["mcptasks_listen_streams_open"] == 0
            assert not any(key.startswith("mcptasks_tasks_completed_total") for key in during), during

            await tasks.cancel(slow)
            (key,) = waiting["inputRequests"]
            await tasks.update(asking, {key: accept({"confirm": True})})
            for name, arguments in (
                ("slow_compute", {"seconds": 0.05}),
                ("failing_job", {}),
                ("protocol_error_job", {}),
            ):
                await tasks.finish((await tasks.start(name, arguments))["taskId"])
            await tasks.finish(asking)
            after = await scrape_until(http, metrics, "mcptasks_tasks_running", 0)
    assert after['mcptasks_tasks_created_total{tool="slow_compute"}'] == 2
    assert after['mcptasks_tasks_cancelled_total{tool="slow_compute"}'] == 1
    assert after['mcptasks_tasks_completed_total{tool="slow_compute"}'] == 1
    assert after['mcptasks_tasks_completed_total{tool="confirm_delete"}'] == 1
    assert after['mcptasks_tasks_completed_total{tool="failing_job"}'] == 1
    assert after['mcptasks_tasks_tool_errors_total{tool="failing_job"}'] == 1
    assert after['mcptasks_tasks_failed_total{reason="-32603",tool="protocol_error_job"}'] == 1
    assert after['mcptasks_tasks_waiting_for_input{tool="confirm_delete"}'] == 0
    assert after['mcptasks_task_duration_seconds_count{status="cancelled",tool="slow_compute"}'] == 1
    assert (
        after['mcptasks_task_duration_seconds_bucket{le="+Inf",status="completed",tool="slow_compute"}'] == 1
    )
    assert after['mcptasks_task_requests_total{method="tasks/update",tool="confirm_delete"}'] == 1
    assert after['mcptasks_task_requests_total{method="tasks/cancel",tool="slow_compute"}'] == 1
    assert after["mcptasks_store_up"] == 1
    assert sum(value for key, value in after.items() if key.startswith("mcptasks_tasks_created_total")) == 5


REFUSALS = 5
REASON_BYTES = 1_000_000
"""Clients answer questions with error objects this large (under the request bound)."""


def label_values(text: str) -> dict[str, set[str]]:
    """Every value each label name takes in a Prometheus text exposition (parsed by prometheus-client)."""
    values: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for name, value in sample.labels.items():
                values.setdefault(name, set()).add(value)
    return values


@pytest.mark.anyio
async def test_error_answers_from_clients_make_one_bounded_label_and_a_small_scrape(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    log = tmp_path / "server.log"
    extra = ("--metrics-port", str(metrics_port))
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra, cwd=tmp_path) as server:
        wait_accepting(server, metrics_port, log)
        assert f"  metrics   {metrics} (Prometheus text format)" in log.read_text()
        async with (
            Client(
                f"http://127.0.0.1:{port}/mcp",
                extensions=[advertise(EXTENSION_ID)],
                elicitation_callback=answered_by_hand,
            ) as client,
            httpx2.AsyncClient(timeout=TIMEOUT) as http,
        ):
            tasks = Tasks(client)
            for index in range(REFUSALS):
                task_id = (await tasks.start("confirm_delete", {"filename": f"{index}.txt"}))["taskId"]
                (key,) = (await tasks.wait_input(task_id, count=1))["inputRequests"]
                # a huge reason of its own per task, odd codes, and one posing as the server's reason
                reason = "worker_lost" if index == 0 else f"{index}:" + "x" * REASON_BYTES
                refusal = {"code": -1000 - index, "message": "refused", "data": {"reason": reason}}
                await tasks.update(task_id, {key: refusal})
                failed = await tasks.finish(task_id)
                assert failed["status"] == "failed" and failed["error"] == refusal  # the task keeps it
            await tasks.finish((await tasks.start("protocol_error_job", {}))["taskId"])
            scraped = await http.get(metrics)
    assert scraped.status_code == 200 and len(scraped.content) < 16_000, len(scraped.content)
    found = samples(scraped.text)
    assert found['mcptasks_tasks_failed_total{reason="client_error",tool="confirm_delete"}'] == REFUSALS
    assert found['mcptasks_tasks_failed_total{reason="-32603",tool="protocol_error_job"}'] == 1
    labels = label_values(scraped.text)
    assert labels["reason"] == {"client_error", "-32603"} and labels["reason"] <= FAILURE_LABELS
    assert all(len(value) <= 64 for values in labels.values() for value in values), labels


def test_serve_with_metrics_but_without_the_extra_names_the_pip_command(tmp_path: Path) -> None:
    command = cli_command(
        "serve",
        HELLO,
        "--transport",
        "http",
        "--port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        without="prometheus_client",
    )
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mcptasks: error: --metrics-port: the metrics endpoint"), line
    assert "pip install 'mcptasks[metrics]'" in line, line


@pytest.mark.anyio
async def test_the_metrics_endpoint_refuses_a_foreign_host(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    extra = ("--metrics-port", str(metrics_port))
    log = tmp_path / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra, cwd=tmp_path) as server:
        wait_accepting(server, metrics_port, log)
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            await scrape_until(http, url, "mcptasks_tasks_running", 0)
            refused = await http.get(url, headers={"Host": "evil.example"})
            assert refused.status_code == 421, refused.text
            assert "metrics endpoint" in refused.text and "--metrics-host" in refused.text
            foreign = await http.get(url, headers={"Origin": "http://evil.example"})
            assert foreign.status_code == 403, foreign.text
            assert (await http.post(url)).status_code == 405


async def asgi_get(app: Any, path: str, host: str) -> tuple[int, bytes]:
    """One GET through an ASGI app: its status and body."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", host.encode())],
    }
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


@pytest.mark.anyio
async def test_the_mounting_example_of_the_metrics_page_works_as_shown() -> None:
    (block,) = [
        block for block in blocks(ROOT / "docs" / "operating" / "metrics.md") if block.lang == "python"
    ]
    namespace: dict[str, Any] = {}
    exec(compile(block.code, block.where, "exec"), namespace)
    operator = namespace["operator"]
    status, body = await asgi_get(operator, "/metrics", "ops.internal:9464")
    assert status == 200 and b"# TYPE mcptasks_tasks_created_total counter" in body, body
    assert b"mcptasks_tasks_running 0.0" in body.splitlines()
    assert (await asgi_get(operator, "/metrics", "127.0.0.1:9464"))[0] == 421
