"""`memprof compare`: every memory kind side by side at one size, and what to use when.

For each kind, where it applies: what allocating the buffer costs, HtoD and DtoH copy
bandwidth, the bandwidth of a kernel reading the buffer directly (readSum, verified), and
the host's write and read throughput (numpy copyto). Managed memory appears three times:
read by a kernel right after the host wrote it (pages migrate on demand), read again
(resident), and read after cuMemPrefetchAsync.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import memory
from memprof.experiments import consistency
from memprof.experiments.base import (
    COPY_CALLS,
    FLOAT32_BYTES,
    LAUNCH_CALL,
    Experiment,
    Measure,
    Power,
    Repeat,
    RunContext,
    Warmup,
    power_param,
    repeat_param,
    warmup_param,
)
from memprof.experiments.common import gpu_timing
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.model.schema import ByteCount
from memprof.model.summary import Summary, Table

SINGLE_GPU_KINDS = memory.single_gpu_kinds()
# Rows that are not memory kinds: ways of using one (a migrating kind shows three moments).
UVA_ROW = ("uva", "UVA: mapped, host pointer")  # after mapped: its host pointer in a kernel
MIGRATION_MOMENTS = ("first touch", "resident", "prefetched")


def table_rows(kinds: list[memory.MemoryKind]) -> dict[str, str]:
    """Row key -> label for every kind, in memory.MEMORY_KINDS' order."""
    rows = {}
    for kind in kinds:
        if kind.migrates:
            rows.update(
                {f"{kind.name} {moment}": f"{kind.name}, {moment}" for moment in MIGRATION_MOMENTS}
            )
        else:
            rows[kind.name] = kind.label
        if kind.name == "mapped":
            rows[UVA_ROW[0]] = UVA_ROW[1]
    return rows


ROWS = table_rows(SINGLE_GPU_KINDS)
COLUMNS = {  # operation: (header, larger is better)
    "alloc": ("Allocate", False),
    "h2d": ("HtoD GB/s", True),
    "d2h": ("DtoH GB/s", True),
    "kernel_read": ("Kernel read GB/s", True),
    "host_write": ("Host write GB/s", True),
    "host_read": ("Host read GB/s", True),
}


@dataclass(frozen=True)
class CompareParams:
    power: Power = power_param(24)  # 2^24 float32 = 64 MiB
    repeat: Repeat = repeat_param(5)
    warmup: Warmup = warmup_param(1)


@dataclass(frozen=True)
class CompareExtra:
    bytes_per_array: ByteCount
    skipped: list[str]


