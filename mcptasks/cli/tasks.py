"""`mcptasks tasks`: inspect or cancel a task by id, or list the ledger's unfinished tasks.

    mcptasks tasks get (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks cancel (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks answer (URL | --stdio "CMD ...") [--answer KEY=JSON ...] [--] TASK_ID
    mcptasks tasks pending [--ledger PATH]

Task ids are opaque and may start with `-`: put `--` before a TASK_ID. `get` and `cancel` exit 0
on success, with the same statuses as `mcptasks call` otherwise; `pending` lists the tasks of
the `--ledger PATH` (or `$MCPTASKS_LEDGER`) not known to be finished, with the command that
resumes each. `answer` waits until the task asks (or ends), checks the given answers against
the questions' schemas, then sends them in one `tasks/update` (see `mcptasks.cli.answers`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcptasks.cli.answers import Answers, parse_answers
from mcptasks.cli.arguments import Subcommands, reparse
from mcptasks.cli.errors import EXIT_HELP, EXIT_OK, PROG, CliError
from mcptasks.cli.failures import run_reporting
from mcptasks.cli.ledger import LEDGER_ENV, open_ledger
from mcptasks.cli.output import to_json, write
from mcptasks.cli.render import task_json
from mcptasks.cli.schema import field_names, near
from mcptasks.cli.target import Target, add_target_options, split_target

if TYPE_CHECKING:
    from mcptasks.client import DetailedTask, TaskHandle

__all__ = ["register", "run_answer", "run_pending", "run_tasks"]

_TASK_USAGE = "%(prog)s (URL | --stdio CMD) [options] [--] TASK_ID"
_ANSWER_USAGE = "%(prog)s (URL | --stdio CMD) (--answer KEY=JSON ... | --answers FILE | --decline | --cancel) [--] TASK_ID"
_ANSWER_DESCRIPTION = "Answer a task's questions (waiting until it asks), checked against their schemas."


def run_tasks(args: argparse.Namespace) -> int:
    """The `tasks get` / `tasks cancel` handler (`CliError` for a bad command line)."""
    name = args.tasks_command
    description = "Print the task as JSON." if name == "get" else "Cancel the task."
    args = reparse(args, add_target_options, f"{PROG} tasks {name}", _TASK_USAGE, description)

    async def act(handle: TaskHandle) -> None:
        if args.tasks_command == "cancel":
            await handle.cancel()
            task = await handle.status()
            write(sys.stdout, f"cancellation requested; task {task_id} is {task.status}\n")
        else:
            write(sys.stdout, to_json(task_json(await handle.status())) + "\n")

    target, task_id = _task_target(args)
    return _on_the_task(args, target, task_id, act)


def _task_target(args: argparse.Namespace) -> tuple[Target, str]:
    """The server and the one TASK_ID after it (`CliError` otherwise)."""
    target, words = split_target(args.words, args.stdio, args.header)
    if len(words) != 1:
        raise CliError("expected exactly one TASK_ID after the server")
    return target, words[0]


def _on_the_task(
    args: argparse.Namespace, target: Target, task_id: str, act: Callable[[TaskHandle], Awaitable[None]]
) -> int:
    """Run `act` on the task, resumed through the ledger; exit 0, or the failure reported in
    one line."""
    ledger = open_ledger(args.ledger)

    async def work() -> int:
        from mcptasks.client import TaskHandle, TasksClient

        extension = TasksClient(ledger=ledger, server_id=target.identity)
        async with target.client(extension) as client:
            await act(TaskHandle.resume(client, task_id))
        return EXIT_OK

    return run_reporting(work, sys.stderr, target.url)


def _add_answer_command_options(parser: argparse.ArgumentParser) -> None:
    from mcptasks.cli.call import add_answer_options

    add_target_options(parser)
    add_answer_options(parser)


def run_answer(args: argparse.Namespace) -> int:
    """The `tasks answer` handler: answer a task's questions from the command line."""
    args = reparse(
        args, _add_answer_command_options, f"{PROG} tasks answer", _ANSWER_USAGE, _ANSWER_DESCRIPTION
    )
    target, task_id = _task_target(args)
    answers = parse_answers(args.answer, args.answers, args.decline, args.cancel)
    if not answers:
        raise CliError(
            "nothing to answer with: give --answer KEY=JSON, --answers FILE, --decline or --cancel"
        )

    async def act(handle: TaskHandle) -> None:
        task = await _asking(handle)
        responses = _responses(task, answers)
        await handle.respond(responses)
        task = await handle.status()
        write(sys.stdout, f"answered {', '.join(responses)}; task {task_id} is {task.status}\n")

    return _on_the_task(args, target, task_id, act)


