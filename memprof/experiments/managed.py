"""`memprof managed`: seed 000's unified memory, and what its page migration costs.

With managed a, b and res that the host has just written, sumArrays is timed
  (a) first launch: every page the kernel touches migrates to the GPU on demand,
  (b) next launch: the pages are resident,
  (c) the same work with cuMemAlloc and explicit copies,
  (d) first launch after cuMemPrefetchAsync moved the pages ahead of time,
  (e) the host's first read of the result afterwards (pages migrate back),
  (f) the first launch under each cuMemAdvise hint.
Each cycle starts with the host writing the inputs, which brings the pages back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from memprof.experiments import consistency
from memprof.experiments.base import (
    COPY_CALLS,
    FLOAT32_BYTES,
    LAUNCH_CALL,
    MEMSET_CALL,
    POISON,
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
from memprof.experiments.common import gpu_timing, input_arrays, launch_sum
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s, format_ms
from memprof.model.params import CommaList, param
from memprof.model.results import Result
from memprof.model.schema import DISTINCT, ByteCount
from memprof.model.summary import Summary, Table

Advice = Literal["read-mostly", "preferred-location", "accessed-by"]  # memprof.core.driver.ADVICE
ADVICE_CHOICES: tuple[Advice, ...] = get_args(Advice)


@dataclass(frozen=True)
class ManagedParams:
    power: Power = power_param(22)
    repeat: Repeat = repeat_param(10)
    warmup: Warmup = warmup_param(1, "Untimed cycles before timing (0 to 1000).")
    prefetch: bool = param(True, "Also time cuMemPrefetchAsync to the GPU before the kernel.")
    advice: Annotated[tuple[Advice, ...], DISTINCT] = param(
        ADVICE_CHOICES,
        "Time the first launch under these cuMemAdvise hints (default: each).",
        flags=("--advise",),
        form=CommaList(),
    )


@dataclass(frozen=True)
class ManagedExtra:
    bytes_per_array: ByteCount
    concurrent_managed_access: bool
    skipped: list[str]


class Managed(Experiment):
    name = "managed"
    help = "Unified (managed) memory: on-demand page migration, prefetch and advice, vs copies."
    Params = ManagedParams
    Extra = ManagedExtra
    measures = (
        Measure("host", "host_write", "the host writing a, b, res", "host clock"),
        Measure("host", "host_read", "the host reading res", "host clock"),
        Measure("gpu", "kernel_first", "the first launch after the host wrote", "one operation"),
        Measure("gpu", "kernel", "the next launch (pages resident)", "one operation"),
        Measure("gpu", "h2d", "explicit copies: host → device", "one operation"),
        Measure("gpu", "d2h", "explicit copies: device → host", "one operation"),
        Measure("span", "end_to_end", "explicit copies: 2 HtoD + kernel + DtoH", "end to end"),
        Measure("gpu", "prefetch", "cuMemPrefetchAsync of a, b, res", "one operation", False),
        Measure("api", "prefetch", "cuMemPrefetchAsync calls", "host clock", False),
        Measure("api", "advise", "cuMemAdvise calls", "host clock", False),
        POISON,
        LAUNCH_CALL,
        MEMSET_CALL,
        *COPY_CALLS,
    )

    def run(self, ctx: RunContext) -> ManagedExtra:
        import numpy as np

        from memprof.core import driver, memory
        from memprof.core.kernels import load_kernel
        from memprof.core.verify import compare_arrays

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        memory.MEMORY_KINDS["managed"].check_supported(session)
        elements = 1 << params.power
        nbytes = elements * FLOAT32_BYTES
        # Managed memory may all land on the GPU: never ask for more than is free there.
        memory.require_memory(session, device_bytes=6 * nbytes, host_bytes=8 * nbytes)
        concurrent = bool(session.attribute("CONCURRENT_MANAGED_ACCESS"))
        kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
        a_values, b_values, expected = input_arrays(elements)
        a, b, res = (memory.allocate(session, "managed", elements) for _ in range(3))
        received = np.zeros(elements, np.float32)
        skipped: list[str] = []
        steps = 2 + (1 if params.prefetch else 0) + len(params.advice)

        def cycle(kind: str, before_kernel=None) -> None:
            """Host writes the inputs, two launches, host reads the result."""
            session.synchronize()  # always, as required where concurrentManagedAccess is 0
            with profiler.host_clock(
                "host", "host write a, b, res", "host_write", kind, 3 * nbytes
            ):
                a.array[:] = a_values
                b.array[:] = b_values
                res.array.fill(np.nan)  # poison: the kernel must write every element
            if before_kernel:
                before_kernel(kind)
            pointers = (a.device_pointer, b.device_pointer, res.device_pointer, elements)
            kernel.launch(
                session, elements, *pointers, kind=kind, nbytes=3 * nbytes, operation="kernel_first"
            )
            kernel.launch(session, elements, *pointers, kind=kind, nbytes=3 * nbytes)
            session.synchronize()
            with profiler.host_clock("host", "host read res", "host_read", kind, nbytes):
                np.copyto(received, res.array)

        def prefetch_to_gpu(kind: str) -> None:
            with (
                profiler.events(
                    "gpu", "[Unified Memory prefetch HtoD]", "prefetch", kind, 3 * nbytes
                ),
                profiler.api("cuMemPrefetchAsync", "prefetch", kind),
            ):
                for buffer in (a, b, res):
                    driver.prefetch(buffer.device_pointer, nbytes, session.device_index)

        def read_resident_host_memory() -> None:
            with profiler.host_clock("host", "host read res", "host_read", "pageable", nbytes):
                np.copyto(received, a_values)

        ctx.progress("on-demand migration", 0, steps)
        profiler.repeat(lambda: cycle("managed"), params.warmup, params.repeat)
        ctx.check(compare_arrays("sumArrays, managed memory", received, expected))
        profiler.repeat(read_resident_host_memory, params.warmup, params.repeat)

        ctx.progress("explicit copies", 1, steps)
        host_a, host_b, out = (memory.allocate(session, "pinned", elements) for _ in range(3))
        host_a.array[:], host_b.array[:] = a_values, b_values
        d_a, d_b, d_res = (memory.allocate(session, "device", elements) for _ in range(3))

        def explicit_copies() -> None:
            with profiler.events(
                "span", "2 HtoD + kernel + DtoH", "end_to_end", "device", 3 * nbytes
            ):
                memory.copy(session, d_a, host_a)
                memory.copy(session, d_b, host_b)
                launch_sum(
                    session,
                    kernel,
                    d_a.device_pointer,
                    d_b.device_pointer,
                    d_res,
                    elements,
                    "device",
                )
                memory.copy(session, out, d_res)

        profiler.repeat(explicit_copies, params.warmup, params.repeat)
        ctx.check(compare_arrays("sumArrays, device memory", out.array, expected))

        if params.prefetch:
            ctx.progress("prefetch", 2, steps)
            if concurrent:
                kind = "managed+prefetch"
                profiler.repeat(lambda: cycle(kind, prefetch_to_gpu), params.warmup, params.repeat)
                ctx.check(
                    compare_arrays("sumArrays, managed memory prefetched", received, expected)
                )
            else:
                skipped.append("prefetch: needs concurrentManagedAccess, which this GPU lacks")

        for index, advice in enumerate(params.advice):
            ctx.progress(f"advice {advice}", 2 + int(params.prefetch) + index, steps)
            if not concurrent:
                skipped.append(
                    f"advice {advice}: needs concurrentManagedAccess, which this GPU lacks"
                )
                continue
            kind = f"managed+{advice}"
            location = None if advice == "read-mostly" else session.device_index
            for buffer in (a, b, res):
                with profiler.api("cuMemAdvise", "advise", kind):
                    driver.advise(buffer.device_pointer, nbytes, advice, location)
            profiler.repeat(lambda kind=kind: cycle(kind), params.warmup, params.repeat)
            ctx.check(compare_arrays(f"sumArrays, managed memory, {advice}", received, expected))
            session.synchronize()
            for buffer in (a, b, res):
                driver.advise(buffer.device_pointer, nbytes, advice, location, unset=True)

        for buffer in (a, b, res, host_a, host_b, out, d_a, d_b, d_res):
            buffer.free()
        ctx.progress("done", steps, steps)
        return ManagedExtra(nbytes, concurrent, skipped)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        params, extra = result.parameters, result.extra
        nbytes = consistency.array_bytes(result)
        consistency.measured_bytes(result, ARRAYS_MOVED, [nbytes])
        variants = {"managed+prefetch": params.prefetch}
        variants |= {f"managed+{advice}": True for advice in params.advice}
        for index, m in enumerate(result.measurements):
            asked = variants.get(m.kind) if m.kind else None
            if m.kind in variants and not (asked and extra.concurrent_managed_access):
                why = (
                    "extra.concurrent_managed_access is false"
                    if asked
                    else "parameters did not ask for it"
                )
                consistency.refuse(f"measurements[{index}].kind", f"is {m.kind!r}, but {why}")
        timed = {m.kind for m in result.measurements if m.operation == "kernel_first"}
        needed = [("gpu", "kernel_first", "managed"), ("host", "host_read", "pageable")]
        needed += [("span", "end_to_end", "device"), ("gpu", "kernel", "device")]
        for kind in sorted(timed & {"managed", *variants}):
            needed += [("gpu", "kernel", kind), ("host", "host_read", kind)]
            if kind == "managed+prefetch":
                needed.append(("gpu", "prefetch", kind))
        for group, operation, kind in needed:
            consistency.present(result, group, operation, kind, "the managed summary shows")


# What each operation moves, in arrays of bytes_per_array: a step over a, b and res moves 3.
ARRAYS_MOVED = {
    **consistency.SUM_ARRAYS_MOVES,
    ("host", "host_write"): 3,
    ("host", "host_read"): 1,
    ("gpu", "kernel_first"): 3,
    ("span", "end_to_end"): 3,
    ("gpu", "prefetch"): 3,
    ("api", "prefetch"): 0,
    ("api", "advise"): 0,
}


def summarize(result: Result) -> Summary:
    nbytes = result.extra.bytes_per_array
    table = Table(
        f"sumArrays over managed a, b, res of {format_bytes(nbytes)} each, written by the host",
        ["Step", "Median", "Moved", "Effective GB/s"],
        notes=[
            "Kernels and prefetch: " + gpu_timing(result) + "; host reads: host clock (numpy "
            "copyto). Medians.",
            "Effective GB/s (10^9 B/s) = the bytes a step had to bring over, over its time: "
            "a first launch needs a, b and res on the GPU; a host read needs res on the host.",
        ]
        + [f"Skipped {reason}." for reason in result.extra.skipped],
    )

    def median(operation: str, kind: str, group: str) -> float | None:
        try:
            return result.find(operation, kind, group).stats.median_ms
        except KeyError:
            return None

    def add(step: str, time_ms: float, moved: int | None) -> None:
        rate = format_gb_per_s(bandwidth_gb_per_s(moved, time_ms)) if moved else "-"
        table.add_row(step, format_ms(time_ms), format_bytes(moved) if moved else "-", rate)

    variants = [("managed", "(a) on demand")]
    if median("kernel_first", "managed+prefetch", "gpu") is not None:
        variants.append(("managed+prefetch", "(d) after cuMemPrefetchAsync"))
    variants += [
        (f"managed+{advice}", f"(f) cuMemAdvise {advice}")
        for advice in result.parameters.advice
        if median("kernel_first", f"managed+{advice}", "gpu") is not None
    ]
    first = {}
    for kind, label in variants:
        if kind == "managed+prefetch":
            add(f"{label}: prefetch a, b, res", median("prefetch", kind, "gpu"), 3 * nbytes)
        first[kind] = median("kernel_first", kind, "gpu")
        add(
            f"{label}: first launch",
            first[kind],
            None if kind == "managed+prefetch" else 3 * nbytes,
        )
        add(f"{label}: next launch", median("kernel", kind, "gpu"), None)
        add(f"{label}: (e) host reads res", median("host_read", kind, "host"), nbytes)
    add(
        "host reads resident host memory (reference)",
        median("host_read", "pageable", "host"),
        nbytes,
    )
    explicit = median("end_to_end", "device", "span")
    add("(c) device memory: kernel alone", median("kernel", "device", "gpu"), None)
    add("(c) device memory: 2 HtoD + kernel + DtoH", explicit, 3 * nbytes)

    on_demand, resident = first["managed"], median("kernel", "managed", "gpu")
    conclusion = (
        f"On-demand migration made the first launch {on_demand / resident:.0f}x slower than a "
        f"resident one ({format_ms(on_demand)} vs {format_ms(resident)}, pages arriving at "
        f"{format_gb_per_s(bandwidth_gb_per_s(3 * nbytes, on_demand))} GB/s); explicit copies "
        f"did the whole job, copies included, in {format_ms(explicit)}."
    )
    if "managed+prefetch" in first:
        prefetched = first["managed+prefetch"] + median("prefetch", "managed+prefetch", "gpu")
        conclusion += f" Prefetch plus launch took {format_ms(prefetched)}: " + (
            "prefetch managed memory before the kernel that needs it."
            if prefetched < on_demand
            else "here prefetching did not beat on-demand migration."
        )
    return Summary(tables=[table], conclusions=[conclusion])
