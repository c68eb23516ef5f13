"""Is `memprof peer` within 5% of a native program? Run on a machine with two GPUs.

Builds benchmarks/peer_reference.cu (cudaMemcpyPeerAsync, peer access on, same size), then
alternates memprof's peer experiment (this process) and the native program over --rounds;
prints each direction's GB/s (median over rounds) and the ratio.

    python3 benchmarks/peer_reference.py [--rounds 3] [--power 26]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import Result, nvcc, reference_output, rows

import memprof


def figures(result: Result, method: str) -> dict[tuple[int, int], float]:
    """(source GPU, destination GPU) -> GB/s of one method's copies, from the Result's CSV."""
    found = rows(result, group="gpu", operation=method)
    return {(row["source_gpu"], row["destination_gpu"]): row["gb_per_s"] for row in found}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--power", type=int, default=26)
    arguments = parser.parse_args()
    ours: dict[str, list[float]] = {}
    native: dict[str, list[float]] = {}
    seconds = []
    with tempfile.TemporaryDirectory() as build:
        binary = nvcc("peer_reference.cu", Path(build))
        for _ in range(arguments.rounds):
            start = time.perf_counter()
            result = memprof.run("peer", power=arguments.power)
            seconds.append(time.perf_counter() - start)
            assert result.passed, [c.detail for c in result.checks if not c.passed]
            for method in ("ce_on", "ce_bidir"):
                for (a, b), gbs in figures(result, method).items():
                    if {a, b} == {0, 1}:
                        ours.setdefault(f"{method} {a}->{b}", []).append(gbs)
            for line in reference_output(binary, arguments.power).splitlines():
                method, pair, gbs, _ = line.split()
                key = f"{'ce_bidir' if method == 'bidir' else method} {pair}"
                native.setdefault(key, []).append(float(gbs))
    print(f"{'copy':<16}{'memprof GB/s':>14}{'native GB/s':>14}{'ratio':>8}")
    for key in sorted(native):
        mine, theirs = statistics.median(ours[key]), statistics.median(native[key])
        print(f"{key:<16}{mine:>14.1f}{theirs:>14.1f}{mine / theirs:>8.3f}")
    print(f"memprof peer took {statistics.median(seconds):.1f} s (median of {len(seconds)})")


if __name__ == "__main__":
    main()
