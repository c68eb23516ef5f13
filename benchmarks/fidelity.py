"""Does memprof measure what an independent program measures? Run on the GPU machine.

Prints memprof's pageable and pinned HtoD/DtoH bandwidth at 256 MiB beside a reference
measured in the same run by a C++ program using the CUDA runtime API (built here with
nvcc), with the ratio and the targets (pinned within 2%, pageable within 5%). The two
alternate for --rounds rounds, each allocating afresh, and the medians of the rounds are
compared, so that drift of the machine (pageable copies depend on host memcpy and page
placement) touches both alike. Then the wall time of `memprof pinned --power 20` with a
warm kernel cache (target 1.5 s or less).

    python3 benchmarks/fidelity.py [--repeat 20] [--rounds 3]
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memprof.experiments.pinned import PinnedParams
from memprof.experiments.pinned import run as run_pinned
from memprof.formatting import bandwidth_gb_per_s
from memprof.session import GpuSession

POWER = 26  # 2^26 float32 = 256 MiB
NBYTES = 4 << POWER
TOLERANCE = {"pinned": 0.02, "pageable": 0.05}
WALL_TARGET_S = 1.5


def reference_medians(repeat: int) -> dict[tuple[str, str], float]:
    source = Path(__file__).with_name("reference_bandwidth.cu")
    with tempfile.TemporaryDirectory() as build:
        binary = Path(build) / "reference_bandwidth"
        subprocess.run(["nvcc", "-O2", "-o", str(binary), str(source)], check=True)
        output = subprocess.run(
            [str(binary), str(NBYTES), str(repeat)], check=True, capture_output=True, text=True
        ).stdout
    medians = {}
    for line in output.splitlines():
        kind, direction, median_ms = line.split()
        medians[kind, direction] = float(median_ms)
    return medians


def memprof_medians(repeat: int) -> dict[tuple[str, str], float]:
    with GpuSession(0) as session:
        result = run_pinned(session, PinnedParams(power=POWER, repeat=repeat, warmup=2))
    if not result.passed:
        sys.exit("memprof's own verification failed")
    return {
        (kind, direction): result.find(direction, kind, "gpu").stats.median_ms
        for kind in ("pageable", "pinned")
        for direction in ("h2d", "d2h")
    }


def wall_time_s(arguments: list[str], runs: int = 3) -> float:
    command = [sys.executable, "-m", "memprof", *arguments]
    subprocess.run(command, check=True, capture_output=True)  # warm PyCUDA's kernel cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rounds = []
    for _ in range(args.rounds):
        rounds.append((reference_medians(args.repeat), memprof_medians(args.repeat)))
    keys = sorted(rounds[0][0])
    reference = {key: statistics.median(r[key] for r, _ in rounds) for key in keys}
    measured = {key: statistics.median(m[key] for _, m in rounds) for key in keys}
    for index, (r, m) in enumerate(rounds, start=1):
        ratios = ", ".join(
            f"{kind} {direction} {r[kind, direction] / m[kind, direction]:.3f}"
            for kind, direction in keys
        )
        print(f"round {index}: memprof/reference bandwidth {ratios}")
    all_met = True
    print(
        f"Transfer bandwidth at {NBYTES >> 20} MiB, median over {args.rounds} rounds of the "
        f"median of {args.repeat} (GB/s = 10^9 B/s)"
    )
    header = ("memory", "dir", "memprof", "reference", "ratio", "target")
    print("{:9} {:4} {:>9} {:>10} {:>7} {:>8}  verdict".format(*header))
    for (kind, direction), reference_ms in sorted(reference.items()):
        ours = bandwidth_gb_per_s(NBYTES, measured[kind, direction])
        theirs = bandwidth_gb_per_s(NBYTES, reference_ms)
        ratio = ours / theirs
        met = abs(ratio - 1) <= TOLERANCE[kind]
        all_met &= met
        print(
            f"{kind:9} {direction:4} {ours:9.2f} {theirs:10.2f} {ratio:7.4f} "
            f"{'±' + format(TOLERANCE[kind], '.0%'):>8}  {'met' if met else 'MISSED'}"
        )
    wall = wall_time_s(["pinned", "--power", "20"])
    met = wall <= WALL_TARGET_S
    all_met &= met
    print(
        f"wall time of `memprof pinned --power 20` (warm kernel cache, median of 3): "
        f"{wall:.2f} s (target <= {WALL_TARGET_S} s) {'met' if met else 'MISSED'}"
    )
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
