"""Issue 18's scale target: `memprof report` of a result with 100,000 measurements in under 3 s.

    python3 benchmarks/report_scale.py [MEASUREMENTS]

The result is a recorded trace's copies at 100,000 distinct sizes, passed through memprof
trace's own collection (tests/large_result.py). Each figure is the best of 3 runs of the
whole command (`python -m memprof report FILE > /dev/null`, start-up included), printed beside
what reading the same file with json.load alone takes in a fresh interpreter, the floor any
loader has. No GPU needed. Exit status 0 when the target is met.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.large_result import write_large_trace  # noqa: E402

TARGET_S = 3.0


def best_s(command: list[str], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as folder:
        path = write_large_trace(Path(folder) / "large.json", count)
        size_mb = path.stat().st_size / 1e6
        report_s = best_s([sys.executable, "-m", "memprof", "report", str(path)])
        json_s = best_s([sys.executable, "-c", f"import json; json.load(open({str(path)!r}))"])
    print(f"memprof report of {count:,} measurements ({size_mb:.0f} MB): {report_s:.2f} s")
    print(f"json.load of the same file in a fresh interpreter:     {json_s:.2f} s")
    print(f"ratio: {report_s / json_s:.1f}x json.load; target: under {TARGET_S:.0f} s")
    return 0 if report_s < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
