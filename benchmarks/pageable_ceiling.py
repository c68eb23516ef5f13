"""Does the pageable ceiling explain the runs? Each saved `memprof pinned` run's pageable HtoD
and DtoH GB/s (its CSV rows) as the share of the host staging ceiling measured beside them
(docs/ceilings.md). Target (issue 16): every share within 50-100%; exit status 0 when met.

    python3 benchmarks/pageable_ceiling.py pinned_1.json pinned_2.json pinned_3.json
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from common import rows

import memprof


def shares(path: Path) -> tuple[str, bool]:
    """The line printed of one saved run, and whether both its shares are within 50-100%."""
    result = memprof.load(path)
    if result.command != "pinned":
        return f"{path.name}: a result of memprof {result.command}, not pinned", False
    cells, met = [], True
    for direction in ("h2d", "d2h"):
        staging = rows(result, group="host", operation=f"staging_{direction}")
        copy = rows(result, group="gpu", operation=direction, kind="pageable")
        if len(staging) != 1 or len(copy) != 1:
            return f"{path.name}: no staging memcpy recorded (a file from an older memprof)", False
        copy, share = copy[0], copy[0]["ceiling_share"]
        share = None if share is None or math.isnan(share) else share
        met &= share is not None and 0.5 <= share <= 1.0
        cells.append(
            f"{direction} {copy['gb_per_s']:5.1f} of {staging[0]['gb_per_s']:5.1f} GB/s = "
            f"{share or 0:4.0%} {copy['limiter'] if share is not None else 'no ceiling'}"
        )
    line = f"{path.name}: " + " | ".join(cells)
    return line + ("" if met else "   <- outside 50-100%"), met


def main(paths: list[str]) -> int:
    results = [shares(Path(path)) for path in paths]
    for line, _ in results:
        print(line)
    met = all(ok for _, ok in results)
    print("target (every pageable figure 50-100% of its ceiling):", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
