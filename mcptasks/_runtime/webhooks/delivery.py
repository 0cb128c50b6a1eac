"""`WebhookDelivery`: sends each task event to every endpoint, at least once, from any replica.

The events are outbox entries in the task records (`events`), written with the change that made
them. The process that wrote one sends it at once (`wrote`, a fast path that never waits: when
its buffer is full the sweep finds the event instead). Every `webhook_sweep_interval` seconds
each process reads the records that still hold entries (`KeepsOutbox.outbox_records`) and takes
the due ones: it claims them with a compare-and-set that moves their `due` past the attempt's
timeout, so two replicas do not send the same attempt, and a process killed in the middle of one
leaves it due again for anyone once that lease ran out.

After an attempt the entry is removed (delivered, dropped, endpoint gone, attempts used up) or
its `n` and `due` move on by exponential backoff with jitter (`Retry-After` when the endpoint
gave one), in the same kind of write; a retry keeps the event's id. A 410 stops that endpoint in
this process for good: logged as an error, its pending events dropped, no new ones made for it
(a restart tries it once more). A record keeps pending events past its `ttl`: each write of its
outbox keeps it at least until one more backoff and attempt are over (`ledger.outbox_changed`).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Collection
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcptasks._runtime.ledger import outbox_changed
from mcptasks._runtime.webhooks.events import (
    ANY_ENDPOINT,
    Stamp,
    addressed,
    entry_key,
    find,
    message,
    stamper,
    updated,
    without,
)
from mcptasks._runtime.webhooks.targets import Endpoint, endpoints
from mcptasks.errors import MissingExtra
from mcptasks.stores.base import KeepsOutbox, StoreBase, TaskRecord

logger = logging.getLogger("mcptasks")

OUTCOMES: tuple[str, ...] = ("delivered", "retried", "gave_up", "dropped", "gone")
"""The `outcome` label values of attempts: delivered (2xx), retried later, given up after the
last attempt, dropped (413, or an endpoint no process knew for an hour), endpoint gone (410)."""

FRESH_BUFFER = 10_000
"""Events the fast path holds before it leaves new ones to the sweep."""

FRESH_MEMORY = 50_000
"""Events stamped here and not yet seen written that are remembered (a stamp whose write lost its
compare-and-set race is never written; the oldest are forgotten past this)."""

SENDERS = 16
"""Attempts in flight at once in one process."""

UNKNOWN_ENDPOINT_GRACE = 3600.0
"""Seconds an event for an endpoint this process does not know (another replica's settings,
during a change of them) is left for a process that knows it before a sweep drops it."""

SWEEP_BATCH = 1_000
"""Records one sweep reads."""

BACKOFF_BASE = 2.0
BACKOFF_CAP = 600.0
"""The n-th retry waits `min(BACKOFF_BASE * 2**(n-1), BACKOFF_CAP)` seconds, times a jitter in [0.5, 1]."""

_Key = tuple[str, str, str]
"""One delivery: task id, event id, endpoint key."""


def backoff(attempts: int, retry_after: float | None = None) -> float:
    """Seconds before the next attempt after `attempts` failed ones."""
    if retry_after is not None:
        return min(max(retry_after, BACKOFF_BASE), BACKOFF_CAP)
    wait: float = min(BACKOFF_BASE * 2.0 ** (attempts - 1), BACKOFF_CAP)
    return wait * random.uniform(0.5, 1.0)


class WebhookStats:
    """What one process's deliveries did (read by the metrics endpoint)."""

    def __init__(self) -> None:
        self.deliveries: Counter[str] = Counter()
        """Attempts by outcome (`OUTCOMES`)."""
        self.failures: Counter[str] = Counter()
        """Failed attempts by reason (`targets.FAILURE_REASONS`)."""
        self.outbox_depth = 0
        """Pending deliveries the last sweep found in the store (at most its batch of records)."""


