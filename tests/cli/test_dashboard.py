"""The dashboard in real headless Chromium: `mcptasks dashboard` serving a SQLite or PostgreSQL
store that a running engine fills with working, input-waiting, failed and completed tasks.

Checks the rendered DOM (counts, rows, escaping), a live update after a status change (no
reload), filtering, and cancelling with and without the operator token. Plus the HTTP API's
guards and the CLI's refusals, without a browser.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from browser import Browser, chromium_or_skip
from operator_stores import store_url, workload
from processes import ROOT, clean_env, free_port, stop, wait_accepting

from mcptasks.cli.dashboard import is_loopback

__all__ = ["store_url"]

TOKEN = "operator-s3cret"


@contextmanager
def dashboard(
    url: str, tmp_path: Path, *, token: str | None = TOKEN, extra: tuple[str, ...] = ()
) -> Iterator[str]:
    """`mcptasks dashboard` on a free loopback port; yields its base URL."""
    port = free_port()
    log = tmp_path / f"dashboard-{port}.log"
    env = clean_env() if token is None else clean_env(MCPTASKS_DASHBOARD_TOKEN=token)
    command = [sys.executable, "-m", "mcptasks", "dashboard", "--store", url, "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--refresh", "0.3", *extra],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_accepting(process, port, log)
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop(process)


def http(method: str, url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    """One request; (status, body, headers) whatever the status."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


