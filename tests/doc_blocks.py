"""Code as a page displays it: the fenced blocks of a Markdown page, and the files a reader builds.

The documentation keeps its code in the pages (readable on a code host as well as on the site), and
the tests run exactly that code. A block's `title` says what the reader does with it, and the site
shows the title above the block:

- `title="ci.py"`: add the block to the end of `ci.py` (a new file starts empty);
- `title="ci.py — replace run_steps"`: replace the top-level definitions named (comma-separated;
  `the imports` names the import statements at the top) by the block, where the first one stood.

`build_file` replays those edits in page order, up to the end of a given section, so the tests
assemble each tutorial step as the reader has it at that point.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_HEADING = re.compile(r"^#{1,6} +(?P<text>.+?) *#*$")
_TITLE = re.compile(r'\btitle="(?P<title>[^"]*)"')
_EDIT = re.compile(r"^(?P<file>[\w./-]+)(?: — replace (?P<names>.+))?$")
IMPORTS = "the imports"


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    """1-based line of the opening fence."""
    lang: str
    title: str | None
    section: str
    """The text of the nearest heading above the block."""
    section_number: int
    """How many headings precede the block (0 before the first heading)."""
    code: str

    @property
    def where(self) -> str:
        """`page.md:line`, for messages."""
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced code block of `page`, in order (also those indented inside admonitions)."""
    return _scan(page)[1]


def sections(page: Path) -> list[str]:
    """The headings of `page`, in order (not counting `#` lines inside code blocks)."""
    return _scan(page)[0]


def _scan(page: Path) -> tuple[list[str], list[Block]]:
    headings: list[str] = []
    found: list[Block] = []
    section, number = "", 0
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        heading = _HEADING.match(line)
        if heading:
            section, number = heading["text"], number + 1
            headings.append(section)
        fence = _FENCE.match(line)
        if fence is None:
            index += 1
            continue
        indent, marker, info = fence["indent"], fence["fence"], fence["info"].strip()
        opening = index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != marker:
            body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index])
            index += 1
        title = _TITLE.search(info)
        found.append(
            Block(
                page=page,
                line=opening + 1,
                lang=info.split()[0] if info else "",
                title=title["title"] if title else None,
                section=section,
                section_number=number,
                code="\n".join(body) + "\n",
            )
        )
        index += 1
    return headings, found


def build_file(page: Path, name: str, *, through: str | None = None) -> str:
    """The file `name` as a reader has it after following `page` to the end of the section whose
    heading starts with `through` (the whole page when None)."""
    headings = sections(page)
    last = len(headings)  # the number of headings up to and including the last section read
    if through is not None:
        matching = [i for i, heading in enumerate(headings) if heading.startswith(through)]
        if not matching:
            raise ValueError(f"{page.name} has no section starting with {through!r}")
        last = matching[0] + 1
    source = ""
    touched = False
    for block in blocks(page):
        if block.section_number > last:
            break
        edit = _EDIT.match(block.title or "")
        if edit is None or edit["file"] != name:
            continue
        touched = True
        if edit["names"] is None:
            source = (source.rstrip("\n") + "\n\n\n" if source.strip() else "") + block.code
        else:
            names = [part.strip() for part in edit["names"].split(",")]
            source = replace(source, names, block.code, where=block.where)
    if not touched:
        raise ValueError(f"{page.name} builds no file {name!r}")
    return source


def replace(source: str, names: list[str], code: str, *, where: str = "") -> str:
    """`source` with the top-level definitions `names` replaced by `code` (see the module doc)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    spans = [_span(tree, lines, name, where) for name in names]
    first = min(start for start, _ in spans)
    dropped = {line for start, end in spans for line in range(start, end)}
    out = [line for number, line in enumerate(lines) if number < first and number not in dropped]
    out.append(code if code.endswith("\n") else code + "\n")
    out.extend(line for number, line in enumerate(lines) if number >= first and number not in dropped)
    return "".join(out)


def _span(tree: ast.Module, lines: list[str], name: str, where: str) -> tuple[int, int]:
    """The 0-based [start, end) line range of the top-level definition `name` (with decorators,
    the comment lines right above it and an attribute docstring right below it)."""
    body = tree.body
    for index, node in enumerate(body):
        if name == IMPORTS:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            end = index
            while end + 1 < len(body) and isinstance(body[end + 1], (ast.Import, ast.ImportFrom)):
                end += 1
            return node.lineno - 1, _end(body[end])
        if name not in _defines(node):
            continue
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        stop = _end(node)
        following = body[index + 1] if index + 1 < len(body) else None
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            stop = _end(following)
        return start, stop
    raise ValueError(f"{where}: the block replaces {name!r}, but the file so far has no such definition")


def _end(node: ast.stmt) -> int:
    end = node.end_lineno
    assert end is not None
    return end


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def write_file(page: Path, name: str, directory: Path, *, through: str | None = None) -> Path:
    """Build `name` from `page` (see `build_file`) and write it into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(build_file(page, name, through=through))
    return path
