"""What bounds a pageable copy? The driver stages it through a small pinned buffer with one
host thread; which host memcpy is that thread's ceiling?

For each size, side by side in one process (PyCUDA directly, host clock, median of --rounds):
- pageable HtoD and DtoH: back-to-back cuMemcpyHtoD/DtoH from/to a numpy array (they block);
- memcpy whole: one ctypes.memmove between two pageable buffers of the size (memprof's
  ceiling before this benchmark);
- staged C: the pageable buffer copied chunk by chunk, C bytes at a time, into (HtoD) or out
  of (DtoH) one pinned buffer of C bytes, reused: the staging work without the DMA.

A ceiling must never be beaten: every pageable figure should sit at or under its model.

    python3 benchmarks/pageable_staging.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
import pycuda.driver as cuda

MiB = 1 << 20
SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB)
CHUNKS = (64 << 10, 256 << 10, 1 * MiB, 2 * MiB, 4 * MiB)
BATCH_S = 0.05  # each timed batch lasts about this long


def rate_gb_per_s(nbytes: int, operation, rounds: int) -> float:
    """Median GB/s of `rounds` batches of back-to-back `operation()` calls."""
    operation()
    start = time.perf_counter()
    operation()
    once = max(time.perf_counter() - start, 1e-6)
    count = max(1, int(BATCH_S / once))
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            operation()
        rates.append(nbytes * count / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def staged(address: int, staging: int, chunk: int, nbytes: int, into_staging: bool):
    """One pass over the buffer, chunk by chunk, through the staging buffer."""
    steps = [(offset, min(chunk, nbytes - offset)) for offset in range(0, nbytes, chunk)]
    if into_staging:
        return lambda: [ctypes.memmove(staging, address + o, n) for o, n in steps]
    return lambda: [ctypes.memmove(address + o, staging, n) for o, n in steps]


def row(nbytes: int, stagings: dict, rounds: int) -> list[float]:
    """Pageable HtoD, DtoH, whole memcpy, then staged in/out per chunk size: GB/s."""
    host = np.ones(nbytes, np.uint8)
    other = np.ones(nbytes, np.uint8)
    device = cuda.mem_alloc(nbytes)
    address = host.ctypes.data
    try:
        cells = [
            rate_gb_per_s(nbytes, lambda: cuda.memcpy_htod(device, host), rounds),
            rate_gb_per_s(nbytes, lambda: cuda.memcpy_dtoh(host, device), rounds),
            rate_gb_per_s(
                nbytes, lambda: ctypes.memmove(other.ctypes.data, address, nbytes), rounds
            ),
        ]
        for chunk, staging in stagings.items():
            for into in (True, False):
                operation = staged(address, staging.ctypes.data, chunk, nbytes, into)
                cells.append(rate_gb_per_s(nbytes, operation, rounds))
        return cells
    finally:
        device.free()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        stagings = {chunk: cuda.pagelocked_empty(chunk, np.uint8) for chunk in CHUNKS}
        header = f"{'size':>8}{'HtoD':>8}{'DtoH':>8}{'whole':>8}" + "".join(
            f"{'in' + str(c >> 10) + 'K':>8}{'out' + str(c >> 10) + 'K':>8}" for c in CHUNKS
        )
        print("GB/s (10^9 B/s), host clock; in/out: staged memcpy into/out of a pinned chunk")
        print(header)
        for nbytes in SIZES:
            cells = row(nbytes, stagings, rounds)
            print(f"{nbytes // MiB:>5}MiB" + "".join(f"{c:8.1f}" for c in cells))
    finally:
        context.pop()
        context.detach()


if __name__ == "__main__":
    main()
