"""Draw docs/img again: `memprof plot` of one recorded fixture per command, as SVG.

Usage (from the repository root, in the virtual environment README.md installs, with the
test extra's matplotlib):

    python tools/pictures.py            # rewrite docs/img/*.svg, list what changed
    python tools/pictures.py --check    # change nothing; exit 1 if a picture differs

The pictures are drawn exactly as `memprof plot FIXTURE -o docs/img/COMMAND.svg` draws them
(and RUNS as `memprof plot FIXTURE FIXTURE -o docs/img/NAME.svg`).
An SVG is the same byte for byte on every run with one matplotlib version (its ids are
salted, its date left out); another version may draw the same picture in other bytes, so
--check is for the machine that made them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PICTURES = ROOT / "docs" / "img"
# The fixture each command's picture is drawn from (the fullest of its recordings).
CHOSEN = {
    "info": "h200_info",
    "check": "h200_check",
    "pinned": "h200_pinned_p20",
    "zerocopy": "h200_zerocopy_sweep",
    "uva": "h200_uva",
    "managed": "h200_managed",
    "writecombined": "h200_writecombined",
    "register": "h200_register",
    "pinlimit": "h200_pinlimit",
    "alloc": "h200_alloc",
    "streams": "h200_streams",
    "device": "h200_device",
    "compare": "h200_compare",
    "sweep": "h200_sweep",
    "smallcopies": "h200_smallcopies",
    "peer": "h200x2_peer",
    "hostlink": "h200x2_hostlink",
    "portable": "h200x2_portable",
    "check-pairs": "h200x2_check_pairs",
    "trace": "h200_trace_torch",
}
# Pictures of several runs (`memprof plot A.json B.json -o NAME.svg`), the reference first.
RUNS = {"sweep-runs": ("legacy_v2_sweep", "h200_sweep")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw docs/img from tests/fixtures.")
    parser.add_argument("--check", action="store_true", help="only say what would change")
    options = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from memprof.api import plot_file
    from memprof.experiments import COMMANDS

    missing = {command.name for command in COMMANDS} - set(CHOSEN)
    if missing:
        raise SystemExit(f"pictures: error: no fixture chosen for {', '.join(sorted(missing))}")
    changed = []
    with tempfile.TemporaryDirectory() as folder:
        drawings = {name: [stem] for name, stem in CHOSEN.items()} | RUNS
        for name, stems in drawings.items():
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
