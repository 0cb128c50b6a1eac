"""Executors that run task bodies on a durable execution engine (optional extras).

`mcptasks.executors.temporal` (`pip install 'mcptasks[temporal]'`) and `mcptasks.executors.dbos`
(`pip install 'mcptasks[dbos]'`). They are the only modules of mcptasks that import `temporalio` or
`dbos`; import the one you use, or name it by URL (`EngineConfig.executor`, `--executor`).
"""
