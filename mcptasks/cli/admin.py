"""`mcptasks admin list|show|answer|cancel|purge|stats`: operator commands that read the store directly.

They need store access, not MCP credentials, and no MCP client can reach them. Output is a table
(control characters in tool-supplied text shown escaped), or JSON with `--json` (the same characters
as `\\uXXXX` escapes); both are written through `mcptasks.cli.output`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

import anyio

from mcptasks._runtime.operator import (
    OPERATOR_CANCEL_REASON,
    age_text,
    answer_task,
    cancel_task,
    check_operator_url,
    describe,
    iso,
    open_existing,
    parse_duration,
    parse_since,
    purge_tasks,
)
from mcptasks.cli.answers import parse_answers
from mcptasks.cli.arguments import Subcommands
from mcptasks.cli.errors import CliError
from mcptasks.cli.failures import store_open_failure
from mcptasks.cli.logsetup import configure_logging
from mcptasks.cli.output import one_line, to_json, write
from mcptasks.stores.admin import TaskQuery
from mcptasks.stores.base import KeepsJournal, OperatorStore, TaskRecord
from mcptasks.stores.extras import MissingExtra
from mcptasks.stores.foreign import adopt_store
from mcptasks.stores.redaction import redact_url
from mcptasks.stores.url import store_from_url
from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES

__all__ = ["STORE_ENV", "add_store_option", "open_operator_store", "register"]

STORE_ENV = "MCPTASKS_STORE"
_SHOWN = (
    "taskId",
    "tool",
    "status",
    "statusMessage",
    "owner",
    "ownerHash",
    "createdAt",
    "lastUpdatedAt",
    "attempt",
    "runner",
    "ttlMs",
    "pollIntervalMs",
    "version",
)
_STATUS_ORDER = ("working", "input_required", "completed", "failed", "cancelled")
_PROG = "mcptasks admin"
_WRITES = ("answer", "cancel", "purge")
_JOURNAL_WIDTH = 120
"""Most characters `admin show` prints of a journal entry's other fields."""


def _error(message: str) -> CliError:
    """A bad `mcptasks admin` command line or store: one `mcptasks admin: error:` line, exit 2."""
    return CliError(message, prog=_PROG)


def _safe(text: object, width: int | None = None) -> str:
    """`text` on one line, control characters escaped (a status message cannot drive the terminal)."""
    shown = one_line(text)
    if width is not None and len(shown) > width:
        shown = shown[: width - 1] + "…"
    return shown


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        write(out, "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")


def _json(value: Any, out: TextIO) -> None:
    write(out, to_json(value) + "\n")


def _split(values: Sequence[str] | None) -> frozenset[str] | None:
    if not values:
        return None
    return frozenset(v.strip() for item in values for v in item.split(",") if v.strip())


# -- the commands -----------------------------------------------------------------------------