class WebhookDelivery:
    """Delivers the task events of one engine (see the module docstring)."""

    def __init__(
        self,
        store: StoreBase,
        urls: Collection[str],
        secret: str | None,
        *,
        allow_private: bool = False,
        timeout: float = 10.0,
        max_attempts: int = 12,
        sweep_interval: float = 5.0,
    ) -> None:
        try:
            import standardwebhooks  # noqa: F401
        except ImportError as exc:
            raise MissingExtra(
                "webhooks", "standardwebhooks", "webhooks", what="webhooks (--webhook)"
            ) from exc
        self.reader = store
        self.endpoints = endpoints(list(urls), secret, allow_private, complete=False)
        self.by_key = {endpoint.key: endpoint for endpoint in self.endpoints}
        self.secret = secret
        self.allow_private = allow_private
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.sweep_interval = sweep_interval
        self.lease = timeout + 5.0
        """How long a claimed attempt keeps its entry from other sweeps."""
        self.gone: set[str] = set()
        """Endpoints that answered 410 (keys): nothing more is sent to them from this process."""
        self.stats = WebhookStats()
        self._stamper: Stamp = stamper(self.live_keys, first_due=self.lease)
        self._fresh: dict[_Key, None] = {}
        """Deliveries stamped by this process and not seen written yet: the fast path sends only
        these (an entry another replica wrote is that replica's to send first, else the sweep's)."""
        self._send: MemoryObjectSendStream[tuple[TaskRecord, _Key]]
        self._receive: MemoryObjectReceiveStream[tuple[TaskRecord, _Key]]
        self._send, self._receive = anyio.create_memory_object_stream(FRESH_BUFFER)
        self._in_flight: set[_Key] = set()
        self._sender: Any = None
        self._outbox: KeepsOutbox | None = None
        """The store's outbox, once `run` checked it has one."""

    def live_keys(self) -> list[str]:
        """The endpoints new events are made for (every configured one that has not said 410)."""
        return [key for key in self.by_key if key not in self.gone]

    def stamp(self, before: TaskRecord | None, after: TaskRecord) -> TaskRecord:
        """What `RecordWriter` applies to each change: `after` with the change's events."""
        stamped = self._stamper(before, after)
        if stamped is not after:
            for entry in stamped.outbox[len(after.outbox) :]:
                key: _Key = (stamped.task_id, *entry_key(entry))
                self._fresh[key] = None
            while len(self._fresh) > FRESH_MEMORY:
                del self._fresh[next(iter(self._fresh))]
        return stamped

    def wrote(self, record: TaskRecord) -> None:
        """`record` was written: send the events this process stamped on it now (never waits;
        the sweep is the backstop)."""
        for entry in record.outbox:
            key: _Key = (record.task_id, *entry_key(entry))
            if key not in self._fresh or key in self._in_flight:
                continue
            del self._fresh[key]
            try:
                self._send.send_nowait((record, key))
            except anyio.WouldBlock:
                continue
            self._in_flight.add(key)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Send events until cancelled: the fast path, and the sweep every `sweep_interval`.
        `ValueError` at once for settings that cannot deliver (no secret, a literal private
        address not allowed, a store without an outbox)."""
        from mcptasks._runtime.webhooks.sender import Sender

        endpoints([endpoint.url for endpoint in self.endpoints], self.secret, self.allow_private)
        self._outbox = self.reader.outbox()
        if self._outbox is None:
            name = type(self.reader).__name__
            raise ValueError(f"webhooks need a task store with a webhook outbox; {name} has none")

        async with Sender(
            self.secret or "", timeout=self.timeout, allow_private=self.allow_private
        ) as sender:
            self._sender = sender
            async with anyio.create_task_group() as group:
                for _ in range(SENDERS):
                    group.start_soon(self._work)
                task_status.started()
                while True:
                    try:
                        await self.sweep()
                    except Exception:
                        logger.warning("webhook outbox sweep failed; will retry", exc_info=True)
                    await anyio.sleep(self.sweep_interval)

    async def _work(self) -> None:
        async for record, key in self._receive.clone():
            try:
                await self.attempt(record, key)
            except Exception:
                logger.warning(
                    "webhook delivery of event %s failed; the sweep retries it", key[1], exc_info=True
                )
            finally:
                self._in_flight.discard(key)

    async def sweep(self) -> None:
        """Claim the due entries of the records that hold any, and queue their attempts."""
        records = await self._store().outbox_records(SWEEP_BATCH)
        now = time.time()
        depth = 0
        for record in records:
            depth += len(record.outbox)
            if any(entry.get("to") == ANY_ENDPOINT for entry in record.outbox):
                outbox = addressed(record, self.live_keys(), now)
                changed = outbox_changed(record, outbox, self._keep_until(now))
                await self._store().replace_outbox(changed, expected_version=record.version)
                continue  # its entries are due at the next sweep (or another replica's)
            due = [
                entry_key(entry)
                for entry in record.outbox
                if float(entry.get("due", 0)) <= now
                and (record.task_id, *entry_key(entry)) not in self._in_flight
                and (
                    entry.get("to") in self.by_key or float(entry.get("at", 0)) < now - UNKNOWN_ENDPOINT_GRACE
                )
            ]
            if not due:
                continue
            leased = {key: {"due": now + self.lease} for key in due}
            claimed = outbox_changed(record, updated(record, leased), self._keep_until(now))
            if not await self._store().replace_outbox(claimed, expected_version=record.version):
                continue  # changed meanwhile (another replica claimed it): the next sweep looks again
            for event_key in due:
                key: _Key = (record.task_id, *event_key)
                self._in_flight.add(key)
                await self._send.send((claimed, key))
        self.stats.outbox_depth = depth

    async def attempt(self, record: TaskRecord, key: _Key) -> None:
        """One attempt of the delivery `key` of `record`, then its entry removed or rescheduled."""
        from mcptasks._runtime.webhooks.sender import body_of

        task_id, event_key = key[0], key[1:]
        entry = find(record, event_key)
        if entry is None:
            return
        endpoint = self.by_key.get(str(entry["to"]))
        if endpoint is None or endpoint.key in self.gone:
            why = "endpoint gone (410)" if endpoint is not None else "no process knows its endpoint"
            logger.warning("webhook event %s of task %s dropped: %s", entry["id"], task_id, why)
            self.stats.deliveries["dropped" if endpoint is None else "gone"] += 1
            await self._settle(record, event_key, None)
            return
        body = body_of(message(entry, record))
        tried = await self._sender.post(endpoint, str(entry["id"]), body)
        attempts = int(entry.get("n", 0)) + 1
        if tried.verdict == "delivered":
            self.stats.deliveries["delivered"] += 1
            await self._settle(record, event_key, None)
            return
        self.stats.failures[tried.reason or "other"] += 1
        if tried.verdict == "gone":
            self._stop(endpoint)
            self.stats.deliveries["gone"] += 1
            await self._settle(record, event_key, None)
        elif tried.verdict == "drop":
            logger.error(
                "webhook %s refused event %s for good (%s); it is dropped",
                endpoint.shown,
                entry["id"],
                tried.detail,
            )
            self.stats.deliveries["dropped"] += 1
            await self._settle(record, event_key, None)
        elif attempts >= self.max_attempts:
            logger.error(
                "webhook %s: giving up on event %s (%s) of task %s after %d attempts (last: %s)",
                endpoint.shown, entry["id"], entry["type"], task_id, attempts, tried.detail,
            )  # fmt: skip
            self.stats.deliveries["gave_up"] += 1
            await self._settle(record, event_key, None)
        else:
            wait = backoff(attempts, tried.retry_after)
            logger.info(
                "webhook %s: event %s not delivered (%s); attempt %d of %d in %.1f s",
                endpoint.shown, entry["id"], tried.detail, attempts + 1, self.max_attempts, wait,
            )  # fmt: skip
            self.stats.deliveries["retried"] += 1
            await self._settle(record, event_key, {"n": attempts, "due": time.time() + wait})

    def _store(self) -> KeepsOutbox:
        if self._outbox is None:
            raise RuntimeError("WebhookDelivery.run has not started")
        return self._outbox

    def _keep_until(self, now: float) -> float:
        """How long a record with pending entries is kept at least: past one more full backoff
        and attempt (a pending event does not expire with its record while attempts remain)."""
        return now + BACKOFF_CAP + 2 * self.lease

    def _stop(self, endpoint: Endpoint) -> None:
        if endpoint.key not in self.gone:
            self.gone.add(endpoint.key)
            logger.error(
                "webhook %s answered 410 Gone: this process sends it nothing more until it restarts "
                "(remove it from --webhook / MCPTASKS_WEBHOOKS)",
                endpoint.shown,
            )

    async def _settle(
        self, record: TaskRecord, event_key: tuple[str, str], change: dict[str, Any] | None
    ) -> None:
        """Remove the entry `event_key` (`change` None) or update it, with compare-and-set."""
        current: TaskRecord | None = record
        while current is not None and find(current, event_key) is not None:
            outbox = (
                without(current, [event_key]) if change is None else updated(current, {event_key: change})
            )
            new = outbox_changed(current, outbox, self._keep_until(time.time()))
            if await self._store().replace_outbox(new, expected_version=current.version):
                return
            current = await self.reader.get(current.task_id)
