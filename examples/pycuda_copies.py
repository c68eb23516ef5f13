"""A PyCUDA program that knows every copy it makes: the reference `memprof trace` is checked on.

It copies between device memory and pageable (numpy) or pinned (page-locked) host memory at
sizes from 4 KiB to 32 MiB, times every copy itself with CUDA events, and prints one line
that benchmarks/trace_check.py reads:

    memprof-example: {"copies": [{"direction": "HtoD", "source": "pageable", ...}], ...}

Asynchronous copies are queued behind a 256 MiB device-to-device copy (reported too, not
timed), so their events bracket GPU work, not Python's launch cost. Synchronous (pageable)
copies cannot wait in a queue: their events bracket the call, as a user would time it.
Run it bare (`python examples/pycuda_copies.py`) or traced (`memprof trace examples/...`).
"""

from __future__ import annotations

import time

START = time.perf_counter()

import itertools  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import pycuda.driver as cuda  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
# (direction, host memory kind, bytes per copy, copies)
PLAN = [
    ("HtoD", "pageable", 4 * KiB, 50),
    ("HtoD", "pageable", 4 * MiB, 10),
    ("HtoD", "pageable", 32 * MiB, 4),
    ("DtoH", "pageable", 4 * MiB, 10),
    ("HtoD", "pinned", 4 * KiB, 50),
    ("HtoD", "pinned", 4 * MiB, 10),
    ("HtoD", "pinned", 32 * MiB, 4),
    ("DtoH", "pinned", 4 * MiB, 10),
]
GATE_BYTES = 256 * MiB
MEMSET_BYTES, MEMSETS = 32 * MiB, 3


def timed_copies(direction, host, device, nbytes, count, stream, gate):
    """Milliseconds of `count` copies, each between its own pair of CUDA events."""
    host_view = host[:nbytes]
    if stream is None:  # synchronous: the call returns when the copy is done
        total_ms = 0.0
        for _ in range(count):
            start, end = cuda.Event(), cuda.Event()
            start.record()
            if direction == "HtoD":
                cuda.memcpy_htod(device, host_view)
            else:
                cuda.memcpy_dtoh(host_view, device)
            end.record()
            end.synchronize()
            total_ms += end.time_since(start)
        return total_ms
    cuda.memcpy_dtod_async(gate[1], gate[0], GATE_BYTES, stream)  # keeps the stream busy
    events = [cuda.Event() for _ in range(count + 1)]
    events[0].record(stream)
    for index in range(count):
        if direction == "HtoD":
            cuda.memcpy_htod_async(device, host_view, stream)
        else:
            cuda.memcpy_dtoh_async(host_view, device, stream)
        events[index + 1].record(stream)
    stream.synchronize()
    return sum(b.time_since(a) for a, b in itertools.pairwise(events))


def main() -> None:
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        largest = max(nbytes for *_, nbytes, _ in PLAN)
        device = cuda.mem_alloc(largest)
        gate = (cuda.mem_alloc(GATE_BYTES), cuda.mem_alloc(GATE_BYTES))
        hosts = {
            "pageable": np.ones(largest, np.uint8),
            "pinned": cuda.pagelocked_empty(largest, np.uint8),
        }
        hosts["pinned"][:] = 1
        stream = cuda.Stream()
        copies = []
        for direction, kind, nbytes, count in PLAN:
            event_ms = timed_copies(
                direction,
                hosts[kind],
                device,
                nbytes,
                count,
                stream if kind == "pinned" else None,
                gate,
            )
            source, destination = (kind, "device") if direction == "HtoD" else ("device", kind)
            copies.append(
                {
                    "direction": direction,
                    "source": source,
                    "destination": destination,
                    "bytes": nbytes,
                    "count": count,
                    "event_ms": event_ms,
                }
            )
        gates = sum(1 for _, kind, _, _ in PLAN if kind == "pinned")
        copies.append(
            {
                "direction": "DtoD",
                "source": "device",
                "destination": "device",
                "bytes": GATE_BYTES,
                "count": gates,
                "event_ms": None,
            }
        )
        for _ in range(MEMSETS):
            cuda.memset_d8(device, 0, MEMSET_BYTES)
        context.synchronize()
        report = {
            "program": "pycuda_copies",
            "copies": copies,
            "memsets": [{"bytes": MEMSET_BYTES, "count": MEMSETS}],
            "wall_s": time.perf_counter() - START,
        }
        print("memprof-example: " + json.dumps(report), flush=True)
    finally:
        context.pop()


if __name__ == "__main__":
    main()