class Compare(Experiment):
    name = "compare"
    help = "Every memory kind side by side, and which to use for what, from the measured figures."
    Params = CompareParams
    Extra = CompareExtra
    gpus = "one_or_every"
    measures = (
        Measure("api", "alloc", "a driver allocation of each kind", "host clock"),
        Measure("api", "free", "its free", "host clock"),
        Measure(
            "host", "alloc", "numpy.empty and every page written (+ registration)", "host clock"
        ),
        Measure("host", "free", "its free (and unregistration)", "host clock"),
        Measure("host", "host_write", "numpy copyto into the buffer", "host clock"),
        Measure("host", "host_read", "numpy copyto out of the buffer", "host clock"),
        Measure("gpu", "h2d", "one copy host → device", "one operation"),
        Measure("gpu", "d2h", "one copy device → host", "one operation"),
        Measure("gpu", "kernel_read", "readSum over the buffer", "one operation"),
        Measure(
            "gpu", "prefetch", "cuMemPrefetchAsync of the managed buffer", "one operation", False
        ),
        LAUNCH_CALL,
        *COPY_CALLS,
    )

    def run(self, ctx: RunContext) -> CompareExtra:
        import numpy as np

        from memprof.core.access import DirectAccess
        from memprof.core.verify import compare_arrays

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        facts = ctx.facts[session.device_index]
        elements = 1 << params.power
        nbytes = elements * FLOAT32_BYTES
        # one host kind at a time, plus the values, a scratch array and the managed buffer
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=6 * nbytes)
        access = DirectAccess(session)
        values = np.random.default_rng(5).random(elements, dtype=np.float32)
        scratch = np.zeros(elements, np.float32)
        d = memory.allocate(session, "device", elements)
        supported, skipped = memory.supported_kinds(facts.attributes, SINGLE_GPU_KINDS)
        host_kinds = [kind for kind in supported if kind.host_copies]
        steps = len(host_kinds) + 2

        def repeat(action) -> None:
            profiler.repeat(action, params.warmup, params.repeat)

        def allocation_cost(kind: str) -> memory.Buffer:
            repeat(lambda: memory.allocate(session, kind, elements).free())
            return memory.allocate(session, kind, elements)

        for step, kind_class in enumerate(host_kinds):
            kind = kind_class.name
            ctx.progress(ROWS[kind], step, steps)
            buffer = allocation_cost(kind)
            repeat(
                lambda b=buffer, k=kind: _timed_copyto(profiler, "host_write", k, b.array, values)
            )
            repeat(
                lambda b=buffer, k=kind: _timed_copyto(profiler, "host_read", k, scratch, b.array)
            )
            ctx.check(compare_arrays(f"host read back, {ROWS[kind]}", scratch, values))
            repeat(lambda b=buffer: memory.copy(session, d, b))
            repeat(lambda b=buffer: memory.copy(session, b, d))
            ctx.check(
                compare_arrays(f"copied to the device and back, {ROWS[kind]}", buffer.array, values)
            )
            if kind_class.kernel_access:
                repeat(lambda b=buffer, k=kind: access.read(b.device_pointer, elements, k))
                ctx.check(access.check_sum(f"kernel read, {ROWS[kind]}", values))
            if kind == "mapped":  # the same memory through the host pointer (UVA)
                if session.attribute("UNIFIED_ADDRESSING"):
                    repeat(lambda b=buffer: access.read(b.array.ctypes.data, elements, "uva"))
                    ctx.check(access.check_sum(f"kernel read, {ROWS['uva']}", values))
                else:
                    skipped.append("UVA: unifiedAddressing is 0 on this GPU")
            buffer.free()

        ctx.progress("managed", len(host_kinds), steps)
        if any(kind.migrates for kind in supported):
            ctx.checks += _managed(session, access, values, repeat, allocation_cost, skipped)

        ctx.progress("device", len(host_kinds) + 1, steps)
        d.free()
        d = allocation_cost("device")
        session.cuda.memcpy_htod(d.device_pointer, values)
        repeat(lambda: access.read(d.device_pointer, elements, "device"))
        ctx.check(access.check_sum(f"kernel read, {ROWS['device']}", values))
        d.free()
        access.free()
        ctx.progress("done", steps, steps)
        return CompareExtra(bytes_per_array=nbytes, skipped=skipped)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        nbytes = consistency.array_bytes(result)
        consistency.measured_bytes(result, ARRAYS_MOVED, [nbytes])
        for kind in ("pinned", "pageable"):  # every GPU has them: the recommendations' basis
            for group, operation in (*COPIES, ("host", "host_write"), ("host", "host_read")):
                consistency.present(result, group, operation, kind, "every compare run records")
        consistency.present(result, "gpu", "kernel_read", "device", "every compare run records")


COPIES = (("gpu", "h2d"), ("gpu", "d2h"))
ARRAYS_MOVED = {  # every operation moves one buffer; a launch or a driver call nothing
    **{key: 1 for key in (*COPIES, ("api", "h2d"), ("api", "d2h"))},
    **{(group, operation): 1 for group in ("api", "host") for operation in ("alloc", "free")},
    **{("host", operation): 1 for operation in ("host_write", "host_read")},
    ("gpu", "kernel_read"): 1,
    ("gpu", "prefetch"): 1,
    ("api", "launch"): 0,
    ("api", "driver_call"): 0,
}


def _timed_copyto(profiler, operation: str, kind: str, destination, source) -> None:
    import numpy as np

    with profiler.host_clock(
        "host", f"host {operation.split('_')[1]} (numpy copyto)", operation, kind, source.nbytes
    ):
        np.copyto(destination, source)


