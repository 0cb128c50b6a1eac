"""The `--ledger PATH` (or `$MCPTASKS_LEDGER`) task ledger of `mcptasks call` and `mcptasks tasks`."""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from mcptasks.cli.errors import CliError

if TYPE_CHECKING:
    from mcptasks.client import TaskLedger

LEDGER_ENV = "MCPTASKS_LEDGER"


def open_ledger(path: str | None) -> TaskLedger | None:
    """The ledger named by --ledger or the environment, read once (`CliError` when unusable)."""
    path = path or os.environ.get(LEDGER_ENV)
    if not path:
        return None
    from mcptasks.client import TaskLedger
    from mcptasks.stores.url import store_error_hint

    ledger = TaskLedger(path)
    try:
        ledger.pending()
    except (sqlite3.Error, OSError) as exc:
        text = str(exc).rstrip(". ") or type(exc).__name__
        raise CliError(f"cannot use the ledger {path}: {text}; {store_error_hint(exc)}") from None
    return ledger