async def _list(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    try:
        since = None if args.since is None else parse_since(args.since)
        query = TaskQuery(_split(args.status), _split(args.tool), args.owner, since)
        page = await store.list_tasks(query, limit=args.limit, after=args.after)
    except ValueError as exc:
        raise _error(str(exc)) from None
    now = time.time()
    views = [describe(r, show_owner=args.show_owners, now=now) for r in page.records]
    if args.json:
        _json({"tasks": views, "nextCursor": page.next_cursor}, out)
        return 0
    header = ["TASK ID", "TOOL", "STATUS", "OWNER", "AGE", "ATTEMPT", "RUNNER", "MESSAGE"]
    rows = [header]
    for view in views:
        rows.append(
            [
                _safe(view["taskId"]),
                _safe(view["tool"], 24),
                view["status"],
                _safe(view["owner"], 24) if args.show_owners else view["ownerHash"],
                age_text(view["ageSeconds"]),
                str(view["attempt"]),
                _safe(view["runner"] or "-", 20),
                _safe(view["statusMessage"] or "", 48),
            ]
        )
    _table(rows, out)
    if page.next_cursor is not None:
        write(out, f"more: --after {page.next_cursor}\n")
    return 0


async def _read_journal(store: OperatorStore, task_id: str) -> list[Any]:
    """The task's journal entries, parsed (an entry that is not JSON stays text); empty when the
    store keeps no journal."""
    if not isinstance(store, KeepsJournal):
        return []
    entries: list[Any] = []
    for text in await store.read_journal(task_id):
        try:
            entries.append(json.loads(text))
        except ValueError:
            entries.append(text)
    return entries


def _without_values(entry: Any) -> Any:
    """A journal entry with only what it is (`kind`, `name`, a question's `keys`): its values
    (step results, answers) are shown with `--result`, like the task's arguments and result."""
    if not isinstance(entry, dict):
        return "(hidden: --result shows it)"
    return {key: entry[key] for key in ("kind", "name", "keys") if key in entry}


def _journal_lines(entries: Sequence[Any]) -> list[str]:
    """One line per entry: position, `kind`, `name`, and the other fields as compact JSON
    (truncated, control characters escaped)."""
    rows = []
    for position, entry in enumerate(entries):
        if isinstance(entry, dict):
            kind, name = entry.get("kind"), entry.get("name")
            rest: Any = {key: value for key, value in entry.items() if key not in ("kind", "name")}
        else:
            kind = name = None
            rest = entry
        compact = json.dumps(rest, separators=(",", ":"), ensure_ascii=False) if rest != {} else ""
        shown_kind = _safe(kind if kind is not None else "-", 16)
        shown_name = _safe(name if name is not None else "-", 32)
        rows.append(
            [str(position), shown_kind, shown_name, _safe(compact[: _JOURNAL_WIDTH + 1], _JOURNAL_WIDTH)]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return ["  " + "  ".join([*(row[i].ljust(widths[i]) for i in range(3)), row[3]]).rstrip() for row in rows]


async def _show(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    record = await store.get(args.task_id)
    if record is None:
        raise _error(f"no task {args.task_id!r} (unknown, expired or purged)")
    view = describe(record, show_owner=args.show_owners, show_result=args.result, detail=True)
    journal = await _read_journal(store, record.task_id)
    if not args.result:  # step values and answers are results too
        journal = [_without_values(entry) for entry in journal]
    if args.json:
        if journal:
            view = {**view, "journal": journal}
        _json(view, out)
        return 0
    simple = [(key, view[key]) for key in _SHOWN if key in view]
    _table([[f"{key}:", _safe(value if value is not None else "-")] for key, value in simple], out)
    write(out, "timeline:\n")
    for entry in view["timeline"]:
        message = f"  {_safe(entry['statusMessage'], 80)}" if entry["statusMessage"] else ""
        write(out, f"  {entry['at']}  {entry['status']}{message}\n")
    _write_answers(view, out)
    for key in ("inputRequests", "error") + (("arguments", "result") if args.result else ()):
        if view.get(key):
            write(out, f"{key}:\n")
            for line in json.dumps(view[key], indent=2, ensure_ascii=True).splitlines():
                write(out, f"  {line}\n")
    _write_journal(journal, out)
    return 0


def _write_answers(view: dict[str, Any], out: TextIO) -> None:
    """The "answers:" (who answered each key, when) and "deadlines:" sections of `show`."""
    if view.get("answers"):
        write(out, "answers:\n")
        for key, entry in view["answers"].items():
            who = entry["by"] + (f" ({_safe(entry['name'], 40)})" if entry.get("name") else "")
            due = f" (deadline {entry['deadline']})" if entry.get("deadline") else ""
            write(out, f"  {_safe(key, 40)}: {who} at {entry['at']}{due}\n")
    if view.get("inputDeadlines"):
        write(out, "deadlines:\n")
        for key, deadline in view["inputDeadlines"].items():
            answer = _safe(json.dumps(deadline["answer"], ensure_ascii=True), 60)
            write(out, f"  {_safe(key, 40)}: at {deadline['at']}, then {answer}\n")


def _write_journal(journal: Sequence[Any], out: TextIO) -> None:
    """The "Journal (N entries):" section of `show` (nothing for an empty journal)."""
    if journal:
        write(out, f"Journal ({len(journal)} {'entry' if len(journal) == 1 else 'entries'}):\n")
        for line in _journal_lines(journal):
            write(out, line + "\n")


async def _cancel(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    before = await store.get(args.task_id)
    record = await cancel_task(store, args.task_id, reason=args.reason)
    if before is None or record is None:
        raise _error(f"no task {args.task_id!r} (unknown, expired or purged)")
    changed = not before.terminal
    if args.json:
        _json({"taskId": record.task_id, "status": record.status, "changed": changed}, out)
    elif changed:
        write(out, f"{record.task_id}: cancelled\n")
    else:
        write(out, f"{record.task_id}: already {record.status}, unchanged\n")
    return 0


def _wire_answers(record: TaskRecord, args: argparse.Namespace) -> dict[str, Any]:
    """The wire answers the command line gives `record`'s pending questions, by key.

    `--answer`, `--decline` and `--cancel` mean what they mean to `mcptasks call` (an
    elicitation's content, by its key or a field name, checked against its schema); a request
    of another method takes the JSON as its whole answer. A KEY no pending question takes is
    passed on as it is, so that `answer_task` says why it is refused.
    """
    given = parse_answers(args.answer, None, args.decline, args.cancel)
    wanted: dict[str, Any] = {}
    for key, request in sorted(record.input_requests.items()):
        raw = request.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if request.get("method") != "elicitation/create":
            if key in given.by_key:
                given.used.add(key)
                wanted[key] = given.by_key[key]
            continue
        schema = params.get("requestedSchema")
        reply = given.respond(
            key, str(params.get("message", "")), schema if isinstance(schema, dict) else None
        )
        if reply is not None:
            action, content = reply
            wanted[key] = {"action": action, "content": content} if action == "accept" else {"action": action}
    for key in given.unused():
        wanted[key] = given.by_key[key]
    if given.bare:
        raise _error("an --answer without a KEY found no pending question to answer")
    return wanted


async def _answer(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    current = await store.get(args.task_id)
    if current is None:
        raise _error(f"no task {args.task_id!r} (unknown, expired or purged)")
    answers = _wire_answers(current, args) if not current.terminal else {}
    record = await answer_task(store, args.task_id, answers, name=args.name)
    if record is None:
        raise _error(f"no task {args.task_id!r} (unknown, expired or purged)")
    view = describe(record, detail=True)
    if args.json:
        _json({"taskId": record.task_id, "status": record.status, "answers": view["answers"]}, out)
    else:
        write(out, f"{record.task_id}: answered; now {record.status}\n")
    return 0


async def _purge(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    try:
        cutoff = time.time() - parse_duration(args.older_than)
        statuses = _split(args.status) or frozenset(TERMINAL_STATUSES)
        deleted = await purge_tasks(store, statuses, cutoff)
    except ValueError as exc:
        raise _error(str(exc)) from None
    if args.json:
        _json({"deleted": deleted, "statuses": sorted(statuses), "olderThan": iso(cutoff)}, out)
    else:
        write(
            out, f"deleted {deleted} {'/'.join(sorted(statuses))} task(s) last updated before {iso(cutoff)}\n"
        )
    return 0


async def _stats(store: OperatorStore, args: argparse.Namespace, out: TextIO) -> int:
    stats = await store.stats()
    now = time.time()
    if args.json:
        data = stats.to_dict()
        data["oldest_active"] = iso(stats.oldest_active)
        for lease in data["runners"].values():
            lease["expires_at"] = iso(lease["expires_at"])
        _json(data, out)
        return 0
    statuses = [s for s in _STATUS_ORDER if s in stats.by_status or s in ACTIVE_STATUSES]
    rows = [["TOOL", *(s.upper() for s in statuses), "TOTAL"]]
    for tool, counts in sorted(stats.by_tool.items()):
        rows.append([_safe(tool, 32), *(str(counts.get(s, 0)) for s in statuses), str(sum(counts.values()))])
    rows.append(["(all)", *(str(stats.by_status.get(s, 0)) for s in statuses), str(stats.total)])
    _table(rows, out)
    oldest = (
        "-"
        if stats.oldest_active is None
        else f"{iso(stats.oldest_active)} ({age_text(now - stats.oldest_active)} ago)"
    )
    write(out, f"oldest active: {oldest}\nqueued (no runner yet): {stats.queued}\n")
    counted = "not counted by this store" if stats.tool_errors is None else str(stats.tool_errors)
    write(out, f"tool errors (completed with isError): {counted}\n")
    if stats.runners:
        write(out, "live runners:\n")
        lease_rows = [["RUNNER", "ACTIVE TASKS", "LEASE ENDS IN"]]
        for name, lease in stats.runners.items():
            lease_rows.append(
                [_safe(name, 40), str(lease.active_tasks), f"{max(0.0, lease.expires_at - now):.1f}s"]
            )
        _table(lease_rows, out)
    else:
        write(out, "live runners: none\n")
    return 0


_COMMANDS: dict[str, Callable[[OperatorStore, argparse.Namespace, TextIO], Awaitable[int]]] = {
    "list": _list,
    "show": _show,
    "answer": _answer,
    "cancel": _cancel,
    "purge": _purge,
    "stats": _stats,
}


def run_admin(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one `mcptasks admin` command (`CliError` for bad input or an unusable store)."""
    stream = sys.stdout if out is None else out
    url = args.store or os.environ.get(STORE_ENV)
    if not url:
        raise _error(f"name the task store: --store URL or ${STORE_ENV}")
    if getattr(args, "limit", 1) < 1:
        raise _error("--limit must be a positive integer")

    if args.admin_command in _WRITES:  # the change is logged on stderr (one line)
        configure_logging("info")

    async def run() -> int:
        # Reads never create a store or migrate its schema; cancel and purge may migrate one.
        store = await open_operator_store(url, migrate=args.admin_command in _WRITES)
        try:
            return await _COMMANDS[args.admin_command](store, args, stream)
        except CliError:
            raise
        except ValueError as exc:
            raise _error(str(exc)) from None
        except (OSError, RuntimeError) as exc:
            raise _error(f"cannot use the task store: {exc}") from None
        finally:
            await store.close()

    return anyio.run(run)


async def open_operator_store(url: str, *, migrate: bool = False, prog: str = _PROG) -> OperatorStore:
    """The existing store `url` names, open (see `open_existing`); `CliError` naming the cause
    (a bad URL, a missing extra, no such store, an unusable one) otherwise."""
    try:
        store = adopt_store(store_from_url(check_operator_url(url)))
    except (ValueError, MissingExtra) as exc:
        raise CliError(str(exc), prog=prog) from None
    try:
        await open_existing(store, migrate=migrate)
    except Exception as exc:
        raise CliError(store_open_failure(exc, redact_url(url)), prog=prog) from None
    return store


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """The `--store URL` option of the operator commands."""
    parser.add_argument(
        "--store", help=f"task store URL (sqlite:///..., redis://..., postgresql://...); also ${STORE_ENV}"
    )


def register(commands: Subcommands) -> None:
    """Add the `admin` subcommand (it sets `handler(args) -> int`)."""
    admin = commands.add_parser(
        "admin",
        help="inspect, answer, cancel and purge tasks straight from the store (operators)",
        description="Operator commands over the task store. They bypass MCP: store access is the credential.",
    )
    actions = admin.add_subparsers(
        dest="admin_command", required=True, metavar="{list,show,answer,cancel,purge,stats}"
    )

    def action(name: str, text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}.")
        add_store_option(parser)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.set_defaults(handler=run_admin)
        return parser

    listing = action("list", "list tasks, newest first")
    listing.add_argument("--status", action="append", help="only these statuses (repeat or comma-separate)")
    listing.add_argument("--tool", action="append", help="only these tools (repeat or comma-separate)")
    listing.add_argument("--owner", help="only tasks of this owner (the exact owner string)")
    listing.add_argument("--since", help="only tasks created since: a duration ago (2h) or an ISO time")
    listing.add_argument(
        "--limit", type=int, default=50, help="most tasks to print (default 50, at most 1000)"
    )
    listing.add_argument("--after", metavar="CURSOR", help="continue a listing (the cursor it printed)")
    listing.add_argument("--show-owners", action="store_true", help="print owners instead of their hashes")

    show = action("show", "print one task: record, input requests, error, timeline, journal")
    show.add_argument("task_id", help="the task's id (as `admin list` prints it)")
    show.add_argument(
        "--result",
        action="store_true",
        help="also print the arguments, the result and the journal's values (step results, answers)",
    )
    show.add_argument("--show-owners", action="store_true", help="also print the owner")

    answer = action(
        "answer", "answer a task's pending questions (as its client would; logged as an operator's)"
    )
    answer.add_argument("task_id", help="the task's id (as `admin list` prints it)")
    answer.add_argument(
        "--answer",
        action="append",
        metavar="KEY=JSON",
        help="accept question KEY (its inputRequests key or a field name) with this content, checked "
        "against its schema, as `mcptasks call --answer` does; a request other than an elicitation "
        "takes the JSON as its whole answer (repeatable)",
    )
    choice = answer.add_mutually_exclusive_group()
    choice.add_argument(
        "--decline", action="store_true", help="decline every pending question no --answer matches"
    )
    choice.add_argument(
        "--cancel", action="store_true", help="cancel every pending question no --answer matches"
    )
    answer.add_argument("--name", help="who answers, kept with the answers (e.g. a login)")

    cancel = action("cancel", "cancel a task (as its owner would; terminal tasks stay as they are)")
    cancel.add_argument("task_id", help="the task's id (as `admin list` prints it)")
    cancel.add_argument("--reason", default=OPERATOR_CANCEL_REASON, help="the statusMessage to set")

    purge = action("purge", "delete finished tasks last updated before a given age")
    purge.add_argument(
        "--status", action="append", help="completed, failed and/or cancelled (default: all three)"
    )
    purge.add_argument("--older-than", required=True, help="age such as 7d, 12h, 1h30m")

    action("stats", "counts by status and tool, oldest active task, queue depth, live runners")
