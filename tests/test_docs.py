"""The docs stay true: every block of output in README.md and docs/*.md that names the fixture
it was rendered from (a `<!-- memprof report tests/fixtures/X.json ... -->` line before it,
tools/docblocks.py) is what `memprof report` prints of it today, and every memprof module or
function the docs name in code exists.

After a change to what memprof prints, `python tools/docblocks.py` renders them all again."""

from __future__ import annotations

import importlib
import re

import pytest

from tools import docblocks

BLOCKS = [block for path in docblocks.documents() for block in docblocks.blocks(path)]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.where)
def test_every_marked_block_is_what_memprof_prints_of_its_fixture(block):
    lines = block.path.read_text(encoding="utf-8").splitlines()
    shown = block.shown(lines)
    assert shown == docblocks.expected(block, shown), (
        f"{block.where} is stale: run python tools/docblocks.py"
    )


def block_starts(lines: list[str]) -> list[tuple[int, int]]:
    """Where each fenced or indented block opens, and the line its content starts at."""
    starts, fenced = [], False
    for index, line in enumerate(lines):
        if line.startswith("```"):
            if not fenced:
                starts.append((index, index + 1))
            fenced = not fenced
        elif (
            not fenced
            and line.startswith("    ")
            and line.strip()
            and (index == 0 or not lines[index - 1].strip())
        ):
            starts.append((index, index))
    return starts


def test_every_block_said_to_be_rendered_from_a_fixture_is_marked():
    """A block right after words naming `memprof report tests/fixtures/...` carries the marker
    that lets the test above check it."""
    unmarked = []
    for path in docblocks.documents():
        lines = path.read_text(encoding="utf-8").splitlines()
        marked = {block.start for block in docblocks.blocks(path)}
        for opens, start in block_starts(lines):
            before = " ".join(lines[max(0, opens - 4) : opens])
            if "memprof report tests/fixtures/" in before and start not in marked:
                unmarked.append(f"{path.name}:{opens + 1}")
    assert unmarked == []


def test_the_marker_reads_its_fixture_width_and_bounds(tmp_path, monkeypatch):
    document = tmp_path / "page.md"
    document.write_text(
        "Intro.\n\n"
        '<!-- memprof report tests/fixtures/h200_check.json COLUMNS=80 from "Health of" '
        'to "No other process" -->\n'
        "```text\n$ memprof check\nold line\n```\n\n"
        "<!-- memprof report tests/fixtures/h200_info.json -->\n\n    indented\n    old\n\nAfter.\n"
    )
    monkeypatch.setattr(docblocks, "ROOT", docblocks.ROOT)
    fenced, indented = docblocks.blocks(document)
    assert (fenced.columns, fenced.first, fenced.last, fenced.indented) == (
        80,
        "Health of",
        "No other process",
        False,
    )
    assert (indented.columns, indented.first, indented.last, indented.indented) == (
        100,
        None,
        None,
        True,
    )
    text = docblocks.rewritten(document)
    lines = text.splitlines()
    assert lines[4] == "$ memprof check"  # the command typed is kept
    assert lines[5].startswith("Health of GPU 0")
    assert lines[lines.index("```", 4) - 1].startswith("PASS     No other process")
    assert text.endswith("\nAfter.\n")
    assert "    memprof info on NVIDIA H200" in text
    rendered = docblocks.rendering("tests/fixtures/h200_info.json", 100)
    assert sum(line.startswith("    ") or not line for line in lines) >= len(rendered)


NAMED = re.compile(r"`(memprof(?:\.[A-Za-z_]\w*)+)")


def test_every_memprof_name_in_the_docs_exists():
    missing = []
    for path in docblocks.documents():
        for name in NAMED.findall(path.read_text(encoding="utf-8")):
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                try:
                    for attribute in parts[cut:]:
                        found = getattr(found, attribute)
                except AttributeError:
                    missing.append(f"{path.name}: {name}")
                break
    assert missing == []
