"""Install and locate the official MCP conformance suite, the MCP Inspector CLI and the Node 22 they
need (npm registry).

`python tests/conformance_tools.py` installs the suite into `.conformance/` and prints the node and
CLI paths; `python tests/conformance_tools.py inspector` does the same for the Inspector in
`.inspector/`.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".conformance"
INSPECTOR_CACHE = ROOT / ".inspector"
CONFORMANCE_VERSION = "0.2.0-alpha.12"
INSPECTOR_VERSION = "2.12.0"
NODE_VERSION = "22.23.5"
TASKS_SCENARIOS = [  # the suite's tasks scenarios (not scored in the 2026-07-28 set)
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]


def node_package() -> str:
    """The npm package that ships a Node binary for this machine."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"node-linux-{arch}"


def _npm_install(cache: Path, package: str, script: Path) -> tuple[Path, Path]:
    """Install (once) `package` and Node 22 into `cache`; return (node binary, `script`)."""
    node = cache / "node_modules" / node_package() / "bin" / "node"
    if not (node.exists() and script.exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(f"npm is needed to install {package} (install Node.js with npm)")
        cache.mkdir(exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(cache),
                package,
                f"{node_package()}@{NODE_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return node, script


def install() -> tuple[Path, Path]:
    """Install (once) and return (node binary, conformance CLI script)."""
    cli = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    return _npm_install(CACHE, f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}", cli)


def install_inspector() -> tuple[Path, Path]:
    """Install (once) and return (node binary, MCP Inspector launcher script; `--cli` selects the CLI)."""
    package = INSPECTOR_CACHE / "node_modules" / "@modelcontextprotocol" / "inspector"
    launcher = package / "clients" / "launcher" / "build" / "index.js"
    return _npm_install(INSPECTOR_CACHE, f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}", launcher)


if __name__ == "__main__":
    node_path, cli_path = install_inspector() if sys.argv[1:] == ["inspector"] else install()
    print(node_path)
    print(cli_path)
