"""The `mcptasks` command line: `serve`, `worker`, `call`, `tasks`, `admin`, `dashboard`.

`mcptasks.cli.main.main` is the entry point of the `mcptasks` command and `python -m mcptasks`.
"""
