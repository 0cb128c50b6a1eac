"""In-process fan-out of change notifications, shared by the stores (PostgreSQL fans out its LISTEN)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectSendStream


class LocalBroadcast:
    """Delivers every published task id to every open subscription in this process."""

    def __init__(self) -> None:
        self._subscribers: set[MemoryObjectSendStream[str]] = set()

    @property
    def subscribed(self) -> bool:
        """Whether any subscription is open."""
        return bool(self._subscribers)

    def close(self) -> None:
        """End every open subscription (their iterators stop)."""
        for stream in tuple(self._subscribers):
            stream.close()
        self._subscribers.clear()

    def publish(self, task_id: str) -> None:
        """Send `task_id` to all subscribers without waiting (the buffers are unbounded)."""
        for stream in tuple(self._subscribers):
            try:
                stream.send_nowait(task_id)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(stream)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[str]]:
        """Open a subscription; the yielded iterator ends when the context closes."""
        send, receive = anyio.create_memory_object_stream[str](math.inf)
        self._subscribers.add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
