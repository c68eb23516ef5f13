"""What several experiments share: sizes, input data, and the sumArrays kernel.

Light at import, as every experiment module is: numpy is imported by the functions that
run on the GPU side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memprof.experiments.base import FLOAT32_BYTES, HOST_MEMCPY

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


class SumArrays:
    """The seeds' kernel, res = a + b over float32, with random inputs and numpy's answer."""

    def __init__(self, session: Any, elements: int) -> None:
        from memprof.core.kernels import load_kernel

        self.session, self.elements = session, elements
        self.kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
        self.a, self.b, self.expected = input_arrays(elements)

    def launch(self, a_pointer: int, b_pointer: int, result: Any, kind: str | None) -> None:
        """Poison the device result, then run sumArrays reading a and b at these addresses."""
        from memprof.core import memory

        memory.memset(self.session, result, POISON_BYTE)
        self.kernel.launch(
            self.session,
            self.elements,
            a_pointer,
            b_pointer,
            result.device_pointer,
            self.elements,
            kind=kind,
            nbytes=3 * self.elements * FLOAT32_BYTES,
        )

    def flow(self, sources: tuple, out: Any, devices: tuple, span: tuple, kernel_kind: Any) -> None:
        """The seeds' whole flow, timed end to end as `span` (name, operation, kind): a and b
        copied in from `sources`, sumArrays, the result copied out to `out`."""
        from memprof.core import memory

        session, nbytes = self.session, self.elements * FLOAT32_BYTES
        (a, b), (d_a, d_b, d_res) = sources, devices
        memory.memset(session, d_res, POISON_BYTE)
        with session.profiler.events("span", *span, 3 * nbytes):
            memory.copy(session, d_a, a)
            memory.copy(session, d_b, b)
            pointers = (d_a.device_pointer, d_b.device_pointer, d_res.device_pointer)
            self.kernel.launch(
                session,
                self.elements,
                *pointers,
                self.elements,
                kind=kernel_kind,
                nbytes=3 * nbytes,
            )
            memory.copy(session, out, d_res)

    def verify(self, result: Any, name: str) -> Any:
        """Copy a device result back (never recorded: no measurement's part) and check it."""
        import numpy as np

        from memprof.core.verify import compare_arrays

        host = np.full(self.expected.shape, np.nan, dtype=self.expected.dtype)
        self.session.cuda.memcpy_dtoh(host, result.device_pointer)  # a direct call
        return compare_arrays(name, host, self.expected)


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


HOST_MEMCPY_NAME = "host memcpy (pageable → pageable)"
HOST_MEMCPY_TARGET_MS = 10.0  # a batch of host copies lasts about this long


def measure_host_memcpy(profiler: Any, destination: np.ndarray, source: np.ndarray) -> None:
    """The pageable copies' ceiling, in the same run and at the same size: one host thread
    copying `source` into `destination` (both pageable), back to back on the host clock.
    The driver stages a pageable copy through its pinned buffer with such a memcpy."""
    import ctypes

    nbytes = source.nbytes
    if destination.nbytes < nbytes:
        raise ValueError("the memcpy destination is smaller than its source")
    to, origin = destination.ctypes.data, source.ctypes.data
    profiler.host_throughput(
        HOST_MEMCPY_NAME,
        HOST_MEMCPY.operation,
        "pageable",
        nbytes,
        lambda: ctypes.memmove(to, origin, nbytes),
        target_ms=HOST_MEMCPY_TARGET_MS,
        batches=5,
    )


def host_memcpy_gb_per_s(result: Any, nbytes: int) -> float | None:
    """The host memcpy rate measured in this run at this size (None: not recorded)."""
    from memprof.model.formatting import bandwidth_gb_per_s

    for m in result.measurements:
        if (m.group, m.operation) == HOST_MEMCPY.key and m.bytes == nbytes:
            stats = m.throughput_stats or m.stats
            return bandwidth_gb_per_s(nbytes, stats.median_ms)
    return None


def pageable_ceiling(result: Any, nbytes: int, index: int | None = None) -> Any:
    """The ceiling of pageable copies of `nbytes` (memprof.model.ceilings.host_ceiling)."""
    from memprof.model.ceilings import host_ceiling, pcie_ceiling

    return host_ceiling(host_memcpy_gb_per_s(result, nbytes), pcie_ceiling(result, index))


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
