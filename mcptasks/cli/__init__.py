"""The `mcptasks` command line: `serve`, `worker`, `call`, `tasks`, `admin`, `dashboard`.

`mcptasks.cli.main.main` is the entry point of the `mcptasks` command and `python -m mcptasks`;
`main.build_parser` is its one parser. Each other subcommand module adds itself with
`register(subcommands)` and sets a `handler(args) -> int`; a bad command line anywhere is a
`CliError` (`errors`), one line on stderr and exit status 2.

- server side: `main` (serve, worker), `startup` (the start-up block), `logsetup`
- client side: `call`, `tasks`; what they share: `arguments` (intermixed options, `key=value`),
  `target` (URL or stdio command), `ledger`, `render` (results, tasks), `status` (the live line),
  `terminal` (line input, Ctrl-C and its menu), `forms` and `prompter` (elicitation on the
  terminal), `failures` (one line and an exit status for a failure)
- operators: `admin`, `dashboard`
"""
