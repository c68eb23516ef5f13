"""Issue targets for `compare` and `sweep`, measured on the GPU machine.

    python3 benchmarks/compare_and_sweep.py

- sweep: pinned HtoD at 64 KiB within 10% of a native reference that queues the same copies
  behind a spinning kernel (benchmarks/gated_copy_reference.cu, CUDA C++ runtime API).
- compare: the whole command, default size, in under 15 s (wall clock, warm kernel cache).
Exit status 0 when both targets are met.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import memprof
from memprof.model.formatting import bandwidth_gb_per_s

POWER = 14  # 2^14 float32 = 64 KiB
NBYTES = 4 << POWER
REPEAT = 200


def reference_ms() -> float:
    source = Path(__file__).with_name("gated_copy_reference.cu")
    with tempfile.TemporaryDirectory() as build:
        binary = Path(build) / "gated_copy_reference"
        subprocess.run(["nvcc", "-O2", "-o", str(binary), str(source)], check=True)
        output = subprocess.run(
            [str(binary), str(NBYTES), str(REPEAT)], check=True, capture_output=True, text=True
        ).stdout
    return float(output.split()[-1])


def memprof_ms() -> float:
    result = memprof.run(
        "sweep", powers=(POWER,), kinds=("pinned",), directions=("h2d",), repeat=REPEAT
    )
    if not result.passed:
        sys.exit("memprof's own verification failed")
    return result.find("h2d", "pinned", "gpu", NBYTES).stats.median_ms


def main() -> int:
    theirs, ours = reference_ms(), memprof_ms()
    ratio = ours / theirs
    sweep_met = abs(ratio - 1) <= 0.10
    print(
        f"pinned HtoD at {NBYTES >> 10} KiB, median of {REPEAT} gated copies: "
        f"memprof {ours * 1e3:.3f} us "
        f"({bandwidth_gb_per_s(NBYTES, ours):.2f} GB/s), reference {theirs * 1e3:.3f} us "
        f"({bandwidth_gb_per_s(NBYTES, theirs):.2f} GB/s), ratio {ratio:.3f} (target within 10%): "
        f"{'met' if sweep_met else 'MISSED'}"
    )
    command = [sys.executable, "-m", "memprof", "compare", "--quiet"]
    subprocess.run(command, check=True)  # warm the kernel cache
    start = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - start
    compare_met = wall < 15
    verdict = "met" if compare_met else "MISSED"
    print(f"memprof compare (64 MiB), wall time {wall:.2f} s (target < 15 s): {verdict}")
    return 0 if sweep_met and compare_met else 1


if __name__ == "__main__":
    sys.exit(main())
