"""What reading the GPU state from NVML adds to a run: `memprof.run("pinned", power=20)`
with nvidia-ml-py importable and with it hidden (every state field then reads unknown),
alternating, 5 rounds after a warm-up, wall time of each; prints the medians and the ratio.

    python3 benchmarks/nvml_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import memprof  # noqa: E402


def timed(hide_nvml: bool) -> float:
    saved = sys.modules.get("pynvml")
    if hide_nvml:
        sys.modules["pynvml"] = None  # `import pynvml` raises ImportError
    try:
        start = time.perf_counter()
        result = memprof.run("pinned", power=20)
        elapsed = time.perf_counter() - start
    finally:
        if hide_nvml:
            if saved is None:
                del sys.modules["pynvml"]
            else:
                sys.modules["pynvml"] = saved
    state = result.gpu_states[0]
    assert (state.unavailable is not None) == hide_nvml, state
    return elapsed


def main() -> int:
    timed(False), timed(True)  # warm-up: kernels compiled, CUPTI and NVML loaded once
    with_nvml, without = [], []
    for _ in range(5):
        with_nvml.append(timed(False))
        without.append(timed(True))
    a, b = statistics.median(with_nvml), statistics.median(without)
    print(f"pinned --power 20: {a:.3f} s with NVML, {b:.3f} s without: {a / b:.3f}x")
    print("each:", " ".join(f"{x:.3f}/{y:.3f}" for x, y in zip(with_nvml, without, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
