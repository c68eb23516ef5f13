"""What `memprof alloc` measures of the allocators programs use today: stream-ordered pools
(the device's default pool, and one of memprof's own that keeps freed memory), virtual memory
management (each step, and growing a buffer in place against cuMemAlloc, a copy and
cuMemFree), first use, and the allocate-use-free-sync loop a training step runs.
docs/allocators.md says how each figure is timed.

A driver call's figure has a floor (CUPTI's own bookkeeping: on the H200, calls under a
microsecond read 0.4-0.5 us above a C++ program's clock; on the host clock, Python's cost of
the call): each cycle also times cuCtxGetDevice, which does next to nothing, the same way, and
a figure that floor is more than a tenth of is marked (read it as "under").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from memprof.experiments import base
from memprof.experiments.common import found_or_none, stops_at
from memprof.model.figures import Derived, figure_finder, steady_ms
from memprof.model.formatting import format_bytes, format_ms, format_ratio, plural
from memprof.model.results import Check, Result
from memprof.model.schema import DISTINCT, ByteCount, Count
from memprof.model.summary import Column, Table, table

LOOP_ITERATIONS = 50  # iterations of the loop at each size: the first is the cold one
POOL_KINDS = ("pool", "pool_kept")
LOOP_KINDS = ("device", "pool", "pool_kept", "vmm")  # the loop's allocators, in table order
PoolKind = Literal["pool", "pool_kept"]  # POOL_KINDS: what a saved record may name
LoopKind = Literal["device", "pool", "pool_kept", "vmm"]  # LOOP_KINDS
FILL_BYTE = 0x5A  # what a memset writes into new memory, checked where memprof verifies it
GROWN_BYTE = 0xC3  # what the added half of a grown buffer holds

_CALL, _GPU, _HOST = "driver call", "one operation", "host clock"
MEASURES = tuple(
    # the loop's samples are its iterations (LOOP_ITERATIONS), whatever --repeat
    base.Measure(group, operation, what, basis, required=False, per_repeat=operation != "loop")
    for group, operation, what, basis in (
        ("api", "alloc_new", "an allocation from an empty pool (or cuMemAlloc)", _CALL),
        ("api", "alloc_reused", "an allocation right after cuMemFreeAsync", _CALL),
        ("api", "alloc_after_sync", "an allocation after a free and a sync", _CALL),
        ("api", "free_call", "cuMemFreeAsync (cuMemFree for cuMemAlloc)", _CALL),
        ("api", "sync_after_free", "the sync after a free: memory given back", _CALL),
        ("api", "trim", "cuMemPoolTrimTo of a pool keeping freed memory", _CALL),
        ("gpu", "stream_alloc", "the stream's side of a stream-ordered allocation", _GPU),
        ("gpu", "stream_free", "the stream's side of cuMemFreeAsync", _GPU),
        ("gpu", "first_use", "a memset of new memory", _GPU),
        ("gpu", "use_again", "a memset of cuMemAlloc's memory used before", _GPU),
        ("api", "reserve", "cuMemAddressReserve", _CALL),
        ("api", "create", "cuMemCreate", _CALL),
        ("api", "map", "cuMemMap", _CALL),
        ("api", "set_access", "cuMemSetAccess", _CALL),
        ("api", "unmap", "cuMemUnmap", _CALL),
        ("api", "release_memory", "cuMemRelease", _CALL),
        ("api", "address_free", "cuMemAddressFree", _CALL),
        ("api", "call_floor", "cuCtxGetDevice, next to nothing, timed as the calls are", _CALL),
        ("api", "grow_in_place", "create, map, grant access to the added half", _HOST),
        ("api", "grow_by_copy", "cuMemAlloc of twice the size, copy, cuMemFree", _HOST),
        ("host", "loop", "one iteration: allocate, memset, free, sync", _HOST),
    )
)

LOOP_NAMES = {
    "device": "cuMemAlloc, memset, cuMemFree, sync",
    "pool": "cuMemAllocAsync, memset, cuMemFreeAsync, sync",
    "pool_kept": "cuMemAllocFromPoolAsync, memset, cuMemFreeAsync, sync",
    "vmm": "cuMemCreate, cuMemMap, cuMemSetAccess, memset, sync, cuMemUnmap, cuMemRelease",
}


@dataclass(frozen=True)
class AllocatorsRecord:
    """What alloc's summary needs of the modern allocators beside their measurements."""

    pools: Annotated[list[PoolKind], DISTINCT]  # the pool kinds measured
    vmm: bool  # virtual memory management measured
    granularity_bytes: ByteCount | None  # what VMM sizes round up to (None: not measured)
    default_pool_threshold_bytes: Count | None  # the default pool's release threshold
    loop_kinds: Annotated[list[LoopKind], DISTINCT]  # the loop's allocators, in table order
    loop_iterations: Count  # iterations of the loop at each size