def _managed(session, access, values, repeat, allocation_cost, skipped) -> list:
    import numpy as np

    from memprof.core import driver
    from memprof.core.verify import compare_arrays

    profiler = session.profiler
    elements = values.size
    buffer = allocation_cost("managed")
    scratch = np.zeros_like(values)
    concurrent = bool(session.attribute("CONCURRENT_MANAGED_ACCESS"))

    def cycle() -> None:
        session.synchronize()
        _timed_copyto(profiler, "host_write", "managed first touch", buffer.array, values)
        access.read(buffer.device_pointer, elements, "managed first touch")
        access.read(buffer.device_pointer, elements, "managed resident")
        session.synchronize()
        _timed_copyto(profiler, "host_read", "managed first touch", scratch, buffer.array)

    repeat(cycle)
    checks = [access.check_sum(f"kernel read, {ROWS['managed resident']}", values)]
    checks.append(compare_arrays(f"host read back, {ROWS['managed first touch']}", scratch, values))
    if concurrent:

        def prefetched() -> None:
            session.synchronize()
            np.copyto(buffer.array, values)  # pages back on the host
            with profiler.events(
                "gpu",
                "[Unified Memory prefetch HtoD]",
                "prefetch",
                "managed prefetched",
                buffer.nbytes,
            ):
                driver.prefetch(buffer.device_pointer, buffer.nbytes, session.device_index)
            access.read(buffer.device_pointer, elements, "managed prefetched")

        repeat(prefetched)
        checks.append(access.check_sum(f"kernel read, {ROWS['managed prefetched']}", values))
    else:
        skipped.append("managed prefetched: needs concurrentManagedAccess")
    buffer.free()
    return checks


def _figures(result: Result) -> dict[tuple[str, str], float]:
    """(row, operation) -> GB/s for bandwidths, median ms for allocation."""
    nbytes = result.extra.bytes_per_array
    figures = {}
    for m in result.measurements:
        row = {"managed": "managed first touch"}.get(m.kind, m.kind)
        if row not in ROWS or m.operation not in COLUMNS or m.group not in ("gpu", "host", "api"):
            continue
        if m.operation == "alloc":
            figures[row, "alloc"] = m.stats.median_ms
        elif m.group in ("gpu", "host") and m.bytes == nbytes:
            figures[row, m.operation] = bandwidth_gb_per_s(nbytes, m.stats.median_ms)
    return figures


def summarize(result: Result) -> Summary:
    nbytes = result.extra.bytes_per_array
    figures = _figures(result)
    table = Table(
        f"Every memory kind, {format_bytes(nbytes)} per buffer "
        f"(2^{result.parameters.power} floats)",
        ["Memory", *(header for header, _ in COLUMNS.values())],
        notes=[
            "Allocate: host clock around allocation, median (managed: cuMemAllocManaged, no pages "
            "yet). Copies and kernel reads: "
            + gpu_timing(result)
            + "; host reads and writes: host clock. "
            f"Medians of {result.parameters.repeat}; GB/s = 10^9 bytes/s; best of each column "
            "in bold.",
            "Kernel read: readSum over the buffer from the GPU, 16-byte loads, its sum verified. "
            "Managed first touch: pages migrate to the GPU during the read; host read after it: "
            "they migrate back.",
        ]
        + [f"Skipped: {reason}." for reason in result.extra.skipped],
    )
    for row, label in ROWS.items():
        cells = []
        for operation in COLUMNS:
            value = figures.get((row, operation))
            if value is None:
                cells.append("-")
            else:
                cells.append(format_ms(value) if operation == "alloc" else format_gb_per_s(value))
        table.add_row(label, *cells)
    for column, (operation, (_, larger_is_better)) in enumerate(COLUMNS.items(), start=1):
        present = [
            (figures[row, operation], index)
            for index, row in enumerate(ROWS)
            if (row, operation) in figures
        ]
        if present:
            _, best_row = max(present) if larger_is_better else min(present)
            table.highlighted.append((best_row, column))
    return Summary(tables=[table], conclusions=recommendations(figures, nbytes), show_profile=False)


