"""A PyTorch program that knows every copy it makes: the reference `memprof trace` is checked on.

Tensor.copy_ between a CUDA tensor and a CPU tensor in pageable or pinned
(pin_memory=True) memory, at sizes from 4 KiB to 32 MiB, each copy timed by the program
itself with CUDA events; it prints one line that benchmarks/trace_check.py reads:

    memprof-example: {"copies": [{"direction": "HtoD", "source": "pageable", ...}], ...}

Non-blocking copies are queued behind torch.cuda._sleep (a spin kernel), so their events
bracket GPU work, not Python's launch cost. Blocking copies (from pageable memory) are
timed around the call, as a user would. Run it bare or under `memprof trace`.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import itertools  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402

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
GATE_CYCLES = 4_000_000  # about 2 ms of spinning: longer than queuing a batch takes


def copy(direction: str, host: torch.Tensor, device: torch.Tensor, non_blocking: bool) -> None:
    if direction == "HtoD":
        device.copy_(host, non_blocking=non_blocking)
    else:
        host.copy_(device, non_blocking=non_blocking)


def timed_copies(direction, host, device, count, pinned) -> float:
    """Milliseconds of `count` copies, each between its own pair of CUDA events."""
    if not pinned:  # blocking: the call returns when the copy is done
        total_ms = 0.0
        for _ in range(count):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            copy(direction, host, device, non_blocking=False)
            end.record()
            end.synchronize()
            total_ms += start.elapsed_time(end)
        return total_ms
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(GATE_CYCLES)  # keeps the stream busy while the copies queue
    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
    events[0].record()
    for index in range(count):
        copy(direction, host, device, non_blocking=True)
        events[index + 1].record()
    torch.cuda.synchronize()
    return sum(a.elapsed_time(b) for a, b in itertools.pairwise(events))


def main() -> None:
    torch.cuda.init()
    copies = []
    for direction, kind, nbytes, count in PLAN:
        host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=kind == "pinned")
        device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        event_ms = timed_copies(direction, host, device, count, kind == "pinned")
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
    torch.cuda.synchronize()
    report = {
        "program": "torch_copies",
        "copies": copies,
        "memsets": [],
        "wall_s": time.perf_counter() - START,
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
