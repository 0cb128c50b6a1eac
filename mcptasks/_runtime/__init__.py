"""Running task bodies against a store: the engine, the protocol handlers, input, push, limits.

Private: the public names are re-exported from `mcptasks`. Free of the `mcp` SDK.

Where things are:

- `engine`: the package of `TaskEngine`, a thin facade over parts that own their state (record
  writes, the runs hosted here, the local host, immediate results, claims, liveness) and one
  placement seam (here, the queue, an executor); `polling`: advertised poll intervals and poll
  limiting.
- `run`: `TaskRun`, one running body and the record writes it makes (status, checkpoint, input),
  through `RunHost` (`run_host`), the part of the engine a run may use; `questions`: one `ask`
  of a body and its answers.
- `driver`: turns a body's yields into channel calls and its end into an `Outcome`.
- `recovery`: what becomes of tasks whose runner is gone; `heartbeat`, `instances`: leases.
- `protocol`: `TasksProtocol`, the extension's requests as plain dicts; `request_params` reads
  and refuses their params, `routing_headers` checks `Mcp-Method` / `Mcp-Name`, `task_results`
  renders the result dicts; `routes` decides how a `tools/call` is answered; `mrtr`, `parking`, `request_state`: input rounds on `tools/call`;
  `fallback`: the generated `task_*` tools.
- `feed`, `push`: change notifications and `notifications/tasks` streams.
- `limits`, `outages`, `watchdog`, `observer`, `tasklog`, `operator`: bounds, store outages, a
  blocked loop, telemetry hooks, transition logs, operator views; `safe_text`: untrusted text
  escaped for terminals and logs.
"""
