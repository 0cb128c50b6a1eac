"""`GuardedConfig`: a `uvicorn.Config` whose connections get read deadlines and a bound.

`mcptasks serve --transport http` and `TaskServer.run("http")` build theirs with `guarded_config`
from the `EngineConfig` settings `header_timeout`, `body_timeout` and `max_connections`;
`mcptasks.server.app.uvicorn_server` then accepts its connections through an `Acceptor`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn

from mcptasks._runtime.config import EngineConfig
from mcptasks.server.acceptor import Acceptor
from mcptasks.server.connection_guard import ConnectionGuard, default_max_connections
from mcptasks.server.read_deadlines import DeadlineProtocol


def follows_cycles(protocol_class: Any) -> bool:
    """Whether `DeadlineProtocol` can wrap `protocol_class`: uvicorn's h11 or httptools protocol,
    which keep the request being answered in `cycle`."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    known: tuple[type, ...] = (H11Protocol,)
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        pass
    else:
        known += (HttpToolsProtocol,)
    return isinstance(protocol_class, type) and issubclass(protocol_class, known)


class GuardedConfig(uvicorn.Config):
    """A `uvicorn.Config` whose HTTP connections `guard` watches: uvicorn's protocol (`http=`,
    default auto) is wrapped in a `DeadlineProtocol` when it loads."""

    def __init__(self, app: Any, *, guard: ConnectionGuard, **options: Any) -> None:
        super().__init__(app, **options)
        self.guard = guard

    def load(self) -> None:
        """Load as uvicorn does, then wrap the HTTP protocol (if it is one the deadlines follow)."""
        super().load()
        if follows_cycles(self.http_protocol_class):
            self.guard.inner_protocol = self.http_protocol_class
            self.http_protocol_class = DeadlineProtocol


def guarded_config(app: Any, settings: EngineConfig, **options: Any) -> GuardedConfig:
    """A `GuardedConfig` for `app` with the deadlines and bound of `settings` (`max_connections`
    None: three quarters of the open-file limit); `options` go to `uvicorn.Config`."""
    limit = settings.max_connections if settings.max_connections is not None else default_max_connections()
    guard = ConnectionGuard(settings.header_timeout, settings.body_timeout, limit)
    return GuardedConfig(app, guard=guard, **options)


def acceptor_for(server: uvicorn.Server) -> Acceptor | None:
    """The `Acceptor` of a started `server` whose config is a `GuardedConfig` (None otherwise):
    it makes protocols exactly as uvicorn's own accept does."""
    config = server.config
    if not isinstance(config, GuardedConfig):
        return None

    def protocol() -> asyncio.Protocol:
        return config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )

    return Acceptor(config.guard, protocol, ssl=config.ssl)
