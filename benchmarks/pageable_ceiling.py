"""Does the pageable ceiling explain the runs? Each pageable figure of `memprof pinned` runs
against the host staging ceiling measured in the same run (docs/ceilings.md).

    python3 benchmarks/pageable_ceiling.py pinned_1.json pinned_2.json pinned_3.json

Prints one line per run: pageable HtoD and DtoH GB/s against the host side measured beside
them (one host thread staging the buffer through a 256 KiB buffer, per direction), each as a
share of its ceiling (the lower of that and the link). Target (issue 16): every share
between 50% and 100%; exit status 0 when met.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprof.experiments import base, load  # noqa: E402
from memprof.experiments.pinned import COPY  # noqa: E402
from memprof.model.figures import figure, host_side  # noqa: E402


def shares(path: Path) -> tuple[str, bool]:
    result = load(path)
    if result.command != "pinned":
        return f"{path.name}: a result of memprof {result.command}, not pinned", False
    nbytes = base.array_bytes(result.parameters)
    cells, met = [], True
    for direction, measure in COPY.items():
        side = host_side(result, nbytes, direction)
        if side is None or not side.staged:
            return f"{path.name}: no staging memcpy recorded (a file from an older memprof)", False
        # the figure the table shows, against the ceiling the table shows
        copy = figure(result, base.find(result, measure, "pageable"), measure)
        share = copy.share
        met &= share is not None and 0.5 <= share <= 1.0
        cells.append(
            f"{direction} {copy.gb_per_s:5.1f} of {side.gb_per_s:5.1f} GB/s = "
            f"{share or 0:4.0%} {copy.ceiling.limiter if copy.ceiling else 'no ceiling'}"
        )
    line = f"{path.name}: " + " | ".join(cells)
    return line + ("" if met else "   <- outside 50-100%"), met


def main(paths: list[str]) -> int:
    results = [shares(Path(path)) for path in paths]
    for line, _ in results:
        print(line)
    met = all(ok for _, ok in results)
    print("target (every pageable figure 50-100% of its ceiling):", "met" if met else "NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
