"""Re-record golden renderings: `memprof report FIXTURE` at 80 and 120 columns.

    python tools/golden.py                  # every fixture in tests/fixtures
    python tools/golden.py h200_streams     # only these (fixture names without .json)

It renders with the memprof of this checkout (not an installed one), as the tests do.

tests/test_golden.py compares each rendering with tests/golden/NAME.WIDTH.txt. Re-record only
for an intended change, and say in the commit what moved and why; then read `git diff
tests/golden` line by line before committing.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = ROOT / "tests" / "golden"
WIDTHS = (80, 120)


def report(fixture: Path, width: int) -> str:
    """What `COLUMNS=width memprof report FIXTURE | cat` prints (as tests/test_golden.py)."""
    from typer.testing import CliRunner

    from memprof.cli import app

    ran = CliRunner().invoke(app, ["report", str(fixture)], env={"COLUMNS": str(width)})
    if ran.exit_code != 0:
        raise SystemExit(f"memprof report {fixture.name} failed ({ran.exit_code}): {ran.output}")
    return ran.stdout


def main(names: list[str]) -> None:
    fixtures = [FIXTURES / f"{name}.json" for name in names] or sorted(FIXTURES.glob("*.json"))
    for fixture in fixtures:
        if not fixture.is_file():
            raise SystemExit(f"no fixture {fixture}")
        for width in WIDTHS:
            golden = GOLDEN / f"{fixture.stem}.{width}.txt"
            text = report(fixture, width)
            changed = not golden.exists() or golden.read_text() != text
            golden.write_text(text)
            print(f"{'re-recorded' if changed else 'unchanged  '} {golden.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's memprof, whatever is installed
    main(sys.argv[1:])
