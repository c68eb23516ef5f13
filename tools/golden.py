"""Record tests/golden again: `memprof report FIXTURE` of every fixture at 80 and 120 columns,
made as tests/test_golden.py makes them (the CLI in this process, COLUMNS set, no terminal).

    python tools/golden.py            # rewrite tests/golden/*.txt, list what changed
    python tools/golden.py --check    # change nothing; exit 1 if a rendering differs
    python tools/golden.py h200_uva   # only that fixture's renderings (a new one's)

A change to what the user sees fails that test until it is recorded here on purpose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = ROOT / "tests" / "golden"
WIDTHS = (80, 120)


def rendering(fixture: Path, width: int) -> str:
    """What `COLUMNS=width memprof report FIXTURE | cat` prints."""
    from typer.testing import CliRunner

    from memprof.cli import app

    ran = CliRunner().invoke(app, ["report", str(fixture)], env={"COLUMNS": str(width)})
    if ran.exit_code != 0:
        raise SystemExit(f"golden: error: {fixture.name} at {width}: exit {ran.exit_code}")
    return ran.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record tests/golden from tests/fixtures.")
    parser.add_argument("--check", action="store_true", help="only say what would change")
    parser.add_argument("only", nargs="*", metavar="FIXTURE", help="only these (default: all)")
    options = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    fixtures = sorted(FIXTURES.glob("*.json"))
    known = {fixture.stem for fixture in fixtures}
    if unknown := sorted(set(options.only) - known):
        raise SystemExit(f"golden: error: no fixture {', '.join(unknown)} in tests/fixtures")
    changed = []
    for fixture in [f for f in fixtures if f.stem in options.only] if options.only else fixtures:
        for width in WIDTHS:
            path = GOLDEN / f"{fixture.stem}.{width}.txt"
            text = rendering(fixture, width)
            if not path.exists() or path.read_text() != text:
                changed.append(path.name)
                if not options.check:
                    path.write_text(text)
    stale = sorted(p.name for p in GOLDEN.glob("*.txt") if p.name.rsplit(".", 2)[0] not in known)
    verb = "differ" if options.check else "rewritten"
    print(f"{len(changed)} {verb}" + "".join(f"\n  {name}" for name in changed))
    if stale:
        print("without a fixture (remove by hand):" + "".join(f"\n  {name}" for name in stale))
    return 1 if options.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
