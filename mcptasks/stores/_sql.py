"""Status conditions shared by the SQL stores (SQLite, PostgreSQL), built from `mcptasks.wire`.

Schema migrations keep the literals they were written with: they are history, and an index
predicate means the same whatever the order of its list.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES


def _listed(statuses: Iterable[str]) -> str:
    return ", ".join(f"'{status}'" for status in sorted(statuses))


ACTIVE = f"status IN ({_listed(ACTIVE_STATUSES)})"
"""The condition of a `working` / `input_required` row."""

NOT_TERMINAL = f"status NOT IN ({_listed(TERMINAL_STATUSES)})"
"""The condition of a row that may still change."""


def fair_queue(tasks: str, queued: str, unexpired: str) -> str:
    """The CTEs of a fair claim (see `TaskStore.claim`), ending in `fair (task_id, created_at,
    turn)`: each queued row of `tasks` (unexpired and claimable: `queued`, a condition) with its
    owner's turn, the owner's unexpired (`unexpired`) active rows held by runners plus the row's
    place in the owner's queue (oldest first). Claim in `FAIR_ORDER`."""
    return (
        f"queued AS (SELECT task_id, owner, created_at FROM {tasks} "
        f"WHERE runner IS NULL AND {ACTIVE} AND {queued}), "
        f"held AS (SELECT owner, count(*) AS n FROM {tasks} WHERE runner IS NOT NULL AND {ACTIVE} "
        f"AND {unexpired} AND owner IN (SELECT owner FROM queued) GROUP BY owner), "
        "fair AS (SELECT q.task_id, q.created_at, COALESCE(h.n, 0) + row_number() OVER "
        "(PARTITION BY q.owner ORDER BY q.created_at, q.task_id) AS turn "
        "FROM queued AS q LEFT JOIN held AS h ON h.owner = q.owner)"
    )


FAIR_ORDER = "fair.turn, fair.created_at, fair.task_id"
"""The order a claim takes the rows of `fair_queue` in: the owners holding the fewest first."""
