"""`memprof managed`: seed 000's unified memory, and what its page migration costs.

sumArrays over managed a, b and res the host has just written (which brings the pages back):
its first launch (the pages migrate on demand) and the next (resident), the host's read of res
(they migrate back), against cuMemAlloc with explicit copies, a cuMemPrefetchAsync first and
each cuMemAdvise hint.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from memprof.experiments import base
from memprof.experiments.common import SumArrays, found_or_none, gpu_timing, prefetch_to_gpu
from memprof.model.figures import Figure, figure_finder
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.model.params import CommaList, param
from memprof.model.results import Check, Result
from memprof.model.schema import DISTINCT, SchemaError
from memprof.model.summary import Column, Summary, table

Advice = Literal["read-mostly", "preferred-location", "accessed-by"]  # memprof.core.bindings.ADVICE
ADVICE_CHOICES: tuple[Advice, ...] = get_args(Advice)


@dataclass(frozen=True)
class ManagedParams(base.OneSize):
    warmup: base.Warmup = base.warmup_param(1, "Untimed cycles before timing (0 to 1000).")
    prefetch: bool = param(True, "Also time cuMemPrefetchAsync to the GPU before the kernel.")
    advice: Annotated[tuple[Advice, ...], DISTINCT] = param(
        ADVICE_CHOICES,
        "Time the first launch under these cuMemAdvise hints (default: each).",
        flags=("--advise",),
        form=CommaList(),
    )


@dataclass(frozen=True)
class ManagedExtra:
    skipped: list[str]


# What each step brings over: a first launch needs a, b and res on the GPU (a prefetch already
# brought them), the next finds them there; a host read needs res on the host (base.HOST_READ).
KERNEL_FIRST = base.Measure(
    "gpu",
    "kernel_first",
    "the first launch after the host wrote",
    "one operation",
    arrays=3,
    traffic={"managed+prefetch": 0},
    shows="latency",
)
KERNEL = base.Measure(
    "gpu", "kernel", "the next launch (pages resident)", "one operation", arrays=3, traffic=0
)
PREFETCH = dataclasses.replace(base.PREFETCH, arrays=3)  # a, b and res
END_TO_END = base.Measure(
    "span", "end_to_end", "explicit copies: 2 HtoD + kernel + DtoH", "end to end", arrays=3
)


class Managed(base.Experiment):
    name = "managed"
    Params = ManagedParams
    Extra = ManagedExtra
    measures = (
        base.Measure("host", "host_write", "the host writing a, b, res", "host clock", arrays=3),
        base.HOST_READ,
        KERNEL_FIRST,
        KERNEL,
        *base.ONE_COPY.values(),  # the explicit copies'
        END_TO_END,
        PREFETCH,
        base.PREFETCH_CALLS,
        base.Measure("api", "advise", "cuMemAdvise calls", "host clock", False, 0),
        *base.CORE_RECORDS,
    )  # fmt: skip

    def run(self, ctx: base.RunContext) -> ManagedExtra:
        from memprof.core import memory
        from memprof.core.verify import compare_arrays

        session, params = ctx.session, ctx.params
        memory.MEMORY_KINDS["managed"].check_supported(session)
        nbytes = base.FLOAT32_BYTES << params.power
        # Managed memory may all land on the GPU: never ask for more than is free there.
        memory.require_memory(session, device_bytes=6 * nbytes, host_bytes=8 * nbytes)
        concurrent = bool(session.attribute("CONCURRENT_MANAGED_ACCESS"))
        flow = _ManagedFlow(session, 1 << params.power)
        skipped: list[str] = []
        step = ctx.steps(2 + int(params.prefetch) + len(params.advice))

        def measure(kind: str, check: str, before_kernel=None) -> None:
            ctx.measure.repeat(
                lambda: flow.cycle(kind, before_kernel), params.warmup, params.repeat
            )
            ctx.check(compare_arrays(check, flow.received, flow.expected))

        step(f"managed memory, {format_bytes(nbytes)}: on-demand migration")
        measure("managed", "sumArrays, managed memory")
        ctx.measure.repeat(flow.read_resident_host_memory, params.warmup, params.repeat)
        step(f"device memory, {format_bytes(nbytes)}: explicit copies")
        ctx.check(flow.explicit_copies(params))
        if params.prefetch:
            step(f"managed memory, {format_bytes(nbytes)}: prefetch")
            if concurrent:
                measure("managed+prefetch", "sumArrays, managed memory prefetched", flow.prefetch)
            else:
                skipped.append("prefetch: needs concurrentManagedAccess, which this GPU lacks")
        for advice in params.advice:
            step(f"managed memory, {format_bytes(nbytes)}: advice {advice}")
            if not concurrent:
                skipped.append(
                    f"advice {advice}: needs concurrentManagedAccess, which this GPU lacks"
                )
                continue
            with flow.advised(advice):
                measure(f"managed+{advice}", f"sumArrays, managed memory, {advice}")
        flow.free()
        step("done")
        return ManagedExtra(skipped)

    def derived(self, result: Result) -> dict:
        derived = {"bytes_per_array": base.array_bytes(result.parameters)}
        concurrent = result.device.attributes.get(CONCURRENT) if result.device else None
        if concurrent is not None:
            derived["concurrent_managed_access"] = bool(concurrent)
        return derived

    def check_consistency(self, result: Result) -> None:
        params = result.parameters
        concurrent = result.device.attributes.get(CONCURRENT, 1)
        variants = {f"managed+{advice}" for advice in params.advice}
        variants |= {"managed+prefetch"} if params.prefetch else set()
        for index, m in enumerate(result.measurements):
            kind = m.kind or ""
            if kind.startswith("managed+") and kind not in variants:
                raise SchemaError(
                    f"measurements[{index}].kind", f"is {kind!r}, but parameters did not ask for it"
                )
            if kind in variants and not concurrent:
                raise SchemaError(
                    f"measurements[{index}].kind",
                    f"is {kind!r}, but device.attributes.{CONCURRENT} is 0",
                )
        timed = {m.kind for m in result.measurements if m.operation == "kernel_first"}
        needed = [("gpu", "kernel_first", "managed"), ("host", "host_read", "pageable")]
        needed += [("span", "end_to_end", "device"), ("gpu", "kernel", "device")]
        for kind in sorted(timed & {"managed", *variants}):
            needed += [("gpu", "kernel", kind), ("host", "host_read", kind)]
            if kind == "managed+prefetch":
                needed.append(("gpu", "prefetch", kind))
        present = {(m.group, m.operation, m.kind) for m in result.measurements}
        for group, operation, kind in needed:
            if (group, operation, kind) not in present:
                raise SchemaError(
                    "measurements",
                    f"has no {group} {operation!r} of kind {kind!r}, which the managed summary "
                    "shows",
                )


CONCURRENT = "concurrentManagedAccess"  # the capability prefetch and advice need


class _ManagedFlow:
    """The seed's sumArrays over managed a, b and res, and the same with explicit copies."""

    def __init__(self, session, elements: int) -> None:
        import numpy as np

        from memprof.core import memory

        self.session, self.elements = session, elements
        self.nbytes = elements * base.FLOAT32_BYTES
        self.sums = SumArrays(session, elements)
        self.kernel = self.sums.kernel
        self.a_values, self.b_values, self.expected = self.sums.a, self.sums.b, self.sums.expected
        self.a, self.b, self.res = (memory.allocate(session, "managed", elements) for _ in range(3))
        self.received = np.zeros(elements, np.float32)
        self.copies: list = []

    def cycle(self, kind: str, before_kernel=None) -> None:
        """Host writes the inputs, two launches, host reads the result."""
        import numpy as np

        session, profiler, nbytes = self.session, self.session.profiler, self.nbytes
        session.synchronize()  # always, as required where concurrentManagedAccess is 0
        with profiler.host_clock("host", "host write a, b, res", "host_write", kind, 3 * nbytes):
            self.a.array[:] = self.a_values
            self.b.array[:] = self.b_values
            self.res.array.fill(np.nan)  # poison: the kernel must write every element
        if before_kernel:
            before_kernel(kind)
        pointers = (self.a.device_pointer, self.b.device_pointer, self.res.device_pointer)
        launch = (session, self.elements, *pointers, self.elements)
        self.kernel.launch(*launch, kind=kind, nbytes=3 * nbytes, operation="kernel_first")
        self.kernel.launch(*launch, kind=kind, nbytes=3 * nbytes)
        session.synchronize()
        with profiler.host_clock("host", "host read res", "host_read", kind, nbytes):
            np.copyto(self.received, self.res.array)

    def prefetch(self, kind: str) -> None:
        """cuMemPrefetchAsync of a, b and res to the GPU, before the kernel needs them."""
        prefetch_to_gpu(self.session, (self.a, self.b, self.res), kind)

    @contextlib.contextmanager
    def advised(self, advice: str) -> Iterator[None]:
        """a, b and res under one cuMemAdvise hint inside, the hint undone afterwards."""
        from memprof.core import bindings

        session = self.session
        location = None if advice == "read-mostly" else session.device_index
        for buffer in (self.a, self.b, self.res):
            with session.profiler.api("cuMemAdvise", "advise", f"managed+{advice}"):
                bindings.advise(buffer.device_pointer, self.nbytes, advice, location)
        yield
        session.synchronize()
        for buffer in (self.a, self.b, self.res):
            bindings.advise(buffer.device_pointer, self.nbytes, advice, location, unset=True)

    def read_resident_host_memory(self) -> None:
        """The reference for a host read: numpy memory that never left the host."""
        import numpy as np

        with self.session.profiler.host_clock(
            "host", "host read res", "host_read", "pageable", self.nbytes
        ):
            np.copyto(self.received, self.a_values)

    def explicit_copies(self, params: ManagedParams) -> Check:
        """2 HtoD + kernel + DtoH with pinned and device memory: what migration competes with."""
        from memprof.core import memory
        from memprof.core.verify import compare_arrays

        session, profiler, elements = self.session, self.session.profiler, self.elements
        host_a, host_b, out = (memory.allocate(session, "pinned", elements) for _ in range(3))
        host_a.array[:], host_b.array[:] = self.a_values, self.b_values
        d_a, d_b, d_res = (memory.allocate(session, "device", elements) for _ in range(3))
        self.copies = [host_a, host_b, out, d_a, d_b, d_res]

        def flow() -> None:
            span = ("2 HtoD + kernel + DtoH", "end_to_end", "device")
            self.sums.flow((host_a, host_b), out, (d_a, d_b, d_res), span, "device")

        profiler.repeat(flow, params.warmup, params.repeat)
        return compare_arrays("sumArrays, device memory", out.array, self.expected)

    def free(self) -> None:
        for buffer in (self.a, self.b, self.res, *self.copies):
            buffer.free()