# -- the GPU side ----------------------------------------------------------------------------


class Allocators:
    """The modern allocators on one session: its pools, its stream, its granularity."""

    def __init__(self, session: Any, kinds: list[str]) -> None:
        from memprof.core import bindings, memory

        self.session, self.kinds = session, kinds
        self.profiler = session.profiler
        self.stream = self.profiler.stream
        self.cu_stream = bindings.stream(self.stream)
        self.ordinal = session.device_index
        self.pools = [k for k in POOL_KINDS if k in kinds]
        self.kind = {name: memory.MEMORY_KINDS[name] for name in kinds}
        self.default_pool = bindings.default_pool(self.ordinal) if "pool" in kinds else None
        self.granularity = bindings.granularity(self.ordinal) if "vmm" in kinds else None
        self._host: Any = None  # where checks read device memory back (readback())
        self._gpu: Any = None  # the GPU's own check of device memory (check_bytes())
        self.readback_bytes = 0  # the most any check of this run reads back, where known

    def readback(self, nbytes: int) -> Any:
        """nbytes of host memory for a check to read into: one buffer for every check, so the
        OS provides its pages once."""
        import numpy as np

        if self._host is None or self._host.size < nbytes:
            self._host = np.empty(max(nbytes, self.readback_bytes), np.uint8)
        return self._host[:nbytes]

    def record(self) -> AllocatorsRecord:
        from memprof.core import bindings

        threshold = None
        if self.default_pool is not None:
            threshold = bindings.release_threshold(self.default_pool)
        return AllocatorsRecord(
            pools=list(self.pools),
            vmm="vmm" in self.kinds,
            granularity_bytes=self.granularity,
            default_pool_threshold_bytes=threshold,
            loop_kinds=[k for k in LOOP_KINDS if k == "device" or k in self.kinds],
            loop_iterations=LOOP_ITERATIONS,
        )

    def empty_pools(self) -> None:
        """Every pool back to holding nothing, so the next allocation is a pool's first."""
        from memprof.core import bindings

        with self.profiler.paused():
            self.stream.synchronize()
            for kind in self.pools:
                bindings.trim(self.kind[kind].pool(self.session) or self.default_pool, 0)

    def memset(self, address: int, nbytes: int, operation: str, kind: str) -> None:
        """A memset of the whole buffer on the profiler's stream, timed as a GPU operation."""
        cuda = self.session.cuda
        with self.profiler.events("gpu", "[CUDA memset]", operation, kind, nbytes):
            cuda.memset_d8_async(address, FILL_BYTE, nbytes, self.stream)

    # -- one repetition of each measurement ------------------------------------------------

    def device_cycle(self, nbytes: int) -> None:
        """cuMemAlloc and cuMemFree timed as the pools' calls are; its memory used twice."""
        cuda, profiler = self.session.cuda, self.profiler
        with profiler.driver_call("cuMemAlloc", "alloc_new", "device", nbytes):
            allocation = cuda.mem_alloc(nbytes)
        try:
            self.memset(int(allocation), nbytes, "first_use", "device")
            self.memset(int(allocation), nbytes, "use_again", "device")
            self.stream.synchronize()
        finally:
            with profiler.driver_call("cuMemFree", "free_call", "device", nbytes):
                allocation.free()

    def pool_cycle(self, kind: str, nbytes: int) -> None:
        """A pool's allocation empty, reused and after a sync; its free, the sync giving memory
        back, the stream's side of both, and trimming. No call is timed while the stream is
        held behind the gate: each meets the stream as a program's would."""
        from memprof.core import bindings

        profiler, stream, cu_stream = self.profiler, self.stream, self.cu_stream
        call, free_call = self.kind[kind].alloc_call, self.kind[kind].free_call
        source = self.kind[kind].pool(self.session)  # None: cuMemAllocAsync's default pool
        self.empty_pools()
        with profiler.driver_call(call, "alloc_new", kind, nbytes):
            address = bindings.alloc_async(nbytes, cu_stream, source)
        self.memset(address, nbytes, "first_use", kind)
        with profiler.driver_call(free_call, "free_call", kind, nbytes):
            bindings.free_async(address, cu_stream)
        with profiler.driver_call(call, "alloc_reused", kind, nbytes):
            address = bindings.alloc_async(nbytes, cu_stream, source)
        stream.synchronize()  # the memset is done: the synchronization below waits for nothing
        bindings.free_async(address, cu_stream)
        with profiler.driver_call("cuStreamSynchronize", "sync_after_free", kind, nbytes):
            stream.synchronize()
        with profiler.driver_call(call, "alloc_after_sync", kind, nbytes):
            address = bindings.alloc_async(nbytes, cu_stream, source)
        bindings.free_async(address, cu_stream)
        stream.synchronize()
        with profiler.events("gpu", f"{call} (stream side)", "stream_alloc", kind, nbytes):
            address = bindings.alloc_async(nbytes, cu_stream, source)
        with profiler.events("gpu", f"{free_call} (stream side)", "stream_free", kind, nbytes):
            bindings.free_async(address, cu_stream)
        stream.synchronize()
        if source is not None:  # it kept the memory: give it back
            with profiler.driver_call("cuMemPoolTrimTo", "trim", kind, nbytes):
                bindings.trim(source, 0)
        self.call_floor(kind, nbytes)

    def call_floor(self, kind: str, nbytes: int) -> None:
        """cuCtxGetDevice, next to nothing, timed as the cycle's calls: what timing adds."""
        from memprof.core import bindings

        with self.profiler.driver_call("cuCtxGetDevice", "call_floor", kind, nbytes):
            bindings.current_device()

    def vmm_cycle(self, nbytes: int) -> None:
        """Each step of building a buffer by hand, its first use, and taking it apart."""
        from memprof.core import bindings

        profiler, size = self.profiler, self.vmm_bytes(nbytes)
        with profiler.driver_call("cuMemAddressReserve", "reserve", "vmm", nbytes):
            address = bindings.reserve(size)
        handle, mapped = None, False
        try:
            with profiler.driver_call("cuMemCreate", "create", "vmm", nbytes):
                handle = bindings.create(size, self.ordinal)
            with profiler.driver_call("cuMemMap", "map", "vmm", nbytes):
                bindings.map_memory(address, size, handle)
            mapped = True
            with profiler.driver_call("cuMemSetAccess", "set_access", "vmm", nbytes):
                bindings.set_access(address, size, self.ordinal)
            self.memset(address, nbytes, "first_use", "vmm")  # what was asked for is used
            self.stream.synchronize()
            with profiler.driver_call("cuMemUnmap", "unmap", "vmm", nbytes):
                bindings.unmap(address, size)
            mapped = False
            with profiler.driver_call("cuMemRelease", "release_memory", "vmm", nbytes):
                bindings.release(handle)
            handle = None
            with profiler.driver_call("cuMemAddressFree", "address_free", "vmm", nbytes):
                bindings.address_free(address, size)
        except BaseException:
            handles = [handle] if handle is not None else []
            with profiler.paused():
                bindings.take_apart(address, size, handles, size if mapped else 0)
            raise
        self.call_floor("vmm", nbytes)

    def vmm_bytes(self, nbytes: int) -> int:
        from memprof.core import bindings

        return bindings.rounded(nbytes, self.granularity)

    # -- growing a buffer ------------------------------------------------------------------------

    def grow_in_place(self, nbytes: int, verify: bool) -> str | None:
        """Grow a mapped buffer to twice its size where it is: map more memory after it.
        With verify: what went wrong with the data (None: nothing)."""
        from memprof.core import bindings

        profiler, size, ordinal = self.profiler, self.vmm_bytes(nbytes), self.ordinal
        with profiler.paused():
            address = bindings.reserve(2 * size)  # room to grow, as a growing allocator keeps
        handles: list[Any] = []
        mapped = 0
        try:
            handles.append(bindings.create(size, ordinal))
            bindings.map_memory(address, size, handles[0])
            mapped = size
            bindings.set_access(address, size, ordinal)
            self.session.cuda.memset_d8(address, FILL_BYTE, size)
            self.session.synchronize()  # the GPU idle: growing is the host's calls alone
            with profiler.api(
                "cuMemCreate + cuMemMap + cuMemSetAccess", "grow_in_place", "vmm", nbytes
            ):
                handles.append(bindings.create(size, ordinal))
                bindings.map_memory(address + size, size, handles[1])
                mapped = 2 * size
                bindings.set_access(address + size, size, ordinal)
            return self._check_grown(address, size, verify)
        finally:
            self.session.synchronize()  # nothing may touch the range while it is unmapped
            bindings.take_apart(address, 2 * size, handles, mapped)

    def grow_by_copy(self, nbytes: int, verify: bool) -> str | None:
        """Grow a cuMemAlloc buffer to twice its size the classic way: allocate the larger
        size, copy, free the old one; the copy waited for, since the data must be there."""
        cuda, profiler = self.session.cuda, self.profiler
        buffers = [cuda.mem_alloc(nbytes)]  # what is allocated now, freed on the way out
        try:
            cuda.memset_d8(int(buffers[0]), FILL_BYTE, nbytes)
            self.session.synchronize()  # the copy below waits for nothing else
            with profiler.api(
                "cuMemAlloc + cuMemcpyDtoDAsync + cuMemFree", "grow_by_copy", "device", nbytes
            ):
                buffers.append(cuda.mem_alloc(2 * nbytes))
                cuda.memcpy_dtod_async(buffers[1], buffers[0], nbytes, self.stream)
                buffers.pop(0).free()
                self.stream.synchronize()
            return self._check_grown(int(buffers[0]), nbytes, verify)
        finally:
            for buffer in buffers:
                buffer.free()

    def _check_grown(self, address: int, nbytes: int, verify: bool) -> str | None:
        """Write the added half, then check both halves (with verify)."""
        if not verify:
            return None
        self.session.cuda.memset_d8(address + nbytes, GROWN_BYTE, nbytes)
        for start, value in ((address, FILL_BYTE), (address + nbytes, GROWN_BYTE)):
            check = self.check_bytes("grown", start, nbytes, value)
            if not check.passed:
                return check.detail
        return None

    def prepare_checks(self) -> None:
        """Load the GPU's check (its module, its scratch memory) now, not between timings."""
        from memprof.core.verify import GpuVerifier

        self._gpu = GpuVerifier(self.session)

    def free_checks(self) -> None:
        if self._gpu is not None:
            self._gpu.free()
            self._gpu = None

    def check_bytes(self, name: str, address: int, nbytes: int, value: int) -> Any:
        """A Check that every byte at `address` is `value`: the GPU looks, and only where it
        finds a difference is the memory read back for compare_constant's account."""
        from memprof.core.verify import SUCCESS, compare_constant
        from memprof.model.results import Check

        if self._gpu is None:
            self.prepare_checks()
        gpu = self._gpu  # it compares whole words; the host compares any other range
        if gpu.whole_words(address, nbytes) and gpu.first_not_byte(address, nbytes, value) is None:
            return Check(name, True, nbytes, SUCCESS)
        host = self.readback(nbytes)
        self.session.cuda.memcpy_dtoh(host, address)
        return compare_constant(name, host, value)

    # -- the loop ---------------------------------------------------------------------------

    def loop_step(self, kind: str, nbytes: int, reserved: int | None) -> Any:
        """One iteration of the loop with one allocator, timed as a whole on the host clock:
        what a training step that allocates, uses, frees and synchronizes pays each time."""
        from memprof.core import bindings

        cuda, stream, cu_stream = self.session.cuda, self.stream, self.cu_stream
        name, ordinal = LOOP_NAMES[kind], self.ordinal

        def device() -> None:
            allocation = cuda.mem_alloc(nbytes)
            cuda.memset_d8_async(int(allocation), FILL_BYTE, nbytes, stream)
            allocation.free()
            stream.synchronize()

        def pool() -> None:
            address = bindings.alloc_async(nbytes, cu_stream, self.kind[kind].pool(self.session))
            cuda.memset_d8_async(address, FILL_BYTE, nbytes, stream)
            bindings.free_async(address, cu_stream)
            stream.synchronize()

        def remap() -> None:
            size = self.vmm_bytes(nbytes)
            handle = bindings.create(size, ordinal)
            bindings.map_memory(reserved, size, handle)
            bindings.set_access(reserved, size, ordinal)
            cuda.memset_d8_async(reserved, FILL_BYTE, size, stream)
            stream.synchronize()
            bindings.unmap(reserved, size)
            bindings.release(handle)

        action = {"device": device, "vmm": remap}.get(kind, pool)

        def step() -> None:
            with self.profiler.host_clock("host", name, "loop", kind, nbytes):
                action()

        return step

    def calls_and_growth(self, nbytes: int, params: Any, grown: dict[str, list[str]]) -> None:
        """One size's calls, first uses and growth; a grown buffer's wrong data into `grown`."""
        profiler = self.profiler

        def repeat(step: Any) -> None:
            profiler.repeat(step, params.warmup, params.repeat)

        repeat(lambda: self.device_cycle(nbytes))
        for kind in self.pools:
            repeat(lambda kind=kind: self.pool_cycle(kind, nbytes))
        growing = [("device", self.grow_by_copy)]
        if "vmm" in self.kinds:
            repeat(lambda: self.vmm_cycle(nbytes))
            growing.append(("vmm", self.grow_in_place))
        for kind, grow in growing:
            repeat(lambda grow=grow: grow(nbytes, False))
            with profiler.paused():
                problem = grow(nbytes, True)
            if problem:
                grown[kind].append(f"{format_bytes(nbytes)}: {problem}")

    def loop_at(self, nbytes: int, kinds: list[str]) -> None:
        """The loop at one size with every allocator, each starting with empty pools."""
        from memprof.core.bindings import address_free, reserve

        for kind in kinds:
            self.empty_pools()
            size = self.vmm_bytes(nbytes) if kind == "vmm" else 0
            reserved = reserve(size) if kind == "vmm" else None
            try:
                with self.profiler.untraced():  # CUPTI's timestamps would slow every call
                    self.profiler.repeat(self.loop_step(kind, nbytes, reserved), 0, LOOP_ITERATIONS)
            finally:
                if reserved is not None:
                    address_free(reserved, size)

    def verify(self, kind: str, nbytes: int) -> Any:
        """A Check that memory of this kind holds what a memset wrote into all of it."""
        import numpy as np

        from memprof.core import memory

        with self.profiler.paused():
            buffer = memory.allocate(self.session, kind, nbytes, np.uint8)
            try:
                self.session.cuda.memset_d8_async(
                    buffer.device_pointer, FILL_BYTE, nbytes, self.stream
                )
                self.stream.synchronize()
                name = f"memset of {self.kind[kind].label}"
                return self.check_bytes(name, buffer.device_pointer, nbytes, FILL_BYTE)
            finally:
                buffer.free()


