"""`RedisTaskStore`: records in Redis, shared by every replica (`redis://host:port/db`, `rediss://...`).

Redis is the single source of truth: any number of engine instances, in any number of processes
or hosts, can share one Redis database (and one key prefix) and see each other's records, claims,
heartbeats and wake-ups. Requires redis-py >= 5.0.1 (`pip install 'mcptasks[redis]'`) and Redis >= 6;
asyncio only (redis-py does not run on trio).

Durability: a `create` or `replace` that returned has been applied by the Redis server. Whether it
survives a restart of the *server* is the server's persistence configuration (AOF with
`appendfsync everysec` loses at most about a second; RDB snapshots lose everything since the last
snapshot; `--save "" --appendonly no` keeps nothing). With replicas, a failover may lose writes
that had not reached the replica yet.

Key layout (`P` is the `prefix`, default `mcptasks`):

- `P:task:{task_id}` -- hash: `body` (JSON of every record field but `version` and `runner`),
  `version`, `runner` (absent: None), `status`, `expires` (`expires_at`, absent: never), `idem`
  (the idempotency key holding this task, if any), `w` (id of the last create/replace call, so a
  call retried by the client after a lost reply is recognised). Keys of records with a TTL carry a
  Redis expiry `KEY_TTL_GRACE_MS` after `expires_at`, a backstop should `delete_expired` never
  run; `get` hides an expired record by `expires_at` exactly, whatever the key's TTL.
- `P:active` -- sorted set of `working` / `input_required` task ids, score `created_at`.
- `P:queued` -- the subset of `P:active` with `runner` None (what `claim` takes), same score.
- `P:expiry` -- sorted set of the ids of records with a TTL, score `expires_at`.
- `P:journal:{task_id}` -- list: the task's journal entries (`KeepsJournal`), position = index;
  same Redis expiry as the task's key, deleted with the record.
- `P:idem:{sha256(owner)[:32]}:{key}` -- string: the id of the task holding that owner's
  idempotency key; same Redis expiry as the task's key.
- `P:owner:{sha256(owner)[:32]}` -- sorted set of the owner's `working` / `input_required` task
  ids, score `expires_at` (`+inf`: never), what `count_active` counts.
- `P:runners` -- sorted set of engine instance ids, score: heartbeat expiry (epoch seconds).
- `P:offers` -- hash: engine instance id -> JSON list of the task tools it runs (`KeepsOffers`).
- `P:claim:{call id}` -- list of the ids one `claim` call took, kept `CLAIM_LOG_TTL_MS` so a
  retried call returns the same records instead of taking more.
- Pub/sub channel `P:changes` -- `publish`/`subscribe` (and `replace_and_publish`, whose script
  publishes right after its write).

Every write that must be atomic (`create` with its idempotency check, the compare-and-set
`replace`, `claim`, `delete_expired`, `purge`, `append_journal`) is one Lua script. Some scripts
derive task keys from ids they read, so the store targets a standalone Redis (or Sentinel / a
managed primary); it is not written for Redis Cluster.

Times are this host's `time.time()`, as with the other stores: keep the clocks of the hosts
sharing a store in sync (the Redis server's clock only drives the backstop key expiry).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, Protocol, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from mcptasks.stores.admin import (
    TaskPage,
    TaskQuery,
    TaskStats,
    check_journal_append,
    check_purge,
    journal_gap,
    page_of,
    stats_of,
)
from mcptasks.stores.base import OFFER_MEMORY, RunnerOffer, StoreBase, TaskExists, TaskRecord, owner_digest
from mcptasks.stores.extras import MissingExtra
from mcptasks.stores.redaction import redact_url
from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES

try:
    import redis.asyncio as aioredis
    from redis.commands.core import AsyncScript
    from redis.exceptions import DataError as RedisDataError
    from redis.exceptions import RedisError
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a venv without the extra
    if (exc.name or "").partition(".")[0] != "redis":
        raise
    raise MissingExtra("Redis", "redis", "redis") from exc

__all__ = [
    "CLAIM_LOG_TTL_MS",
    "CLAIM_WINDOW",
    "CONNECT_TIMEOUT",
    "KEY_TTL_GRACE_MS",
    "MAX_CLAIM",
    "MAX_CLAIM_SKIP",
    "MAX_CONNECTIONS",
    "POOL_TIMEOUT",
    "RedisTaskStore",
    "redact_url",
]

logger = logging.getLogger(__name__)

KEY_TTL_GRACE_MS = 60_000
"""How long after `expires_at` Redis drops a record's key by itself (absorbs clock skew between
the hosts and the server; `delete_expired` normally removes records before that)."""

CLAIM_LOG_TTL_MS = 60_000
"""How long the ids one `claim` call took are kept, for recognising a retried call."""

CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection when the URL sets no `socket_connect_timeout`."""

MAX_CONNECTIONS = 64
"""Connections one store opens at most when the URL sets no `max_connections`; each open
subscription holds one. Callers beyond that wait for a free connection (they do not fail)."""

