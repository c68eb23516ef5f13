"""Issue 21's scale target: `memprof report` of a result with 100,000 measurements within
1.5x of what json.load of the same file alone takes (issue 18's: under 3 s).

    python3 benchmarks/report_scale.py [MEASUREMENTS]

The result is a recorded trace's copies at 100,000 distinct sizes, passed through memprof
trace's own collection (tests/large_result.py). Each figure is the best of 3 runs of the
whole command (`python -m memprof report FILE > /dev/null`, start-up included), printed beside
what reading the same file with json.load alone takes in a fresh interpreter, the floor any
loader has. Bytecode is cached (in a folder of this run's own) as an installed memprof has it,
after one untimed run. No GPU needed. Exit status 0 when both targets are met.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, python_environment

from tests.large_result import write_large_trace

TARGET_S = 3.0
TARGET_RATIO = 1.5


def best_s(command: list[str], cache: str, runs: int = 3) -> float:
    environment = python_environment(bytecode=cache)
    times = []
    for run in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=environment)
        if run:  # the first wrote the bytecode
            times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as folder:
        path = write_large_trace(Path(folder) / "large.json", count)
        size_mb = path.stat().st_size / 1e6
        cache = str(Path(folder) / "pycache")
        report_s = best_s([sys.executable, "-m", "memprof", "report", str(path)], cache)
        load = f"import json; json.load(open({str(path)!r}))"
        json_s = best_s([sys.executable, "-c", load], cache)
    ratio = report_s / json_s
    print(f"memprof report of {count:,} measurements ({size_mb:.0f} MB): {report_s:.2f} s")
    print(f"json.load of the same file in a fresh interpreter:     {json_s:.2f} s")
    print(
        f"ratio: {ratio:.2f}x json.load (target {TARGET_RATIO}x); "
        f"{report_s:.2f} s (target under {TARGET_S:.0f} s)"
    )
    return 0 if ratio <= TARGET_RATIO and report_s < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