def summarize(result: Result) -> Summary:
    nbytes = base.array_bytes(result.parameters)
    figure_of = figure_finder(result, Managed.measures)

    def find(group: str, operation: str, kind: str) -> Figure | None:
        found = found_or_none(result, group, operation, kind, None)
        return None if found is None else figure_of(found)

    variants = [
        ("managed", "on demand"),  # every run's (check_consistency)
        ("managed+prefetch", "after cuMemPrefetchAsync"),
        *((f"managed+{advice}", f"cuMemAdvise {advice}") for advice in result.parameters.advice),
    ]
    steps: dict[str, Figure | None] = {}  # each row's step and figure, in the table's order
    first = {}
    for kind, label in variants:
        launch = find("gpu", "kernel_first", kind)
        if launch is None:
            continue
        first[kind] = launch
        if kind == "managed+prefetch":
            steps[f"{label}: prefetch a, b, res"] = find("gpu", "prefetch", kind)
        steps[f"{label}: first launch"] = launch
        steps[f"{label}: next launch"] = find("gpu", "kernel", kind)
        steps[f"{label}: host reads res"] = find("host", "host_read", kind)
    steps["host reads resident host memory (reference)"] = find("host", "host_read", "pageable")
    explicit = find("span", "end_to_end", "device")
    steps["device memory: kernel alone"] = find("gpu", "kernel", "device")
    steps["device memory: 2 HtoD + kernel + DtoH"] = explicit
    rows = [{"step": step, "figure": one} for step, one in steps.items()]
    resident = find("gpu", "kernel", "managed")
    conclusion = _conclusion(first, resident, explicit, find("gpu", "prefetch", "managed+prefetch"))
    notes = [
        "Kernels and prefetch: " + gpu_timing(result) + "; host reads: host clock (numpy "
        "copyto). Medians.",
        "Effective GB/s (10^9 B/s) = the bytes a step had to bring over, over its time: "
        "a first launch needs a, b and res on the GPU; a host read needs res on the host.",
        *(f"Skipped {reason}." for reason in result.extra.skipped),
    ]
    title = f"sumArrays over managed a, b, res of {format_bytes(nbytes)} each, written by the host"
    return Summary(tables=[table(title, STEPS, rows, notes)], conclusions=[conclusion])


