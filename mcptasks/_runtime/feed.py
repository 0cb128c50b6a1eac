"""`TaskFeed`: one subscription to the store's change feed, fanned out to local watchers.

Every write of a task record is announced on the store's change feed (`TaskStore.publish`,
which crosses processes on Redis and PostgreSQL). A replica runs one `TaskFeed`; each listen
stream registers a `Watch` for its task ids. A change only marks the id dirty in the watches that
follow it, so a burst of changes costs a watcher one re-read of the newest state, however slow it
is: memory per watcher is bounded by the number of ids it follows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import anyio

from mcptasks.stores.base import CHANGED_PREFIX, TaskStore

logger = logging.getLogger(__name__)


class Watch:
    """The task ids one listener follows, and which of them changed since it last looked."""

    __slots__ = ("_dirty", "_wake", "closed", "ids")

    def __init__(self, task_ids: Iterable[str]) -> None:
        self.ids: set[str] = set(task_ids)
        self._dirty: set[str] = set(self.ids)
        self._wake = anyio.Event()
        self._wake.set()
        self.closed = False
        """True once the feed shut down: the listener should end its stream."""

    def mark(self, task_id: str) -> None:
        """Note that `task_id` changed (a no-op for ids this watch does not follow)."""
        if task_id in self.ids:
            self._dirty.add(task_id)
            self._wake.set()

    def mark_all(self) -> None:
        """Note that every followed id may have changed (after notifications may have been lost)."""
        self._dirty |= self.ids
        self._wake.set()

    def close(self) -> None:
        """End the watch (the server is stopping)."""
        self.closed = True
        self._wake.set()

    def drop(self, task_id: str) -> None:
        """Stop following `task_id` (it ended or vanished)."""
        self.ids.discard(task_id)
        self._dirty.discard(task_id)

    async def changed(self, resync_after: float) -> set[str]:
        """Wait until some followed ids changed (or `resync_after` seconds passed: then all); take them.

        Returns an empty set when the watch is closed.
        """
        with anyio.move_on_after(resync_after) as scope:
            await self._wake.wait()
        if self.closed:
            return set()
        if scope.cancelled_caught:
            self.mark_all()
        self._wake = anyio.Event()
        dirty, self._dirty = self._dirty, set()
        return dirty


class TaskFeed:
    """Fans the store's change notifications out to the watches of this process.

    Run it for the server's lifetime (`async with feed.running(store):`); leaving closes every
    watch so their streams end cleanly.
    """

    def __init__(self) -> None:
        self._watches: dict[str, set[Watch]] = {}
        self._changes: dict[str, int] = {}
        """How many changes of each watched task this feed delivered (see `changes`)."""
        self._running = False
        self._closing = False

    @property
    def running(self) -> bool:
        """Whether the feed is subscribed to a store and accepting watches."""
        return self._running and not self._closing

    @contextmanager
    def watch(self, task_ids: Iterable[str]) -> Iterator[Watch]:
        """Follow `task_ids` while the context is open."""
        watch = Watch(task_ids)
        for task_id in watch.ids:
            self._watches.setdefault(task_id, set()).add(watch)
        if self._closing:
            watch.close()
        try:
            yield watch
        finally:
            for task_id in tuple(self._watches):
                followers = self._watches.get(task_id)
                if followers is not None and watch in followers:
                    followers.discard(watch)
                    if not followers:
                        del self._watches[task_id]
                        self._changes.pop(task_id, None)

    def watching(self, task_id: str) -> bool:
        """Whether a listener in this process follows `task_id`."""
        return task_id in self._watches

    def changes(self, task_id: str) -> int:
        """How many changes of `task_id` were delivered so far: a read of the task begun when
        this was N shows every change up to the N-th (the store was written before it announced)."""
        return self._changes.get(task_id, 0)

    def changed(self, task_id: str) -> None:
        """Mark `task_id` dirty in every watch that follows it."""
        followers = self._watches.get(task_id)
        if not followers:
            return
        self._changes[task_id] = self._changes.get(task_id, 0) + 1
        for watch in tuple(followers):
            watch.mark(task_id)

    def close(self) -> None:
        """Close every watch (streams end with their closing response); new watches start closed."""
        self._closing = True
        for followers in tuple(self._watches.values()):
            for watch in tuple(followers):
                watch.close()

    def _resync(self) -> None:
        for followers in tuple(self._watches.values()):
            for watch in tuple(followers):
                watch.mark_all()

    async def run(
        self, store: TaskStore, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Consume the store's change feed until cancelled (resubscribing after failures)."""
        self._running = True
        self._closing = False
        try:
            await follow(
                store,
                lambda message: self.changed(message.removeprefix(CHANGED_PREFIX)),
                resubscribed=self._resync,  # changes published while resubscribing are lost
                what="task feed",
                task_status=task_status,
            )
        finally:
            self._running = False
            self.close()


async def follow(
    store: TaskStore,
    changed: Callable[[str], None],
    *,
    resubscribed: Callable[[], None] | None = None,
    what: str,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call `changed` with every message on the store's change feed until cancelled.

    Started (`task_status`) once the first subscription is open; a failure before that raises.
    Later failures are logged and the feed is subscribed to again with a growing delay (up to
    5 s); `resubscribed` is called each time, as messages sent meanwhile are lost.
    """
    started = False
    delay = 0.1
    while True:
        try:
            async with store.subscribe() as changes:
                if not started:
                    task_status.started()
                    started = True
                elif resubscribed is not None:
                    resubscribed()
                delay = 0.1
                async for message in changes:
                    changed(message)
        except Exception:
            if not started:
                raise
            logger.warning("mcptasks %s subscription failed; resubscribing", what, exc_info=True)
        await anyio.sleep(delay)
        delay = min(delay * 2, 5.0)
