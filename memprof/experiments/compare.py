"""`memprof compare`: every memory kind side by side at one size, and what to use when.

Each kind's allocation, copies, kernel read (readSum, verified) and host reads and writes
(numpy copyto), where it applies. Managed memory is three rows (first touch, resident,
prefetched); device memory one per allocator the GPU and cuda-bindings have (cuMemAlloc, the
stream-ordered pools, virtual memory management).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from memprof.core import memory
from memprof.experiments import base
from memprof.experiments.common import gpu_timing, measure_host_staging, prefetch_to_gpu
from memprof.model.ceilings import detail_of, hbm_ceiling, pcie_ceiling
from memprof.model.figures import Figure, figure_finder, host_side
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Check, Result
from memprof.model.summary import Column, Summary, Table, table

SINGLE_GPU_KINDS = memory.single_gpu_kinds()
# Rows that are not memory kinds: ways of using one (a migrating kind shows three moments).
UVA_ROW = ("uva", "UVA: mapped, host pointer")  # after mapped: its host pointer in a kernel
MIGRATION_MOMENTS = ("first touch", "resident", "prefetched")


def table_rows(kinds: list[memory.MemoryKind]) -> dict[str, str]:
    """Row key -> label for every kind, in memory.MEMORY_KINDS' order."""
    rows = {}
    for kind in kinds:
        if kind.migrates:
            for moment in MIGRATION_MOMENTS:
                rows[f"{kind.name} {moment}"] = f"{kind.name}, {moment}"
        else:
            rows[kind.name] = kind.label
        if kind.name == "mapped":
            rows[UVA_ROW[0]] = UVA_ROW[1]
    return rows


ROWS = table_rows(SINGLE_GPU_KINDS)
# Kinds allocated through cuda-bindings have a row where a run measured them: results saved
# before memprof knew them never list them.
MEASURED_ONLY = frozenset(kind.name for kind in SINGLE_GPU_KINDS if kind.via_bindings)
KINDS_TABLE = (  # each column's key: the operation whose figure it shows
    Column("Memory", "memory"),
    Column("Allocate", "alloc", "median_ms"),  # the one column where smaller is better
    Column("HtoD GB/s", "h2d", "gb_per_s"),
    Column("DtoH GB/s", "d2h", "gb_per_s"),
    Column("Kernel read GB/s", "kernel_read", "gb_per_s"),
    Column("Host write GB/s", "host_write", "gb_per_s"),
    Column("Host read GB/s", "host_read", "gb_per_s"),
)
COLUMNS = tuple(column.of for column in KINDS_TABLE[1:])
AGAINST_CEILINGS = (
    Column("Memory", "memory"),
    Column("HtoD", "h2d", "share"),
    Column("DtoH", "d2h", "share"),
    Column("Kernel read", "kernel_read", "share"),
)


@dataclass(frozen=True)
class CompareParams:
    power: base.Power = base.power_param(24)  # 2^24 float32 = 64 MiB
    repeat: base.Repeat = base.repeat_param(5)
    warmup: base.Warmup = base.warmup_param(1)


@dataclass(frozen=True)
class CompareExtra:
    skipped: list[str]


# Where a kernel's reads come from: across the link, or from the GPU's own memory.
READS_DEVICE_MEMORY = (
    *(kind.name for kind in SINGLE_GPU_KINDS if kind.on_device),  # cuMemAlloc, pools, VMM
    "managed resident",
    "managed prefetched",
)
KERNEL_READ = base.Measure(
    "gpu",
    "kernel_read",
    "readSum over the buffer",
    "one operation",
    arrays=1,
    shows="latency",
    bound={
        kind: "hbm" if kind in READS_DEVICE_MEMORY else "link"
        for kind in (*ROWS, "managed", "managed first touch")
    },
)


