"""What several experiments share: sizes, input data, and the sumArrays kernel.

Light at import, as every experiment module is: numpy is imported by the functions that
run on the GPU side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memprof.experiments.base import FLOAT32_BYTES

if TYPE_CHECKING:
    import numpy as np


def size_label(power: int) -> str:
    from memprof.model.formatting import format_bytes

    return f"2^{power} ({format_bytes(FLOAT32_BYTES << power)})"


def input_arrays(elements: int, seed: int = 2018) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random float32 inputs a, b and numpy's a + b: never zeros, which hide unwritten output."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.random(elements, dtype=np.float32)
    b = rng.random(elements, dtype=np.float32)
    return a, b, a + b


POISON_BYTE = 0xFF  # 0xFFFFFFFF is a float32 NaN: an element the kernel skipped never passes


def launch_sum(
    session,
    kernel,
    a_pointer: int,
    b_pointer: int,
    result,
    elements: int,
    kind: str | None,
) -> None:
    """Poison the device result, then run sumArrays reading a and b from the given addresses."""
    from memprof.core import memory

    memory.memset(session, result, POISON_BYTE)
    kernel.launch(
        session,
        elements,
        a_pointer,
        b_pointer,
        result.device_pointer,
        elements,
        kind=kind,
        nbytes=3 * elements * FLOAT32_BYTES,
    )


def verify_device_result(session, result, expected: np.ndarray, name: str):
    """Copy a device result back (not recorded: it is not part of any measurement) and check it."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    host = np.full(expected.shape, np.nan, dtype=expected.dtype)
    session.cuda.memcpy_dtoh(host, result.device_pointer)  # a direct call: never profiled
    return compare_arrays(name, host, expected)


def gpu_timing(result) -> str:
    """How this Result's GPU operations were timed, for table notes."""
    if result.timing is not None and result.timing.source == "cupti":
        return "CUPTI's record of each operation"
    if result.timing is not None:
        return "gated CUDA events around each operation"
    return "CUDA events around each operation"  # results saved before memprof recorded it


def gb_per_s_by_key(result: Any, key_of: Callable[[Any], Any]) -> dict[Any, float]:
    """GB/s of every GPU copy that `key_of(measurement)` gives a key (None: not one of them),
    from the median of its back-to-back batches (one copy's time where there were none).

    A file without one such copy is not a run of that experiment: ValueError.
    """
    from memprof.model.formatting import bandwidth_gb_per_s

    found = {}
    for m in result.measurements:
        key = key_of(m) if m.group == "gpu" else None
        if key is not None:
            stats = m.throughput_stats or m.stats
            found[key] = bandwidth_gb_per_s(m.bytes, stats.median_ms)
    if not found:
        raise ValueError("it holds no copy measurements")
    return found


def stops_at(holds: dict[int, bool]) -> int | None:
    """The smallest size from which something no longer holds at any larger size (a pool
    helping, a way of copying losing), or None where it still holds at the largest size.

    holds: size -> whether it held there. A size where it held again above an earlier
    miss moves the answer up to after that size: the answer is where it stops for good.
    """
    stop = None
    for size in sorted(holds, reverse=True):
        if holds[size]:
            break
        stop = size
    return stop