def measure(ctx: Any, kinds: list[str], progress: Any) -> AllocatorsRecord:
    """Every measurement of the modern allocators at every size, and their checks; kinds:
    those supported here among pool, pool_kept and vmm."""
    params = ctx.params
    allocators = Allocators(ctx.session, kinds)
    allocators.prepare_checks()  # before anything is timed
    record = allocators.record()
    largest = 4 << max(params.powers)
    # a half of a grown buffer: VMM's is rounded up to the granularity
    allocators.readback_bytes = allocators.vmm_bytes(largest) if record.vmm else largest
    grown: dict[str, list[str]] = {"vmm": [], "device": []}
    for power in params.powers:
        nbytes = 4 << power
        progress(f"pools and virtual memory, {format_bytes(nbytes)}")
        allocators.calls_and_growth(nbytes, params, grown)
        progress(f"allocate-use-free loop, {format_bytes(nbytes)}")
        allocators.loop_at(nbytes, record.loop_kinds)
    allocators.empty_pools()
    for kind in kinds:
        progress(f"checking what a memset wrote, {kind} {format_bytes(largest)}")
        ctx.check(allocators.verify(kind, largest))
    allocators.free_checks()
    sizes = len(params.powers)
    for kind, label in (("device", "cuMemAlloc, copy, cuMemFree"), ("vmm", "in place (VMM)")):
        if kind == "device" or record.vmm:
            problems = grown[kind]
            detail = problems[0] if problems else f"Check result success! ({plural(sizes, 'size')})"
            ctx.check(Check(f"grown to twice the size, {label}", not problems, sizes, detail))
    return record


