"""10,000 small copies (4 KiB, pageable, synchronous): the overhead target of `memprof trace`.

Half host to device, half device to host, between a numpy array and device memory, as a
program moving scalars or tiny tensors one at a time does. It prints one line with what it
did and its own wall times, which benchmarks/trace_check.py compares bare and traced:

    memprof-example: {"copies": [...], "wall_s": ..., "loop_s": ...}

Usage: python examples/small_copies.py [COPIES] (default 10000).
"""

from __future__ import annotations

import time

START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pycuda.driver as cuda  # noqa: E402

COPY_BYTES = 4 << 10


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    to_device, to_host = (total + 1) // 2, total // 2
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        host = np.ones(COPY_BYTES, np.uint8)
        device = cuda.mem_alloc(COPY_BYTES)
        loop_start = time.perf_counter()
        for index in range(total):
            if index % 2 == 0:
                cuda.memcpy_htod(device, host)
            else:
                cuda.memcpy_dtoh(host, device)
        loop_s = time.perf_counter() - loop_start
        report = {
            "program": "small_copies",
            "copies": [
                {
                    "direction": "HtoD",
                    "source": "pageable",
                    "destination": "device",
                    "bytes": COPY_BYTES,
                    "count": to_device,
                    "event_ms": None,
                },
                {
                    "direction": "DtoH",
                    "source": "device",
                    "destination": "pageable",
                    "bytes": COPY_BYTES,
                    "count": to_host,
                    "event_ms": None,
                },
            ],
            "memsets": [],
            "loop_s": loop_s,
            "wall_s": time.perf_counter() - START,
        }
        print("memprof-example: " + json.dumps(report), flush=True)
    finally:
        context.pop()


if __name__ == "__main__":
    main()