class Compare(base.Experiment):
    name = "compare"
    Params = CompareParams
    Extra = CompareExtra
    gpus = "one_or_every"
    measures = (  # every GPU has pinned, pageable and device memory: the recommendations' basis
        *base.ALLOCATIONS,
        *(
            dataclasses.replace(m, required_kinds=("pinned", "pageable"))
            for m in (base.HOST_WRITE, base.HOST_READ, *base.ONE_COPY.values())
        ),
        dataclasses.replace(KERNEL_READ, required_kinds=("device",)),
        dataclasses.replace(base.PREFETCH, arrays=1),  # the managed buffer
        base.PREFETCH_CALLS,
        base.LAUNCH_CALL,
        *base.COPY_CALLS,
        *base.HOST_SIDE,
    )

    def run(self, ctx: base.RunContext) -> CompareExtra:
        session, params = ctx.session, ctx.params
        nbytes = base.FLOAT32_BYTES << params.power
        # one host kind at a time, plus the values, a scratch array and the managed buffer
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=6 * nbytes)
        attributes = ctx.facts[session.device_index].attributes
        supported, skipped = memory.supported_kinds(attributes, SINGLE_GPU_KINDS)
        host_kinds = [kind for kind in supported if kind.host_copies]
        device_kinds = [kind.name for kind in supported if kind.on_device]
        step = ctx.steps(len(host_kinds) + 1 + len(device_kinds))
        every = _EveryKind(ctx, 1 << params.power)
        for kind in host_kinds:
            step(f"{ROWS[kind.name]}, {format_bytes(nbytes)}")
            every.host_kind(kind, skipped)
        step(f"managed memory, {format_bytes(nbytes)}")
        if any(kind.migrates for kind in supported):
            every.managed(skipped)
        every.device_buffer.free()  # the host kinds' copies are done
        for kind in device_kinds:  # cuMemAlloc, then each pool and virtual memory
            step(f"{ROWS[kind]}, {format_bytes(nbytes)}")
            every.device(kind)
        every.access.free()
        step("done")
        return CompareExtra(skipped=skipped)

    def derived(self, result: Result) -> dict:
        return {"bytes_per_array": base.array_bytes(result.parameters)}


