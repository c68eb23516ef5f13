"""Kernels that read or write a buffer directly, wherever it lives, and check what they did."""

from __future__ import annotations

from typing import Any

import numpy as np

from memprof.core import memory
from memprof.core.kernels import Kernel, load_kernel
from memprof.core.session import GpuSession
from memprof.model.results import Check

BLOCK_SIZE = 256
BLOCKS_PER_SM = 8


def float64_sum(values: np.ndarray) -> float:
    """numpy's float64 sum of float32 values (no float64 copy of a 1 GiB array): what a
    readSum over them should find."""
    return float(values.sum(dtype=np.float64))


class DirectAccess:
    """readSum and fillValue over any address a kernel can use, with their partial sums."""

    def __init__(self, session: GpuSession) -> None:
        self.session = session
        self.reader: Kernel = load_kernel(session, "direct_access.cu", "readSum")
        self.writer: Kernel = load_kernel(session, "direct_access.cu", "fillValue")
        self.blocks = session.attribute("MULTIPROCESSOR_COUNT") * BLOCKS_PER_SM
        with session.profiler.paused():
            self.partial = memory.allocate(session, "device", self.blocks)

    def grid(self, elements: int) -> int:
        return max(1, min(self.blocks, -(-elements // (4 * BLOCK_SIZE))))

    def read(
        self,
        pointer: int,
        elements: int,
        kind: str,
        stream: Any = None,
        operation: str = "kernel_read",
    ) -> None:
        """readSum over `elements` floats at `pointer`, recorded as a kernel read."""
        arguments = (pointer, self.partial.device_pointer, elements)
        self._launch(self.reader, arguments, elements, kind, stream, operation)

    def write(
        self,
        pointer: int,
        elements: int,
        value: float,
        kind: str,
        stream: Any = None,
        operation: str = "kernel_write",
    ) -> None:
        """fillValue over `elements` floats at `pointer`, recorded as a kernel write."""
        arguments = (pointer, np.float32(value), elements)
        self._launch(self.writer, arguments, elements, kind, stream, operation)

    def _launch(self, kernel: Kernel, arguments, elements, kind, stream, operation) -> None:
        sizes = {"nbytes": 4 * elements, "block_size": BLOCK_SIZE, "blocks": self.grid(elements)}
        recorded = {"kind": kind, "stream": stream, "operation": operation}
        kernel.launch(self.session, elements, *arguments, **sizes, **recorded)

    def check_sum(self, name: str, elements: int, expected_sum: float) -> Check:
        """The last readSum's partial sums over `elements` floats against `expected_sum`
        (float64_sum of what it read, computed once for every read of the same values)."""
        self.session.synchronize()
        partial = np.empty(self.blocks, np.float32)
        self.session.cuda.memcpy_dtoh(partial, self.partial.device_pointer)
        used = self.grid(elements)
        gpu = float(partial[:used].sum(dtype=np.float64))
        error = abs(gpu - expected_sum) / max(abs(expected_sum), 1e-30)
        words = f"sum {gpu:.6g} vs numpy {expected_sum:.6g} (relative error {error:.1e})"
        return Check(name, bool(error <= 1e-4), int(elements), words)

    def free(self) -> None:
        with self.session.profiler.paused():
            self.partial.free()
