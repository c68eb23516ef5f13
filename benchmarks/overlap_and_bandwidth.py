"""Issue targets for `device` and `streams`, GPU machine, read from each Result's CSV rows:

- device, 2^25 float64: triad at 85% of the theoretical peak or more, copy within 5% of triad.
- streams, K = 4 and 8: overlapped time within 15% of the ideal (the longest stage's total
  plus one chunk of each other stage).

    python3 benchmarks/overlap_and_bandwidth.py       (exit status 0 when every target is met)
"""

from __future__ import annotations

import sys

from common import Misses, Result, rows

import memprof


def best_gb_per_s(result: Result) -> dict[str, float]:
    """Each STREAM kernel's best GB/s, by its name (copy, mul, add, triad, dot)."""
    kernels = rows(result, group="gpu", operation="kernel")
    return {row["name"].split("_")[1]: row["gb_per_s"] for row in kernels}


def overlap_ms(result: Result) -> tuple[float, float, float]:
    """Serial, overlapped (on the run's K streams) and ideally overlapped time of all chunks,
    median ms."""
    serial = rows(result, group="span", kind="pinned, 1 stream")[0]["median_ms"]
    overlapped = f"pinned, {result.parameters.streams} streams"
    overlapped = rows(result, group="span", kind=overlapped)[0]["median_ms"]
    ideal = rows(result, group="derived", operation="overlap")[0]["median_ms"]
    return serial, overlapped, ideal


def main() -> int:
    misses = Misses()
    result = memprof.run("device", power=25, dtype="float64", repeat=30)
    peak = result.device.theoretical_memory_bandwidth_gb_per_s
    best = best_gb_per_s(result)
    print(f"{result.device.name}: theoretical {peak:,.0f} GB/s; 2^25 float64, best of 30")
    for name, value in best.items():
        print(f"  {name:13} {value:8,.0f} GB/s  {value / peak:6.1%} of peak")
    print(f"  target triad >= 85% of peak: {misses.judge(best['triad'] >= 0.85 * peak, 'triad')}")
    ratio = best["copy"] / best["triad"]
    copy_met = misses.judge(abs(ratio - 1) <= 0.05, "copy against triad")
    print(f"  target copy within 5% of triad ({ratio:.1%}): {copy_met}")
    misses.judge(result.passed, "device's verification")
    for count in (4, 8):
        result = memprof.run("streams", power=26, streams=count, repeat=7)
        serial, overlapped, ideal = overlap_ms(result)
        met = misses.judge(overlapped <= 1.15 * ideal and result.passed, f"streams K={count}")
        print(
            f"streams K={count}: serial {serial:.3f} ms, overlapped {overlapped:.3f} ms, "
            f"ideal {ideal:.3f} ms -> {overlapped / ideal - 1:+.1%} over ideal "
            f"(target <= +15%): {met}"
        )
    return misses.status()


if __name__ == "__main__":
    sys.exit(main())