POOL_TIMEOUT = 20.0
"""Seconds a call waits for a free connection when the URL sets no `timeout`, before failing
with a `redis.exceptions.ConnectionError`."""

HEALTH_CHECK_INTERVAL = 2.0
"""A pooled connection idle this many seconds is checked with a PING before its next use, so the
first calls after a Redis restart do not fail on connections the old server closed."""

MAX_CLAIM = 10_000
"""Most records one `claim` call takes (a larger `limit` is capped)."""

MAX_CLAIM_SKIP = 1_000
"""Most queued records of other tools one `claim(..., tools=...)` call steps over (looking
further would hold Redis longer; the next call looks again)."""

CLAIM_WINDOW = 1_000
"""How many of the oldest claimable queued records one `claim` call ranks to take them fairly
across owners (at least its `limit`): an owner's task behind more of them than that waits until
the queue ahead of it is shorter (the SQL stores rank the whole queue)."""

_DELETE_BATCH = 500
"""Expired records one `delete_expired` script run deletes (it runs again while there are more)."""

_READ_BATCH = 500
"""Records fetched per round trip by `list_active`."""

_MAX_EXPIRE_MS = 2**47
"""Expiry times beyond this (about year 6429) are not given to Redis; the key just has no TTL."""

_RESUBSCRIBE_BACKOFF = (0.1, 5.0)
"""First and longest pause (seconds) between attempts to restore a lost subscription."""


# -- Lua ---------------------------------------------------------------------------------------
#
# create/replace ARGV: 1 task_id, 2 call id, 3 now, 4 body, 5 version (as stored after the write),
# 6 status, 7 "1" if active, 8 "1" if runner is set, 9 runner, 10 created_at, 11 expires_at or "",
# 12 key expiry (epoch ms) or "", 13 idempotency key name or "", 14 task key prefix;
# replace adds 15 expected version, and replace_and_publish 16 channel, 17 message.
# create/replace KEYS: 1 task, 2 active, 3 queued, 4 expiry, 5 journal, 6 the owner's active set,
# 7 idempotency key (when ARGV[13]).
# Numbers travel as the strings Python formatted (repr of floats) and are never turned back into
# strings by Lua, whose number formatting would lose precision.


def _lua_set(name: str, statuses: Iterable[str]) -> str:
    return f"local {name} = {{{', '.join(f'{status} = true' for status in sorted(statuses))}}}\n"


_STATUS_LUA = _lua_set("ACTIVE", ACTIVE_STATUSES) + _lua_set("TERMINAL", TERMINAL_STATUSES)
"""Lua sets of the statuses (`TERMINAL[status]` is true for a terminal one), from `mcptasks.wire`."""

_WRITE_LUA = """
local function write_record(task, id)
  local set = {'body', ARGV[4], 'version', ARGV[5], 'status', ARGV[6], 'w', ARGV[2], 'o', KEYS[6]}
  local del = {}
  if ARGV[8] == '1' then
    table.insert(set, 'runner'); table.insert(set, ARGV[9])
  else
    table.insert(del, 'runner')
  end
  if ARGV[11] ~= '' then
    table.insert(set, 'expires'); table.insert(set, ARGV[11])
  else
    table.insert(del, 'expires')
  end
  if ARGV[13] ~= '' then
    table.insert(set, 'idem'); table.insert(set, ARGV[13])
  else
    table.insert(del, 'idem')
  end
  redis.call('HSET', task, unpack(set))
  if #del > 0 then
    redis.call('HDEL', task, unpack(del))
  end
  if ARGV[11] ~= '' then
    redis.call('ZADD', KEYS[4], ARGV[11], id)
  else
    redis.call('ZREM', KEYS[4], id)
  end
  if ARGV[12] ~= '' then
    redis.call('PEXPIREAT', task, ARGV[12])
    redis.call('PEXPIREAT', KEYS[5], ARGV[12])  -- the journal (if any) goes with its record
  else
    redis.call('PERSIST', task)
    redis.call('PERSIST', KEYS[5])
  end
  if ARGV[7] == '1' then
    redis.call('ZADD', KEYS[6], ARGV[11] ~= '' and ARGV[11] or '+inf', id)
    redis.call('ZADD', KEYS[2], ARGV[10], id)
    if ARGV[8] == '1' then
      redis.call('ZREM', KEYS[3], id)
    else
      redis.call('ZADD', KEYS[3], ARGV[10], id)
    end
  else
    redis.call('ZREM', KEYS[6], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
  end
end

-- The unexpired task other than `id` holding the idempotency key KEYS[7], as
-- {task_id, body, version, runner}, or false.
local function live_holder(id, now)
  local holder = redis.call('GET', KEYS[7])
  if not holder or holder == id then
    return false
  end
  local h = redis.call('HMGET', ARGV[14] .. holder, 'body', 'version', 'runner', 'expires')
  if not h[1] or (h[4] and tonumber(h[4]) <= now) then
    return false
  end
  return {holder, h[1], h[2], h[3]}
end

local function take_idem(id)
  redis.call('SET', KEYS[7], id)
  if ARGV[12] ~= '' then
    redis.call('PEXPIREAT', KEYS[7], ARGV[12])
  end
end
"""

