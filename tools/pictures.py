"""Draw docs/img again: `memprof plot FIXTURE -o docs/img/COMMAND.svg` of one recorded fixture
per command (RUNS: several fixtures in one picture). Needs the test extra's matplotlib.

    python tools/pictures.py            # rewrite docs/img/*.svg, list what changed
    python tools/pictures.py --check    # change nothing; exit 1 if a picture differs
    python tools/pictures.py uva        # only that command's picture (a new one's)

An SVG is the same byte for byte with one matplotlib version, so --check is for the machine
that drew them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PICTURES = ROOT / "docs" / "img"
# Pictures of several runs (`memprof plot A.json B.json -o NAME.svg`), the reference first.
RUNS = {"sweep-runs": ("legacy_v2_sweep", "h200_sweep")}


def chosen() -> dict[str, str]:
    """The fixture each command's picture is drawn from (the fullest of its recordings): its
    registry line's (memprof.experiments.Command.fixture)."""
    sys.path.insert(0, str(ROOT))
    from memprof.experiments import COMMANDS

    return {command.name: command.fixture for command in COMMANDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw docs/img from tests/fixtures.")
    parser.add_argument("--check", action="store_true", help="only say what would change")
    parser.add_argument("only", nargs="*", metavar="PICTURE", help="only these (default: all)")
    options = parser.parse_args(argv)
    drawings = {name: [stem] for name, stem in chosen().items()}
    if missing := sorted(name for name, (stem,) in drawings.items() if not stem):
        raise SystemExit(f"pictures: error: no fixture chosen for {', '.join(missing)}")
    drawings |= RUNS
    from memprof.api import plot_file  # after chosen(), which puts this checkout on the path

    changed = []
    with tempfile.TemporaryDirectory() as folder:
        if unknown := sorted(set(options.only) - set(drawings)):
            raise SystemExit(f"pictures: error: no picture {', '.join(unknown)} is drawn")
        for name, stems in drawings.items():
            if options.only and name not in options.only:
                continue
            drawn = Path(folder) / f"{name}.svg"
            plot_file([FIXTURES / f"{stem}.json" for stem in stems], str(drawn))
            path = PICTURES / drawn.name
            if not path.exists() or path.read_bytes() != drawn.read_bytes():
                changed.append(path.name)
                if not options.check:
                    path.write_bytes(drawn.read_bytes())
    stale = sorted(p.name for p in PICTURES.glob("*.svg") if p.stem not in drawings)
    verb = "differ" if options.check else "rewritten"
    print(f"{len(changed)} {verb}" + "".join(f"\n  {name}" for name in changed))
    if stale:
        print("without a command (remove by hand):" + "".join(f"\n  {name}" for name in stale))
    return 1 if options.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
