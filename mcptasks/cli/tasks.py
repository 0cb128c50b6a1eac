"""`mcptasks tasks`: inspect or cancel a task by id, or list the ledger's unfinished tasks.

    mcptasks tasks get (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks cancel (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks pending [--ledger PATH]

Task ids are opaque and may start with `-`: put `--` before a TASK_ID. `get` and `cancel` exit 0
on success, with the same statuses as `mcptasks call` otherwise; `pending` lists the tasks of
the `--ledger PATH` (or `$MCPTASKS_LEDGER`) not known to be finished, with the command that
resumes each.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from mcptasks.cli.arguments import Subcommands, reparse
from mcptasks.cli.errors import EXIT_HELP, EXIT_OK, PROG, CliError
from mcptasks.cli.failures import run_reporting
from mcptasks.cli.ledger import LEDGER_ENV, open_ledger
from mcptasks.cli.render import task_json, to_json, write
from mcptasks.cli.target import add_target_options, split_target

__all__ = ["register", "run_pending", "run_tasks"]

_TASK_USAGE = "%(prog)s (URL | --stdio CMD) [options] [--] TASK_ID"


def run_tasks(args: argparse.Namespace) -> int:
    """The `tasks get` / `tasks cancel` handler (`CliError` for a bad command line)."""
    name = args.tasks_command
    description = "Print the task as JSON." if name == "get" else "Cancel the task."
    args = reparse(args, add_target_options, f"{PROG} tasks {name}", _TASK_USAGE, description)
    target, words = split_target(args.words, args.stdio, args.header)
    if len(words) != 1:
        raise CliError("expected exactly one TASK_ID after the server")
    ledger = open_ledger(args.ledger)
    (task_id,) = words

    async def work() -> int:
        from mcptasks.client import TaskHandle, TasksClient

        extension = TasksClient(ledger=ledger, server_id=target.identity)
        async with target.client(extension) as client:
            handle = TaskHandle.resume(client, task_id)
            if args.tasks_command == "cancel":
                await handle.cancel()
                task = await handle.status()
                write(sys.stdout, f"cancellation requested; task {task_id} is {task.status}\n")
            else:
                task = await handle.status()
                write(sys.stdout, to_json(task_json(task)) + "\n")
        return EXIT_OK

    return run_reporting(work, sys.stderr, target.url)


def run_pending(args: argparse.Namespace) -> int:
    """The `tasks pending` handler: the ledger's unfinished tasks and how to resume them."""
    ledger = open_ledger(args.ledger)
    if ledger is None:
        raise CliError(f"no ledger: pass --ledger PATH or set ${LEDGER_ENV}")
    entries = ledger.pending()
    if args.json_output:
        rows = [
            {
                "server": e.server,
                "taskId": e.task_id,
                "tool": e.tool,
                "status": e.status,
                "createdAt": e.created_at,
            }
            for e in entries
        ]
        write(sys.stdout, to_json(rows) + "\n")
        return EXIT_OK
    for entry in entries:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created_at))
        write(
            sys.stdout,
            f"{stamp}  {entry.status:<15} {entry.tool or '?'}  {entry.task_id}  ({entry.server})\n",
        )
        where: list[str] | None = None
        if entry.server.startswith("stdio:"):
            where = ["--stdio", entry.server.removeprefix("stdio:")]
        elif entry.server.startswith(("http://", "https://")):
            where = [entry.server]
        if where is not None:
            hint = shlex.join([PROG, "call", *where, entry.tool or "TOOL", f"--resume={entry.task_id}"])
            write(sys.stdout, f"  {hint}\n")
    return EXIT_OK


def register(commands: Subcommands) -> None:
    """Add the `tasks` subcommand with `get`, `cancel` and `pending` (each sets `handler(args) -> int`)."""
    tasks = commands.add_parser(
        "tasks",
        help="inspect or cancel a task by id",
        description="Inspect or cancel a task by id, or list the ledger's unfinished tasks.",
    )
    actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="{get,cancel,pending}")
    for name, text in (("get", "print the task as JSON"), ("cancel", "cancel the task")):
        action = actions.add_parser(
            name,
            help=text,
            description=f"{text[0].upper()}{text[1:]}.",
            usage=_TASK_USAGE,
            epilog=EXIT_HELP,
        )
        add_target_options(action)
        action.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        action.set_defaults(handler=run_tasks)
    pending = actions.add_parser(
        "pending",
        help="list the ledger's unfinished tasks",
        description="List the ledger's unfinished tasks.",
    )
    pending.add_argument("--ledger", metavar="PATH", help=f"the ledger file (also ${LEDGER_ENV})")
    pending.add_argument("--json-output", action="store_true", help="print JSON")
    pending.set_defaults(handler=run_pending)
