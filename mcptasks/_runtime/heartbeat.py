"""Heartbeats that do not depend on a free event loop.

An engine tells its peers it is alive by renewing a lease in the store. If those renewals ran on
the engine's event loop, one task body that blocks the loop for longer than the lease (a
`time.sleep`, a synchronous `subprocess.run`) would make peer replicas fail every task of this
live process as `worker_lost`. So, for stores shared between processes, the lease is renewed by a
`HeartbeatThread`: a thread with an event loop of its own and its own store connection (the
store's `twin()`).

The thread still watches the engine's loop: the loop marks itself alive (`tick`) every second, and
when it has not done so for `wedge_limit` seconds the thread stops renewing, so a process whose
loop is wedged for good loses its lease within `wedge_limit + lease_ttl` and its tasks are failed
(or re-run) by the survivors. It renews again as soon as the loop comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from functools import partial

import anyio

from mcptasks._runtime.offers import heartbeat
from mcptasks.stores.base import StoreBase, TaskStore

__all__ = ["HeartbeatThread", "heartbeat_thread"]

logger = logging.getLogger("mcptasks")


class HeartbeatThread:
    """Renews `instance_id`'s lease every `lease_ttl / 3` from its own thread while the engine's
    loop keeps ticking (at most `wedge_limit` seconds between ticks)."""

    def __init__(
        self,
        make_store: Callable[[], TaskStore],
        instance_id: str,
        lease_ttl: float,
        wedge_limit: float,
        tools: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        self.make_store = make_store
        self.tools = tools
        """The task tools the engine offers (read at each renewal, `offers.heartbeat`)."""
        self.instance_id = instance_id
        self.lease_ttl = lease_ttl
        self.wedge_limit = wedge_limit
        self._last_tick = time.monotonic()
        self._stop = threading.Event()
        self._wake: Callable[[], object] = lambda: None
        self._thread = threading.Thread(
            target=self._main, name=f"mcptasks-heartbeat-{instance_id}", daemon=True
        )
        self.renewals = 0
        """How many heartbeats this thread wrote (for tests and diagnostics)."""

    def tick(self) -> None:
        """Mark the engine's event loop as alive (called from that loop)."""
        self._last_tick = time.monotonic()

    async def tick_forever(self) -> None:
        """Tick every second (run it on the engine's loop for as long as the thread runs)."""
        while True:
            self.tick()
            await anyio.sleep(1.0)

    def start(self) -> None:
        """Start renewing (the engine has already written its first heartbeat)."""
        self._last_tick = time.monotonic()
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop renewing and wait (at most `timeout` seconds) for the thread to close its store."""
        self._stop.set()
        with contextlib.suppress(RuntimeError):  # its loop may be closed already
            self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _main(self) -> None:
        try:
            asyncio.run(self._beat())
        except Exception:  # pragma: no cover - _beat catches store errors itself
            logger.exception("mcptasks heartbeat thread failed; the event loop keeps the lease from now on")

    async def _pause(self, seconds: float, wake: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(wake.wait(), seconds)

    async def _beat(self) -> None:
        store: TaskStore | None = None
        wedged = False
        wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake = lambda: loop.call_soon_threadsafe(wake.set)
        try:
            while not self._stop.is_set():
                silent = time.monotonic() - self._last_tick
                if silent > self.wedge_limit:
                    if not wedged:
                        wedged = True
                        logger.error(
                            "mcptasks: the event loop has been blocked for %.0f s; no longer renewing the "
                            "lease of %s, so peers will take over its tasks",
                            silent,
                            self.instance_id,
                        )
                else:
                    if wedged:
                        wedged = False
                        logger.warning("mcptasks: the event loop runs again; renewing the lease")
                    try:
                        if store is None:
                            store = self.make_store()
                            await store.open()
                        await heartbeat(store, self.instance_id, self.lease_ttl, self.tools())
                        self.renewals += 1
                    except Exception:
                        logger.warning("mcptasks heartbeat failed; will retry", exc_info=True)
                        if store is not None:
                            await _close_quietly(store)
                            store = None
                await self._pause(self.lease_ttl / 3, wake)
        finally:
            if store is not None:
                await _close_quietly(store)


async def _close_quietly(store: TaskStore) -> None:
    try:
        await store.close()
    except Exception:
        logger.debug("closing the heartbeat store failed", exc_info=True)


def heartbeat_thread(
    store: StoreBase,
    instance_id: str,
    lease_ttl: float,
    wedge_limit: float,
    tools: Callable[[], Collection[str]] = frozenset,
) -> HeartbeatThread | None:
    """A lease renewer on its own thread for `store` (offering `tools()`); None when the store
    cannot make a `twin()`."""
    if store.twin() is None:
        return None
    return HeartbeatThread(partial(_twin, store), instance_id, lease_ttl, wedge_limit, tools)


def _twin(store: StoreBase) -> TaskStore:
    """A new store reaching the same data as `store` (for the heartbeat thread's own loop)."""
    twin = store.twin()
    if twin is None:
        raise RuntimeError(f"{store!r} no longer makes a twin()")
    return twin
