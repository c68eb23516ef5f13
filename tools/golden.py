"""Write the golden renderings tests/test_golden.py compares: `memprof report FIXTURE` at 80 and
120 columns, for fixtures recorded on the GPU machine.

    python tools/golden.py                    # every fixture that has no golden files yet
    python tools/golden.py h200_smallcopies   # these fixtures (by name), overwriting
    python tools/golden.py --all              # every fixture, overwriting

A golden file that changes is either a bug or an intended change: say which in the commit
that records it. Run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from typer.testing import CliRunner

from memprof.cli import app

ROOT = Path(__file__).resolve().parent.parent
FIXTURES, GOLDEN = ROOT / "tests" / "fixtures", ROOT / "tests" / "golden"
WIDTHS = (80, 120)


def report(fixture: Path, width: int) -> str:
    """What `COLUMNS=width memprof report FIXTURE | cat` prints (as tests/test_golden.py)."""
    ran = CliRunner().invoke(app, ["report", str(fixture)], env={"COLUMNS": str(width)})
    if ran.exit_code != 0:
        sys.exit(f"memprof report {fixture.name} failed (exit {ran.exit_code}): {ran.output}")
    return ran.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description="Render fixtures into tests/golden/.")
    parser.add_argument("names", nargs="*", help="fixture names without .json (overwritten)")
    parser.add_argument("--all", action="store_true", help="every fixture, overwritten")
    arguments = parser.parse_args()
    fixtures = sorted(FIXTURES.glob("*.json"))
    if arguments.names:
        known = {fixture.stem: fixture for fixture in fixtures}
        missing = [name for name in arguments.names if name not in known]
        if missing:
            sys.exit(f"no fixture named {', '.join(missing)} in {FIXTURES}")
        chosen = [known[name] for name in arguments.names]
    elif arguments.all:
        chosen = fixtures
    else:
        chosen = [f for f in fixtures if not all(golden(f, w).exists() for w in WIDTHS)]
    for fixture in chosen:
        for width in WIDTHS:
            golden(fixture, width).write_text(report(fixture, width))
            print(f"wrote {golden(fixture, width).relative_to(ROOT)}")
    return 0


def golden(fixture: Path, width: int) -> Path:
    return GOLDEN / f"{fixture.stem}.{width}.txt"


if __name__ == "__main__":
    sys.exit(main())
