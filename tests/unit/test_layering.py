"""The engine layers (wire, authoring, state, engine, protocol) import without the `mcp` SDK.

Each check runs in a fresh interpreter whose import system refuses `mcp`, `mcp.*` and `mcp_types`,
so a stray SDK import anywhere below the hosts fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HOST_MODULES = {
    "mcptasks.server",  # the adapters onto the SDK's MCPServer
    "mcptasks.client",  # the client side, an extension of the SDK's Client
    "mcptasks.cli",  # the command line: serves through mcptasks.server, calls through mcptasks.client
    "mcptasks.__main__",
}
"""Host and client adapters: they may import the SDK (and need not exist yet)."""

ENGINE_MODULES = [
    "mcptasks",
    "mcptasks.wire",
    "mcptasks.errors",
    "mcptasks._authoring.yields",
    "mcptasks._authoring.results",
    "mcptasks._authoring.context",
    "mcptasks._authoring.tool",
    "mcptasks._runtime.driver",
    "mcptasks._runtime.engine",
    "mcptasks._runtime.instances",
    "mcptasks._runtime.outages",
    "mcptasks._runtime.heartbeat",
    "mcptasks._runtime.tasklog",
    "mcptasks._runtime.protocol",
    "mcptasks._runtime.feed",
    "mcptasks._runtime.push",
    "mcptasks.stores",
    "mcptasks.stores.base",
    "mcptasks.stores.memory",
    "mcptasks.stores.sqlite",
    "mcptasks.testing",
]

BLOCKER = textwrap.dedent(
    """
    import importlib, importlib.abc, json, pkgutil, sys

    BLOCKED = ("mcp", "mcp_types")

    class BlockSdk(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"blocked SDK import: {name}")
            return None

    sys.meta_path.insert(0, BlockSdk())
    for name in list(sys.modules):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            del sys.modules[name]
    """
)


def run_isolated(body: str) -> dict[str, object]:
    """Run `body` after the blocker in a fresh interpreter; it prints one JSON line as its report."""
    completed = subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def test_the_blocker_blocks_the_sdk() -> None:
    report = run_isolated(
        """
        outcomes = {}
        for name in ("mcp", "mcp.server", "mcp_types"):
            try:
                importlib.import_module(name)
                outcomes[name] = "imported"
            except ImportError:
                outcomes[name] = "blocked"
        print(json.dumps(outcomes))
        """
    )
    assert report == {"mcp": "blocked", "mcp.server": "blocked", "mcp_types": "blocked"}


def test_engine_modules_import_without_the_sdk() -> None:
    report = run_isolated(
        f"""
        failures = {{}}
        for name in {ENGINE_MODULES!r}:
            try:
                importlib.import_module(name)
            except BaseException as exc:
                failures[name] = repr(exc)
        sdk = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types")))
        print(json.dumps({{"failures": failures, "sdk": sdk}}))
        """
    )
    assert report == {"failures": {}, "sdk": []}


def test_every_non_host_module_imports_without_the_sdk() -> None:
    report = run_isolated(
        f"""
        host = {sorted(HOST_MODULES)!r}

        def is_host(name):
            return any(name == h or name.startswith(h + ".") for h in host)

        import mcptasks

        walk_errors = []
        found, failures = [], {{}}
        for info in pkgutil.walk_packages(mcptasks.__path__, "mcptasks.", onerror=walk_errors.append):
            if is_host(info.name):
                continue
            found.append(info.name)
            try:
                importlib.import_module(info.name)
            except BaseException as exc:
                failures[info.name] = repr(exc)
        failures.update({{n: "failed while walking" for n in walk_errors if not is_host(n)}})
        sdk = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types")))
        print(json.dumps({{"found": found, "failures": failures, "sdk": sdk}}))
        """
    )
    assert report["failures"] == {}
    assert report["sdk"] == []
    found = set(report["found"])  # type: ignore[arg-type]
    assert set(ENGINE_MODULES) - {"mcptasks"} <= found
    assert not found & HOST_MODULES


def test_public_names_resolve_without_the_sdk() -> None:
    report = run_isolated(
        """
        import mcptasks

        engine_names = [
            "TaskEngine", "TasksProtocol", "task_tool", "Elicit", "Result", "MemoryTaskStore",
            "SqliteTaskStore", "TaskContext", "ProtocolError", "EXTENSION_ID",
        ]
        missing = [n for n in engine_names if getattr(mcptasks, n, None) is None]
        sdk = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types")))
        print(json.dumps({"missing": missing, "sdk": sdk}))
        """
    )
    assert report == {"missing": [], "sdk": []}
