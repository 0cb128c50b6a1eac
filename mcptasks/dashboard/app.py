"""The dashboard as an ASGI app (Starlette): pages, a small JSON API, and the guarded cancel."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, TypeAlias, cast

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from mcptasks._runtime.operator import OPERATOR_CANCEL_REASON, cancel_task, describe
from mcptasks.dashboard.pages import detail_page, list_page
from mcptasks.dashboard.views import STATUSES, summary
from mcptasks.stores.base import TaskStore
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
        self.store: TaskStore | None = store_from_url(store) if isinstance(store, str) else None
        if self.store is None and self._source is None:
            self.store = cast(TaskStore, store)
        self._opened = not self.owned
        self._lock = anyio.Lock()

    async def get(self) -> TaskStore:
        if self._source is not None:
            return self._source()
        assert self.store is not None
        if not self._opened:
            async with self._lock:
                if not self._opened:
                    await self.store.open()
                    self._opened = True
        return self.store

    async def close(self) -> None:
        if self.owned and self._opened and self.store is not None:
            self._opened = False
            await self.store.close()


def _choice(value: str | None, allowed: frozenset[str] | None = None) -> frozenset[str] | None:
    if not value:
        return None
    if allowed is not None and value not in allowed:
        raise ValueError(value)
    return frozenset({value})


def _base_of(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") + "/"


def _secured(response: Response) -> Response:
    response.headers.update(_HEADERS)
    return response


def _error(status: int, message: str) -> Response:
    return _secured(JSONResponse({"error": message}, status_code=status))


_NO_SUCH_TASK = "no such task (unknown, expired or purged)"


class _Dashboard:
    """The request handlers of one dashboard app (its settings and its store)."""

    def __init__(self, holder: _Store, token: str | None, title: str, refresh_ms: int, show_results: bool):
        self.holder = holder
        self.token = token
        self.title = title
        self.refresh_ms = refresh_ms
        self.show_results = show_results

    async def read_summary(self, request: Request) -> dict[str, Any]:
        return await summary(
            await self.holder.get(),
            statuses=_choice(request.query_params.get("status"), frozenset(STATUSES)),
            tools=_choice(request.query_params.get("tool")),
            can_cancel=self.token is not None,
        )

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
        )
        return _secured(HTMLResponse(page))

    async def api_summary(self, request: Request) -> Response:
        try:
            return _secured(JSONResponse(await self.read_summary(request)))
        except ValueError:
            return _error(400, f"unknown status filter; use one of {', '.join(STATUSES)}")

    async def task_view(self, task_id: str) -> dict[str, Any] | None:
        record = await (await self.holder.get()).get(task_id)
        if record is None:
            return None
        view = describe(record, detail=True, show_result=self.show_results)
        view.pop("arguments", None)
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
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return _error(401, "a valid operator token is required to cancel")
        store_object = await self.holder.get()
        task_id = request.path_params["task_id"]
        before = await store_object.get(task_id)
        record = await cancel_task(store_object, task_id, reason=OPERATOR_CANCEL_REASON)
        if before is None or record is None:
            return _error(404, _NO_SUCH_TASK)
        return _secured(
            JSONResponse({"taskId": task_id, "status": record.status, "changed": not before.terminal})
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
) -> Starlette:
    """The dashboard as an ASGI app; mount it in your server behind your own authentication.

    - `store`: an open `TaskStore` (the app leaves it open), a function returning one (asked on
      each request, e.g. `lambda: server.extension.engine.store`), or a store URL (opened on
      first use, closed with the app's lifespan).
    - `token`: the operator token that write actions (cancel) must carry in the `X-Operator-Token`
      header; None disables every write action.
    - `refresh`: seconds between the page's live updates.
    - `show_results`: whether a task's detail view includes its result (collapsed).

    Reading needs no token: whoever reaches the app sees the task list (owners as hashes).
    """
    if token is not None and not token.strip():
        raise ValueError("the operator token must not be empty")
    if not refresh > 0:
        raise ValueError("refresh must be a positive number of seconds")
    app = _Dashboard(_Store(store), token, title, int(refresh * 1000), show_results)
    return Starlette(
        routes=[
            Route("/", app.index),
            Route("/tasks/{task_id:str}", app.detail),
            Route("/api/summary", app.api_summary),
            Route("/api/tasks/{task_id:str}", app.api_task),
            Route("/api/tasks/{task_id:str}/cancel", app.api_cancel, methods=["POST"]),
            Route("/static/{name:str}", app.asset),
        ],
        lifespan=app.lifespan,
    )
