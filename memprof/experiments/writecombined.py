"""`memprof writecombined` (alias `wc`): cached vs write-combined pinned memory (seeds 002, 004).

Write-combined memory bypasses the CPU's caches: host writes stream out and transfers skip PCIe
snooping, but every host read goes uncached to DRAM (the documented trap). Each kind: copies
both ways, host writes and reads, and a kernel reading it through its mapped device pointer.
"""

from __future__ import annotations

import dataclasses
from functools import partial

from memprof.experiments import base
from memprof.experiments.common import SumArrays, gpu_timing, size_label
from memprof.model.ceilings import detail_of, pcie_ceiling
from memprof.model.figures import Derived, figure
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.results import Result
from memprof.model.summary import Column, Summary, table

# cached pinned memory, mapped so the same buffers serve the kernel; and write-combined
KINDS = {"mapped": "cached pinned", "writecombined": "write-combined pinned"}
WriteCombinedParams = base.OneSize  # writecombined's: one size of arrays

# (measure, row label): every operation timed on each kind (no kind of them is staged, so
# the copies' call, ONE_COPY's for pageable copies, is never read)
ROWS = (
    *(
        (
            dataclasses.replace(copy, kinds=tuple(KINDS), shows="latency"),
            f"copy {base.DIRECTIONS[direction]}",
        )
        for direction, copy in base.ONE_COPY.items()
    ),
    (base.HOST_WRITE, "host writes the buffer"),
    (base.HOST_READ, "host reads the buffer"),
    (
        dataclasses.replace(
            base.SUM_ARRAYS, what="sumArrays reading a and b (mapped)", kinds=tuple(KINDS),
            bound="link",
        ),
        "kernel reads a and b (mapped)",
    ),
)  # fmt: skip


class WriteCombined(base.Experiment):
    name = "writecombined"
    Params = WriteCombinedParams
    measures = (*(measure for measure, _ in ROWS), *base.CORE_RECORDS)

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        import numpy as np

        from memprof.core import memory
        from memprof.core.verify import compare_arrays

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        for kind in KINDS:
            memory.MEMORY_KINDS[kind].check_supported(session)
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=8 * nbytes)
        sums = SumArrays(session, elements)
        a_values, b_values = sums.a, sums.b
        received = np.zeros(elements, np.float32)
        d_a, d_res = (memory.allocate(session, "device", elements) for _ in range(2))
        for done, kind in enumerate(KINDS):
            ctx.progress(f"{KINDS[kind]}, {format_bytes(nbytes)}", done, len(KINDS))
            a, b = (memory.allocate(session, kind, elements) for _ in range(2))

            def host_write(kind: str = kind, a=a, b=b) -> None:
                with profiler.host_clock("host", "host write", "host_write", kind, nbytes):
                    np.copyto(a.array, a_values)
                b.array[:] = b_values

            def host_read(kind: str = kind, a=a) -> None:
                with profiler.host_clock("host", "host read", "host_read", kind, nbytes):
                    np.copyto(received, a.array)

            profiler.repeat(host_write, params.warmup, params.repeat)
            profiler.repeat(host_read, params.warmup, params.repeat)
            ctx.check(compare_arrays(f"host read back, {KINDS[kind]}", received, a_values))
            profiler.repeat(lambda a=a: memory.copy(session, d_a, a), params.warmup, params.repeat)
            profiler.repeat(lambda a=a: memory.copy(session, a, d_a), params.warmup, params.repeat)
            a.array[:] = a_values  # the DtoH copies overwrote it
            launch = partial(sums.launch, a.device_pointer, b.device_pointer, d_res, kind)
            profiler.repeat(launch, params.warmup, params.repeat)
            name = f"sumArrays {size_label(params.power)}, {KINDS[kind]} mapped"
            ctx.check(sums.verify(d_res, name))
            a.free()
            b.free()
        for buffer in (d_a, d_res):
            buffer.free()
        ctx.progress("done", len(KINDS), len(KINDS))
        return base.NoExtra()

    def derived(self, result: Result) -> dict:
        return {"bytes_per_array": base.array_bytes(result.parameters)}


def summarize(result: Result) -> Summary:
    found = {
        (measure.operation, kind): figure(result, base.find(result, measure, kind), measure)
        for measure, _ in ROWS
        for kind in KINDS
    }
    rows, over_link = [], []  # every operation; what crosses the link (copies, kernel reads)
    speedups = {}  # operation -> how many times faster write-combined was, the table's ratio
    for measure, label in ROWS:
        cached, combined = (found[measure.operation, kind] for kind in KINDS)
        against = Derived(f"{measure.operation}: WC vs cached", (cached, combined), "ratio")
        speedups[measure.operation] = against.ratio
        rows.append({"operation": label, "mapped": cached, "writecombined": combined,
                     "against": against})  # fmt: skip
        if measure.bound is not None:
            over_link.append(rows[-1])
    read_slowdown = 1 / speedups["host_read"]
    transfers = (
        f"copies to the device ran at {speedups['h2d']:.2f}x and host writes at "
        f"{speedups['host_write']:.2f}x the cached speed"
    )
    if read_slowdown >= 1.5:
        conclusion = (
            f"The host read write-combined memory {read_slowdown:.1f}x slower than cached pinned "
            f"memory, while {transfers}: use write-combined memory only for buffers the CPU "
            "fills and never reads back."
        )
    else:
        read = found["host_read", "writecombined"]
        conclusion = (
            "The documented trap did not appear on this machine: the host read write-combined "
            f"memory at {format_gb_per_s(read.gb_per_s)} GB/s, "
            f"{read_slowdown:.2f}x the time of cached memory, and {transfers}. Some platforms "
            "(virtual machines among them) map it as ordinary cached memory; where it is really "
            "write-combined, CPU reads of it are many times slower: never read it back."
        )
    notes = [
        f"Copies and kernels: {gpu_timing(result)}; host reads and writes (numpy copyto): host "
        "clock. Medians. GB/s = 10^9 bytes/s; the kernel's GB/s counts the two input arrays.",
        "WC vs cached: how many times faster write-combined was (below 1x: slower).",
    ]
    nbytes = base.array_bytes(result.parameters)
    title = f"Cached vs write-combined pinned memory, {format_bytes(nbytes)} per buffer"
    link_notes = [f"Copies and kernel reads cross the link: {detail_of(pcie_ceiling(result))}."]
    return Summary(
        tables=[
            table(title, SIDE_BY_SIDE, rows, notes),
            table("Over the link, against its ceiling", AGAINST_CEILING, over_link, link_notes),
        ],
        conclusions=[conclusion],
    )


SIDE_BY_SIDE = (
    Column("Operation", "operation"),
    Column("Cached: median", "mapped", "median_ms"),
    Column("Cached GB/s", "mapped", "gb_per_s"),
    Column("Write-combined: median", "writecombined", "median_ms"),
    Column("WC GB/s", "writecombined", "gb_per_s"),
    Column("WC vs cached", "against", "ratio"),
)
AGAINST_CEILING = (
    Column("Operation", "operation"),
    Column("Cached", "mapped", "share"),
    Column("Write-combined", "writecombined", "share"),
)
