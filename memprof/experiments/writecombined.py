"""`memprof writecombined` (alias `wc`): cached vs write-combined pinned memory (seeds 002, 004).

Write-combined memory bypasses the CPU's caches: host writes stream straight out and
transfers skip PCIe snooping, but every host read goes uncached to DRAM, which is the
documented trap. Measured for cached pinned and write-combined buffers alike: HtoD and
DtoH bandwidth, host write and host read throughput, and a kernel reading the buffers
through their mapped device pointers.
"""

from __future__ import annotations

from memprof.experiments import base, consistency
from memprof.experiments.common import SumArrays, gpu_timing, size_label, time_and_rate
from memprof.model.ceilings import cell, detail_of, pcie_ceiling
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s, format_ratio
from memprof.model.results import Result
from memprof.model.summary import Summary, Table

# cached pinned memory, mapped so the same buffers serve the kernel; and write-combined
KINDS = {"mapped": "cached pinned", "writecombined": "write-combined pinned"}
WriteCombinedParams = base.OneSize  # writecombined's: one size of arrays


class WriteCombined(base.Experiment):
    name = "writecombined"
    Params = WriteCombinedParams
    Extra = base.ArrayBytes
    measures = (
        *base.ONE_COPY.values(),
        base.HOST_WRITE,
        base.HOST_READ,
        base.Measure("gpu", "kernel", "sumArrays reading a and b (mapped)", "one operation"),
        *base.CORE_RECORDS,
    )

    def run(self, ctx: base.RunContext) -> base.ArrayBytes:
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
            ctx.progress(KINDS[kind], done, len(KINDS))
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
            profiler.repeat(
                lambda kind=kind, a=a, b=b: sums.launch(
                    a.device_pointer, b.device_pointer, d_res, kind
                ),
                params.warmup,
                params.repeat,
            )
            name = f"sumArrays {size_label(params.power)}, {KINDS[kind]} mapped"
            ctx.check(sums.verify(d_res, name))
            a.free()
            b.free()
        for buffer in (d_a, d_res):
            buffer.free()
        ctx.progress("done", len(KINDS), len(KINDS))
        return base.ArrayBytes(bytes_per_array=nbytes)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        nbytes = consistency.array_bytes(result)
        moves = {
            **consistency.SUM_ARRAYS_MOVES,
            ("host", "host_write"): 1,
            ("host", "host_read"): 1,
        }
        consistency.measured_bytes(result, moves, [nbytes])
        consistency.takes_time(result, [key for key, arrays in moves.items() if arrays])


ROWS = (
    ("h2d", "gpu", "copy host → device"),
    ("d2h", "gpu", "copy device → host"),
    ("host_write", "host", "host writes the buffer"),
    ("host_read", "host", "host reads the buffer"),
    ("kernel", "gpu", "kernel reads a and b (mapped)"),
)


def summarize(result: Result) -> Summary:
    speedups = {
        operation: _median(result, operation, group, "mapped")
        / _median(result, operation, group, "writecombined")
        for operation, group, _ in ROWS
    }
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
        read = base.find(result, base.HOST_READ, "writecombined").stats.median_ms
        nbytes = result.extra.bytes_per_array
        conclusion = (
            "The documented trap did not appear on this machine: the host read write-combined "
            f"memory at {format_gb_per_s(bandwidth_gb_per_s(nbytes, read))} GB/s, "
            f"{read_slowdown:.2f}x the time of cached memory, and {transfers}. Some platforms "
            "(virtual machines among them) map it as ordinary cached memory; where it is really "
            "write-combined, CPU reads of it are many times slower: never read it back."
        )
    return Summary(
        tables=[_side_by_side(result), _against_ceiling(result)], conclusions=[conclusion]
    )


def _median(result: Result, operation: str, group: str, kind: str) -> float:
    return result.find(operation, kind, group).stats.median_ms


def _moved(operation: str, nbytes: int) -> int:
    """The bytes a row's operation moves: the kernel reads two arrays."""
    return 2 * nbytes if operation == "kernel" else nbytes


def _side_by_side(result: Result) -> Table:
    """Every operation on cached and on write-combined memory: times, GB/s and the speed-up."""
    nbytes = result.extra.bytes_per_array
    table = Table(
        f"Cached vs write-combined pinned memory, {format_bytes(nbytes)} per buffer",
        [
            "Operation",
            "Cached: median",
            "Cached GB/s",
            "Write-combined: median",
            "WC GB/s",
            "WC vs cached",
        ],
        notes=[
            "Copies and kernels: " + gpu_timing(result) + "; host reads and writes (numpy "
            "copyto): host clock. "
            "Medians. GB/s = 10^9 bytes/s; the kernel's GB/s counts the two input arrays.",
            "WC vs cached: how many times faster write-combined was (below 1x: slower).",
        ],
    )
    for operation, group, label in ROWS:
        moved = _moved(operation, nbytes)
        cached = _median(result, operation, group, "mapped")
        combined = _median(result, operation, group, "writecombined")
        table.add_row(
            label,
            *time_and_rate(moved, cached),
            *time_and_rate(moved, combined),
            format_ratio(cached / combined),
        )
    return table


def _against_ceiling(result: Result) -> Table:
    """What crosses the link (copies and kernel reads) as a share of it, per kind."""
    link = pcie_ceiling(result)
    against = Table(
        "Over the link, against its ceiling",
        ["Operation", "Cached", "Write-combined"],
        notes=[f"Copies and kernel reads cross the link: {detail_of(link)}."],
    )
    for operation, group, label in ROWS:
        if group != "gpu":
            continue  # host reads and writes stay on the host
        moved = _moved(operation, result.extra.bytes_per_array)
        rates = [
            bandwidth_gb_per_s(moved, _median(result, operation, group, kind)) for kind in KINDS
        ]
        against.add_row(label, *(cell(link, rate) for rate in rates))
    return against
