"""Keep the output shown in README.md and docs/*.md true: render each block again from the
recorded fixture it names. A block (fenced ```text, or indented 4 spaces) follows a marker

    <!-- memprof report tests/fixtures/h200_check.json COLUMNS=80 from "Health" to "memprof" -->

and holds `COLUMNS=N memprof report FIXTURE` (100 columns unless given), from the first line
holding the `from` words to the first after it holding the `to` words (default: all of it).
Lines it begins with that start with "$ " show the command typed and are kept as written.

    python tools/docblocks.py            # render every marked block again, list what changed
    python tools/docblocks.py --check    # change nothing; exit 1 if a block differs

tests/test_docs.py compares every marked block with its rendering (as tests/test_golden.py
does tests/golden, which tools/golden.py records).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(
    r"^<!-- memprof report (?P<fixture>tests/fixtures/(?:traces/)?[\w.-]+\.json)"
    r"(?: COLUMNS=(?P<columns>\d+))?"
    r'(?: from "(?P<first>[^"]*)")?'
    r'(?: to "(?P<last>[^"]*)")? -->$'
)
DEFAULT_COLUMNS = 100
INDENT = "    "


@dataclass(frozen=True)
class Block:
    """A marked block of output in a document: where its lines are and what renders them."""

    path: Path
    marker_line: int  # 0-based index of the comment
    start: int  # first line of the block's content
    end: int  # one past its last line
    indented: bool  # an indented block (else fenced: start and end exclude the fences)
    fixture: str
    columns: int
    first: str | None
    last: str | None

    def shown(self, lines: list[str]) -> list[str]:
        """The block's lines as a reader sees them (without the indent)."""
        content = lines[self.start : self.end]
        return [line[len(INDENT) :] if self.indented else line for line in content]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.marker_line + 1}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every marked block of a document (a marker without a block after it is an error)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for index, line in enumerate(lines):
        marked = MARKER.match(line.strip())
        if marked is None:
            if line.strip().startswith("<!-- memprof report"):
                raise SystemExit(f"docblocks: error: {path.name}:{index + 1}: unreadable marker")
            continue
        at = index + 1
        while at < len(lines) and not lines[at].strip():
            at += 1
        if at < len(lines) and lines[at].startswith("```"):
            end = next((n for n in range(at + 1, len(lines)) if lines[n].startswith("```")), None)
            if end is None:
                raise SystemExit(f"docblocks: error: {path.name}:{at + 1}: unclosed block")
            start, indented = at + 1, False
        elif at < len(lines) and lines[at].startswith(INDENT):
            end = at
            while end < len(lines) and (lines[end].startswith(INDENT) or not lines[end].strip()):
                end += 1
            while end > at and not lines[end - 1].strip():
                end -= 1
            start, indented = at, True
        else:
            raise SystemExit(
                f"docblocks: error: {path.name}:{index + 1}: no block after the marker"
            )
        columns = int(marked["columns"] or DEFAULT_COLUMNS)
        bounds = marked["first"], marked["last"]
        found.append(Block(path, index, start, end, indented, marked["fixture"], columns, *bounds))
    return found


@functools.cache
def rendering(fixture: str, columns: int) -> tuple[str, ...]:
    """What `COLUMNS=columns memprof report FIXTURE | cat` prints (made as tools/golden.py
    makes it), line by line, each line's trailing spaces dropped (as the docs keep them)."""
    from tools.golden import rendering as report

    return tuple(line.rstrip() for line in report(ROOT / fixture, columns).splitlines())


def expected(block: Block, shown: list[str]) -> list[str]:
    """What the block must hold: its "$ " lines as written, then its part of the rendering."""
    prompts = list(itertools.takewhile(lambda line: line.startswith("$ "), shown))
    rendered = list(rendering(block.fixture, block.columns))
    start = 0
    if block.first is not None:
        start = next((n for n, line in enumerate(rendered) if block.first in line), None)
        if start is None:
            raise SystemExit(f"docblocks: error: {block.where}: no line holds {block.first!r}")
    end = len(rendered)
    if block.last is not None:
        last = next((n for n in range(start, end) if block.last in rendered[n]), None)
        if last is None:
            raise SystemExit(f"docblocks: error: {block.where}: no line holds {block.last!r}")
        end = last + 1
    part = rendered[start:end]
    while part and not part[-1]:
        part.pop()
    return prompts + part


def rewritten(path: Path) -> str:
    """The document with every marked block rendered again."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in reversed(blocks(path)):
        wanted = expected(block, block.shown(lines))
        if block.indented:
            wanted = [INDENT + line if line else "" for line in wanted]
        lines[block.start : block.end] = wanted
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the docs' output blocks again.")
    parser.add_argument("--check", action="store_true", help="only say what would change")
    options = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    changed = []
    for path in documents():
        text = rewritten(path)
        if text != path.read_text(encoding="utf-8"):
            changed.append(str(path.relative_to(ROOT)))
            if not options.check:
                path.write_text(text, encoding="utf-8")
    verb = "differ" if options.check else "rewritten"
    print(f"{len(changed)} {verb}" + "".join(f"\n  {name}" for name in changed))
    return 1 if options.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
