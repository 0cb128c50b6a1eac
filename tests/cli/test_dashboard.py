"""The dashboard in real headless Chromium: `mcptasks dashboard` serving a SQLite or PostgreSQL
store that a running engine fills with working, input-waiting, failed and completed tasks.

Checks the rendered DOM (counts, rows, escaping), a live update after a status change (no
reload), filtering, and cancelling with and without the operator token. Plus the HTTP API's
guards and the CLI's refusals, without a browser: the Host and Origin check on every route
(standalone and mounted), and the login that reading needs beyond loopback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import anyio
import pytest
from browser import Browser, chromium_or_skip
from operator_stores import seeded_sqlite, store_url, workload
from processes import ROOT, clean_env, free_port, stop, wait_accepting
from sdk_helpers import serve_http
from starlette.applications import Starlette
from starlette.routing import Mount

from mcptasks.cli.dashboard import is_loopback
from mcptasks.dashboard import dashboard_app
from mcptasks.dashboard.login import FREE_FAILURES, MAX_LOCKOUT, Throttle
from mcptasks.dashboard.views import PREVIEW_CHARS
from mcptasks.stores import TaskRecord

__all__ = ["store_url"]

TOKEN = "operator-s3cret-9fQ2xLw7ZkT4mVb8RjN3"
"""Strong enough for a dashboard beyond loopback (32 characters or more, varied)."""


@contextmanager
def dashboard(
    url: str,
    tmp_path: Path,
    *,
    token: str | None = TOKEN,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`mcptasks dashboard` on a free port (loopback unless `extra` names a --host); yields its
    base URL on 127.0.0.1, the only address the tests connect to."""
    port = free_port()
    log = tmp_path / f"dashboard-{port}.log"
    tokens = {} if token is None else {"MCPTASKS_DASHBOARD_TOKEN": token}
    env = clean_env(**tokens, **(env or {}))
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


def dashboard_command(tmp_path: Path, *args: str) -> list[str]:
    """`mcptasks dashboard` on a (missing) SQLite store in `tmp_path`, with `args`."""
    return [sys.executable, "-m", "mcptasks", "dashboard", "--store", f"sqlite:///{tmp_path / 'x.db'}", *args]