async def _asking(handle: TaskHandle) -> DetailedTask:
    """The task's state once it has questions (`CliError` if it ends without asking)."""
    task = await handle.status()
    if not task.input_requests and not task.terminal:
        async with handle.watch(answer_inputs=False) as updates:
            async for task in updates:
                if task.input_requests or task.terminal:
                    break
    if not task.input_requests:
        raise CliError(f"task {task.task_id} is {task.status}: it has no question to answer")
    return task


def _questions(task: DetailedTask) -> dict[str, tuple[str, dict[str, Any] | None]]:
    """The task's elicitation requests: key -> (message, requestedSchema)."""
    questions: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for key, raw in (task.input_requests or {}).items():
        params = raw.get("params") if isinstance(raw, dict) else None
        if isinstance(raw, dict) and raw.get("method") == "elicitation/create" and isinstance(params, dict):
            schema = params.get("requestedSchema")
            questions[key] = (str(params.get("message", "")), schema if isinstance(schema, dict) else None)
    return questions


def _check_unambiguous(
    task: DetailedTask, answers: Answers, questions: dict[str, tuple[str, dict[str, Any] | None]], listed: str
) -> None:
    """`CliError` for a bare answer to several questions or a field name several questions ask."""
    if answers.bare and len(questions) > 1:
        raise CliError(f"task {task.task_id} asks {len(questions)} questions: write KEY=JSON ({listed})")
    for name in answers.by_key:
        asking = [k for k, (_, schema) in questions.items() if name in field_names(schema)]
        if name not in questions and len(asking) > 1:
            raise CliError(f"{name!r} is a field of several questions ({', '.join(asking)}): use their keys")


def _responses(task: DetailedTask, answers: Answers) -> dict[str, Any]:
    """The `inputResponses` answering the task's questions (`CliError` before anything is sent)."""
    questions = _questions(task)
    listed = "; ".join(f"{key} ({message!r})" for key, (message, _) in questions.items()) or "none"
    _check_unambiguous(task, answers, questions, listed)
    responses: dict[str, Any] = {}
    for key, (message, schema) in questions.items():
        found = answers.respond(key, message, schema)
        if found is not None:
            action, content = found
            responses[key] = {"action": action, **({"content": content} if content is not None else {})}
    unused = answers.unused()
    choices = [*questions, *(name for _, schema in questions.values() for name in field_names(schema))]
    if unused:
        raise CliError(
            f"no question of task {task.task_id} takes {', '.join(unused)}{near(unused[0], choices)}; "
            f"its questions: {listed}"
        )
    if not responses:
        raise CliError(f"no answer matches a question of task {task.task_id}; its questions: {listed}")
    left = [key for key in questions if key not in responses]
    if left:
        write(sys.stderr, f"{PROG}: still unanswered: {', '.join(left)}\n")
    return responses


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
    """Add the `tasks` subcommand with `get`, `cancel`, `answer` and `pending` (each sets `handler(args) -> int`)."""
    tasks = commands.add_parser(
        "tasks",
        help="inspect, answer or cancel a task by id",
        description="Inspect, answer or cancel a task by id, or list the ledger's unfinished tasks.",
    )
    actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="{get,cancel,answer,pending}")
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
    answer = actions.add_parser(
        "answer",
        help="answer a task's questions",
        description=_ANSWER_DESCRIPTION,
        usage=_ANSWER_USAGE,
        epilog=EXIT_HELP,
    )
    _add_answer_command_options(answer)
    answer.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    answer.set_defaults(handler=run_answer)
    pending = actions.add_parser(
        "pending",
        help="list the ledger's unfinished tasks",
        description="List the ledger's unfinished tasks.",
    )
    pending.add_argument("--ledger", metavar="PATH", help=f"the ledger file (also ${LEDGER_ENV})")
    pending.add_argument("--json-output", action="store_true", help="print JSON")
    pending.set_defaults(handler=run_pending)
