"""Keep the code the pages show equal to the snippet files the tests run.

The how-to and concepts pages show the code of `docs/snippets/` in the Markdown itself, so they read
the same on a code host as on the site. A comment line names what the next code block shows:

    <!-- shows docs/snippets/howto_auth.py:server -->
    ```python
    ...the lines between `# --8<-- [start:server]` and `# --8<-- [end:server]`...
    ```

(without `:section`, the whole file less its section marker lines). `tests/docs/test_docs.py` runs the
snippet files and checks, through this module, that every block equals its source and that no
line of a snippet is left unshown.

    python tests/sync_docs.py           # rewrite the blocks from the snippet files; also turns
                                        # `--8<-- "docs/snippets/..."` include lines into blocks
    python tests/sync_docs.py --check   # exit 1 if a page is out of date
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SNIPPETS = DOCS / "snippets"
_MARKER = re.compile(r"^\s*# --8<-- \[(?P<kind>start|end):(?P<name>[\w-]+)\]\s*$")
_SHOWS = re.compile(r"^(?P<indent> *)<!-- shows (?P<ref>(?:docs/snippets|examples)/[^ ]+) -->$")
_INCLUDE = re.compile(r'^ *--8<-- "(?P<ref>(?:docs/snippets|examples)/[^"]+)"$')
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})")


def pages() -> list[Path]:
    """Every Markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))


def source(ref: str) -> str:
    """The code `ref` (`docs/snippets/FILE[:section]` or `examples/FILE[:section]`) stands for."""
    path, _, section = ref.partition(":")
    lines = (ROOT / path).read_text().splitlines()
    if not section:
        kept = [line for line in lines if not _MARKER.match(line)]
        return "\n".join(kept).strip("\n") + "\n"
    inside: list[str] | None = None
    for line in lines:
        marker = _MARKER.match(line)
        if marker and marker["name"] == section:
            if marker["kind"] == "start":
                inside = []
                continue
            if inside is None:
                break
            return textwrap.dedent("\n".join(inside)).strip("\n") + "\n"
        if inside is not None and not marker:
            inside.append(line)
    raise ValueError(f"{path} has no section {section!r}")


def synced(page: Path) -> str:
    """The text of `page` with every shown block rewritten from its source."""
    lines = page.read_text().splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        shows = _SHOWS.match(line)
        fence = _FENCE.match(line)
        ref: str | None = None
        if shows and index + 1 < len(lines) and _FENCE.match(lines[index + 1]):
            out.append(line)
            index += 1
            line = lines[index]
            fence = _FENCE.match(line)
            ref = shows["ref"]
        elif fence and index + 2 < len(lines) and _INCLUDE.match(lines[index + 1]):
            include = _INCLUDE.match(lines[index + 1])
            assert include is not None
            ref = include["ref"]
            out.append(f"{fence['indent']}<!-- shows {ref} -->")
        if ref is None or fence is None:
            out.append(line)
            index += 1
            continue
        indent, marker = fence["indent"], fence["fence"]
        out.append(line)
        index += 1
        while index < len(lines) and lines[index].strip() != marker:
            index += 1
        out.extend((indent + code_line).rstrip() for code_line in source(ref).splitlines())
        out.append(lines[index] if index < len(lines) else indent + marker)
        index += 1
    return "\n".join(out) + "\n"


def shown_refs() -> set[str]:
    """Every `docs/snippets/...` reference a page shows."""
    return {
        match["ref"]
        for page in pages()
        for line in page.read_text().splitlines()
        if (match := _SHOWS.match(line))
    }


def unshown_lines(path: Path, refs: set[str]) -> list[str]:
    """The code lines of snippet `path` that no shown block contains."""
    name = "docs/snippets/" + str(path.relative_to(SNIPPETS))
    if name in refs:
        return []
    sections = {ref.partition(":")[2] for ref in refs if ref.partition(":")[0] == name}
    missing, current = [], None
    for line in path.read_text().splitlines():
        marker = _MARKER.match(line)
        if marker:
            current = marker["name"] if marker["kind"] == "start" else None
        elif line.strip() and current not in sections:
            missing.append(line)
    return missing


def main(argv: list[str]) -> int:
    """Rewrite (or with --check, only verify) every page; see the module doc."""
    check = argv == ["--check"]
    if argv and not check:
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for page in pages():
        text = synced(page)
        if text != page.read_text():
            stale.append(page)
            if not check:
                page.write_text(text)
    for page in stale:
        print(f"{page.relative_to(ROOT)}{' is out of date' if check else ''}", file=sys.stderr)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