class _EveryKind:
    """compare's measurements of one kind after another, sharing the values and buffers."""

    def __init__(self, ctx: base.RunContext, elements: int) -> None:
        import numpy as np

        from memprof.core.access import DirectAccess, float64_sum

        self.ctx, self.session, self.elements = ctx, ctx.session, elements
        self.access = DirectAccess(self.session)
        self.values = np.random.default_rng(5).random(elements, dtype=np.float32)
        self.values_sum = float64_sum(self.values)  # what every kernel read should find
        self.scratch = np.zeros(elements, np.float32)
        self.device_buffer = memory.allocate(self.session, "device", elements)

    def repeat(self, action) -> None:
        self.ctx.measure.repeat(action, self.ctx.params.warmup, self.ctx.params.repeat)

    def allocation_cost(self, kind: str) -> memory.Buffer:
        """Time allocating the kind, each buffer freed before the next, and keep the last one
        to measure with (one more allocation would cost as much as a timed one)."""
        kept: list[memory.Buffer] = []

        def allocate() -> None:
            if kept:
                kept.pop().free()
            kept.append(memory.allocate(self.session, kind, self.elements))

        self.repeat(allocate)
        return kept.pop()

    def check_sum(self, name: str) -> Check:
        """The last kernel read's sum against the values'."""
        return self.access.check_sum(name, self.elements, self.values_sum)

    def host_kind(self, kind_class: memory.MemoryKind, skipped: list[str]) -> None:
        """Allocation, host writes and reads, copies both ways, and a kernel reading it."""
        import numpy as np

        from memprof.core.verify import NAN_BITS, compare_arrays

        ctx, session, profiler, values = self.ctx, self.session, self.ctx.measure, self.values
        kind, d, access = kind_class.name, self.device_buffer, self.access
        buffer = self.allocation_cost(kind)
        self.repeat(lambda: _timed_copyto(profiler, "host_write", kind, buffer.array, values))
        self.repeat(lambda: _timed_copyto(profiler, "host_read", kind, self.scratch, buffer.array))
        ctx.check(compare_arrays(f"host read back, {ROWS[kind]}", self.scratch, values))
        if kind == "pageable":  # the pageable copies' host side, at their size
            measure_host_staging(profiler, self.scratch)
        # NaN where each direction's copies must write: a copy that wrote nothing fails the
        # check (the device buffer held the previous kind's values, this buffer its own)
        session.cuda.memset_d32(d.device_pointer, NAN_BITS, self.elements)
        self.repeat(lambda: memory.copy(session, d, buffer))
        buffer.array.fill(np.nan)
        self.repeat(lambda: memory.copy(session, buffer, d))
        ctx.check(
            compare_arrays(f"copied to the device and back, {ROWS[kind]}", buffer.array, values)
        )
        if kind_class.kernel_access:
            self.repeat(lambda: access.read(buffer.device_pointer, self.elements, kind))
            ctx.check(self.check_sum(f"kernel read, {ROWS[kind]}"))
        if kind == "mapped":  # the same memory through the host pointer (UVA)
            if session.attribute("UNIFIED_ADDRESSING"):
                self.repeat(lambda: access.read(buffer.array.ctypes.data, self.elements, "uva"))
                ctx.check(self.check_sum(f"kernel read, {ROWS['uva']}"))
            else:
                skipped.append("UVA: unifiedAddressing is 0 on this GPU")
        buffer.free()

    def device(self, kind: str) -> None:
        """Device memory's allocation (cuMemAlloc, a pool's, or VMM) and a kernel reading it."""
        d = self.allocation_cost(kind)
        self.session.cuda.memcpy_htod(d.device_pointer, self.values)
        self.repeat(lambda: self.access.read(d.device_pointer, self.elements, kind))
        self.ctx.check(self.check_sum(f"kernel read, {ROWS[kind]}"))
        d.free()

    def managed(self, skipped: list[str]) -> None:
        """Managed memory's first touch, resident read and (where it can) prefetched read."""
        import numpy as np

        from memprof.core.verify import compare_arrays

        session, access, values, elements = self.session, self.access, self.values, self.elements
        profiler = session.profiler
        buffer = self.allocation_cost("managed")
        scratch = np.zeros_like(values)

        def cycle() -> None:
            session.synchronize()
            _timed_copyto(profiler, "host_write", "managed first touch", buffer.array, values)
            access.read(buffer.device_pointer, elements, "managed first touch")
            access.read(buffer.device_pointer, elements, "managed resident")
            session.synchronize()
            _timed_copyto(profiler, "host_read", "managed first touch", scratch, buffer.array)

        self.repeat(cycle)
        self.ctx.check(self.check_sum(f"kernel read, {ROWS['managed resident']}"))
        name = f"host read back, {ROWS['managed first touch']}"
        self.ctx.check(compare_arrays(name, scratch, values))
        if session.attribute("CONCURRENT_MANAGED_ACCESS"):

            def prefetched() -> None:
                session.synchronize()
                np.copyto(buffer.array, values)  # pages back on the host
                prefetch_to_gpu(session, (buffer,), "managed prefetched")
                access.read(buffer.device_pointer, elements, "managed prefetched")

            self.repeat(prefetched)
            self.ctx.check(self.check_sum(f"kernel read, {ROWS['managed prefetched']}"))
        else:
            skipped.append("managed prefetched: needs concurrentManagedAccess")
        buffer.free()


def _timed_copyto(profiler, operation: str, kind: str, destination, source) -> None:
    import numpy as np

    name = f"host {operation.split('_')[1]} (numpy copyto)"
    with profiler.host_clock("host", name, operation, kind, source.nbytes):
        np.copyto(destination, source)


def _cell_figures(result: Result) -> dict[tuple[str, str], Figure]:
    """(row, operation) -> the figures of every cell the table shows."""
    nbytes = base.array_bytes(result.parameters)
    figure_of = figure_finder(result, Compare.measures)
    found = {}
    for m in result.measurements:
        row = {"managed": "managed first touch"}.get(m.kind, m.kind)
        if row not in ROWS or m.operation not in COLUMNS or m.group not in ("gpu", "host", "api"):
            continue
        if m.operation == "alloc" or (m.group in ("gpu", "host") and m.bytes == nbytes):
            found[row, m.operation] = figure_of(m)
    return found


def _figures(result: Result) -> dict[tuple[str, str], float]:
    """(row, operation) -> GB/s for bandwidths, median ms for allocation."""
    return _values(_cell_figures(result))


def _values(found: dict[tuple[str, str], Figure]) -> dict[tuple[str, str], float]:
    return {key: one.median_ms if key[1] == "alloc" else one.gb_per_s for key, one in found.items()}