# -- the summary ------------------------------------------------------------------------------

EQUIVALENT = 0.05  # a pool within 5% of cuMemAlloc does not help
FLOOR_SHARE = 0.1  # a call's figure that the floor is more than this share of is marked
NEAR_FLOOR = "*"  # the mark
# What driver_call() times, one call each: what the floor (call_floor) is the floor of.
CALLS = tuple(m.operation for m in MEASURES if m.basis == _CALL and m.operation != "call_floor")
SHORT = {"device": "cuMemAlloc", "pool": "pool", "pool_kept": "kept", "vmm": "VMM"}
LOOP_LABELS = {
    "device": "cuMemAlloc",
    "pool": "default pool",
    "pool_kept": "kept pool",
    "vmm": "VMM remap",
}
POOL_NAMES = {
    "pool": "default pool (cuMemAllocAsync)",
    "pool_kept": "pool keeping freed memory (cuMemAllocFromPoolAsync)",
}


def _median(result: Result, group: str, operation: str, kind: str, nbytes: int) -> float | None:
    found = found_or_none(result, group, operation, kind, nbytes)
    return None if found is None else found.stats.median_ms


def _sizes(result: Result) -> list[int]:
    return [4 << power for power in result.parameters.powers]


def _sources(result: Result, operations: tuple[str, ...]) -> set[str]:
    return {m.source for m in result.measurements if m.group == "api" and m.operation in operations}