_CREATE_LUA = (
    _WRITE_LUA
    + """
local id = ARGV[1]
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'w') == ARGV[2] then
    return {'created'}  -- this very call already ran (the client retried after a lost reply)
  end
  return {'exists'}
end
if ARGV[13] ~= '' then
  local holder = live_holder(id, tonumber(ARGV[3]))
  if holder then
    return {'held', holder[2], holder[3], holder[4]}
  end
end
redis.call('DEL', KEYS[5])  -- a new record starts with an empty journal
write_record(KEYS[1], id)
if ARGV[13] ~= '' then
  take_idem(id)
end
return {'created'}
"""
)

_REPLACE_LUA = (
    _STATUS_LUA
    + _WRITE_LUA
    + """
local id = ARGV[1]
local cur = redis.call('HMGET', KEYS[1], 'version', 'status', 'w', 'idem')
if not cur[1] then
  return 0
end
if cur[1] ~= ARGV[15] then
  if cur[3] == ARGV[2] and cur[1] == ARGV[5] then
    return 1  -- this very call already ran (the client retried after a lost reply)
  end
  return 0
end
if TERMINAL[cur[2]] then
  return 0
end
write_record(KEYS[1], id)
if cur[4] and cur[4] ~= ARGV[13] and redis.call('GET', cur[4]) == id then
  redis.call('DEL', cur[4])
end
if ARGV[13] ~= '' and not live_holder(id, tonumber(ARGV[3])) then
  take_idem(id)
end
if ARGV[16] then
  redis.call('PUBLISH', ARGV[16], ARGV[17])  -- replace_and_publish: the announcement, same call
end
return 1
"""
)

_REPLACE_ANY_LUA = _REPLACE_LUA.replace("if TERMINAL[cur[2]] then\n  return 0\nend\n", "", 1)
"""The replace script without its terminal check: `replace_outbox`, which a terminal record takes."""
assert _REPLACE_ANY_LUA != _REPLACE_LUA

# KEYS: 1 queued, 2 active, 3 this call's claim log. ARGV: 1 runner, 2 limit, 3 now,
# 4 task key prefix, 5 claim log TTL (ms), 6 the tools to take, a JSON list ("": any), 7 the most
# claimable ids of other tools one call steps over, 8 how many claimable ids it ranks (the
# oldest). Returns a flat list: task_id, body, version, ...
_CLAIM_LUA = (
    _STATUS_LUA
    + """
local out = {}
local log = redis.call('LRANGE', KEYS[3], 0, -1)
if #log > 0 then
  -- this very call already ran (the client retried after a lost reply): the same records again
  for _, id in ipairs(log) do
    local h = redis.call('HMGET', ARGV[4] .. id, 'body', 'version')
    if h[1] then
      table.insert(out, id); table.insert(out, h[1]); table.insert(out, h[2])
    end
  end
  return out
end
local limit = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local wanted = nil
if ARGV[6] and ARGV[6] ~= '' then
  wanted = {}
  for _, tool in ipairs(cjson.decode(ARGV[6])) do
    wanted[tool] = true
  end
end
local skipped = 0  -- claimable ids of other tools, left at the head of the queue
-- Fair across owners: the claimable ids among the oldest ARGV[8] are ranked by their owner's
-- turn (the owner's active ids not queued here, plus the id's place in the owner's queue).
local window = tonumber(ARGV[8])
local cands = {}
local places = {}
while #cands < window and skipped <= tonumber(ARGV[7]) do
  local offset = skipped + #cands
  local ids = redis.call('ZRANGE', KEYS[1], offset, offset + math.min(window - #cands, 500) - 1)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local key = ARGV[4] .. id
    local h = redis.call('HMGET', key, 'status', 'runner', 'expires', 'body', 'o')
    local claimable = h[4] and ACTIVE[h[1]] and not h[2] and (not h[3] or tonumber(h[3]) > now)
    local mine = claimable and (not wanted or wanted[cjson.decode(h[4]).tool])
    if claimable and not mine then
      skipped = skipped + 1  -- stays queued for a runner of its tool
    elseif mine then
      local owner = h[5] or ('~' .. id)  -- written before owners were kept: an owner of its own
      places[owner] = (places[owner] or 0) + 1
      table.insert(cands, {id = id, key = key, body = h[4], owner = owner, place = places[owner], at = #cands})
    else
      -- not claimable: it leaves the queue (and the active set, when its record is gone)
      redis.call('ZREM', KEYS[1], id)
      if not h[4] then
        redis.call('ZREM', KEYS[2], id)
      end
    end
  end
end
local held = {}
for owner, queued in pairs(places) do
  held[owner] = 0
  if owner:sub(1, 1) ~= '~' then
    held[owner] = math.max(0, redis.call('ZCOUNT', owner, '(' .. ARGV[3], '+inf') - queued)
  end
end
for _, c in ipairs(cands) do
  c.turn = held[c.owner] + c.place
end
table.sort(cands, function(x, y)
  if x.turn ~= y.turn then
    return x.turn < y.turn
  end
  return x.at < y.at
end)
local taken = 0
for _, c in ipairs(cands) do
  if taken >= limit then
    break
  end
  redis.call('ZREM', KEYS[1], c.id)
  redis.call('HSET', c.key, 'runner', ARGV[1])
  local version = redis.call('HINCRBY', c.key, 'version', 1)
  redis.call('RPUSH', KEYS[3], c.id)
  table.insert(out, c.id); table.insert(out, c.body); table.insert(out, version)
  taken = taken + 1
end
if taken > 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return out
"""
)