def shown_rows(figures: dict[tuple[str, str], object]) -> dict[str, str]:
    """The rows a Result shows: every kind's, but an allocator's only where it was measured."""
    return {
        row: label
        for row, label in ROWS.items()
        if row not in MEASURED_ONLY or any((row, operation) in figures for operation in COLUMNS)
    }


def summarize(result: Result) -> Summary:
    nbytes = base.array_bytes(result.parameters)
    found = _cell_figures(result)
    figures = _values(found)
    rows = shown_rows(figures)
    notes = [
        "Allocate: host clock around allocation, median (managed: cuMemAllocManaged, no pages "
        "yet). Copies and kernel reads: "
        + gpu_timing(result)
        + "; host reads and writes: host clock. "
        f"Medians of {base.repetitions(result)}; GB/s = 10^9 bytes/s; best of each column "
        "in bold.",
        "Kernel read: readSum over the buffer from the GPU, 16-byte loads, its sum verified. "
        "Managed first touch: pages migrate to the GPU during the read; host read after it: "
        "they migrate back.",
        *(f"Skipped: {reason}." for reason in result.extra.skipped),
    ]
    title = (
        f"Every memory kind, {format_bytes(nbytes)} per buffer (2^{result.parameters.power} floats)"
    )
    kinds = _table(title, KINDS_TABLE, rows, found, notes)
    for column, operation in enumerate(COLUMNS, start=1):
        present = [
            (figures[row, operation], index)
            for index, row in enumerate(rows)
            if (row, operation) in figures
        ]
        if present:
            _, best_row = min(present) if operation == "alloc" else max(present)
            kinds.highlighted.append((best_row, column))
    ceilings = [
        "Copies, and kernels reading host memory, against the link: "
        f"{detail_of(pcie_ceiling(result))}.",
        "Kernels reading device memory (device, managed once resident) against HBM: "
        f"{detail_of(hbm_ceiling(result.device), 'unknown')}.",
        _pageable_note(result, nbytes),
    ]
    tables = [
        kinds,
        _table("Against each figure's ceiling", AGAINST_CEILINGS, rows, found, ceilings),
    ]
    return Summary(tables=tables, conclusions=recommendations(figures, nbytes), show_profile=False)


def _table(title: str, columns, rows: dict[str, str], found: dict, notes: list[str]) -> Table:
    """A row per memory kind shown, each cell its (kind, operation)'s figure."""
    made = [
        {"memory": label, **{op: found.get((row, op)) for op in COLUMNS}}
        for row, label in rows.items()
    ]
    return table(title, columns, made, notes)


def _pageable_note(result: Result, nbytes: int) -> str:
    """What pageable copies are set against, as this file recorded it."""
    sides = [host_side(result, nbytes, direction) for direction in ("h2d", "d2h")]
    if None in sides:
        return "Pageable copies against the link only (their host side is not in this file)."
    h2d, d2h = sides
    if not h2d.staged:
        return (
            "Pageable copies against the lower of the link and one host thread's memcpy "
            f"between two pageable buffers of this size, this run: {h2d.gb_per_s:.1f} GB/s "
            "(a file from an older memprof: pageable copies can beat it, docs/ceilings.md)."
        )
    return (
        "Pageable copies against the lower of the link and their host side: one host thread "
        "staging the buffer through a 256 KiB buffer, chunk by chunk, this run: "
        f"{h2d.gb_per_s:.1f} GB/s in, {d2h.gb_per_s:.1f} GB/s out."
    )


EQUIVALENT = 0.05  # options within 5% of the fastest are treated as equal