STEPS = (
    Column("Step", "step"),
    Column("Median", "figure", "median_ms"),
    Column("Moved", "figure", "moved_bytes"),
    Column("Effective GB/s", "figure", "gb_per_s"),
)


def _conclusion(
    first: dict[str, Figure], resident: Figure, explicit: Figure, prefetch: Figure | None
) -> str:
    """On-demand migration against resident pages, explicit copies and a prefetch."""
    on_demand = first["managed"]
    conclusion = (
        f"On-demand migration made the first launch "
        f"{on_demand.median_ms / resident.median_ms:.0f}x slower than a resident one "
        f"({format_ms(on_demand.median_ms)} vs {format_ms(resident.median_ms)}, pages arriving "
        f"at {format_gb_per_s(on_demand.gb_per_s)} GB/s); explicit copies did the whole job, "
        f"copies included, in {format_ms(explicit.median_ms)}."
    )
    if "managed+prefetch" in first and prefetch is not None:
        prefetched = first["managed+prefetch"].median_ms + prefetch.median_ms
        conclusion += f" Prefetch plus launch took {format_ms(prefetched)}: " + (
            "prefetch managed memory before the kernel that needs it."
            if prefetched < on_demand.median_ms
            else "here prefetching did not beat on-demand migration."
        )
    return conclusion
