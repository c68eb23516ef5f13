"""Issue targets for `streams` and `device`, measured on the GPU machine.

    python3 benchmarks/overlap_and_bandwidth.py

- device, 2^25 float64: triad at 85% of the theoretical peak or more, copy within 5% of triad.
- streams, K >= 4, kernel time about one copy direction: overlapped time within 15% of the
  ideal (the longest stage's total plus one chunk of each other stage).
Exit status 0 when every target is met.
"""

from __future__ import annotations

import sys

import memprof
from memprof.experiments import device, streams
from memprof.model.figures import ideal_overlapped_ms


def main() -> int:
    met_all = True
    result = memprof.run("device", power=25, dtype="float64", repeat=30)
    peak = result.device.theoretical_memory_bandwidth_gb_per_s
    best = {}
    for label, _, figure in device._operations(result):  # device's measures read the best time
        best[label.split()[0]] = figure.gb_per_s
    print(f"{result.device.name}: theoretical {peak:,.0f} GB/s; 2^25 float64, best of 30")
    for name, value in best.items():
        print(f"  {name:13} {value:8,.0f} GB/s  {value / peak:6.1%} of peak")
    triad_met = best["triad"] >= 0.85 * peak
    copy_met = abs(best["copy"] / best["triad"] - 1) <= 0.05
    met_all &= triad_met and copy_met
    print(f"  target triad >= 85% of peak: {'met' if triad_met else 'MISSED'}")
    ratio = best["copy"] / best["triad"]
    print(f"  target copy within 5% of triad ({ratio:.1%}): {'met' if copy_met else 'MISSED'}")
    if not result.passed:
        print("  VERIFICATION FAILED")
        met_all = False

    for count in (4, 8):
        result = memprof.run("streams", power=26, streams=count, repeat=7)
        times = streams.stage_times(result, "serial")
        ideal = ideal_overlapped_ms(list(times.values()))
        labels = streams.mode_labels(count)
        overlapped = result.find("total", labels["overlapped"], "span").stats.median_ms
        serial = result.find("total", labels["serial"], "span").stats.median_ms
        met = overlapped <= 1.15 * ideal and result.passed
        met_all &= met
        stage_text = ", ".join(f"{stage} {total:.3f} ms" for stage, (total, _) in times.items())
        print(
            f"streams K={count}: stages {stage_text}; serial {serial:.3f} ms, overlapped "
            f"{overlapped:.3f} ms, ideal {ideal:.3f} ms -> {overlapped / ideal - 1:+.1%} over "
            f"ideal (target <= +15%): {'met' if met else 'MISSED'}"
        )
    return 0 if met_all else 1


if __name__ == "__main__":
    sys.exit(main())