def _call_source(result: Result, operations: tuple[str, ...]) -> str:
    """How this run timed its single driver calls: CUPTI's records or the host clock."""
    sources = _sources(result, operations)
    if sources == {"cupti"}:
        return "CUPTI's record of each call (in the driver, entry to exit)"
    if sources == {"host"}:
        return "the host clock around each call (no CUPTI: Python's cost of a call included)"
    return "CUPTI's record of each call where it had one, else the host clock"


def call_floor_ms(result: Result) -> float | None:
    """The median cuCtxGetDevice, timed as the run's driver calls were (None: files before
    it, or not on their clock: CUPTI kept no record of it where it kept theirs)."""
    floors = [m for m in result.measurements if (m.group, m.operation) == ("api", "call_floor")]
    if not floors or {m.source for m in floors} != _sources(result, CALLS):
        return None
    return statistics.median(sample for m in floors for sample in m.samples_ms)


def near_floor(value_ms: float, floor_ms: float | None) -> bool:
    """Is the floor more than a tenth of a call's figure (so the figure says "under")?"""
    return floor_ms is not None and floor_ms > FLOOR_SHARE * value_ms


def _call_cell(value_ms: float, floor_ms: float | None) -> str:
    """A driver call's figure, marked where it is near the floor of how it was timed."""
    return format_ms(value_ms) + _mark(value_ms, floor_ms)


