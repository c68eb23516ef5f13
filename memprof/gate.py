"""Timing small GPU operations without the host's enqueue cost, as nvbandwidth does.

A one-thread kernel spins on a flag in mapped host memory while every timed operation is
queued behind it, each followed by an event; then the host releases the flag and the whole
batch runs back to back, so the events measure the operations alone. The spin gives up
after GATE_TIMEOUT_NS and says so, so a gate never hangs the GPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from memprof import memory
from memprof.errors import MemprofError
from memprof.kernels import load_kernel
from memprof.session import GpuSession

GATE_TIMEOUT_NS = 2_000_000_000


class Gate:
    def __init__(self, session: GpuSession) -> None:
        self.session = session
        self.kernel = load_kernel(session, "gate.cu", "gateWait")
        with session.profiler.paused():
            self.flag = memory.allocate(session, "mapped", 2, np.int32)
        self.stream = session.cuda.Stream()

    def time_each(self, action: Callable[[Any], None], repeat: int) -> list[float]:
        """Milliseconds of each of `repeat` calls of action(stream), queued behind the gate.

        The profiler is paused meanwhile: the caller records the returned times itself.
        """
        cuda = self.session.cuda
        self.flag.array[:] = 0
        self.kernel.function.prepared_async_call(
            (1, 1), (1, 1, 1), self.stream, self.flag.device_pointer, GATE_TIMEOUT_NS
        )
        events = [cuda.Event() for _ in range(repeat + 1)]
        events[0].record(self.stream)
        with self.session.profiler.paused():  # the gate's events are the only timing here
            for event in events[1:]:
                action(self.stream)
                event.record(self.stream)
        self.flag.array[0] = 1  # release everything at once
        events[-1].synchronize()
        if self.flag.array[1]:
            raise MemprofError(
                "the GPU-side gate timed out before the batch was queued: "
                "the host was too slow to enqueue; use fewer --repeat"
            )
        return [end.time_since(start) for start, end in itertools.pairwise(events)]

    def free(self) -> None:
        with self.session.profiler.paused():
            self.flag.free()