# KEYS: 1 expiry, 2 active, 3 queued. ARGV: 1 now, 2 batch size, 3 task key prefix, 4 journal key
# prefix.
_DELETE_EXPIRED_LUA = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  local kept = redis.call('HMGET', key, 'idem', 'o')
  local idem = kept[1]
  if idem and redis.call('GET', idem) == id then
    redis.call('DEL', idem)
  end
  if kept[2] then
    redis.call('ZREM', kept[2], id)  -- the owner's active set
  end
  redis.call('DEL', key, ARGV[4] .. id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
return #ids
"""

# KEYS: 1 expiry, 2 active, 3 queued. ARGV: 1 task key prefix, 2 journal key prefix, 3.. task ids.
# Deletes the listed
# records that are terminal (a terminal record never changes, so the caller's filter still holds).
_PURGE_LUA = (
    _STATUS_LUA
    + """
local n = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = ARGV[1] .. id
  local h = redis.call('HMGET', key, 'status', 'idem')
  if TERMINAL[h[1]] then
    if h[2] and redis.call('GET', h[2]) == id then
      redis.call('DEL', h[2])
    end
    redis.call('DEL', key, ARGV[2] .. id)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    n = n + 1
  end
end
return n
"""
)

# KEYS: 1 task, 2 journal. ARGV: 1 position, 2 entry, 3 now. Returns {'none'} (unknown, expired or
# terminal task), {'gap', length}, {'appended'}, or {'stored', entry} (the position was taken).
_APPEND_JOURNAL_LUA = (
    _STATUS_LUA
    + """
local h = redis.call('HMGET', KEYS[1], 'status', 'expires', 'version')
if not h[3] or TERMINAL[h[1]] or (h[2] and tonumber(h[2]) <= tonumber(ARGV[3])) then
  return {'none'}
end
local position = tonumber(ARGV[1])
local length = redis.call('LLEN', KEYS[2])
if position < length then
  return {'stored', redis.call('LINDEX', KEYS[2], position)}
end
if position > length then
  return {'gap', length}
end
redis.call('RPUSH', KEYS[2], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])  -- the journal expires with its record
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {'appended'}
"""
)


class _PubSub(Protocol):
    """The part of `redis.asyncio.client.PubSub` used here (redis-py leaves it unannotated)."""

    async def subscribe(self, *channels: str) -> None: ...

    async def get_message(
        self,
        ignore_subscribe_messages: bool = False,
        timeout: float | None = 0.0,  # noqa: ASYNC109 -- redis-py's signature
    ) -> dict[str, Any] | None: ...

    async def aclose(self) -> None: ...


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _float(value: float) -> str:
    """A float as a string Redis and Lua parse back to the very same double."""
    return repr(float(value))


def _call_id() -> str:
    return os.urandom(12).hex()


class _Subscription:
    """The iterator `RedisTaskStore.subscribe` yields: the task ids published on the channel.

    A lost connection is restored (and the channel subscribed again) with backoff; ids published
    while it was down are lost, as pub/sub keeps nothing. Ends when the context exits or the
    store closes.
    """

    def __init__(self, pubsub: _PubSub) -> None:
        self._pubsub = pubsub
        self._closed = False
        self._scope: anyio.CancelScope | None = None

    def __aiter__(self) -> _Subscription:
        return self

    async def __anext__(self) -> str:
        backoff = _RESUBSCRIBE_BACKOFF[0]
        while not self._closed:
            message: dict[str, Any] | None = None
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                    backoff = _RESUBSCRIBE_BACKOFF[0]
                except (RedisError, OSError) as exc:
                    if self._closed:
                        break
                    logger.warning("task store subscription lost (%s); reconnecting in %.1fs", exc, backoff)
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, _RESUBSCRIBE_BACKOFF[1])
                finally:
                    self._scope = None
            if message is not None and message.get("type") == "message":
                return _text(message["data"])
        raise StopAsyncIteration

    def stop(self) -> None:
        """End the iteration: a waiting `__anext__` returns at once."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()


