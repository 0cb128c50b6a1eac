"""The layering contract of `pyproject.toml` (`[tool.importlinter]`) holds: `lint-imports` passes.

The contracts: each layer imports only the layers below it (cli > server, client, dashboard,
telemetry > runtime, testing > authoring, stores > errors > wire), nothing below the server, the
client and the CLI imports the `mcp` SDK, and `import mcptasks` itself loads no SDK.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_the_import_contracts_are_kept() -> None:
    completed = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "0 broken" in completed.stdout, completed.stdout