EQUIVALENT = 0.05  # options within 5% of the fastest are treated as equal


def recommendations(figures: dict[tuple[str, str], float], nbytes: int) -> list[str]:
    """One recommendation per use: the fastest measured way, with the times that justify it.

    Options within 5% of the fastest count as equal, and the one listed first (the simpler
    or safer) is recommended, so run-to-run noise never picks a kind with a known trap.
    """

    def ms(row: str, operation: str) -> float | None:
        bandwidth = figures.get((row, operation))
        return nbytes / (bandwidth * 1e9) * 1e3 if bandwidth else None

    def sentence(use: str, options: dict[str, tuple[str, list[float | None]]]) -> str:
        totals = {name: sum(parts) for name, (_, parts) in options.items() if None not in parts}
        fastest = min(totals.values())
        equal = [
            name
            for name in options
            if name in totals and totals[name] <= fastest * (1 + EQUIVALENT)
        ]
        choice = equal[0]  # options are listed in order of preference
        others = ", ".join(
            f"{name} {format_ms(time)}"
            for name, time in sorted(totals.items(), key=lambda item: item[1])
            if name != choice
        )
        size = format_bytes(nbytes)
        text = f"{use}: {options[choice][0]} ({format_ms(totals[choice])} for {size}; {others})"
        if len(equal) > 1:
            also = " and ".join(name for name in equal if name != choice)
            text += f"; {also} came within 5%, as good here"
        return text + "."

    device_read = ms("device", "kernel_read")
    return [
        sentence(
            "Data the GPU uses once",
            {
                "pinned copy": (
                    "copy it from pinned memory, then read device memory",
                    [ms("pinned", "h2d"), device_read],
                ),
                "zero-copy": (
                    "read it in place from mapped (zero-copy) memory",
                    [ms("mapped", "kernel_read")],
                ),
                "managed": (
                    "managed memory, migrated on demand",
                    [ms("managed first touch", "kernel_read")],
                ),
            },
        ),
        sentence(
            "Data the GPU reads 10 times",
            {
                "device memory": (
                    "copy it once to device memory",
                    [ms("pinned", "h2d")] + [device_read] * 10,
                ),
                "managed": (
                    "managed memory (migrates once, then resident)",
                    [ms("managed first touch", "kernel_read")]
                    + [ms("managed resident", "kernel_read")] * 9,
                ),
                "zero-copy": (
                    "keep reading it over PCIe (zero-copy)",
                    [ms("mapped", "kernel_read")] * 10,
                ),
            },
        ),
        sentence(
            "Data the CPU writes and the GPU consumes",
            {
                "pinned": (
                    "write into pinned memory and copy it",
                    [ms("pinned", "host_write"), ms("pinned", "h2d")],
                ),
                "writecombined": (
                    "write into write-combined memory and copy it",
                    [ms("writecombined", "host_write"), ms("writecombined", "h2d")],
                ),
                "mapped": (
                    "write into mapped memory and let the kernel read it there",
                    [ms("mapped", "host_write"), ms("mapped", "kernel_read")],
                ),
                "pageable": (
                    "write into numpy memory and copy it",
                    [ms("pageable", "host_write"), ms("pageable", "h2d")],
                ),
            },
        ),
        sentence(
            "Results the CPU reads back",
            {
                "pinned": (
                    "copy them into pinned memory",
                    [ms("pinned", "d2h"), ms("pinned", "host_read")],
                ),
                "pageable": (
                    "copy them into numpy memory",
                    [ms("pageable", "d2h"), ms("pageable", "host_read")],
                ),
                "managed": (
                    "leave them in managed memory and read them there",
                    [ms("managed first touch", "host_read")],
                ),
                "writecombined": (
                    "copy them into write-combined memory",
                    [ms("writecombined", "d2h"), ms("writecombined", "host_read")],
                ),
            },
        ),
    ]
