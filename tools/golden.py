"""Re-record tests/golden/: `memprof report FIXTURE` at 80 and 120 columns, for every fixture.

Run it after an intended change to what memprof prints, read `git diff tests/golden`, and say
in the commit what changed in the output and why (tests/test_golden.py keeps the files).

    python tools/golden.py            # every fixture
    python tools/golden.py h200_info  # some of them, by name
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_golden import GOLDEN, report  # noqa: E402  (the test's own rendering)

FIXTURES = ROOT / "tests" / "fixtures"
WIDTHS = (80, 120)


def main(names: list[str]) -> int:
    fixtures = [FIXTURES / f"{name}.json" for name in names] or sorted(FIXTURES.glob("*.json"))
    for fixture in fixtures:
        if not fixture.exists():
            print(f"no fixture {fixture}", file=sys.stderr)
            return 2
        for width in WIDTHS:
            target = GOLDEN / f"{fixture.stem}.{width}.txt"
            text = report(fixture, width)
            changed = not target.exists() or target.read_text() != text
            target.write_text(text)
            print(f"{'changed  ' if changed else 'unchanged'} {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
