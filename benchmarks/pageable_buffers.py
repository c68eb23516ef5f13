"""Why do pageable copies of numpy arrays and of malloc'd C buffers differ? Run on the GPU machine.

For each size, alternating over rounds in one process: `memprof pinned --host-buffer B` for
B in numpy, malloc, hugepages (host-blocked time of the synchronous copy and CUPTI's DMA
time), then the native C++ program (benchmarks/native_copies.cu, malloc'd touched memory,
its own process). Prints GB/s of host-blocked time, median over rounds.

    python3 benchmarks/pageable_buffers.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

import memprof
from memprof.core.memory import PAGEABLE_BUFFERS

POWERS = (18, 22, 24, 26)  # 1, 16, 64, 256 MiB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    blocked: dict[tuple, list[float]] = {}
    dma: dict[tuple, list[float]] = {}
    with tempfile.TemporaryDirectory() as build:
        binary = Path(build) / "native_copies"
        source = Path(__file__).with_name("native_copies.cu")
        subprocess.run(["nvcc", "-O2", "-o", str(binary), str(source)], check=True)
        for _ in range(rounds):
            for power in POWERS:
                nbytes = 4 << power
                for buffer in PAGEABLE_BUFFERS:
                    result = memprof.run(
                        "pinned",
                        timing="cupti",
                        power=power,
                        repeat=5,
                        warmup=1,
                        host_buffer=buffer,
                    )
                    for direction in ("h2d", "d2h"):
                        key = (power, buffer, direction)
                        api = result.find(direction, "pageable", "api").stats.median_ms
                        gpu = result.find(direction, "pageable", "gpu").stats.median_ms
                        blocked.setdefault(key, []).append(nbytes / api / 1e6)
                        dma.setdefault(key, []).append(nbytes / gpu / 1e6)
                output = subprocess.run(
                    [str(binary), str(nbytes)], check=True, capture_output=True, text=True
                ).stdout
                for line in output.splitlines():
                    kind, direction, _, milliseconds = line.split()
                    if kind == "pageable":
                        key = (power, "native malloc", direction)
                        blocked.setdefault(key, []).append(nbytes / float(milliseconds) / 1e6)
    print("GB/s of host-blocked time (DMA alone in brackets), median of", rounds, "rounds")
    for power in POWERS:
        for direction in ("h2d", "d2h"):
            cells = []
            for buffer in (*PAGEABLE_BUFFERS, "native malloc"):
                key = (power, buffer, direction)
                cell = f"{buffer} {statistics.median(blocked[key]):5.1f}"
                if key in dma:
                    cell += f" ({statistics.median(dma[key]):5.1f})"
                cells.append(cell)
            print(f"{(4 << power) >> 20:>4} MiB {direction}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
