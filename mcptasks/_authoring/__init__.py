"""How a task body is written: `@task_tool`, what it may yield, its context, its result.

Private: the public names are re-exported from `mcptasks`. Imports only `wire` and `errors`.
"""
