"""A GPU-side gate, so CUDA events time GPU work and never Python (as nvbandwidth does).

A one-thread kernel spins on a generation number in mapped host memory while the timed work
is queued behind it; the host's write releases it all back to back. The spin gives up after
GATE_TIMEOUT_NS and says so: a gate never hangs the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memprof.core.kernels import load_kernel
from memprof.errors import MemprofError

GATE_TIMEOUT_NS = 2_000_000_000


class Gate:
    def __init__(self, session: Any) -> None:
        cuda = session.cuda
        self.kernel = load_kernel(session, "gate.cu", "gateWait")
        self.flag = cuda.pagelocked_empty(2, np.int64, mem_flags=cuda.host_alloc_flags.DEVICEMAP)
        self.flag[:] = 0
        self._flag_pointer = int(self.flag.base.get_device_pointer())
        session.own(self.flag.base.free)  # freed when the session closes
        self.generation = 0
        self.closed = False

    def close(self, *streams: Any) -> None:
        """Hold back what is queued on `streams` until open(): a gate kernel per stream."""
        self.generation += 1
        for stream in streams:
            self.kernel.function.prepared_async_call(
                (1, 1), (1, 1, 1), stream, self._flag_pointer, self.generation, GATE_TIMEOUT_NS
            )
        self.closed = True

    def open(self) -> None:
        """Release everything queued behind the gate at once, on every stream it holds."""
        self.flag[0] = self.generation
        self.closed = False

    def check(self) -> None:
        """After the gated work finished: fail if the gate gave up waiting for the host."""
        if self.flag[1]:
            self.flag[1] = 0
            raise MemprofError(
                "the GPU-side gate timed out before the timed work was queued: the host was "
                "too slow to enqueue it (try fewer --repeat)"
            )