def _mark(value_ms: float, floor_ms: float | None) -> str:
    return NEAR_FLOOR if near_floor(value_ms, floor_ms) else ""


def _floor_note(result: Result, floor_ms: float | None, first: bool) -> str:
    """The floor of the calls' figures, on screen (first: in full; then: by reference)."""
    if floor_ms is not None and not first:
        return f"Floor {format_ms(floor_ms)} and {NEAR_FLOOR}: as in the table above."
    if floor_ms is not None:
        return (
            f"Floor: {format_ms(floor_ms)}, what cuCtxGetDevice (a call that does next to "
            "nothing) read, timed the same way in this run: that much of any call's figure may "
            f"be how it was timed. {NEAR_FLOOR}: the floor is over {FLOOR_SHARE:.0%} of the "
            "figure: read it as an upper bound of the call's own time."
        )
    if not first:
        return "No floor: as in the table above."
    if any(m.operation == "call_floor" for m in result.measurements):
        why = "cuCtxGetDevice was not timed as the calls were (CUPTI kept no record of it)"
    else:
        why = "an older memprof did not time a call that does nothing"
    return (
        f"No floor: {why}, so a figure under a few microseconds may be largely how it was "
        "timed, not the call."
    )


def _table(
    result: Result,
    title: str,
    columns: list[tuple[str, str, str, str]],
    floor_ms: float | None = None,
) -> Table:
    """A row per size, a median per column (header, group, operation, kind), a driver call's
    marked near the floor."""
    declared = [Column("Size", "size")]
    for header, group, op, _ in columns:
        call = group == "api" and op in CALLS
        marked = (lambda m: _mark(m.stats.median_ms, floor_ms)) if call else None
        declared.append(Column(header, header, "median_ms", mark=marked))
    rows = [
        {"size": format_bytes(nbytes),
         **{header: found_or_none(result, group, op, kind, nbytes)
            for header, group, op, kind in columns}}
        for nbytes in _sizes(result)
    ]  # fmt: skip
    return table(title, declared, rows)


# a pool's columns: (header after the pool's short name, operation)
POOL_ALLOCATIONS = (
    ("new", "alloc_new"),
    ("reused", "alloc_reused"),
    ("after sync", "alloc_after_sync"),
)
POOL_FREES = (("free", "free_call"), ("sync", "sync_after_free"), ("trim", "trim"))


def pool_tables(result: Result, record: AllocatorsRecord) -> list[Table]:
    """Allocation and free from each pool, against cuMemAlloc and cuMemFree."""
    repeat = base.repetitions(result)
    allocation = [("cuMemAlloc", "api", "alloc_new", "device")]
    free = [("cuMemFree", "api", "free_call", "device")]
    for kind in record.pools:
        frees = POOL_FREES if kind == "pool_kept" else POOL_FREES[:2]  # a pool it keeps: trim
        allocation += [(f"{SHORT[kind]} {w}", "api", op, kind) for w, op in POOL_ALLOCATIONS]
        free += [(f"{SHORT[kind]} {w}", "api", op, kind) for w, op in frees]
    calls = _call_source(result, ("alloc_new", "alloc_reused", "free_call", "trim"))
    floor = call_floor_ms(result)
    first = _table(result, f"Stream-ordered allocation, median of {repeat}", allocation, floor)
    threshold = record.default_pool_threshold_bytes
    first.notes = [
        f"Driver calls: {calls}.",
        _floor_note(result, floor, first=True),
        "pool: the device's default pool (cuMemAllocAsync), release threshold "
        + (f"{format_bytes(threshold)}" if threshold is not None else "unknown")
        + ": it gives freed memory back at the next synchronization. kept: a pool of "
        "memprof's own (cuMemAllocFromPoolAsync) whose threshold keeps all freed memory.",
        "new: from an empty pool; reused: right after cuMemFreeAsync of the same size in the "
        "same stream; after sync: after that free and a stream synchronization.",
        _stream_side_note(result, record),
    ]
    second = _table(result, f"Stream-ordered free, median of {repeat}", free, floor)
    second.notes = [
        _floor_note(result, floor, first=False),
        "free: cuMemFreeAsync (cuMemFree for cuMemAlloc); sync: the cuStreamSynchronize right "
        "after it, where a pool gives memory above its threshold back (no GPU work waits "
        "there); trim: cuMemPoolTrimTo(0) of the pool that kept the memory.",
    ]
    return [first, second]


def _stream_side_note(result: Result, record: AllocatorsRecord) -> str:
    """What the stream itself pays for a stream-ordered call, at the largest size."""
    largest = max(_sizes(result))
    parts = []
    for kind in record.pools:
        alloc = _median(result, "gpu", "stream_alloc", kind, largest)
        free = _median(result, "gpu", "stream_free", kind, largest)
        if alloc is not None and free is not None:
            parts.append(f"{SHORT[kind]} {format_ms(alloc)} and {format_ms(free)}")
    figures = "; ".join(parts) or "not measured"
    return (
        "The calls only queue work: what the stream itself spent on an allocation and a free "
        "(gated CUDA events around each, less an empty pair's interval) at "
        f"{format_bytes(largest)}: {figures}."
    )


