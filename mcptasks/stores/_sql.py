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
