"""Install and locate the official MCP conformance suite and the Node 22 it needs (npm registry).

`python tests/conformance_tools.py` installs into `.conformance/` and prints the node and CLI paths.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".conformance"
CONFORMANCE_VERSION = "0.2.0-alpha.12"
NODE_VERSION = "22.23.5"


def node_package() -> str:
    """The npm package that ships a Node binary for this machine."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"node-linux-{arch}"


def install() -> tuple[Path, Path]:
    """Install (once) and return (node binary, conformance CLI script)."""
    node = CACHE / "node_modules" / node_package() / "bin" / "node"
    cli = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and cli.exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed to install the conformance suite (install Node.js with npm)")
        CACHE.mkdir(exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(CACHE),
                f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}",
                f"{node_package()}@{NODE_VERSION}",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return node, cli


if __name__ == "__main__":
    node_path, cli_path = install()
    print(node_path)
    print(cli_path)