def vmm_tables(result: Result, record: AllocatorsRecord) -> list[Table]:
    """Each step of virtual memory management, and growing a buffer in place or by copy."""
    repeat = base.repetitions(result)
    steps = [
        ("Reserve", "reserve"),
        ("Create", "create"),
        ("Map", "map"),
        ("Access", "set_access"),
        ("Unmap", "unmap"),
        ("Release", "release_memory"),
        ("Free range", "address_free"),
    ]
    granularity = record.granularity_bytes or 0
    floor = call_floor_ms(result)
    columns = [(header, "api", operation, "vmm") for header, operation in steps]
    vmm = _table(result, f"Virtual memory management, median of {repeat}", columns, floor)
    vmm.notes = [
        f"Driver calls: {_call_source(result, tuple(op for _, op in steps))}.",
        _floor_note(result, floor, first=not record.pools),  # in full where no pool table is
        "Reserve: cuMemAddressReserve; Create: cuMemCreate (physical memory); Map: cuMemMap; "
        "Access: cuMemSetAccess (read-write for this GPU); Unmap: cuMemUnmap; Release: "
        "cuMemRelease; Free range: cuMemAddressFree. Sizes round up to the allocation "
        f"granularity, {format_bytes(granularity)} here.",
    ]
    rows = []
    for nbytes in _sizes(result):
        in_place, by_copy, faster = _growth(result, nbytes)
        rows.append({"size": format_bytes(nbytes), "in place": in_place, "by copy": by_copy,
                     "faster": faster})  # fmt: skip
    notes = [
        "Host clock around each. In place: cuMemCreate, cuMemMap and cuMemSetAccess of the "
        "added half, after the buffer (its addresses reserved at twice the size, as a "
        "growing allocator reserves them). New + copy + free: cuMemAlloc of twice the size, "
        "cuMemcpyDtoDAsync of the data, cuMemFree of the old buffer, the copy waited for."
    ]
    growth = table(f"Growing a buffer to twice its size, median of {repeat}", GROWTH, rows, notes)
    return [vmm, growth]


GROWTH = (
    Column("Size", "size"),
    Column("In place (VMM)", "in place", "median_ms"),
    Column("New + copy + free", "by copy", "median_ms"),
    Column("In place is", "faster", lambda one: f"{format_ratio(one.ratio)} faster"),
)


def _growth(result: Result, nbytes: int) -> tuple[Any, Any, Derived | None]:
    """Growing a buffer of `nbytes` in place, and by a copy (None: not measured), and how many
    times faster in place was (None: not both measured)."""
    in_place = found_or_none(result, "api", "grow_in_place", "vmm", nbytes)
    by_copy = found_or_none(result, "api", "grow_by_copy", "device", nbytes)
    if in_place is None or by_copy is None:
        return in_place, by_copy, None
    of = figure_finder(result, MEASURES)
    name = f"{format_bytes(nbytes)}: by copy / in place"
    return in_place, by_copy, Derived(name, (of(by_copy), of(in_place)), "ratio")


def first_use_table(result: Result, record: AllocatorsRecord) -> Table:
    columns = [
        ("cuMemAlloc", "gpu", "first_use", "device"),
        ("cuMemAlloc again", "gpu", "use_again", "device"),
    ]
    columns += [(SHORT[kind], "gpu", "first_use", kind) for kind in record.pools]
    if record.vmm:
        columns.append(("VMM", "gpu", "first_use", "vmm"))
    first = _table(result, f"First use, median of {base.repetitions(result)}", columns)
    first.notes = [
        "A memset of the whole new buffer (the size asked for), its GPU time: CUPTI's record "
        "of it, or gated CUDA events. cuMemAlloc again: a second memset of the same memory."
    ]
    return first


def loop_table(result: Result, record: AllocatorsRecord) -> Table:
    iterations = record.loop_iterations
    of = figure_finder(result, MEASURES)
    rows = []
    for nbytes in _sizes(result):
        found = [found_or_none(result, "host", "loop", kind, nbytes) for kind in record.loop_kinds]
        steady = {
            m.kind: Derived(f"{m.kind} loop, steady", (of(m),), "steady")
            for m in found
            if m is not None
        }
        rows.append({"size": format_bytes(nbytes), **steady})
    columns = [Column("Size", "size")]
    columns += [Column(LOOP_LABELS[kind], kind, "median_ms") for kind in record.loop_kinds]
    notes = [
        "Host clock around each whole iteration (Python's calls included), median of "
        f"iterations 2 to {iterations}: the first one finds the pools empty. An iteration: "
        "allocate one buffer, memset it, free it, synchronize the stream, as a training "
        "step does. VMM remap: the address range kept; cuMemCreate, cuMemMap, "
        "cuMemSetAccess, memset, synchronize, cuMemUnmap, cuMemRelease."
    ]
    title = f"Allocate, use, free, sync, {iterations} times: per iteration"
    return table(title, columns, rows, notes)


