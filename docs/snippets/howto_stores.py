# --8<-- [start:head]
"""Choosing and configuring a task store (nothing here connects until the server starts)."""

from mcptasks import MemoryTaskStore, SqliteTaskStore, TaskServer, store_from_url
from mcptasks.stores.postgres import PostgresTaskStore
from mcptasks.stores.redis import RedisTaskStore

# --8<-- [end:head]


# --8<-- [start:urls]
dev = TaskServer("reports")  # memory:// -- the default; gone when the process ends
single_node = TaskServer("reports", store="sqlite:///tasks.db")  # relative to the working directory
absolute = TaskServer("reports", store="sqlite:////var/lib/reports/tasks.db")  # four slashes: absolute
shared = TaskServer("reports", store="redis://:s3cret@redis.internal:6379/0")  # rediss:// for TLS
also_shared = TaskServer(
    "reports", store="postgresql://reports:s3cret@db.internal:5432/app?sslmode=require&schema=reports_tasks"
)
# --8<-- [end:urls]

# --8<-- [start:objects]
# For options a URL cannot carry, build the store yourself:
redis_store = RedisTaskStore("redis://redis.internal:6379/0", prefix="billing")  # keys billing:*
postgres_store = PostgresTaskStore(
    "postgresql://reports@db.internal/app",
    schema="billing_tasks",  # tables live in this schema (created and migrated on start)
    min_size=2,
    max_size=20,  # connection pool bounds; LISTEN uses one more connection
    connect_timeout=5.0,
)
billing = TaskServer("billing", store=postgres_store)
# --8<-- [end:objects]

# --8<-- [start:url-function]
store = store_from_url("sqlite:///tasks.db")  # what TaskServer(store="...") and --store use
assert isinstance(store, SqliteTaskStore)
assert isinstance(store_from_url("memory://"), MemoryTaskStore)
# --8<-- [end:url-function]
