"""The dashboard as an ASGI app (Starlette): pages, a small JSON API, the guarded cancel and answer, the
Host/Origin check on every route and, when reads are protected, the operator login."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, TypeAlias, cast
from urllib.parse import parse_qs

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from mcptasks._runtime.operator import (
    OPERATOR_CANCEL_REASON,
    AnswerRefused,
    answer_task,
    cancel_task,
    open_existing,
)
from mcptasks.dashboard.guard import (
    LOOPBACK_HOSTS,
    SESSION_COOKIE,
    SESSION_SECONDS,
    HostGuard,
    bearer_token,
    token_matches,
)
from mcptasks.dashboard.login import TOKEN_ADVICE, Sessions, Throttle, Throttled, weak_token
from mcptasks.dashboard.pages import detail_page, list_page, login_page
from mcptasks.dashboard.views import KINDS, query_for, summary, task_detail
from mcptasks.stores.base import OperatorStore, TaskStore
from mcptasks.stores.foreign import adopt_store
from mcptasks.stores.url import store_from_url

__all__ = ["TOKEN_HEADER", "StoreSource", "dashboard_app"]

TOKEN_HEADER = "X-Operator-Token"
"""The request header that carries the operator token on write actions."""

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}


StoreSource: TypeAlias = "TaskStore | str | Callable[[], TaskStore]"
"""What `dashboard_app` reads: an open store, a store URL, or a function returning an open store."""


class _Store:
    """The store the app reads: given open (or by a function, asked on every request), or
    opened from a URL on first use (and closed by the app's lifespan when it runs standalone)."""

    def __init__(self, store: StoreSource) -> None:
        self.owned = isinstance(store, str)
        self._source = store if callable(store) and not isinstance(store, TaskStore) else None
        self.store: OperatorStore | None = (
            adopt_store(store_from_url(store)) if isinstance(store, str) else None
        )
        if self.store is None and self._source is None:
            self.store = adopt_store(cast(TaskStore, store))
        self._opened = not self.owned
        self._lock = anyio.Lock()

    async def get(self) -> OperatorStore:
        if self._source is not None:
            return adopt_store(self._source())
        assert self.store is not None
        if not self._opened:
            async with self._lock:
                if not self._opened:  # the dashboard never creates a store or migrates it
                    await open_existing(self.store)
                    self._opened = True
        return self.store

    async def close(self) -> None:
        if self.owned and self._opened and self.store is not None:
            self._opened = False
            await self.store.close()


def _choice(value: str | None) -> frozenset[str] | None:
    return frozenset({value}) if value else None


def _base_of(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") + "/"


def _secured(response: Response) -> Response:
    response.headers.update(_HEADERS)
    return response


def _error(status: int, message: str) -> Response:
    return _secured(JSONResponse({"error": message}, status_code=status))


def _too_many(throttled: Throttled) -> Response:
    response = _error(
        429, f"too many wrong operator tokens from your address: retry in {throttled.seconds} s"
    )
    response.headers["Retry-After"] = str(throttled.seconds)
    return response


def _client(request: Request) -> str:
    """The address a request came from (the proxy's, behind a reverse proxy)."""
    return request.client.host if request.client is not None else "unknown"


_NO_SUCH_TASK = "no such task (unknown, expired or purged)"
_LOGIN_BODY_LIMIT = 8192
_Handler: TypeAlias = Callable[[Request], Awaitable[Response]]


def _safe_next(value: str, base: str) -> str:
    """`value` when it is a path of this dashboard (no scheme, host or backslash), else `base`."""
    if (
        value.startswith(base)
        and not value.startswith("//")
        and "\\" not in value
        and value.isprintable()
        and len(value) <= 2000
    ):
        return value
    return base


async def _form(request: Request) -> dict[str, str] | None:
    """A small urlencoded form's fields (the first of each), or None for anything else."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _LOGIN_BODY_LIMIT:
            return None
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return None
    return {key: values[0] for key, values in fields.items()}


_ANSWER_BODY_LIMIT = 65536


async def _json_answers(request: Request) -> dict[str, Any] | None:
    """The `answers` object of a small JSON body, or None for anything else."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _ANSWER_BODY_LIMIT:
            return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict) or not answers or not all(isinstance(k, str) for k in answers):
        return None
    return answers


class _Dashboard:
    """The request handlers of one dashboard app (its settings and its store)."""

    def __init__(
        self,
        holder: _Store,
        token: str | None,
        title: str,
        refresh_ms: int,
        show_results: bool,
        protect_reads: bool,
        redact_arguments: bool | Sequence[str],
        throttle: Throttle,
    ):
        self.holder = holder
        self.redact_all = redact_arguments is True
        self.redacted: tuple[str, ...] = () if isinstance(redact_arguments, bool) else tuple(redact_arguments)
        self.token = token
        self.title = title
        self.refresh_ms = refresh_ms
        self.show_results = show_results
        self.protect_reads = protect_reads
        self.sessions = Sessions()
        self.throttle = throttle

    def token_ok(self, request: Request, given: str) -> bool:
        """Whether `given` is the operator token; a wrong one counts against the request's client
        address, and `Throttled` while that address must wait (nothing is compared then)."""
        assert self.token is not None
        client = _client(request)
        self.throttle.check(client)
        if token_matches(given, self.token):
            self.throttle.succeeded(client)
            return True
        self.throttle.failed(client)
        return False

    def signed_in(self, request: Request) -> bool:
        """Whether the request may read: reads are open, or it carries the operator token as a
        bearer token or the cookie of an open session (`Throttled` for a throttled bearer)."""
        if not self.protect_reads:
            return True
        bearer = bearer_token(request.headers)
        if bearer is not None:
            return self.token_ok(request, bearer)
        return self.sessions.valid(request.cookies.get(SESSION_COOKIE))

    def login_form(
        self,
        request: Request,
        *,
        failed: bool = False,
        next_path: str | None = None,
        throttled: Throttled | None = None,
    ) -> Response:
        base = _base_of(request)
        if next_path is None:
            query = request.url.query
            next_path = request.url.path + (f"?{query}" if query else "")
        page = login_page(
            base=base,
            title=self.title,
            next_path=_safe_next(next_path, base),
            failed=failed,
            retry_after=None if throttled is None else throttled.seconds,
        )
        response = _secured(HTMLResponse(page, status_code=401 if throttled is None else 429))
        if throttled is not None:
            response.headers["Retry-After"] = str(throttled.seconds)
        return response

    def page(self, handler: _Handler) -> _Handler:
        """`handler` for a page: the login form (401, or 429 while throttled) instead, unless the
        request may read."""

        async def guarded(request: Request) -> Response:
            try:
                allowed = self.signed_in(request)
            except Throttled as throttled:
                return self.login_form(request, throttled=throttled)
            return await handler(request) if allowed else self.login_form(request)

        return guarded

    def api(self, handler: _Handler) -> _Handler:
        """`handler` for the JSON API: a JSON 401 (or 429 while throttled) instead, unless the
        request may read."""

        async def guarded(request: Request) -> Response:
            try:
                allowed = self.signed_in(request)
            except Throttled as throttled:
                return _too_many(throttled)
            if allowed:
                return await handler(request)
            response = _error(
                401,
                "reading needs the operator token: send 'Authorization: Bearer <token>' or log in on the page",
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="mcptasks dashboard"'
            return response

        return guarded

    async def login(self, request: Request) -> Response:
        """POST of the login form: a new session's cookie (never the token) and a redirect, or the
        form again (429 while the client's address is throttled)."""
        if not self.protect_reads:
            return _secured(Response("not found", status_code=404))
        base = _base_of(request)
        fields = await _form(request)
        if fields is None:
            return _secured(Response("send the login form (application/x-www-form-urlencoded)", 400))
        next_path = _safe_next(fields.get("next", base), base)
        try:
            if not self.token_ok(request, fields.get("token", "")):
                return self.login_form(request, failed=True, next_path=next_path)
        except Throttled as throttled:
            return self.login_form(request, next_path=next_path, throttled=throttled)
        response = _secured(RedirectResponse(next_path, status_code=303))
        response.set_cookie(
            SESSION_COOKIE,
            self.sessions.open(),
            max_age=SESSION_SECONDS,
            path=base,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def logout(self, request: Request) -> Response:
        """POST: end this browser's session (its cookie is refused from now on) and forget it."""
        if not self.protect_reads:
            return _secured(Response("not found", status_code=404))
        self.sessions.revoke(request.cookies.get(SESSION_COOKIE))
        base = _base_of(request)
        response = _secured(RedirectResponse(base, status_code=303))
        response.delete_cookie(
            SESSION_COOKIE,
            path=base,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def read_summary(self, request: Request) -> dict[str, Any]:
        query = query_for(request.query_params.get("status"), _choice(request.query_params.get("tool")))
        return await summary(await self.holder.get(), query=query, can_cancel=self.token is not None)

    async def index(self, request: Request) -> Response:
        try:
            data = await self.read_summary(request)
        except ValueError:
            return _secured(HTMLResponse("unknown status filter", status_code=400))
        page = list_page(
            data,
            base=_base_of(request),
            title=self.title,
            refresh_ms=self.refresh_ms,
            status=request.query_params.get("status", ""),
            tool=request.query_params.get("tool", ""),
            logout=self.protect_reads,
        )
        return _secured(HTMLResponse(page))

    async def api_summary(self, request: Request) -> Response:
        try:
            return _secured(JSONResponse(await self.read_summary(request)))
        except ValueError:
            return _error(400, f"unknown status filter; use one of {', '.join(KINDS)}")

    async def task_view(self, task_id: str) -> dict[str, Any] | None:
        record = await (await self.holder.get()).get(task_id)
        if record is None:
            return None
        view = task_detail(
            record,
            time.time(),
            show_result=self.show_results,
            redact_all=self.redact_all,
            redacted=self.redacted,
        )
        view["canCancel"] = self.token is not None
        return view

    async def detail(self, request: Request) -> Response:
        view = await self.task_view(request.path_params["task_id"])
        if view is None:
            return _secured(HTMLResponse(_NO_SUCH_TASK, status_code=404))
        page = detail_page(
            view,
            base=_base_of(request),
            title=self.title,
            refresh_ms=self.refresh_ms,
            can_cancel=self.token is not None,
            logout=self.protect_reads,
        )
        return _secured(HTMLResponse(page))

    async def api_task(self, request: Request) -> Response:
        view = await self.task_view(request.path_params["task_id"])
        if view is None:
            return _error(404, _NO_SUCH_TASK)
        return _secured(JSONResponse(view))

    async def api_cancel(self, request: Request) -> Response:
        if self.token is None:
            return _error(403, "cancelling is disabled: start the dashboard with an operator token")
        given = request.headers.get(TOKEN_HEADER, "")
        try:
            if not given or not self.token_ok(request, given):  # no token at all is no guess
                return _error(401, "a valid operator token is required to cancel")
        except Throttled as throttled:
            return _too_many(throttled)
        store_object = await self.holder.get()
        task_id = request.path_params["task_id"]
        before = await store_object.get(task_id)
        record = await cancel_task(store_object, task_id, reason=OPERATOR_CANCEL_REASON)
        if before is None or record is None:
            return _error(404, _NO_SUCH_TASK)
        return _secured(
            JSONResponse({"taskId": task_id, "status": record.status, "changed": not before.terminal})
        )

    async def api_answer(self, request: Request) -> Response:
        """POST `{"answers": {key: answer}}` (JSON, with the operator token in `X-Operator-Token`):
        answer the task's pending questions as an operator (`answer_task`)."""
        if self.token is None:
            return _error(403, "answering is disabled: start the dashboard with an operator token")
        given = request.headers.get(TOKEN_HEADER, "")
        try:
            if not given or not self.token_ok(request, given):
                return _error(401, "a valid operator token is required to answer")
        except Throttled as throttled:
            return _too_many(throttled)
        answers = await _json_answers(request)
        if answers is None:
            return _error(400, 'send {"answers": {KEY: ANSWER}} as JSON (at most 64 KiB)')
        task_id = request.path_params["task_id"]
        try:
            record = await answer_task(await self.holder.get(), task_id, answers, name="dashboard")
        except AnswerRefused as refused:
            return _error(409, str(refused))
        if record is None:
            return _error(404, _NO_SUCH_TASK)
        return _secured(
            JSONResponse({"taskId": task_id, "status": record.status, "answered": sorted(answers)})
        )

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return _secured(Response("not found", status_code=404))
        content = resources.files("mcptasks.dashboard").joinpath("static").joinpath(name).read_bytes()
        return _secured(Response(content, media_type=_ASSETS[name]))

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.holder.close()


def dashboard_app(
    store: StoreSource,
    *,
    token: str | None = None,
    title: str = "mcptasks",
    refresh: float = 2.0,
    show_results: bool = True,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    protect_reads: bool = False,
    redact_arguments: bool | Sequence[str] = False,
    login_throttle: Throttle | None = None,
) -> Starlette:
    """The dashboard as an ASGI app; mount it in your server behind your own authentication.

    - `store`: an open `TaskStore` (the app leaves it open), a function returning one (asked on
      each request, e.g. `lambda: server.extension.engine.store`), or a store URL (opened on
      first use, closed with the app's lifespan).
    - `token`: the operator token that write actions (cancel) must carry in the `X-Operator-Token`
      header; None disables every write action.
    - `refresh`: seconds between the page's live updates.
    - `show_results`: whether a task's detail view includes its result (collapsed).
    - `allowed_hosts`: the `Host` values the app answers to (`name`, or `name:*` for any port;
      `"*"` turns the check off); others get 421. Default: this machine's loopback names
      (`LOOPBACK_HOSTS`). Name the hosts your users reach it by when it is served beyond loopback.
    - `allowed_origins`: further `Origin` values (same patterns) whose requests are accepted; a
      request from the app's own origin always is, any other `Origin` gets 403.
    - `protect_reads`: whether reading (the pages and the JSON API) needs the operator token too,
      from the login form (a session cookie) or an `Authorization: Bearer` header; needs a strong
      `token` (at least 32 characters). Logging out ends the session; wrong tokens are throttled
      per client address (429 with `Retry-After`).
    - `redact_arguments`: which tool arguments the detail view masks (as `REDACTED`, in the page
      and the API alike): True every value, or the argument names (case-insensitive, also as keys
      nested inside arguments) whose values are masked; False (default) shows them all.
    - `login_throttle`: how wrong operator tokens (login form, bearer header, cancel) are slowed
      down per client address; default `mcptasks.dashboard.login.Throttle()` (5 free, then a
      wait of 1 s doubling up to 60 s, answered with 429 and `Retry-After`).

    Without `protect_reads`, whoever reaches the app sees the task list (owners as hashes).
    """
    if token is not None and not token.strip():
        raise ValueError("the operator token must not be empty")
    if not refresh > 0:
        raise ValueError("refresh must be a positive number of seconds")
    if protect_reads and token is None:
        raise ValueError("protecting reads needs an operator token")
    weakness = weak_token(token) if protect_reads and token is not None else None
    if weakness is not None:
        raise ValueError(f"the operator token is too weak to protect reads ({weakness}); {TOKEN_ADVICE}")
    if isinstance(allowed_hosts, str) or isinstance(allowed_origins, str):
        raise ValueError("allowed_hosts and allowed_origins are sequences of strings, not one string")
    hosts = list(LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts)
    if not hosts or any(not h.strip() for h in [*hosts, *allowed_origins]):
        raise ValueError("allowed_hosts needs at least one host and neither list may hold empty names")
    if isinstance(redact_arguments, str):
        raise ValueError("redact_arguments takes True or a list of argument names, not one string")
    app = _Dashboard(
        _Store(store),
        token,
        title,
        int(refresh * 1000),
        show_results,
        protect_reads,
        redact_arguments,
        login_throttle or Throttle(),
    )
    return Starlette(
        routes=[
            Route("/", app.page(app.index)),
            Route("/tasks/{task_id:str}", app.page(app.detail)),
            Route("/login", app.login, methods=["POST"]),
            Route("/logout", app.logout, methods=["POST"]),
            Route("/api/summary", app.api(app.api_summary)),
            Route("/api/tasks/{task_id:str}", app.api(app.api_task)),
            Route("/api/tasks/{task_id:str}/cancel", app.api_cancel, methods=["POST"]),
            Route("/api/tasks/{task_id:str}/answer", app.api_answer, methods=["POST"]),
            Route("/static/{name:str}", app.asset),
        ],
        middleware=[Middleware(HostGuard, allowed_hosts=hosts, allowed_origins=list(allowed_origins))],
        lifespan=app.lifespan,
    )