def http(method: str, url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    """One request; (status, body, headers) whatever the status."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def raw(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    source: str | None = None,
) -> tuple[int, str, list[tuple[str, str]]]:
    """One request, redirects not followed; (status, body, header pairs) whatever the status.
    A `Host` in `headers` replaces the one of `url` (which is always on 127.0.0.1); `source` is
    the loopback address to send from (another client address than 127.0.0.1)."""
    parts = urllib.parse.urlsplit(url)
    connection = HTTPConnection(
        parts.hostname or "127.0.0.1",
        parts.port,
        timeout=30,
        source_address=None if source is None else (source, 0),
    )
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode(), response.getheaders()
    finally:
        connection.close()


def header(pairs: list[tuple[str, str]], name: str) -> list[str]:
    """Every value of header `name` in `pairs`."""
    return [value for key, value in pairs if key.lower() == name.lower()]


def login_form(token: str, next_path: str = "/") -> tuple[dict[str, str], bytes]:
    """The headers and body a browser posts from the login form."""
    body = urllib.parse.urlencode({"next": next_path, "token": token}).encode()
    return {"Content-Type": "application/x-www-form-urlencoded"}, body


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
                    "tool_error": "0",
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


@pytest.mark.anyio
async def test_every_route_refuses_a_foreign_host_or_origin(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with workload(url) as load:
        working = load.ids["working"]
        with dashboard(url, tmp_path) as base:
            port = urllib.parse.urlsplit(base).port
            cancel = f"{base}api/tasks/{working}/cancel"
            routes = [
                "",
                "api/summary",
                f"api/tasks/{working}",
                f"tasks/{working}",
                "static/dashboard.js",
                "nope",
            ]
            # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1
            for path in routes:
                for host in ("evil.example", f"evil.example:{port}"):
                    status, body, headers = await run(raw, "GET", base + path, {"Host": host})
                    assert status == 421, (path, host)
                    assert body.startswith("Invalid Host header") and "'evil.example" in body
                    assert "--allowed-host" in body and working not in body
                    assert header(headers, "Content-Type") == ["text/plain; charset=utf-8"]
            status, body, _ = await run(
                raw, "POST", cancel, {"Host": "evil.example", "X-Operator-Token": TOKEN}
            )
            assert status == 421
            # this machine's names, with and without a port, are the default
            for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}", f"[::1]:{port}"):
                status, body, _ = await run(raw, "GET", f"{base}api/summary", {"Host": host})
                assert status == 200 and working in body, host
            # a request from another site (or another local app, or an opaque origin) is refused
            for origin in ("http://evil.example", "http://localhost:3000", "null"):
                for path in ("", "api/summary", f"api/tasks/{working}"):
                    status, body, _ = await run(raw, "GET", base + path, {"Origin": origin})
                    assert status == 403 and body.startswith("Invalid Origin header"), (path, origin)
                    assert working not in body
                status, body, _ = await run(
                    raw, "POST", cancel, {"Origin": origin, "X-Operator-Token": TOKEN}
                )
                assert status == 403
            record = await load.engine.store.get(working)
            assert record is not None and record.status == "working"
            # the dashboard's own pages are welcome
            own = {"Origin": f"http://127.0.0.1:{port}"}
            assert (await run(raw, "GET", f"{base}api/summary", own))[0] == 200
            status, body, _ = await run(raw, "POST", cancel, {**own, "X-Operator-Token": TOKEN})
            assert status == 200 and json.loads(body)["status"] == "cancelled"


@pytest.mark.anyio
async def test_allowed_hosts_come_from_the_option_or_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with workload(url) as load:
        completed = load.ids["completed"]
        with dashboard(
            url, tmp_path, extra=("--allowed-host", "dash.example:*", "--allowed-host", "ops")
        ) as base:
            port = urllib.parse.urlsplit(base).port
            for host, expected in (
                (f"dash.example:{port}", 200),
                ("ops", 200),
                (f"ops:{port}", 421),  # a name without :* is that exact Host
                ("dash.example", 421),
                (f"127.0.0.1:{port}", 421),  # the list replaces the default
                ("evil.example", 421),
            ):
                for path in ("", f"api/tasks/{completed}"):
                    assert (await run(raw, "GET", base + path, {"Host": host}))[0] == expected, (host, path)
            origin = {"Host": f"dash.example:{port}", "Origin": f"https://dash.example:{port}"}
            assert (await run(raw, "GET", f"{base}api/summary", origin))[0] == 200
        hosts = {"MCPTASKS_DASHBOARD_ALLOWED_HOSTS": "a.example, b.example:*"}
        with dashboard(url, tmp_path, env=hosts) as base:
            port = urllib.parse.urlsplit(base).port
            for host, expected in (
                ("a.example", 200),
                (f"b.example:{port}", 200),
                (f"a.example:{port}", 421),
            ):
                assert (await run(raw, "GET", f"{base}api/summary", {"Host": host}))[0] == expected, host
        with dashboard(url, tmp_path, extra=("--allowed-host", "*")) as base:
            assert (await run(raw, "GET", f"{base}api/summary", {"Host": "anything.example"}))[0] == 200
            status, _, _ = await run(
                raw,
                "GET",
                f"{base}api/summary",
                {"Host": "anything.example", "Origin": "http://evil.example"},
            )
            assert status == 403


@pytest.mark.anyio
async def test_beyond_loopback_reading_needs_the_operator_login(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with workload(url) as load:
        ids = load.ids
        working = ids["working"]
        with dashboard(url, tmp_path, extra=("--host", "0.0.0.0")) as base:
            port = urllib.parse.urlsplit(base).port
            everything: list[str] = []  # every answer, to check that the token never shows

            async def ask(
                method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None
            ) -> tuple[int, str, list[tuple[str, str]]]:
                answer: tuple[int, str, list[tuple[str, str]]] = await run(
                    raw, method, base + path, headers, body
                )
                everything.append(answer[1] + json.dumps(answer[2]))
                return answer

            # without credentials: the page is the login form, the API a JSON 401; nothing leaks
            for path in ("", f"tasks/{ids['completed']}", "?status=failed"):
                status, page, _ = await ask("GET", path)
                assert (
                    status == 401 and '<form id="login" class="login" method="post" action="/login">' in page
                )
                assert 'name="token" type="password"' in page and "dashboard.js" not in page
                assert not any(task_id in page for name, task_id in ids.items() if name != "completed")
            status, page, _ = await ask("GET", "?status=failed")
            assert 'name="next" value="/?status=failed"' in page
            for path in ("api/summary", f"api/tasks/{working}"):
                status, body, headers = await ask("GET", path)
                assert status == 401 and "operator token" in json.loads(body)["error"]
                assert header(headers, "WWW-Authenticate") == ['Bearer realm="mcptasks dashboard"']
                assert working not in body
            assert (await ask("GET", "static/dashboard.css"))[0] == 200  # assets are no secret
            # the Host check holds beyond loopback too, credentials or not
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            assert (await ask("GET", "api/summary", {**bearer, "Host": "evil.example"}))[0] == 421
            # API clients: Authorization: Bearer
            for wrong in ("Bearer nope", f"Bearer {TOKEN}x", f"Basic {TOKEN}", "Bearer"):
                assert (await ask("GET", "api/summary", {"Authorization": wrong}))[0] == 401, wrong
            status, body, _ = await ask("GET", "api/summary", bearer)
            assert status == 200 and {t["taskId"] for t in json.loads(body)["tasks"]} == set(ids.values())
            status, body, _ = await ask(
                "GET", f"api/tasks/{ids['completed']}", {"Authorization": f"bearer {TOKEN}"}
            )
            assert status == 200 and json.loads(body)["status"] == "completed"

            # the login form: a wrong token is refused, without a cookie
            status, page, headers = await ask("POST", "login", *login_form("wrong"))
            assert status == 401 and "not the operator token" in page and not header(headers, "Set-Cookie")
            status, _, headers = await ask("POST", "login", {"Content-Type": "text/plain"}, TOKEN.encode())
            assert status == 400 and not header(headers, "Set-Cookie")
            form_headers, form_body = login_form(TOKEN, f"/tasks/{working}")
            status, _, headers = await ask(
                "POST", "login", {**form_headers, "Origin": "http://evil.example"}, form_body
            )
            assert status == 403 and not header(headers, "Set-Cookie")
            # the right one: a session cookie (not the token), then back to the page asked for
            own = {"Origin": f"http://127.0.0.1:{port}"}
            status, _, headers = await ask("POST", "login", {**form_headers, **own}, form_body)
            assert status == 303 and header(headers, "Location") == [f"/tasks/{working}"]
            [cookie] = header(headers, "Set-Cookie")
            attributes = [part.strip().lower() for part in cookie.split(";")]
            assert "httponly" in attributes and "samesite=strict" in attributes and "path=/" in attributes
            assert "secure" not in attributes  # plain http here; https sets it
            name, _, value = cookie.split(";")[0].partition("=")
            assert name == "mcptasks_dashboard" and value and TOKEN not in value
            session = {"Cookie": f"{name}={value}"}
            status, page, _ = await ask("GET", f"tasks/{working}", session)
            assert status == 200 and f'data-task="{working}"' in page and 'action="/logout"' in page
            status, page, _ = await ask("GET", "", session)
            assert status == 200 and all(f'data-task-id="{task_id}"' in page for task_id in ids.values())
            for path in ("api/summary", f"api/tasks/{working}"):
                assert (await ask("GET", path, session))[0] == 200
            # where a login sends you is always this dashboard
            for elsewhere in ("//evil.example/", "http://evil.example/", "/\\evil.example", "elsewhere"):
                status, _, headers = await ask("POST", "login", *login_form(TOKEN, elsewhere))
                assert status == 303 and header(headers, "Location") == ["/"], elsewhere
            # a cookie is only good as the dashboard made it
            for forged in (f"{value[:-1]}{'A' if value[-1] != 'A' else 'B'}", value[1:], TOKEN, ""):
                assert (await ask("GET", "api/summary", {"Cookie": f"{name}={forged}"}))[0] == 401, forged
            # cancelling still needs the token in its header, a login is not enough
            cancel = f"api/tasks/{working}/cancel"
            assert (await ask("POST", cancel, session))[0] == 401
            assert (await ask("POST", cancel, {**session, "X-Operator-Token": "nope"}))[0] == 401
            record = await load.engine.store.get(working)
            assert record is not None and record.status == "working"
            status, body, _ = await ask("POST", cancel, {**session, **own, "X-Operator-Token": TOKEN})
            assert status == 200 and json.loads(body)["status"] == "cancelled"
            # logging out forgets the cookie and ends the session: the old cookie is refused
            status, _, headers = await ask("POST", "logout", {**session, **own})
            assert status == 303 and header(headers, "Location") == ["/"]
            [cleared] = header(headers, "Set-Cookie")
            assert cleared.startswith("mcptasks_dashboard=") and "max-age=0" in cleared.lower()
            for path in ("api/summary", f"api/tasks/{working}"):
                assert (await ask("GET", path, session))[0] == 401, path
            status, page, _ = await ask("GET", "", session)
            assert status == 401 and 'id="login"' in page
            assert TOKEN not in "".join(everything)
        logs = await run(lambda: "".join(log.read_text() for log in tmp_path.glob("dashboard-*.log")))
        assert "login required to read" in logs and TOKEN not in logs


@pytest.mark.anyio
async def test_a_mounted_dashboard_checks_host_origin_and_login(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with workload(url) as load:
        working = load.ids["working"]
        ops = dashboard_app(load.engine.store, token=TOKEN, allowed_hosts=["ops.example"], protect_reads=True)
        app = Starlette(routes=[Mount("/ops", ops)])
        async with serve_http(app, "/ops/") as base:
            here = {"Host": "ops.example"}
            for path in ("", "api/summary", f"api/tasks/{working}", "static/dashboard.js"):
                for host in ("evil.example", urllib.parse.urlsplit(base).netloc):
                    assert (await run(raw, "GET", base + path, {"Host": host}))[0] == 421, (path, host)
            assert (await run(raw, "GET", f"{base}api/summary", {**here, "Origin": "http://evil.example"}))[
                0
            ] == 403
            status, page, _ = await run(raw, "GET", base, here)
            assert status == 401 and 'action="/ops/login"' in page and 'name="next" value="/ops/"' in page
            form_headers, form_body = login_form(TOKEN, f"/ops/tasks/{working}")
            status, _, headers = await run(raw, "POST", f"{base}login", {**here, **form_headers}, form_body)
            assert status == 303 and header(headers, "Location") == [f"/ops/tasks/{working}"]
            [cookie] = header(headers, "Set-Cookie")
            assert "path=/ops/" in cookie.lower()
            session = {**here, "Cookie": cookie.split(";")[0]}
            status, body, _ = await run(raw, "GET", f"{base}api/summary", session)
            assert status == 200 and working in body
            outside_headers, outside_body = login_form(TOKEN, "/")
            status, _, headers = await run(
                raw, "POST", f"{base}login", {**here, **outside_headers}, outside_body
            )
            assert status == 303 and header(headers, "Location") == ["/ops/"]  # not outside the mount


def test_the_app_refuses_unusable_settings() -> None:
    for options, message in (
        ({"protect_reads": True}, "needs an operator token"),
        ({"token": TOKEN, "allowed_hosts": []}, "at least one host"),
        ({"token": TOKEN, "allowed_hosts": "ops.example"}, "not one string"),
        ({"token": TOKEN, "allowed_hosts": ["ops.example", " "]}, "empty"),
        ({"redact_arguments": "password"}, "not one string"),
    ):
        with pytest.raises(ValueError, match=message):
            dashboard_app("sqlite:///unused.db", **options)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without an operator token"),
        (["--allowed-host", ""], "--allowed-host needs a host name"),
        (["--store", "memory://"], "memory:// holds tasks inside one server process"),
        (["--port", "0"], "--port must be between 1 and 65535"),
    ],
)
def test_cli_refuses_unsafe_or_useless_setups(tmp_path: Path, args: list[str], message: str) -> None:
    command = dashboard_command(tmp_path, *args)
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


HOSTILE = "<script>alert('x')</script>"
ASKED_SCHEMA = {
    "type": "object",
    "properties": {
        f"who{HOSTILE}": {"type": "string", "description": f"<img src=x onerror=alert(1)>{HOSTILE}"},
        "window": {"type": "string", "enum": ["now", HOSTILE], "default": "now"},
        "canary": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": [f"who{HOSTILE}"],
}


async def seed_operator_store(path: Path, now: float) -> dict[str, str]:
    """A SQLite store with an input-waiting task (hostile arguments, status messages and schema,
    a secret argument), a finished one (known duration) and a working one; their ids by state."""
    from mcptasks import SqliteTaskStore
    from mcptasks.stores import TaskRecord

    store = SqliteTaskStore(path)
    await store.open()
    try:
        waiting = TaskRecord(
            task_id="waiting-task-0001",
            owner="alice",
            tool="deploy",
            created_at=now - 185,
            arguments={
                "env": HOSTILE,
                "password": "hunter2-secret",
                "options": {"API_KEY": "k-secret-9", "retries": 3},
            },
            runner="replica-a",
        )
        for i in range(25):  # more than MAX_STATUS_HISTORY messages, through evolve
            waiting = waiting.evolve(status_message=f"step {i}: {HOSTILE}", updated_at=now - 180 + i)
        waiting = waiting.evolve(
            status="input_required",
            input_requests={
                "input-1": {
                    "method": "elicitation/create",
                    "params": {"message": f"Deploy? {HOSTILE}", "requestedSchema": ASKED_SCHEMA},
                },
                "input-2": {"method": "sampling/createMessage", "params": {"maxTokens": 5, "note": HOSTILE}},
            },
            updated_at=now - 150,
        )
        finished = TaskRecord(
            task_id="finished-task-0002",
            owner="bob",
            tool="report",
            status="completed",
            created_at=now - 900,
            updated_at=now - 700,
            transitions=[[now - 700, "completed", None]],
            result={"content": [{"type": "text", "text": "42 rows"}]},
        )
        working = TaskRecord(task_id="working-task-0003", owner="bob", tool="report", created_at=now - 30)
        for record in (waiting, finished, working):
            await store.create(record)
    finally:
        await store.close()
    return {"input_required": waiting.task_id, "completed": finished.task_id, "working": working.task_id}


EMPTY_LOOKING = ("null", "{}", "[]", "None", "undefined")


@pytest.mark.anyio
async def test_the_detail_view_shows_arguments_history_and_questions_as_text(tmp_path: Path) -> None:
    import time

    from mcptasks.stores.base import MAX_STATUS_HISTORY

    executable = chromium_or_skip()
    db = tmp_path / "tasks.db"
    ids = await seed_operator_store(db, time.time())
    url = f"sqlite:///{db}"
    waiting, finished = ids["input_required"], ids["completed"]
    with dashboard(url, tmp_path, env={"MCPTASKS_DASHBOARD_REDACT": "password, api_key"}) as base:
        # the API: masked arguments (the secrets never leave the server), the status history
        status, body, _ = await run(http, "GET", f"{base}api/tasks/{waiting}")
        assert status == 200 and "hunter2" not in body and "k-secret-9" not in body
        task = json.loads(body)
        assert task["arguments"] == {
            "env": HOSTILE,
            "password": "\u2022\u2022\u2022 (redacted)",
            "options": {"API_KEY": "\u2022\u2022\u2022 (redacted)", "retries": 3},
        }
        history = task["statusHistory"]
        assert len(history) == MAX_STATUS_HISTORY
        assert [h["statusMessage"] for h in history] == [f"step {i}: {HOSTILE}" for i in range(5, 25)]
        assert all(h["at"].endswith("Z") for h in history)
        assert task["endedAt"] is None and task["durationSeconds"] >= 185
        # a finished task's duration is created to ended, and stays so
        done = json.loads((await run(http, "GET", f"{base}api/tasks/{finished}"))[1])
        assert done["durationSeconds"] == 200.0 and done["endedAt"] is not None
        # the server's HTML: every hostile text escaped, no secret, no empty-looking field
        status, page, _ = await run(http, "GET", f"{base}tasks/{waiting}")
        assert status == 200 and "hunter2" not in page and "k-secret-9" not in page
        assert HOSTILE not in page and "<img" not in page
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
        for text in EMPTY_LOOKING:
            assert f">{text}<" not in page, text

        browser = await run(Browser, executable)
        try:
            js = browser.evaluate
            for task_id in (waiting, finished, ids["working"]):
                await run(browser.open, f"{base}tasks/{task_id}")
                await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
                # no script or image made from the task's data, no empty field, no empty section
                assert await run(js, "document.querySelectorAll('main script, main img, main b').length") == 0
                values = await run(js, "[...document.querySelectorAll('#fields dd')].map(d => d.textContent)")
                assert values and all(v.strip() and v.strip() not in EMPTY_LOOKING for v in values), values
                shown = await run(
                    js,
                    "[...document.querySelectorAll('section')].filter(s => !s.hidden).map(s => s.id)",
                )
                for section in shown:
                    text = await run(
                        js, f"document.querySelector('#{section} > :not(h2)').textContent.trim()"
                    )
                    assert text and text not in EMPTY_LOOKING, section
                labels = await run(js, "[...document.querySelectorAll('#fields dt')].map(d => d.textContent)")
                if task_id == finished:
                    assert shown == [] and "Ended" in labels and "Message" not in labels
                    assert (
                        await run(js, "document.getElementById('d-durationSeconds').textContent")
                        == "3 min 20 s"
                    )
                    assert (await run(js, "document.getElementById('result').textContent")).count(
                        "42 rows"
                    ) == 1
                elif task_id == ids["working"]:
                    assert shown == [] and "Ended" not in labels
                    assert "(running)" in await run(
                        js, "document.getElementById('d-durationSeconds').textContent"
                    )
            await run(browser.open, f"{base}tasks/{waiting}")
            await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
            assert await run(
                js, "document.getElementById('d-createdAt').textContent.startsWith('3 min ago (')"
            )
            assert await run(js, "document.getElementById('s-error').hidden")
            # the arguments, masked as asked
            arguments = await run(
                js,
                "Object.fromEntries([...document.querySelectorAll('#arguments dt')].map(d => [d.textContent, d.nextElementSibling.textContent]))",
            )
            assert arguments == {
                "env": HOSTILE,
                "password": "\u2022\u2022\u2022 (redacted)",
                "options": '{"API_KEY":"\u2022\u2022\u2022 (redacted)","retries":3}',
            }
            # the status history, newest first, as text
            messages = await run(
                js, "[...document.querySelectorAll('#history .message')].map(m => m.textContent)"
            )
            assert messages == [f"step {i}: {HOSTILE}" for i in range(24, 4, -1)]
            assert await run(
                js, "/^\\d\\d:\\d\\d:\\d\\d$/.test(document.querySelector('#history time').textContent)"
            )
            # the pending questions: key, method, message, and the schema as a table
            questions = await run(
                js,
                """[...document.querySelectorAll('#inputs .question')].map(q => ({
                    key: q.dataset.key,
                    method: q.querySelector('.method').textContent,
                    message: q.querySelector('.q-message')?.textContent ?? null,
                    rows: [...q.querySelectorAll('.schema tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
                    params: q.querySelector('.q-params')?.textContent ?? null,
                }))""",
            )
            assert questions[0] == {
                "key": "input-1",
                "method": "elicitation/create",
                "message": f"Deploy? {HOSTILE}",
                "rows": [
                    [f"who{HOSTILE}", "string", "required", f"<img src=x onerror=alert(1)>{HOSTILE}"],
                    ["window", f"string, one of: now, {HOSTILE}", "optional", "default: now"],
                    ["canary", "integer, 1..100", "optional", ""],
                ],
                "params": None,
            }
            assert questions[1]["key"] == "input-2" and questions[1]["method"] == "sampling/createMessage"
            assert json.loads(questions[1]["params"]) == {"maxTokens": 5, "note": HOSTILE}
            assert await run(js, "document.querySelectorAll('#inputs img, #inputs script').length") == 0
        finally:
            await run(browser.close)

    # --redact-arguments masks every value; without any setting, every value shows
    with dashboard(url, tmp_path, extra=("--redact-arguments",)) as base:
        body = (await run(http, "GET", f"{base}api/tasks/{waiting}"))[1]
        masked = "\u2022\u2022\u2022 (redacted)"
        assert json.loads(body)["arguments"] == {"env": masked, "password": masked, "options": masked}
        page = (await run(http, "GET", f"{base}tasks/{waiting}"))[1]
        assert "hunter2" not in page and "retries" not in page
    with dashboard(url, tmp_path) as base:
        shown = json.loads((await run(http, "GET", f"{base}api/tasks/{waiting}"))[1])["arguments"]
        assert shown["password"] == "hunter2-secret"
    logs = await run(lambda: "".join(log.read_text() for log in tmp_path.glob("dashboard-*.log")))
    assert "arguments redacted: password, api_key" in logs and "every argument value redacted" in logs


@pytest.mark.anyio
async def test_the_overview_chart_spans_its_card_with_readable_axes(tmp_path: Path) -> None:
    import time

    executable = chromium_or_skip()
    db = tmp_path / "tasks.db"
    ids = await seed_operator_store(db, time.time())
    with dashboard(f"sqlite:///{db}", tmp_path) as base:
        data = json.loads((await run(http, "GET", f"{base}api/summary"))[1])
        assert data["oldestActiveSeconds"] >= 185 and data["oldestActive"].endswith("Z")
        rows = {t["taskId"]: t for t in data["tasks"]}
        assert rows[ids["completed"]]["durationSeconds"] == 200.0 and rows[ids["completed"]]["endedAt"]
        assert rows[ids["working"]]["endedAt"] is None
        browser = await run(Browser, executable)
        try:
            js = browser.evaluate
            await run(browser.open, base)
            await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
            # the chart is as wide as its card's content box
            widths = await run(
                js,
                """(() => { const card = document.querySelector('section.chart'), style = getComputedStyle(card);
                  return [document.getElementById('chart').getBoundingClientRect().width,
                          card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)]; })()""",
            )
            assert widths[0] > 900 and abs(widths[0] - widths[1]) < 1, widths
            # a y-axis with counts from 0, and clock times on the x-axis ending with "now"
            y_ticks = await run(
                js, "[...document.querySelectorAll('#chart .y-tick')].map(t => t.textContent)"
            )
            assert y_ticks[0] == "0" and len(y_ticks) >= 2 and all(t.isdigit() for t in y_ticks)
            assert [int(t) for t in y_ticks] == sorted(int(t) for t in y_ticks)
            x_ticks = await run(
                js, "[...document.querySelectorAll('#chart .x-tick')].map(t => t.textContent)"
            )
            assert x_ticks[-1] == "now" and len(x_ticks) >= 4
            assert all(len(t) == 5 and t[2] == ":" and t.replace(":", "").isdigit() for t in x_ticks[:-1])
            # the chart follows the window's width
            await run(
                browser.call,
                "Emulation.setDeviceMetricsOverride",
                {"width": 800, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
            await run(
                browser.wait_until, "document.getElementById('chart').getBoundingClientRect().width < 800"
            )
            await run(
                browser.wait_until,
                "Number(document.getElementById('chart').getAttribute('viewBox').split(' ')[2]) === Math.round(document.getElementById('chart').getBoundingClientRect().width)",
            )
            # human times: oldest active, created and duration (frozen for a finished task)
            assert await run(js, "document.getElementById('oldest').textContent") == "3 min ago"
            cells = await run(
                js,
                "Object.fromEntries([...document.querySelectorAll('#tasks tbody tr')].map(r => [r.dataset.taskId, [r.querySelector('.created').textContent, r.querySelector('.duration').textContent, r.querySelector('.duration').classList.contains('running')]]))",
            )
            assert cells[ids["completed"]] == ["15 min ago", "3 min 20 s", False]
            assert cells[ids["working"]][0].endswith(" s ago") and cells[ids["working"]][2] is True
            assert cells[ids["input_required"]][0] == "3 min ago"
        finally:
            await run(browser.close)


@pytest.mark.anyio
async def test_wrong_tokens_are_throttled_per_client_address(tmp_path: Path) -> None:
    url = await run(seeded_sqlite, tmp_path / "t.db", TaskRecord(task_id="t-1", owner="bob", tool="build"))
    now = [1000.0]
    app = dashboard_app(url, token=TOKEN, protect_reads=True, login_throttle=Throttle(clock=lambda: now[0]))
    attacker = "127.0.0.2"  # another client address on loopback
    async with serve_http(app, "/") as base:

        async def guess(token: str, source: str = attacker) -> tuple[int, str, list[tuple[str, str]]]:
            answer: tuple[int, str, list[tuple[str, str]]] = await run(
                raw, "POST", f"{base}login", *login_form(token), source
            )
            return answer

        for _ in range(FREE_FAILURES + 1):
            status, page, _ = await guess("guess")
            assert status == 401 and "not the operator token" in page
        # now the address waits: every way of sending a token gets 429, and a right one is not even
        # compared (it would tell itself apart)
        status, page, headers = await guess(TOKEN)
        assert status == 429 and header(headers, "Retry-After") == ["1"] and not header(headers, "Set-Cookie")
        assert "Too many wrong tokens from your address: try again in 1 s." in page
        for method, path, sent in (
            ("GET", "api/summary", {"Authorization": f"Bearer {TOKEN}"}),
            ("GET", "", {"Authorization": f"Bearer {TOKEN}"}),
            ("POST", "api/tasks/t-1/cancel", {"X-Operator-Token": TOKEN}),
        ):
            status, _, headers = await run(raw, method, base + path, sent, None, attacker)
            assert status == 429 and header(headers, "Retry-After") == ["1"], path
        # the operator at another address is not slowed down
        status, _, headers = await guess(TOKEN, "127.0.0.1")
        assert status == 303 and header(headers, "Set-Cookie")
        # each wrong token after a wait doubles the next wait, up to a minute
        for wait in (2, 4, 8, 16, 32, 60, 60):
            now[0] += MAX_LOCKOUT
            assert (await guess("guess"))[0] == 401
            status, _, headers = await guess(TOKEN)
            assert status == 429 and header(headers, "Retry-After") == [str(wait)]
        # once the wait is over, the right token gets in and clears the count
        now[0] += MAX_LOCKOUT
        status, _, headers = await guess(TOKEN)
        assert status == 303 and header(headers, "Set-Cookie")
        assert [(await guess("guess"))[0] for _ in range(FREE_FAILURES)] == [401] * FREE_FAILURES


@pytest.mark.anyio
async def test_a_weak_token_is_refused_beyond_loopback_only(tmp_path: Path) -> None:
    for weak in ("operator-s3cret", "a" * 40, "abab" * 10):
        with pytest.raises(ValueError, match=r"too weak to protect reads.*secrets\.token_urlsafe"):
            dashboard_app("sqlite:///unused.db", token=weak, protect_reads=True)
    done = await anyio.run_process(
        dashboard_command(tmp_path, "--host", "0.0.0.0"),
        check=False,
        env=clean_env(MCPTASKS_DASHBOARD_TOKEN="operator-s3cret"),
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip().splitlines() == [
        "mcptasks dashboard: error: refusing to listen on 0.0.0.0 with a weak operator token (it has 15 "
        "characters, fewer than 32): beyond loopback it guards reading too; generate one with: "
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    ]
    # on loopback a short token still enables the cancel button
    url = await run(seeded_sqlite, tmp_path / "t.db", TaskRecord(task_id="t-1", owner="bob", tool="build"))
    with dashboard(url, tmp_path, token="s3cret") as base:
        status, body, _ = await run(
            http, "POST", f"{base}api/tasks/t-1/cancel", {"X-Operator-Token": "s3cret"}
        )
        assert status == 200 and json.loads(body)["status"] == "cancelled"


TOOL_ERROR_MESSAGE = (
    "Traceback (most recent call last): "
    + "x" * 200
    + "\n"
    + "\n".join(f'  File "job.py", line {n}, in step_{n}' for n in range(40))
)


@pytest.mark.anyio
async def test_a_tool_error_has_its_own_badge_count_and_filter(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    failing = {"content": [{"type": "text", "text": "no such branch"}], "isError": True}
    created = 1_700_000_000.0
    ok = TaskRecord(task_id="t-ok", owner="bob", tool="build", created_at=created).evolve(
        status="completed", result={"content": [], "isError": False}
    )
    bad = TaskRecord(task_id="t-bad", owner="bob", tool="build", created_at=created + 1).evolve(
        status="completed", status_message=TOOL_ERROR_MESSAGE, result=failing
    )
    busy = TaskRecord(task_id="t-busy", owner="bob", tool="build", created_at=created + 2)
    url = await run(seeded_sqlite, tmp_path / "t.db", ok, bad, busy)
    shown = TOOL_ERROR_MESSAGE[: PREVIEW_CHARS - 1] + "\u2026"
    with dashboard(url, tmp_path, token=None) as base:
        status, body, _ = await run(http, "GET", f"{base}api/summary?status=tool_error")
        data = json.loads(body)
        assert status == 200 and [t["taskId"] for t in data["tasks"]] == ["t-bad"]
        assert data["toolErrors"] == 1 and data["counts"]["completed"] == 2
        assert data["kinds"] == {
            "working": 1,
            "input_required": 0,
            "completed": 1,
            "tool_error": 1,
            "failed": 0,
            "cancelled": 0,
        }
        [row] = data["tasks"]
        assert row["kind"] == "tool_error" and row["toolError"] and row["messagePreview"] == shown
        status, body, _ = await run(http, "GET", f"{base}api/summary?status=completed")
        assert [t["taskId"] for t in json.loads(body)["tasks"]] == ["t-ok"]
        browser = await run(Browser, executable)
        try:
            js = browser.evaluate
            await run(browser.open, base)
            for render in ("server", "script"):
                if render == "script":
                    await run(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
                card = await run(
                    js, "document.querySelector('.count[data-status=tool_error] .n').textContent"
                )
                assert card == "1", render
                assert (
                    await run(js, "document.querySelector('.count[data-status=completed] .n').textContent")
                    == "1"
                )
                cell = "document.querySelector('tr[data-task-id=t-bad] td .status')"
                assert await run(js, f"{cell}.textContent") == "tool error", render
                color = await run(js, f"getComputedStyle({cell}).backgroundColor")
                assert color == "rgb(194, 24, 91)", render  # not the green of completed
                message = "document.querySelector('tr[data-task-id=t-bad] .message')"
                assert await run(js, f"{message}.textContent") == shown, render
                assert "whole message" in await run(js, f"{message}.title")
            await run(
                js,
                "(() => { const s = document.getElementById('f-status'); s.value = 'tool_error'; s.dispatchEvent(new Event('change')); })()",
            )
            await run(browser.wait_until, "document.querySelectorAll('#tasks tbody tr').length === 1")
            assert await run(js, "document.querySelector('#tasks tbody tr').dataset.taskId") == "t-bad"
            assert await run(js, "location.search") == "?status=tool_error"
            await run(browser.open, f"{base}tasks/t-bad")
            assert await run(js, "document.getElementById('d-status').textContent") == "tool error"
            assert (
                await run(js, "document.getElementById('d-statusMessage').textContent") == TOOL_ERROR_MESSAGE
            )
        finally:
            await run(browser.close)