def pays_from(pool_ms: list[float], device_ms: list[float]) -> int | None:
    """The first iteration (1-based) after which the pool's total is below cuMemAlloc's."""
    pool_total = device_total = 0.0
    for iteration, (pool, device) in enumerate(zip(pool_ms, device_ms, strict=False), start=1):
        pool_total += pool
        device_total += device
        if pool_total < device_total:
            return iteration
    return None


def loop_verdict(result: Result, kind: str) -> str | None:
    """Where a pool stops beating cuMemAlloc/cuMemFree in the loop, in one sentence."""
    steady = {}
    for nbytes in _sizes(result):
        pool, device = (found_or_none(result, "host", "loop", k, nbytes) for k in (kind, "device"))
        if pool is not None and device is not None:
            pool, device = pool.samples_ms, device.samples_ms
            steady[nbytes] = (steady_ms(pool), steady_ms(device), pays_from(pool, device))
    if not steady:
        return None
    helped = {n: pool < device * (1 - EQUIVALENT) for n, (pool, device, _) in steady.items()}
    stop = stops_at(helped)
    opening = f"In the loop the {POOL_NAMES[kind]}"

    def figures(nbytes: int) -> str:
        pool, device, _ = steady[nbytes]
        return (
            f"{format_ms(pool)} against {format_ms(device)} per iteration at {format_bytes(nbytes)}"
        )

    def ending(nbytes: int) -> str:
        first = steady[nbytes][2]
        return f"; its total fell below cuMemAlloc's from iteration {first}." if first else "."

    if stop is None:
        largest = max(steady)
        where = "at every size" if all(helped.values()) else "at the largest, not every, size"
        return f"{opening} beat cuMemAlloc/cuMemFree {where} ({figures(largest)})" + ending(largest)
    below = [n for n in steady if n < stop and helped[n]]
    if not below:
        return (
            f"{opening} never beat cuMemAlloc/cuMemFree by more than {EQUIVALENT:.0%} "
            f"({figures(min(steady))}; {figures(max(steady))})."
        )
    last = max(below)
    return (
        f"{opening} helped up to {format_bytes(last)} ({figures(last)}) and stopped helping at "
        f"{format_bytes(stop)} ({figures(stop)})" + ending(last)
    )


def summary_parts(result: Result, record: AllocatorsRecord) -> tuple[list[Table], list[str]]:
    """The tables and conclusions `alloc` adds for the modern allocators."""
    tables: list[Table] = []
    if record.pools:
        tables += pool_tables(result, record)
    if record.vmm:
        tables += vmm_tables(result, record)
    tables += [first_use_table(result, record), loop_table(result, record)]
    found = [_pool_conclusion(result, record), _growth_conclusion(result, record)]
    found += [loop_verdict(result, kind) for kind in record.pools]
    return tables, [line for line in found if line]


def _pool_conclusion(result: Result, record: AllocatorsRecord) -> str | None:
    largest = max(_sizes(result))
    floor = call_floor_ms(result)
    device = _median(result, "api", "alloc_new", "device", largest)
    parts, figures = [], [device]
    for kind in record.pools:
        reused = _median(result, "api", "alloc_reused", kind, largest)
        after = _median(result, "api", "alloc_after_sync", kind, largest)
        if reused is not None and after is not None:
            figures += [reused, after]
            parts.append(
                f"from the {POOL_NAMES[kind]} {_call_cell(reused, floor)} reused right after "
                f"cuMemFreeAsync and {_call_cell(after, floor)} after a synchronization"
            )
    if device is None or not parts:
        return None
    said = (
        f"At {format_bytes(largest)} cuMemAlloc took {_call_cell(device, floor)}; a stream-ordered "
        f"allocation {'; '.join(parts)}. A pool only saves the allocation while it still holds "
        "the memory."
    )
    if floor is not None and any(near_floor(value, floor) for value in figures):
        said += f" ({NEAR_FLOOR}: near the floor of how calls are timed, {format_ms(floor)}.)"
    return said


def _growth_conclusion(result: Result, record: AllocatorsRecord) -> str | None:
    if not record.vmm:
        return None
    largest = max(_sizes(result))
    in_place, by_copy, faster = _growth(result, largest)
    if faster is None:
        return None
    return (
        f"Growing a {format_bytes(largest)} buffer to twice its size took "
        f"{format_ms(in_place.stats.median_ms)} in place with virtual memory management "
        f"against {format_ms(by_copy.stats.median_ms)} for cuMemAlloc, a copy and cuMemFree "
        f"({format_ratio(faster.ratio)})."
    )