# Every use, the ways of serving it in order of preference (the simpler or safer first), and
# what each way costs: (row, operation, times) terms, the figures the table measured.
Term = tuple[str, str, int]
USES: tuple[tuple[str, tuple[tuple[str, str, tuple[Term, ...]], ...]], ...] = (
    ("Data the GPU uses once", (
        ("pinned copy", "copy it from pinned memory, then read device memory",
         (("pinned", "h2d", 1), ("device", "kernel_read", 1))),
        ("zero-copy", "read it in place from mapped (zero-copy) memory",
         (("mapped", "kernel_read", 1),)),
        ("managed", "managed memory, migrated on demand",
         (("managed first touch", "kernel_read", 1),)),
    )),
    ("Data the GPU reads 10 times", (
        ("device memory", "copy it once to device memory",
         (("pinned", "h2d", 1), ("device", "kernel_read", 10))),
        ("managed", "managed memory (migrates once, then resident)",
         (("managed first touch", "kernel_read", 1), ("managed resident", "kernel_read", 9))),
        ("zero-copy", "keep reading it over PCIe (zero-copy)", (("mapped", "kernel_read", 10),)),
    )),
    ("Data the CPU writes and the GPU consumes", (
        ("pinned", "write into pinned memory and copy it",
         (("pinned", "host_write", 1), ("pinned", "h2d", 1))),
        ("writecombined", "write into write-combined memory and copy it",
         (("writecombined", "host_write", 1), ("writecombined", "h2d", 1))),
        ("mapped", "write into mapped memory and let the kernel read it there",
         (("mapped", "host_write", 1), ("mapped", "kernel_read", 1))),
        ("pageable", "write into numpy memory and copy it",
         (("pageable", "host_write", 1), ("pageable", "h2d", 1))),
    )),
    ("Results the CPU reads back", (
        ("pinned", "copy them into pinned memory",
         (("pinned", "d2h", 1), ("pinned", "host_read", 1))),
        ("pageable", "copy them into numpy memory",
         (("pageable", "d2h", 1), ("pageable", "host_read", 1))),
        ("managed", "leave them in managed memory and read them there",
         (("managed first touch", "host_read", 1),)),
        ("writecombined", "copy them into write-combined memory",
         (("writecombined", "d2h", 1), ("writecombined", "host_read", 1))),
    )),
)  # fmt: skip


# Ways the docs forbid for a use, whatever one run measured: never recommended. Where one
# comes within 5% of the choice or beats it, the platform hid its trap, and the sentence says
# that, never that it is as good (docs/write-combined.md: never read it on the CPU).
TRAPS = {
    ("Results the CPU reads back", "writecombined"): (
        "this platform hid the write-combined trap: where the memory is really "
        "write-combined, CPU reads of it are many times slower, so never read it back "
        "(docs/write-combined.md)"
    ),
}


def recommendations(figures: dict[tuple[str, str], float], nbytes: int) -> list[str]:
    """One recommendation per use: the fastest measured way, the first listed of those within
    5% (so noise never picks a kind with a known trap), never one of TRAPS."""
    return [sentence(use, ways, figures, nbytes) for use, ways in USES]


def sentence(use: str, ways, figures: dict[tuple[str, str], float], nbytes: int) -> str:
    """The recommendation for one use, from the ways whose every figure was measured."""
    totals = {}
    for name, _, terms in ways:
        rates = [figures.get((row, operation)) for row, operation, _ in terms]
        if all(rates):
            totals[name] = math.fsum(
                times * nbytes / (rate * 1e9) * 1e3
                for (_, _, times), rate in zip(terms, rates, strict=True)
            )
    allowed = [name for name, _, _ in ways if name in totals and (use, name) not in TRAPS]
    if not allowed:
        return f"{use}: none of its ways was measured."
    fastest = min(totals[name] for name in allowed)
    within = {name for name, total in totals.items() if total <= fastest * (1 + EQUIVALENT)}
    equal = [name for name in allowed if name in within]
    choice = equal[0]  # ways are listed in order of preference
    phrase = next(phrase for name, phrase, _ in ways if name == choice)
    others = ", ".join(
        f"{name} {format_ms(time)}"
        for name, time in sorted(totals.items(), key=lambda item: item[1])
        if name != choice
    )
    text = f"{use}: {phrase} ({format_ms(totals[choice])} for {format_bytes(nbytes)}; {others})"
    if len(equal) > 1:
        also = " and ".join(name for name in equal if name != choice)
        text += f"; {also} came within 5%, as good here"
    for name, _, _ in ways:
        if (use, name) in TRAPS and name in totals and totals[name] < fastest:
            text += f"; {name} was faster only because {TRAPS[use, name]}"
        elif (use, name) in TRAPS and name in within:
            text += f"; {name} came within 5% only because {TRAPS[use, name]}"
    return text + "."