def _split_prefix(url: str) -> tuple[str, str | None]:
    """Take `?prefix=name` out of a Redis URL (redis-py would reject it); return (url, prefix)."""
    if not isinstance(url, str):
        return url, None
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for key, value in query if key == "prefix"]
    if not prefixes:
        return url, None
    rest = urlencode([(key, value) for key, value in query if key != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefixes[-1]


class RedisTaskStore(StoreBase):
    """A durable, shared `TaskStore` in a Redis database (`redis://host:port/db`, `rediss://...`).

    `url` is a redis-py URL (`redis://[[user]:password@]host[:port][/db][?option=value...]`);
    `prefix` namespaces every key and the notification channel, so several deployments can share
    one database. Pass `client` to use an existing `redis.asyncio.Redis` instead of creating one
    from `url` (it must encode text as UTF-8, the default; `close` leaves it open), in which case
    `url` only names the server in messages. The store's own client uses a blocking connection
    pool (`MAX_CONNECTIONS`, `POOL_TIMEOUT`; URL options `max_connections=`, `timeout=` override
    them), so bursts of concurrent calls queue for a connection; a given client keeps its own
    pool (redis-py's default pool fails calls beyond 100 concurrent ones instead of waiting). Use
    one instance from one asyncio event loop.
    """

    durable: bool = True
    permanent_errors: tuple[type[BaseException], ...] = (RedisDataError,)
    """Errors retrying cannot cure (a value the client cannot send); the engine retries every
    other error (`StoreRetry`): a lost connection, a restarting or read-only server, OOM."""

    def __init__(self, url: str, *, prefix: str | None = None, client: aioredis.Redis | None = None) -> None:
        url, url_prefix = _split_prefix(url)
        if prefix is not None and url_prefix is not None and prefix != url_prefix:
            raise ValueError(f"two key prefixes given: {prefix!r} and ?prefix={url_prefix!r} in the URL")
        prefix = prefix if prefix is not None else url_prefix if url_prefix is not None else "mcptasks"
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"Redis key prefix must be a non-empty string, got {prefix!r}")
        scheme = urlsplit(url).scheme.lower() if isinstance(url, str) else ""
        if client is None and scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"not a Redis URL: {redact_url(str(url))!r} (use redis://host:port/db)")
        self._url = url
        self._prefix = prefix
        self._given_client = client
        self._client: aioredis.Redis | None = None
        self._state: Literal["new", "opening", "open", "closed"] = "new"
        self._subscriptions: set[_Subscription] = set()
        self._task_prefix = f"{prefix}:task:"
        self._journal_prefix = f"{prefix}:journal:"
        self._active = f"{prefix}:active"
        self._epoch_key = f"{prefix}:epoch"
        self._queued = f"{prefix}:queued"
        self._expiry = f"{prefix}:expiry"
        self._runners = f"{prefix}:runners"
        self._offers = f"{prefix}:offers"
        self._channel = f"{prefix}:changes"
        self._create_script: AsyncScript | None = None
        self._replace_script: AsyncScript | None = None
        self._replace_any_script: AsyncScript | None = None
        self._claim_script: AsyncScript | None = None
        self._delete_script: AsyncScript | None = None
        self._purge_script: AsyncScript | None = None
        self._append_script: AsyncScript | None = None

    @property
    def url(self) -> str:
        """The URL as given (it may hold a password: log `redact_url(store.url)` instead)."""
        return self._url

    def twin(self) -> RedisTaskStore | None:
        """A new, unopened store on the same database and prefix (for another thread's event
        loop); None when this store was given a client (its settings cannot be copied)."""
        return None if self._given_client is not None else RedisTaskStore(self._url, prefix=self._prefix)

    @property
    def prefix(self) -> str:
        """The prefix of every key and of the notification channel."""
        return self._prefix

    @property
    def channel(self) -> str:
        """The pub/sub channel `publish` and `subscribe` use."""
        return self._channel

    @property
    def client(self) -> aioredis.Redis:
        """The Redis client in use (RuntimeError unless open)."""
        return self._require_open()

    def __repr__(self) -> str:
        return f"RedisTaskStore({redact_url(self._url)!r}, prefix={self._prefix!r}, {self._state})"

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect (or adopt the given client) and check the server answers a PING.

        Raises the built-in `ConnectionError` naming the URL (password hidden) when the server
        cannot be reached or refuses the connection (wrong password or database number, TLS
        failure, not a Redis server, ...).
        """
        if self._state == "open":
            return
        if self._state == "opening":
            raise RuntimeError(f"{self!r}: open() called while the store is opening")
        self._state = "opening"
        client = self._given_client
        try:
            if client is None:
                pool = aioredis.BlockingConnectionPool.from_url(
                    self._url,
                    socket_connect_timeout=CONNECT_TIMEOUT,
                    max_connections=MAX_CONNECTIONS,
                    timeout=POOL_TIMEOUT,
                    health_check_interval=HEALTH_CHECK_INTERVAL,
                )
                client = aioredis.Redis.from_pool(pool)
            try:
                await client.ping()
            except (RedisError, OSError) as exc:  # refused, timed out, bad password or DB, not Redis...
                raise ConnectionError(f"cannot reach Redis at {redact_url(self._url)}: {exc}") from exc
        except BaseException:
            self._state = "new"
            if client is not None and client is not self._given_client:
                with anyio.CancelScope(shield=True):
                    await client.aclose()
            raise
        self._client = client
        self._create_script = client.register_script(_CREATE_LUA)
        self._replace_script = client.register_script(_REPLACE_LUA)
        self._replace_any_script = client.register_script(_REPLACE_ANY_LUA)
        self._claim_script = client.register_script(_CLAIM_LUA)
        self._delete_script = client.register_script(_DELETE_EXPIRED_LUA)
        self._purge_script = client.register_script(_PURGE_LUA)
        self._append_script = client.register_script(_APPEND_JOURNAL_LUA)
        self._state = "open"

    async def open_existing(self, *, migrate: bool = False) -> None:
        """`open`: a Redis store has no schema to create or migrate, and opening writes nothing."""
        await self.open()

    async def close(self) -> None:
        """End open subscriptions and release the client this store created. Idempotent."""
        if self._state != "open":
            return
        self._state = "closed"
        for subscription in tuple(self._subscriptions):
            subscription.stop()
        client, self._client = self._client, None
        if client is not None and client is not self._given_client:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    def _require_open(self) -> aioredis.Redis:
        if self._state != "open" or self._client is None:
            if self._state == "closed":
                raise RuntimeError(f"{self!r} is closed")
            raise RuntimeError(f"{self!r} is not open: call `await store.open()` first")
        return self._client

    @staticmethod
    def _script(script: AsyncScript | None) -> AsyncScript:
        if script is None:  # only reachable when not open, which _require_open reports first
            raise RuntimeError("RedisTaskStore is not open")
        return script

    # -- encoding ------------------------------------------------------------------------------

    def _key(self, task_id: str) -> str:
        return self._task_prefix + task_id

    def _owner_key(self, owner: str) -> str:
        return f"{self._prefix}:owner:{owner_digest(owner)}"

    def _idem_key(self, owner: str, key: str) -> str:
        digest = owner_digest(owner)
        return f"{self._prefix}:idem:{digest}:{key}"

    def _write_args(self, record: TaskRecord, call_id: str, version: int) -> tuple[list[str], list[str]]:
        """KEYS and ARGV for the create / replace scripts, writing `record` with `version`."""
        data = record.to_dict()
        del data["version"], data["runner"]
        expires_at = record.expires_at
        key_expiry = ""
        if expires_at is not None and math.isfinite(expires_at):
            expiry_ms = math.ceil(expires_at * 1000) + KEY_TTL_GRACE_MS
            if 0 < expiry_ms < _MAX_EXPIRE_MS:
                key_expiry = str(expiry_ms)
        idem = "" if record.idempotency_key is None else self._idem_key(record.owner, record.idempotency_key)
        keys = [self._key(record.task_id), self._active, self._queued, self._expiry]
        keys.append(self._journal_prefix + record.task_id)
        keys.append(self._owner_key(record.owner))
        if idem:
            keys.append(idem)
        args = [
            record.task_id,
            call_id,
            _float(time.time()),
            json.dumps(data, separators=(",", ":")),
            str(version),
            record.status,
            "1" if record.status in ACTIVE_STATUSES else "0",
            "0" if record.runner is None else "1",
            record.runner or "",
            _float(record.created_at),
            "" if expires_at is None else _float(expires_at),
            key_expiry,
            idem,
            self._task_prefix,
        ]
        return keys, args

    @staticmethod
    def _decode(body: bytes | str, version: bytes | str | int, runner: bytes | str | None) -> TaskRecord:
        data: dict[str, Any] = json.loads(body)
        data["version"] = int(version)
        data["runner"] = None if runner is None else _text(runner)
        return TaskRecord.from_dict(data)

    # -- the TaskStore operations --------------------------------------------------------------

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Store `record` and return it; `TaskExists` if its id is taken. Applied once this returns.

        With an idempotency key held by an unexpired record of the same owner, nothing is stored
        and that record is returned.
        """
        return await self._create(record, _call_id())

    async def _create(self, record: TaskRecord, call_id: str) -> TaskRecord:
        self._require_open()
        keys, args = self._write_args(record, call_id, record.version)
        reply = cast(list[Any], await self._script(self._create_script)(keys=keys, args=args))
        outcome = _text(reply[0])
        if outcome == "exists":
            raise TaskExists(record.task_id)
        if outcome == "held":
            return self._decode(reply[1], reply[2], reply[3] if len(reply) > 3 else None)
        return record

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """The record, unless unknown, expired, or owned by someone other than `owner`."""
        client = self._require_open()
        body, version, runner = await client.hmget(self._key(task_id), ["body", "version", "runner"])
        if body is None or version is None:
            return None
        record = self._decode(body, version, runner)
        if record.expired(time.time()) or (owner is not None and record.owner != owner):
            return None
        return record

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version`; a stored terminal record is never changed."""
        return await self._replace(record, expected_version, _call_id())

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        """`replace`, and when it applied, `publish(message)` from the same script (one round
        trip): subscribers hear of the write exactly when it was made."""
        return await self._replace(record, expected_version, _call_id(), message)

    async def _replace(
        self, record: TaskRecord, expected_version: int, call_id: str, message: str | None = None
    ) -> bool:
        self._require_open()
        keys, args = self._write_args(record, call_id, expected_version + 1)
        args.append(str(expected_version))
        if message is not None:
            args += [self._channel, message]
        if not int(await self._script(self._replace_script)(keys=keys, args=args)):
            return False
        record.version = expected_version + 1
        return True

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version` that a terminal record also takes (`KeepsOutbox`)."""
        self._require_open()
        if record.expired(time.time()):
            return False
        keys, args = self._write_args(record, _call_id(), expected_version + 1)
        args.append(str(expected_version))
        if not int(await self._script(self._replace_any_script)(keys=keys, args=args)):
            return False
        record.version = expected_version + 1
        return True

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """Unexpired records with undelivered webhook events, least recently updated first. It
        scans every task key (Redis keeps no index of them), so the sweep that calls it runs
        every few seconds only."""
        pending = [record for record in await self._all_records() if record.outbox]
        pending.sort(key=lambda record: (record.updated_at, record.task_id))
        return pending[: max(limit, 0)]

    async def list_active(self) -> list[TaskRecord]:
        """Every unexpired `working` / `input_required` record, oldest first."""
        client = self._require_open()
        members = cast(list[bytes | str], await client.zrange(self._active, 0, -1))
        ids = [_text(task_id) for task_id in members]
        now = time.time()
        records: list[TaskRecord] = []
        for start in range(0, len(ids), _READ_BATCH):
            async with client.pipeline(transaction=False) as pipe:
                for task_id in ids[start : start + _READ_BATCH]:
                    pipe.hmget(self._key(task_id), ["body", "version", "runner"])
                rows = cast(list[list[Any]], await pipe.execute())
            for body, version, runner in rows:
                if body is None or version is None:
                    continue  # deleted since the ids were read
                record = self._decode(body, version, runner)
                if record.status in ACTIVE_STATUSES and not record.expired(now):
                    records.append(record)
        return records

    async def delete_expired(self, now: float) -> int:
        """Delete every record whose TTL elapsed at `now` (with its index entries); return how many.

        Records whose key Redis already dropped (see `KEY_TTL_GRACE_MS`) count too.
        """
        self._require_open()
        script = self._script(self._delete_script)
        keys = [self._expiry, self._active, self._queued]
        total = 0
        while True:
            deleted = int(
                await script(
                    keys=keys, args=[_float(now), _DELETE_BATCH, self._task_prefix, self._journal_prefix]
                )
            )
            total += deleted
            if deleted < _DELETE_BATCH:
                return total

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """Record `runner` as alive until now + `ttl`, running `tools` (None: not said), and
        forget runners dead for an hour."""
        client = self._require_open()
        now = time.time()
        async with client.pipeline(transaction=False) as pipe:
            pipe.zadd(self._runners, {runner: now + ttl})
            pipe.zremrangebyscore(self._runners, "-inf", f"({_float(now - OFFER_MEMORY)}")
            if tools is not None:
                pipe.hset(self._offers, runner, json.dumps(sorted(tools)))
            await pipe.execute()

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """The latest heartbeat of every runner not yet forgotten (an hour after its lease)."""
        client = self._require_open()
        async with client.pipeline(transaction=False) as pipe:
            pipe.zrange(self._runners, 0, -1, withscores=True)
            pipe.hgetall(self._offers)
            leases, offered = await pipe.execute()
        tools = {
            _text(runner): frozenset(json.loads(_text(names)))
            for runner, names in cast(dict[Any, Any], offered).items()
        }
        offers = {
            _text(runner): RunnerOffer(float(until), tools.get(_text(runner)))
            for runner, until in cast(list[tuple[Any, float]], leases)
        }
        forgotten = [runner for runner in tools if runner not in offers]
        if forgotten:
            await client.hdel(self._offers, *forgotten)
        return offers

    async def count_active(self, owner: str) -> int:
        """How many unexpired active records `owner` has (`CountsActive`): one round trip, which
        also drops the ids of records that expired while active from the owner's set."""
        client = self._require_open()
        key, now = self._owner_key(owner), _float(time.time())
        async with client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zcard(key)
            _, count = await pipe.execute()
        return int(count)

    async def epoch(self) -> str:
        """The id of the data this store holds, made by the first call over it: a Redis restarted
        without persistence (or flushed) answers with a new one."""
        client = self._require_open()
        async with client.pipeline(transaction=True) as pipe:
            pipe.set(self._epoch_key, secrets.token_hex(8), nx=True)
            pipe.get(self._epoch_key)
            _, value = await pipe.execute()
        return _text(value)

    async def live_runners(self) -> set[str]:
        """Runners whose last heartbeat has not expired."""
        client = self._require_open()
        runners = cast(
            list[bytes | str], await client.zrangebyscore(self._runners, f"({_float(time.time())}", "+inf")
        )
        return {_text(runner) for runner in runners}

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """Assign up to `limit` (at most `MAX_CLAIM`) queued records (of `tools`, when given) to
        `runner` in one atomic step, oldest first, bumping their versions; return them. With
        `tools`, one call steps over at most `MAX_CLAIM_SKIP` queued records of other tools."""
        return await self._claim(runner, limit, _call_id(), tools)

    async def _claim(
        self, runner: str, limit: int, call_id: str, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        self._require_open()
        limit = min(int(limit), MAX_CLAIM)
        if limit <= 0 or (tools is not None and not tools):
            return []
        keys = [self._queued, self._active, f"{self._prefix}:claim:{call_id}"]
        wanted = "" if tools is None else json.dumps(sorted(tools))
        args = [
            runner,
            str(limit),
            _float(time.time()),
            self._task_prefix,
            str(CLAIM_LOG_TTL_MS),
            wanted,
            str(MAX_CLAIM_SKIP),
            str(max(limit, CLAIM_WINDOW)),
        ]
        reply = cast(Sequence[Any], await self._script(self._claim_script)(keys=keys, args=args))
        return [self._decode(reply[i + 1], reply[i + 2], runner) for i in range(0, len(reply), 3)]

    async def _all_records(self) -> list[TaskRecord]:
        """Every unexpired record, found by scanning the task keys (operator queries only: this
        reads the whole prefix)."""
        client = self._require_open()
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self._task_prefix) + "*"
        now = time.time()
        records: list[TaskRecord] = []
        batch: list[bytes | str] = []

        async def read(keys: list[bytes | str]) -> None:
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hmget(key, ["body", "version", "runner"])
                rows = cast(list[list[Any]], await pipe.execute())
            for body, version, runner in rows:
                if body is not None and version is not None:
                    record = self._decode(body, version, runner)
                    if not record.expired(now):
                        records.append(record)

        async for key in client.scan_iter(match=pattern, count=_READ_BATCH):
            batch.append(key)
            if len(batch) >= _READ_BATCH:
                await read(batch)
                batch = []
        if batch:
            await read(batch)
        return records

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Matching unexpired records, newest first, one page (scans every task key)."""
        return page_of(await self._all_records(), query, limit, after)

    async def stats(self) -> TaskStats:
        """Counts, oldest active record, queue depth and live runners (scans every task key)."""
        client = self._require_open()
        runners = cast(
            list[tuple[bytes | str, float]],
            await client.zrangebyscore(self._runners, f"({_float(time.time())}", "+inf", withscores=True),
        )
        return stats_of(await self._all_records(), {_text(name): float(until) for name, until in runners})

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Delete terminal records in `statuses` last updated before `older_than`; return how many."""
        chosen = check_purge(statuses)
        ids = [
            r.task_id for r in await self._all_records() if r.status in chosen and r.updated_at < older_than
        ]
        script = self._script(self._purge_script)
        keys = [self._expiry, self._active, self._queued]
        total = 0
        for start in range(0, len(ids), _DELETE_BATCH):
            total += int(
                await script(
                    keys=keys,
                    args=[self._task_prefix, self._journal_prefix, *ids[start : start + _DELETE_BATCH]],
                )
            )
        return total

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """Store `entry` at `position` of the task's journal, or return the entry already there
        (one script, so concurrent appenders of a position agree); None when the task is unknown,
        expired or terminal; `ValueError` for a gap."""
        check_journal_append(position, entry)
        self._require_open()
        keys = [self._key(task_id), self._journal_prefix + task_id]
        args = [str(position), entry, _float(time.time())]
        reply = cast(list[Any], await self._script(self._append_script)(keys=keys, args=args))
        outcome = _text(reply[0])
        if outcome == "none":
            return None
        if outcome == "gap":
            raise ValueError(journal_gap(task_id, position, int(reply[1])))
        return entry if outcome == "appended" else _text(reply[1])

    async def read_journal(self, task_id: str) -> list[str]:
        """The task's entries in position order (empty when the task is unknown or expired)."""
        client = self._require_open()
        async with client.pipeline(transaction=True) as pipe:
            pipe.hmget(self._key(task_id), ["version", "expires"])
            pipe.lrange(self._journal_prefix + task_id, 0, -1)
            (version, expires), entries = await pipe.execute()
        if version is None or (expires is not None and float(expires) <= time.time()):
            return []
        return [_text(entry) for entry in entries]

    async def publish(self, task_id: str) -> None:
        """Announce `task_id` on the channel: reaches subscribers in every process sharing it."""
        client = self._require_open()
        await client.publish(self._channel, task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """The task ids published on the channel (by any instance), while the context is open.

        The subscription is confirmed by the server before the context is entered, so every
        `publish` made after entering reaches it. It uses a connection of its own.
        """
        return self._subscribe()

    @asynccontextmanager
    async def _subscribe(self) -> AsyncIterator[AsyncIterator[str]]:
        client = self._require_open()
        pubsub = cast(_PubSub, client.pubsub())
        subscription = _Subscription(pubsub)
        try:
            await pubsub.subscribe(self._channel)
            while True:  # wait for the server's confirmation
                message = await pubsub.get_message(timeout=None)
                if message is not None and message.get("type") == "subscribe":
                    break
            self._subscriptions.add(subscription)
            yield subscription
        finally:
            subscription.stop()
            self._subscriptions.discard(subscription)
            with anyio.CancelScope(shield=True):
                await pubsub.aclose()
