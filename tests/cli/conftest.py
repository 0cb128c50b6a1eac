"""The `mcptasks` command line as a user runs it: serve, worker, call, tasks, admin, dashboard."""
