"""Operator queries from Python: the failed tasks, the counts, and a purge of old completed tasks.

Run it:  python operate_admin.py sqlite:///tasks.db   (or postgresql://..., redis://...)
"""

import sys
import time

import anyio

from mcptasks import store_from_url
from mcptasks.stores import TaskQuery


async def report(url: str) -> None:
    """Print the failed tasks and the counts by status, then purge week-old completed tasks."""
    store = store_from_url(url)  # e.g. "postgresql://tasks@db.internal/app"
    await store.open()
    try:
        page = await store.list_tasks(TaskQuery(statuses=frozenset({"failed"})), limit=100)
        for record in page.records:  # newest first; page.next_cursor continues
            print(record.task_id, record.error)
        stats = await store.stats()  # TaskStats: by_status, by_tool, oldest_active, queued, runners
        print(stats.by_status)
        deleted = await store.purge({"completed"}, older_than=time.time() - 7 * 86400)
        print(f"purged {deleted} completed task(s)")
    finally:
        await store.close()


if __name__ == "__main__":
    anyio.run(report, sys.argv[1] if len(sys.argv) > 1 else "sqlite:///tasks.db")
