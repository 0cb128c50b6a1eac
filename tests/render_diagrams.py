"""Pre-render the documentation's Mermaid diagrams to SVG, so the site needs no script or CDN.

Each `docs/diagrams/NAME.mmd` is rendered to `docs/diagrams/NAME.svg` by Mermaid (installed from the
npm registry into `.mermaid/`) running in headless Chromium. The SVG records the SHA-256 of its
source; `tests/docs/test_site.py` fails when a source changed without re-rendering.

    python tests/render_diagrams.py           # re-render every diagram
    python tests/render_diagrams.py --check   # exit 1 if an SVG is missing or stale
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from browser import dump_dom

ROOT = Path(__file__).resolve().parent.parent
DIAGRAMS = ROOT / "docs" / "diagrams"
CACHE = ROOT / ".mermaid"
MERMAID_VERSION = "11.17.2"
MARK = re.compile(
    r"^<!-- rendered from (?P<source>\S+) by tests/render_diagrams\.py; source sha256 (?P<hash>[0-9a-f]{64}) -->\n"
)
CONFIG = {
    "startOnLoad": False,
    "theme": "default",
    "htmlLabels": False,  # plain SVG text: the file renders the same in an <img> and on code hosts
    "flowchart": {"htmlLabels": False},
    "securityLevel": "strict",
}


def source_hash(source: Path) -> str:
    """The SHA-256 of a diagram source, as recorded in its SVG."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def stale() -> list[str]:
    """The diagrams whose SVG is missing or was rendered from a different source."""
    problems = []
    for source in sorted(DIAGRAMS.glob("*.mmd")):
        target = source.with_suffix(".svg")
        if not target.is_file():
            problems.append(f"{target.name} is missing")
            continue
        mark = MARK.match(target.read_text())
        if mark is None or mark["hash"] != source_hash(source):
            problems.append(f"{target.name} is older than {source.name}")
    return problems


def install_mermaid() -> Path:
    """Install (once) and return the path of `mermaid.min.js`."""
    script = CACHE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    if not script.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed to install Mermaid (install Node.js with npm)")
        CACHE.mkdir(exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), f"mermaid@{MERMAID_VERSION}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return script


def render_all() -> list[Path]:
    """Render every `docs/diagrams/*.mmd` to SVG next to it; return the files written."""
    sources = sorted(DIAGRAMS.glob("*.mmd"))
    diagrams = {source.stem: source.read_text() for source in sources}
    with tempfile.TemporaryDirectory(prefix="mcptasks-mermaid-") as work:
        page = Path(work) / "render.html"
        shutil.copy(install_mermaid(), Path(work) / "mermaid.min.js")
        page.write_text(
            "<!doctype html><html><body><script src='mermaid.min.js'></script><script>\n"
            f"mermaid.initialize({json.dumps(CONFIG)});\n"
            f"const diagrams = {json.dumps(diagrams)};\n"
            "(async () => {\n"
            "  for (const [name, text] of Object.entries(diagrams)) {\n"
            "    const out = document.createElement('pre');\n"
            "    out.id = 'svg-' + name;\n"
            "    try { out.textContent = (await mermaid.render('diagram-' + name, text)).svg; }\n"
            "    catch (error) { out.textContent = 'ERROR ' + error; }\n"
            "    document.body.appendChild(out);\n"
            "  }\n"
            "})();\n"
            "</script></body></html>\n"
        )
        dom = dump_dom(page.as_uri(), budget_ms=30_000)
    written = []
    for source in sources:
        found = re.search(rf'<pre id="svg-{re.escape(source.stem)}">(.*?)</pre>', dom, re.DOTALL)
        if found is None:
            raise RuntimeError(f"Mermaid rendered nothing for {source.name}")
        svg = html.unescape(found.group(1))
        if not svg.startswith("<svg"):
            raise RuntimeError(f"Mermaid failed on {source.name}: {svg[:500]}")
        # A white canvas keeps the dark text readable on the site's dark palette.
        svg = svg.replace(' style="', ' style="background-color: white; ', 1)
        target = source.with_suffix(".svg")
        mark = f"<!-- rendered from {source.name} by tests/render_diagrams.py; source sha256 {source_hash(source)} -->\n"
        target.write_text(mark + svg + "\n")
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    """Render every diagram (or with --check, only verify); see the module doc."""
    if argv == ["--check"]:
        problems = stale()
        for problem in problems:
            print(f"{problem}: run python tests/render_diagrams.py", file=sys.stderr)
        return 1 if problems else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for target in render_all():
        print(target.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
