"""A stand-in for cupti-python's `cupti` module, with a driver that makes records as CUPTI does.

Only what memprof.core.activity reads is here, named as cupti-python names it. The records
are the unit inputs CUPTI would deliver: every driver call gets a correlation id (unrelated
to memprof's external ids, as in CUPTI), an API record, the GPU records of what it enqueued,
and, while an external id is pushed, an EXTERNAL_CORRELATION record linking the two.
Records of kinds that are not enabled are dropped, as CUPTI drops them; flush delivers the
rest through the registered callback, in the order a test chooses (CUPTI's buffers do not
keep records of different kinds in the order they happened).
"""

from __future__ import annotations

import enum
from types import SimpleNamespace


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMCPY2 = 22  # copies between GPUs
    MEMSET = 2
    DRIVER = 5
    RUNTIME = 6
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 33
    UNIFIED_MEMORY_COUNTER = 25


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8
    HTOH = 9
    PTOP = 10


class ActivityUnifiedMemoryCounterKind(enum.IntEnum):
    BYTES_TRANSFER_HTOD = 1
    BYTES_TRANSFER_DTOH = 2
    CPU_PAGE_FAULT_COUNT = 3
    GPU_PAGE_FAULT = 4


class ActivityUnifiedMemoryCounterScope(enum.IntEnum):
    PROCESS_SINGLE_DEVICE = 1


class CallbackDomain(enum.IntEnum):
    DRIVER_API = 1
    RUNTIME_API = 2


class ExternalCorrelationKind(enum.IntEnum):
    CUSTOM0 = 2


CALLBACK_IDS = {  # (domain, cbid) -> name, as cupti.get_callback_name answers
    (CallbackDomain.DRIVER_API, 279): "cuMemcpyHtoDAsync_v2",
    (CallbackDomain.DRIVER_API, 281): "cuMemcpyDtoHAsync_v2",
    (CallbackDomain.DRIVER_API, 307): "cuLaunchKernel",
    (CallbackDomain.DRIVER_API, 288): "cuMemsetD8Async",
    (CallbackDomain.RUNTIME_API, 51): "cudaMemcpyAsync",
}
CBID = {name: cbid for (_, cbid), name in CALLBACK_IDS.items()}


class UnifiedMemoryConfig:
    """cupti.ActivityUnifiedMemoryCounterConfig(n): n settable entries and a pointer."""

    def __init__(self, count: int) -> None:
        self.entries = [SimpleNamespace() for _ in range(count)]
        self.ptr = id(self)

    def __getitem__(self, index: int) -> SimpleNamespace:
        return self.entries[index]


class FakeCupti:
    ActivityKind = ActivityKind
    ActivityMemcpyKind = ActivityMemcpyKind
    ActivityUnifiedMemoryCounterKind = ActivityUnifiedMemoryCounterKind
    ActivityUnifiedMemoryCounterScope = ActivityUnifiedMemoryCounterScope
    CallbackDomain = CallbackDomain
    ExternalCorrelationKind = ExternalCorrelationKind

    def __init__(self, refuse: set[ActivityKind] = frozenset(), first_correlation: int = 5000):
        self.refuse = set(refuse)
        self.enabled: set[ActivityKind] = set()
        self.disabled_log: list[ActivityKind] = []
        self.stack: list[int] = []
        self.pending: list[SimpleNamespace] = []
        self.correlation = first_correlation
        self.clock_ns = 1_000_000
        self.callbacks = None
        self.configured: UnifiedMemoryConfig | None = None
        self.names_asked = 0
        self.flushes = 0

    # -- the API memprof calls ----------------------------------------------------------

    def activity_enable(self, kind: ActivityKind) -> None:
        if kind in self.refuse:
            raise RuntimeError("CUPTI_ERROR_NOT_COMPATIBLE (41)")
        self.enabled.add(kind)

    def activity_disable(self, kind: ActivityKind) -> None:
        self.enabled.discard(kind)
        self.disabled_log.append(kind)

    def activity_register_callbacks(self, requested, completed) -> None:
        self.callbacks = (requested, completed)

    def activity_push_external_correlation_id(self, kind, external_id: int) -> None:
        assert kind == ExternalCorrelationKind.CUSTOM0
        self.stack.append(external_id)

    def activity_pop_external_correlation_id(self, kind) -> None:
        assert kind == ExternalCorrelationKind.CUSTOM0
        self.stack.pop()

    def activity_flush_all(self, flag: int) -> None:
        self.flushes += 1
        records, self.pending = self.pending, []
        if records:
            self.callbacks[1](records)

    def ActivityUnifiedMemoryCounterConfig(self, count: int) -> UnifiedMemoryConfig:
        self.configured = UnifiedMemoryConfig(count)
        return self.configured

    def activity_configure_unified_memory_counter(self, pointer: int, count: int) -> None:
        assert self.configured is not None and pointer == self.configured.ptr
        assert count == len(self.configured.entries)

    def get_callback_name(self, domain: CallbackDomain, cbid: int) -> str:
        self.names_asked += 1
        return CALLBACK_IDS[domain, cbid]

    # -- what the driver and the GPU do -------------------------------------------------

    def _record(self, kind: ActivityKind, **fields) -> None:
        if kind in self.enabled:
            self.pending.append(SimpleNamespace(kind=kind, **fields))

    def call(self, name: str, duration_ns: int = 2_000, runtime: bool = False) -> int:
        """A driver (or runtime) call: its API record and, while an id is pushed, the
        external correlation. Returns its correlation id."""
        self.correlation += 7  # never equal to memprof's small external ids
        correlation, start = self.correlation, self.clock_ns
        self.clock_ns += duration_ns
        kind = ActivityKind.RUNTIME if runtime else ActivityKind.DRIVER
        self._record(
            kind, cbid=CBID[name], correlation_id=correlation, start=start, end=start + duration_ns
        )
        if self.stack:
            self._record(
                ActivityKind.EXTERNAL_CORRELATION,
                correlation_id=correlation,
                external_id=self.stack[-1],
                external_kind=ExternalCorrelationKind.CUSTOM0,
            )
        return correlation

    def memcpy(
        self,
        direction: str,
        nbytes: int,
        duration_ns: int,
        src: int = 2,
        dst: int = 3,
        flags: int = 1,
        call: str = "cuMemcpyHtoDAsync_v2",
    ) -> int:
        correlation = self.call(call)
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.MEMCPY,
            correlation_id=correlation,
            copy_kind=int(ActivityMemcpyKind[direction]),
            start=start,
            end=start + duration_ns,
            bytes=nbytes,
            src_kind=src,
            dst_kind=dst,
            flags_=flags,
        )
        return correlation

    def kernel(self, name: str, duration_ns: int) -> int:
        correlation = self.call("cuLaunchKernel")
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.CONCURRENT_KERNEL,
            correlation_id=correlation,
            name=name,
            start=start,
            end=start + duration_ns,
        )
        return correlation

    def memset(self, nbytes: int, duration_ns: int, flags: int = 1) -> int:
        correlation = self.call("cuMemsetD8Async")
        start = self.clock_ns
        self.clock_ns += duration_ns
        self._record(
            ActivityKind.MEMSET,
            correlation_id=correlation,
            start=start,
            end=start + duration_ns,
            bytes=nbytes,
            flags_=flags,
        )
        return correlation

    def counter(self, name: str, value: int, start: int = 0, end: int = 0) -> None:
        self._record(
            ActivityKind.UNIFIED_MEMORY_COUNTER,
            counter_kind=int(ActivityUnifiedMemoryCounterKind[name]),
            value=value,
            start=start,
            end=end,
        )
