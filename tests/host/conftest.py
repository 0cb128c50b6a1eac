"""The SDK adapters: `TaskServer` / `TasksExtension` in process and over real HTTP and stdio, the client, push, replicas."""
