"""The documentation site as a reader sees it.

`mkdocs build --strict` builds the site with zero warnings; every page is checked for table header
rows with no text; the diagrams are pre-rendered SVGs that match their Mermaid sources; and headless
Chromium (Debian's `chromium`; `bash .ci/install-chromium` installs it) loads the built site over
HTTP, checks the rendered DOM (code blocks not cut off on the home page and the tutorial, diagrams
present as loaded SVG images, no raw Mermaid text) and screenshots the home page and the tutorial.
Set `MCPTASKS_SCREENSHOTS=DIR` to keep the screenshots.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import render_diagrams
from browser import chromium_or_reason, dump_dom, screenshot
from doc_blocks import blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CHECK_SCRIPT = Path(__file__).resolve().parents[1] / "site_check.js"
READ_AS_SHOWN = [ROOT / "README.md", DOCS / "index.md", DOCS / "tutorial.md"]
"""Pages whose code is written in the Markdown itself, run from there by tests/docs/test_docs.py."""
DIAGRAM_PAGES = {"concepts/index.html": "task-lifecycle.svg", "how-to/scaling/index.html": "replicas.svg"}
SCREENSHOTS = {"index.html": "home.png", "tutorial/index.html": "tutorial.png"}


# -- without a browser ---------------------------------------------------------------------------


def test_diagrams_are_rendered_from_their_current_sources() -> None:
    assert sorted(render_diagrams.DIAGRAMS.glob("*.mmd")), "no diagram sources"
    assert render_diagrams.stale() == [], "run: python tests/render_diagrams.py"


def test_no_page_needs_a_script_to_draw_a_diagram() -> None:
    fenced = [block.where for page in DOCS.rglob("*.md") for block in blocks(page) if block.lang == "mermaid"]
    assert fenced == [], "draw diagrams as docs/diagrams/*.mmd, rendered to SVG"


def test_pages_read_on_a_code_host_show_their_code() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    including = [str(page.relative_to(ROOT)) for page in pages if '--8<-- "' in page.read_text()]
    assert including == [], "include lines show nothing on a code host: run python tests/sync_docs.py"
    for page in READ_AS_SHOWN:
        assert any(block.lang == "python" for block in blocks(page)), page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once by `mkdocs build --strict`."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]' installs it)")
    work = tmp_path_factory.mktemp("docs")
    built = work / "site"
    completed = subprocess.run(
        [mkdocs, "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(built)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert not re.search(r"^(WARNING|ERROR)", completed.stderr, re.MULTILINE), completed.stderr
    return built


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "diagrams" / "task-lifecycle.svg").is_file()


_EMPTY_HEADER = re.compile(r"<thead>\s*<tr>(\s*<th[^>]*>\s*</th>)+\s*</tr>\s*</thead>")


@pytest.mark.slow
def test_no_table_has_an_empty_header_row(site: Path) -> None:
    pages = [
        str(page.relative_to(site)) for page in site.rglob("*.html") if _EMPTY_HEADER.search(page.read_text())
    ]
    assert pages == []


# -- in headless Chromium ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, with the DOM checker added to the pages looked at."""
    if chromium_or_reason()[0] is None:
        pytest.skip(chromium_or_reason()[1])
    script = f"<script>{CHECK_SCRIPT.read_text()}</script></body>"
    for page in [*SCREENSHOTS, *DIAGRAM_PAGES]:
        path = site / page
        path.write_text(path.read_text().replace("</body>", script, 1))
    handler = partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def rendered(url: str) -> dict[str, Any]:
    """What tests/site_check.js found on the page at `url` once it was loaded."""
    dom = dump_dom(url)
    found = re.search(r'data-site-check="([^"]*)"', dom)
    assert found is not None, f"the check script did not run on {url}: {dom[:500]}"
    report: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return report


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(SCREENSHOTS))
def test_code_is_not_cut_off(served: str, page: str) -> None:
    report = rendered(served + page)
    assert report["codeBlocks"] > 0
    assert report["overflowing"] == [], f"code lines wider than the {report['charsPerLine']} columns shown"
    assert report["rawMermaid"] == [] and report["emptyHeaders"] == 0
    assert all(image["loaded"] for image in report["images"]), report["images"]


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(DIAGRAM_PAGES))
def test_diagrams_render_as_svg_without_a_script(served: str, page: str) -> None:
    report = rendered(served + page)
    assert report["rawMermaid"] == []
    diagrams = [image for image in report["images"] if image["src"].endswith(DIAGRAM_PAGES[page])]
    assert diagrams and all(image["loaded"] for image in diagrams), report["images"]


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(SCREENSHOTS))
def test_screenshots(served: str, page: str, tmp_path: Path) -> None:
    directory = Path(os.environ.get("MCPTASKS_SCREENSHOTS") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    path = screenshot(served + page, directory / SCREENSHOTS[page], width=1280, height=2000)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 2000)
    assert len(data) > 50_000, "the screenshot is nearly blank"