async def run(fn: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(fn, *args)


@pytest.mark.anyio
@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
async def test_dashboard_in_a_real_browser(store_url: str, tmp_path: Path) -> None:
    executable = chromium_or_skip()
    async with workload(store_url) as load:
        ids = load.ids
        with dashboard(store_url, tmp_path) as base:
            browser = await run(Browser, executable)
            try:
                await run(browser.open, base)
                js = browser.evaluate
                # server-rendered counts and rows, then the script takes over (live updates)
                counts = await run(
                    js,
                    "Object.fromEntries([...document.querySelectorAll('.count')].map(c => [c.dataset.status, c.querySelector('.n').textContent]))",
                )
                assert counts == {
                    "working": "1",
                    "input_required": "1",
                    "completed": "1",
                    "failed": "1",
                    "cancelled": "0",
                }
                await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
                rows = await run(
                    js,
                    "Object.fromEntries([...document.querySelectorAll('#tasks tbody tr')].map(r => [r.dataset.status, r.dataset.taskId]))",
                )
                assert rows == ids
                # a statusMessage with markup is text, in the server's HTML and after the script's render
                message = await run(
                    js,
                    f"document.querySelector('tr[data-task-id=\"{ids['working']}\"] .message').textContent",
                )
                assert message == "<script>alert('spin')</script> & <b>busy</b>"
                assert await run(js, "document.querySelectorAll('#tasks b, #tasks tbody script').length") == 0
                status, page, headers = await run(http, "GET", base)
                assert status == 200 and "&lt;script&gt;alert(&#x27;spin&#x27;)&lt;/script&gt;" in page
                assert "script-src 'self'" in headers["content-security-policy"]
                assert await run(js, "document.querySelectorAll('#chart rect').length") >= 4

                # live update: answer the input request; the row and the counts change without a reload
                await run(js, "window.sameDocument = true")
                waiting = await load.engine.store.get(ids["input_required"])
                assert waiting is not None
                [key] = waiting.input_requests
                await load.engine.update(
                    ids["input_required"], {key: {"action": "accept", "content": {}}}, owner=waiting.owner
                )
                await run(
                    browser.wait_until,
                    f"document.querySelector('tr[data-task-id=\"{ids['input_required']}\"]').dataset.status === 'completed'",
                )
                await run(
                    browser.wait_until,
                    "document.querySelector('.count[data-status=completed] .n').textContent === '2'",
                )
                assert await run(js, "window.sameDocument === true")

                # filtering by status
                await run(
                    js,
                    "(() => { const s = document.getElementById('f-status'); s.value = 'failed'; s.dispatchEvent(new Event('change')); })()",
                )
                await run(browser.wait_until, "document.querySelectorAll('#tasks tbody tr').length === 1")
                assert (
                    await run(js, "document.querySelector('#tasks tbody tr').dataset.taskId") == ids["failed"]
                )
                assert await run(js, "location.search") == "?status=failed"

                # the detail view: timeline, input requests, error
                await run(browser.open, f"{base}tasks/{ids['failed']}")
                assert await run(js, "document.getElementById('d-status').textContent") == "failed"
                assert json.loads(await run(js, "document.getElementById('error').textContent")) == {
                    "code": -32603,
                    "message": "disk <full>",
                }
                timeline = await run(
                    js, "[...document.querySelectorAll('#timeline .status')].map(s => s.textContent)"
                )
                assert timeline == ["created", "failed"]

                # cancel: without a token, with a wrong one, then with the operator's
                working = ids["working"]
                await run(browser.open, f"{base}tasks/{working}")
                await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
                click = "document.getElementById('cancel').click()"
                await run(js, "document.getElementById('token').value = ''")
                await run(js, click)
                assert "operator token" in await run(js, "document.getElementById('notice').textContent")
                await run(js, "document.getElementById('token').value = 'wrong'")
                await run(js, click)
                await run(
                    browser.wait_until,
                    "document.getElementById('notice').textContent.includes('valid operator token')",
                )
                record = await load.engine.store.get(working)
                assert record is not None and record.status == "working"
                await run(js, f"document.getElementById('token').value = {json.dumps(TOKEN)}")
                await run(js, click)
                await run(
                    browser.wait_until, "document.getElementById('d-status').textContent === 'cancelled'"
                )
                assert await run(js, "document.getElementById('notice').textContent") == "Cancelled."
                record = await load.engine.store.get(working)
                assert record is not None and record.status == "cancelled"
                if store_url.startswith("postgresql"):
                    with anyio.fail_after(30):
                        await load.stopped.wait()  # the body heard it across processes
            finally:
                await run(browser.close)


@pytest.mark.anyio
async def test_api_guards_writes_and_answers_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with workload(url) as load:
        working = load.ids["working"]
        with dashboard(url, tmp_path) as base:
            cancel = f"{base}api/tasks/{working}/cancel"
            assert (await run(http, "POST", cancel))[0] == 401
            assert (await run(http, "POST", cancel, {"X-Operator-Token": "nope"}))[0] == 401
            assert (await run(http, "GET", cancel))[0] == 405
            status, body, _ = await run(http, "GET", f"{base}api/summary?status=running")
            assert status == 400 and "unknown status" in body
            status, body, _ = await run(http, "GET", f"{base}api/summary?tool=boom")
            assert status == 200 and [t["tool"] for t in json.loads(body)["tasks"]] == ["boom"]
            assert (await run(http, "GET", f"{base}api/tasks/unknown"))[0] == 404
            assert (await run(http, "GET", f"{base}static/../app.py"))[0] == 404
            status, body, _ = await run(http, "GET", f"{base}static/dashboard.js")
            assert status == 200 and "textContent" in body
            record = await load.engine.store.get(working)
            assert record is not None and record.status == "working"
            status, body, _ = await run(http, "POST", cancel, {"X-Operator-Token": TOKEN})
            assert status == 200 and json.loads(body) == {
                "taskId": working,
                "status": "cancelled",
                "changed": True,
            }
        with dashboard(url, tmp_path, token=None, extra=("--no-results",)) as base:
            status, body, _ = await run(
                http,
                "POST",
                f"{base}api/tasks/{load.ids['input_required']}/cancel",
                {"X-Operator-Token": TOKEN},
            )
            assert status == 403 and "disabled" in body
            status, page, _ = await run(http, "GET", f"{base}tasks/{load.ids['input_required']}")
            assert status == 200 and 'id="cancel" type="button" disabled' in page
            assert 'id="result"' not in page
            status, page, _ = await run(http, "GET", f"{base}api/tasks/{load.ids['completed']}")
            assert status == 200 and "result" not in json.loads(page)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without an operator token"),
        (["--store", "memory://"], "memory:// holds tasks inside one server process"),
        (["--port", "0"], "--port must be between 1 and 65535"),
    ],
)
def test_cli_refuses_unsafe_or_useless_setups(tmp_path: Path, args: list[str], message: str) -> None:
    command = [
        sys.executable,
        "-m",
        "mcptasks",
        "dashboard",
        "--store",
        f"sqlite:///{tmp_path / 'x.db'}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=clean_env(), timeout=120, check=False)
    assert done.returncode == 2 and message in done.stderr


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", ""))


def test_the_screenshot_script_saves_both_pictures(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    command = [
        sys.executable,
        "examples/dashboard_screenshots.py",
        "--out",
        str(tmp_path),
        "--chromium",
        executable,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, env=clean_env(), timeout=300, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    for name in ("dashboard.png", "dashboard-task.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
