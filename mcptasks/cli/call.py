"""`mcptasks call`: call a tool from the shell and follow its task.

    mcptasks call URL TOOL [key=value ...] [--json ARGS] [--detach] [--resume=ID] [--json-output]
                  [--answer KEY=JSON ...] [--answers FILE] [--decline | --cancel]
    mcptasks call --stdio "CMD ..." TOOL [key=value ...]

Task ids are opaque and may start with `-`: write `--resume=ID` (the hints this command prints do so).

A `key=value` argument is parsed as JSON when it is valid JSON (`n=3`, `ok=true`, `tags=["a"]`)
and taken as a string otherwise (`name=Ada`); `--json '{...}'` gives the arguments as one object
(`key=value` pairs override its keys). The `key=value` pairs follow TOOL directly.

While a task runs, a live status line (spinner, elapsed time, status, statusMessage) is drawn on
stderr when stderr is a terminal; otherwise each change is printed as a timestamped line.
Elicitation requests become prompts on the terminal, driven by the requested schema (strings,
numbers, integers, booleans, enums, multi-select enums; defaults). A single yes/no question is
one prompt; other questions first ask accept / decline / skip (skip is the MCP action `cancel`).
`--answer KEY=JSON`, `--answers FILE`, `--decline` and `--cancel` answer questions without
asking (see `mcptasks.cli.answers`); without a terminal on stdin, a question none of them answers
stops the command (exit 2, the task left waiting, with the commands that answer and resume it).
The arguments are checked against the tool's `inputSchema` (`tools/list`) first. Ctrl-C asks
whether to cancel the task, leave it running (detach, printing the command that resumes it), or
wait; without a terminal it detaches. The result goes to stdout: text content as text (structured content as JSON when
there is no text; JSON indented when stdout is a terminal), or the whole `CallToolResult` as
JSON with `--json-output`.

Exit status: 0 success (also `--detach`); 1 the tool reported an
error (`isError`); 2 usage error (also arguments that do not fit the tool, an answer that does
not fit its question, a question left unanswered without a terminal); 3 failed (the task failed,
or the server or the connection reported an error); 4 the task was cancelled; 130 interrupted
(Ctrl-C, including detaching after Ctrl-C).

`--ledger PATH` (or `$MCPTASKS_LEDGER`) records started tasks in a `TaskLedger` (see `mcptasks tasks`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from mcptasks.cli.answers import Answers, QuestionError, example_answer, parse_answers
from mcptasks.cli.arguments import Subcommands, parse_arguments, reparse
from mcptasks.cli.errors import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TOOL_ERROR,
    PROG,
    CliError,
)
from mcptasks.cli.failures import leaf, run_reporting
from mcptasks.cli.ledger import open_ledger
from mcptasks.cli.output import one_line, to_json, write
from mcptasks.cli.prompter import AnswerFirst, FormPrompter, Unasked
from mcptasks.cli.render import render_result, result_json, task_json
from mcptasks.cli.schema import check_arguments, field_names, near
from mcptasks.cli.status import StatusLine
from mcptasks.cli.target import Target, add_target_options, split_target
from mcptasks.cli.terminal import (
    Interrupted,
    MenuChoice,
    TerminalInput,
    interrupt_menu,
    interrupts,
    until_interrupted,
)

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

    from mcptasks.client import DetailedTask, TaskHandle, TaskLedger

# The SDK (and `mcptasks.client`, which needs it) is imported where it is used, so that building
# the `mcptasks` argument parser with this subcommand stays cheap.

__all__ = ["CallCommand", "register", "run_call"]


@dataclass
class CallCommand:
    """Everything `mcptasks call` needs, parsed."""

    target: Target
    tool: str
    arguments: dict[str, Any]
    detach: bool = False
    resume: str | None = None
    json_output: bool = False
    ledger: TaskLedger | None = None
    stuck_after: float | None = None
    interactive: bool = False
    live: bool = False
    pretty: bool = False
    """Indent JSON results (stdout is a terminal)."""
    answers: Answers = field(default_factory=Answers)
    """The answers given on the command line (`--answer`, `--answers`, `--decline`, `--cancel`)."""
    texts: dict[str, str] = field(default_factory=dict)
    """The `key=value` pairs as typed (for the check against the tool's `inputSchema`)."""
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    handle: TaskHandle | None = field(default=None, init=False)
    """The task being followed (set once it exists)."""
    prompter: FormPrompter | None = field(default=None, init=False)
    """The terminal prompter (interactive runs only)."""

    def resume_hint(self, task_id: str) -> str:
        """The command line that resumes following `task_id`."""
        words = [PROG, "call", *self.target.words(), self.tool, f"--resume={task_id}"]
        return shlex.join(words)

    def error(self, text: str) -> None:
        """One `mcptasks: error:` line on stderr."""
        write(self.stderr, f"{PROG}: error: {text}\n")

    async def run(self) -> int:
        """Call the tool and follow the task; the exit status.

        When following fails for another reason than the task's own end (the connection broke,
        say), the command that resumes the task is printed before the error propagates.
        """
        try:
            status = await self._run()
            unused = self.answers.unused()
            if unused:
                write(self.stderr, f"{PROG}: note: no question took --answer {', '.join(unused)}\n")
            return status
        except Exception as exc:
            from mcptasks.errors import TaskNotFound

            handle = self.handle
            cause = leaf(exc)
            ended = isinstance(cause, TaskNotFound) or getattr(cause, "cancelled", False) is True
            if handle is None or handle.task_id is None:
                raise
            if isinstance(cause, CliError):  # an answer missing or not fitting: nothing was sent
                answer, edit = "KEY=JSON", ""
                if isinstance(cause, QuestionError):
                    answer = example_answer(cause.key, cause.schema)
                    edit = " (your values in place of the examples)" if field_names(cause.schema) else ""
                words = [PROG, "tasks", "answer", *self.target.words(), "--answer", answer]
                write(
                    self.stderr, f"{PROG}: task {handle.task_id} is waiting for input; answer with{edit}:\n"
                )
                write(self.stderr, f"  {shlex.join([*words, '--', handle.task_id])}\n")
                write(self.stderr, f"{PROG}: and follow it with:\n  {self.resume_hint(handle.task_id)}\n")
                raise
            if not ended and (handle.last is None or not handle.last.terminal):
                write(self.stderr, f"\n{PROG}: task {handle.task_id} may still be running; resume with:\n")
                write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
            raise

    async def _run(self) -> int:
        from mcptasks.client import TaskHandle, TasksClient, start_tool_call

        status = StatusLine(self.stderr, live=self.live)
        ask: FormPrompter | Unasked
        if self.interactive:
            ask = self.prompter = FormPrompter(TerminalInput(sys.stdin.fileno()), status, self.stderr)
        else:
            ask = Unasked()
        prompter = AnswerFirst(self.answers, ask, status)
        extension = TasksClient(
            ledger=self.ledger, server_id=self.target.identity, stuck_after=self.stuck_after
        )
        async with self.target.client(extension, elicitation_callback=prompter) as client:
            if self.resume is not None:
                handle = TaskHandle.resume(client, self.resume, tool=self.tool)
                self.handle = handle
            else:
                arguments = await self.checked_arguments(client)
                handle = await start_tool_call(client, self.tool, arguments)
                if handle.task_id is None:  # answered at once, without a task
                    return self.report_result(await handle.result())
                self.handle = handle
                if self.detach:
                    return self.report_detached(handle)
            with interrupts() as signals:
                if self.resume is None:
                    status.note(f"{PROG}: task {handle.task_id} started (Ctrl-C to cancel or detach)")
                return await self.follow(handle, status, signals)

    async def checked_arguments(self, client: Client) -> dict[str, Any]:
        """The arguments checked against the tool's `inputSchema` from `tools/list` (`CliError`
        for an unknown tool or argument, a missing required one, a value of the wrong type)."""
        tools = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        for tool in tools:
            if tool.name == self.tool:
                return check_arguments(self.tool, tool.input_schema, self.arguments, self.texts)
        names = sorted(tool.name for tool in tools)
        hint = near(self.tool, names)
        raise CliError(f"the server has no tool {self.tool!r}{hint}; its tools: {', '.join(names)}")

    def report_detached(self, handle: TaskHandle) -> int:
        """Print the new task's id (stdout) and how to resume it (stderr)."""
        assert handle.last is not None and handle.task_id is not None
        if self.json_output:
            write(self.stdout, to_json(task_json(handle.last)) + "\n")
        else:
            write(self.stdout, handle.task_id + "\n")
        write(self.stderr, f"{PROG}: task {handle.task_id} is {handle.last.status}; resume with:\n")
        write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
        return EXIT_OK

    async def follow(self, handle: TaskHandle, status: StatusLine, signals: AsyncIterator[Any]) -> int:
        """Watch the task to its end, handling Ctrl-C."""
        assert handle.task_id is not None
        while True:

            async def watch() -> DetailedTask:
                final: DetailedTask | None = None
                async with anyio.create_task_group() as spinner:
                    spinner.start_soon(status.spin)
                    async with handle.watch() as updates:
                        async for task in updates:
                            status.show(task)
                            final = task
                    spinner.cancel_scope.cancel()
                assert final is not None
                return final

            try:
                outcome = await until_interrupted(watch, signals)
            finally:
                status.clear()
            if not isinstance(outcome, Interrupted):
                return self.report_task(outcome)
            question = self.prompter.asking if self.prompter is not None else None
            if self.prompter is not None:
                self.prompter.asking = None
            choice = await self.ask_after_interrupt(handle, signals, question)
            if choice == "detach":
                write(self.stderr, f"{PROG}: detached; task {handle.task_id} keeps running. Resume with:\n")
                write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
                if self.target.url is None:
                    write(
                        self.stderr,
                        f"{PROG}: note: the stdio server stops with this command; resuming works only "
                        "if it keeps its tasks in a durable store\n",
                    )
                return EXIT_INTERRUPTED
            if choice == "cancel":
                return await self.cancel(handle)

    async def ask_after_interrupt(
        self, handle: TaskHandle, signals: AsyncIterator[Any], question: str | None = None
    ) -> MenuChoice:
        """Ask what Ctrl-C should do (detach when there is no terminal or on a second Ctrl-C).

        `question` is the elicitation that was on screen: the menu repeats it, and waiting
        asks it again."""
        if not self.interactive:
            return "detach"
        assert handle.task_id is not None
        return await interrupt_menu(
            self.stderr, TerminalInput(sys.stdin.fileno()), handle.task_id, signals, question
        )

    async def cancel(self, handle: TaskHandle) -> int:
        """Cancel the task and report how it ended (it may have finished first)."""
        await handle.cancel()
        task = await handle.status()
        with anyio.move_on_after(10):
            while not task.terminal:
                await anyio.sleep(handle.policy.interval(task))
                task = await handle.status()
        if task.terminal:
            return self.report_task(task)
        write(
            self.stderr,
            f"{PROG}: cancellation of task {handle.task_id} requested; it is still {task.status}\n",
        )
        return EXIT_CANCELLED

    def report_task(self, task: DetailedTask) -> int:
        """Print a terminal task's outcome; the exit status."""
        if task.status == "completed":
            return self.report_result(task.call_tool_result())
        from mcptasks.client import TaskFailed

        if self.json_output:
            write(self.stdout, to_json(task_json(task)) + "\n")
        if task.status == "failed":
            failure = TaskFailed(task)
            detail = (
                f": {json.dumps(failure.data)}" if failure.data is not None and not self.json_output else ""
            )
            self.error(
                f"task {task.task_id} failed: {one_line(failure.message)} (code {failure.code}){detail}"
            )
            return EXIT_FAILED
        reason = f": {one_line(task.status_message)}" if task.status_message else ""
        write(self.stderr, f"{PROG}: task {task.task_id} was cancelled{reason}\n")
        return EXIT_CANCELLED

    def report_result(self, result: CallToolResult) -> int:
        """Print a tool result; 0, or 1 for `isError`."""
        if self.json_output:
            write(self.stdout, to_json(result_json(result)) + "\n")
        else:
            text = render_result(result, pretty=self.pretty)
            if result.is_error:
                write(self.stderr, f"{PROG}: the tool reported an error:\n{text}\n")
            elif text:
                write(self.stdout, text + ("" if text.endswith("\n") else "\n"))
        return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def run_call(args: argparse.Namespace) -> int:
    """The `call` handler (`CliError` for a bad command line)."""
    args = reparse(args, _add_call_options, f"{PROG} call", _CALL_USAGE, _CALL_DESCRIPTION)
    target, words = split_target(args.words, args.stdio, args.header)
    if not words:
        raise CliError("missing the TOOL to call")
    tool, *pairs = words
    arguments = parse_arguments(pairs, args.json)
    if args.resume is not None and (arguments or args.detach):
        raise CliError("--resume follows an existing task: it takes no arguments and no --detach")
    if args.stuck_after is not None and not args.stuck_after > 0:
        raise CliError("--stuck-after must be a positive number of seconds")
    answers = parse_answers(args.answer, args.answers, args.decline, args.cancel)
    texts = {key: value for key, _, value in (pair.partition("=") for pair in pairs)}
    command = CallCommand(
        target=target,
        tool=tool,
        arguments=arguments,
        detach=args.detach,
        resume=args.resume,
        json_output=args.json_output,
        ledger=open_ledger(args.ledger),
        stuck_after=args.stuck_after,
        interactive=_isatty(sys.stdin),
        live=_isatty(sys.stderr),
        pretty=_isatty(sys.stdout),
        answers=answers,
        texts=texts,
    )
    return run_reporting(command.run, sys.stderr, target.url)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_CALL_USAGE = "%(prog)s (URL | --stdio CMD) TOOL [key=value ...] [options]"
_CALL_DESCRIPTION = "Call a tool on an MCP server; follow the task it creates to its end."


def _add_call_options(parser: argparse.ArgumentParser) -> None:
    add_target_options(parser)
    parser.add_argument("--json", metavar="ARGS", help="the tool arguments as one JSON object")
    parser.add_argument("--detach", action="store_true", help="print the task id once it exists and exit")
    parser.add_argument(
        "--resume",
        metavar="TASK_ID",
        help="follow an existing task instead of calling (write --resume=ID: ids may start with '-')",
    )
    parser.add_argument("--json-output", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--stuck-after",
        type=float,
        metavar="SECONDS",
        help="give up (and cancel) when the task shows no change for this long",
    )
    add_answer_options(parser)


def add_answer_options(parser: argparse.ArgumentParser) -> None:
    """`--answer`, `--answers`, `--decline`, `--cancel` (of `call` and `tasks answer`)."""
    parser.add_argument(
        "--answer",
        action="append",
        metavar="KEY=JSON",
        help="answer the question KEY (its inputRequests key or a field name); a bare JSON value "
        "answers the first question (repeatable)",
    )
    parser.add_argument("--answers", metavar="FILE", help="a JSON object of KEY: answer ('-': stdin)")
    parser.add_argument("--decline", action="store_true", help="decline every question no --answer matches")
    parser.add_argument(
        "--cancel", action="store_true", help="skip (MCP action cancel) every question no --answer matches"
    )


def register(commands: Subcommands) -> None:
    """Add the `call` subcommand (it sets `handler(args) -> int`)."""
    call = commands.add_parser(
        "call",
        help="call a tool and follow its task",
        description=_CALL_DESCRIPTION,
        epilog=EXIT_HELP,
        usage=_CALL_USAGE,
    )
    _add_call_options(call)
    call.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    call.set_defaults(handler=run_call)
