"""What the user sees must not move: every recorded fixture renders exactly as it did.

tests/golden/ holds `memprof report FIXTURE` at 80 and 120 columns, captured before the
contract redesign. A difference here is either a bug or an intended change, which is then
said in the commit that re-records the golden file (tools/golden.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from tests.conftest import FIXTURES

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.txt"))


def report(fixture: Path, width: int) -> str:
    """What `COLUMNS=width memprof report FIXTURE | cat` prints."""
    ran = CliRunner().invoke(app, ["report", str(fixture)], env={"COLUMNS": str(width)})
    assert ran.exit_code == 0, ran.output
    return ran.stdout


@pytest.mark.parametrize("golden", CASES, ids=lambda path: path.stem)
def test_every_fixture_renders_as_recorded(golden):
    name, width = golden.stem.rsplit(".", 1)
    assert report(FIXTURES / f"{name}.json", int(width)) == golden.read_text()


def test_every_fixture_has_its_golden_renderings():
    for fixture in FIXTURES.glob("*.json"):
        for width in (80, 120):
            assert (GOLDEN / f"{fixture.stem}.{width}.txt").exists(), fixture.name


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("*.80.txt")), ids=lambda path: path.stem)
def test_at_80_columns_no_line_is_wider_and_no_table_is_split(golden):
    """Issue 23: every fixture reads in an 80-column terminal as it is, whole tables."""
    text = golden.read_text(encoding="utf-8")
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "(continued)" not in text


def test_the_tool_records_the_fixtures_it_is_given_and_refuses_one_it_lacks(capsys):
    """`python tools/golden.py h200_uva` records a new fixture's renderings alone (test_toy
    records its toy's so)."""
    import importlib.util

    path = GOLDEN.parent.parent / "tools" / "golden.py"
    spec = importlib.util.spec_from_file_location("golden", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(SystemExit, match=r"^golden: error: no fixture h200_none in tests/fix"):
        tool.main(["--check", "h200_info", "h200_none"])
    assert capsys.readouterr().out == ""
    assert tool.main(["--check", "h200_info"]) == 0
    assert capsys.readouterr().out == "0 differ\n"
