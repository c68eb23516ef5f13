"""`memprof pinned`: pageable against pinned host memory (seeds 000, 001, 003).

For each host kind: allocating and freeing a buffer (host clock), the seeds' verified flow
(2 HtoD, sumArrays, DtoH) end to end, then back-to-back copies for the bandwidth.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from memprof.experiments import base
from memprof.model.ceilings import ceiling_remark, detail_of, pcie_ceiling
from memprof.model.figures import Derived, Figure, figure, host_side
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.model.params import param
from memprof.model.results import Result
from memprof.model.summary import Column, Summary, Table, table

HOST_KINDS = ("pageable", "pinned")
DIRECTIONS = base.DIRECTIONS


@dataclass(frozen=True)
class PinnedParams(base.OneSize):
    host_buffer: Literal["numpy", "malloc", "hugepages"] = param(
        "numpy",
        "Where pageable memory comes from: numpy (numpy.empty), malloc (libc, as C programs "
        "get it) or hugepages (mmap with MADV_HUGEPAGE).",
    )


COPY = {
    direction: dataclasses.replace(
        copy, what=f"{copy.what}, and back-to-back copies", kinds=HOST_KINDS, shows="throughput"
    )
    for direction, copy in base.ONE_COPY.items()
}
BLOCKED = {
    direction: base.Measure(
        "api",
        direction,
        f"the host blocked in the {name} call",
        "host clock",
        True,
        1,
        kinds=HOST_KINDS,
    )
    for direction, name in (("h2d", "HtoD"), ("d2h", "DtoH"))
}
ALLOC_HOST = base.Measure(
    "host", "alloc", "numpy.empty and a write to every page", "host clock", arrays=1
)
FREE_HOST = base.Measure("host", "free", "freeing numpy's array", "host clock", arrays=1)
ALLOC = base.Measure("api", "alloc", "cuMemHostAlloc", "host clock", arrays=1)
FREE = base.Measure("api", "free", "cuMemFreeHost", "host clock", arrays=1)
FLOW = base.Measure("span", "flow", "2 HtoD + sumArrays + DtoH", "end to end", arrays=3)


TRANSFERS = (
    Column("Memory", "kind"),
    Column("Direction", "direction"),
    Column("One copy", "copy", "latency_ms"),
    Column("Host blocked", "blocked", "median_ms"),
    Column("GB/s", "copy", "gb_per_s"),
    Column("vs pageable", "against", "ratio"),
    Column("Of ceiling", "copy", "share"),
)
COSTS = (
    Column("Memory", "kind"),
    Column("Allocate", "allocate", "median_ms"),
    Column("Free", "free", "median_ms"),
    Column("Calls", "allocate", "count"),
    Column("Flow (2 HtoD + kernel + DtoH)", "flow", "median_ms"),
    Column("Result", "check"),
)


class Pinned(base.Experiment):
    name = "pinned"
    Params = PinnedParams
    gpus = "one_or_every"
    measures = (
        *COPY.values(),
        *BLOCKED.values(),
        ALLOC_HOST,
        FREE_HOST,
        ALLOC,
        FREE,
        FLOW,
        *base.HOST_SIDE,
        base.POISON,
        base.Measure("gpu", "kernel", "sumArraysGPU", "one operation", arrays=3),
        base.MEMSET_CALL,
        base.LAUNCH_CALL,
    )

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        import numpy as np

        from memprof.core import memory
        from memprof.core.verify import compare_arrays
        from memprof.experiments.common import SumArrays, measure_host_staging

        params, session, profiler = ctx.params, ctx.session, ctx.measure
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        # device: a, b, res; host: a, b, res of one kind at a time plus numpy's inputs
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=7 * nbytes)
        sums = SumArrays(session, elements)
        a_values, b_values, expected = sums.a, sums.b, sums.expected
        d_a, d_b, d_res = (memory.allocate(session, "device", elements) for _ in range(3))
        steps = 2 * len(HOST_KINDS)
        for step, kind in enumerate(HOST_KINDS):
            ctx.progress(f"{kind} memory, {format_bytes(nbytes)}: allocation", 2 * step, steps)

            def allocate(kind: str = kind) -> memory.Buffer:
                return memory.allocate(session, kind, elements, host_buffer=params.host_buffer)

            profiler.repeat(
                lambda allocate=allocate: allocate().free(), params.warmup, params.repeat
            )
            a, b, res = (allocate() for _ in range(3))
            a.array[:] = a_values
            b.array[:] = b_values
            if kind == "pageable":  # the pageable copies' host side, at their size
                measure_host_staging(profiler, res.array)
            ctx.progress(f"{kind} memory, {format_bytes(nbytes)}: transfers", 2 * step + 1, steps)

            def flow(kind: str = kind, a=a, b=b, res=res) -> None:
                span = (FLOW.what, FLOW.operation, kind)
                sums.flow((a, b), res, (d_a, d_b, d_res), span, kernel_kind=None)

            res.array.fill(np.nan)
            profiler.repeat(flow, params.warmup, params.repeat)
            ctx.check(compare_arrays(f"sumArrays, {kind} host memory", res.array, expected))
            synchronous = memory.MEMORY_KINDS[kind].synchronous_copies
            _, h2d = memory.host_copy(session.cuda, "h2d", a, d_a.device_pointer)
            _, d2h = memory.host_copy(session.cuda, "d2h", res, d_res.device_pointer)
            for direction, copy in (("h2d", h2d), ("d2h", d2h)):
                name = base.COPY_NAMES[direction]
                profiler.throughput(name, direction, kind, nbytes, copy, synchronous)
            for buffer in (a, b, res):
                buffer.free()
        for buffer in (d_a, d_b, d_res):
            buffer.free()
        ctx.progress("done", steps, steps)
        return base.NoExtra()

    def derived(self, result: Result) -> dict:
        nbytes = base.array_bytes(result.parameters)
        return {"elements": nbytes // base.FLOAT32_BYTES, "bytes_per_array": nbytes}


def summarize(result: Result) -> Summary:
    nbytes = base.array_bytes(result.parameters)
    copies = {
        (kind, direction): figure(result, base.find(result, measure, kind), measure)
        for kind in HOST_KINDS
        for direction, measure in COPY.items()
    }
    transfers, remarks = _transfers(result, copies)

    allocations = [
        {
            "kind": kind,
            "allocate": result.find("alloc", kind),  # host (pageable) or api (pinned)
            "free": result.find("free", kind),
            "flow": base.find(result, FLOW, kind),
            "check": _verdict(result, kind),
        }
        for kind in HOST_KINDS
    ]
    notes = [
        "Allocate/free: host clock around the call, median. Pageable = numpy.empty plus a "
        "write to every page; after the first, malloc and the kernel reuse freed pages, "
        "so repeated pageable allocations are cheap.",
        "Flow: CUDA events around the whole sequence, median.",
    ]
    costs = table(f"Allocation of {format_bytes(nbytes)}", COSTS, allocations, notes)
    round_trip = {
        row["kind"]: row["allocate"].stats.median_ms + row["free"].stats.median_ms
        for row in allocations
    }
    per_copy_ms = {key: copy.per_operation_ms for key, copy in copies.items()}
    h2d = {kind: copies[kind, "h2d"].gb_per_s for kind in HOST_KINDS}
    conclusions = [_conclusion(per_copy_ms, round_trip, nbytes, h2d)]
    conclusions += [remark for remark in remarks if remark]
    return Summary(tables=[transfers, costs], conclusions=conclusions)


def _verdict(result: Result, kind: str) -> str:
    check = next((c for c in result.checks if kind in c.name), None)
    return "no check recorded" if check is None else "verified" if check.passed else "FAILED"


def _transfers(result: Result, copies: dict[tuple[str, str], Figure]) -> tuple[Table, list]:
    """The copies' table, each against its ceiling, and a remark for any far below it."""
    nbytes = base.array_bytes(result.parameters)
    source = (
        "CUPTI's record of each copy (DMA only; pageable: its call's, staging included)"
        if result.timing is not None and result.timing.source == "cupti"
        else "gated CUDA events around each copy (pageable: staging included)"
    )
    link = pcie_ceiling(result)
    sides = {direction: host_side(result, nbytes, direction) for direction in DIRECTIONS}
    recorded = [side for side in sides.values() if side is not None]
    rows, remarks = [], []
    for kind in HOST_KINDS:
        for direction, label in DIRECTIONS.items():
            copy, pageable = copies[kind, direction], copies["pageable", direction]
            rows.append(
                {
                    "kind": kind,
                    "direction": label,
                    "copy": copy,
                    "blocked": base.find(result, BLOCKED[direction], kind),
                    "against": Derived(
                        f"{kind} {direction} vs pageable", (pageable, copy), "ratio"
                    ),
                }
            )
            if kind == "pinned" or recorded:  # pageable without its host side: half a ceiling
                what = f"{kind.capitalize()} {label}"
                remarks.append(ceiling_remark(what, copy.gb_per_s, copy.ceiling))
    if recorded and not recorded[0].staged:  # an older file's one memcpy, host to host
        rows.append({"kind": "memcpy", "direction": "host → host", "copy": recorded[0]})
    else:
        rows += [
            {"kind": "staging", "direction": DIRECTIONS[direction], "copy": side}
            for direction, side in sides.items()
            if side is not None
        ]
    notes = [
        f"One copy: GPU time of a single copy, median, from {source}.",
        "Host blocked: host clock around the driver call (pageable copies block until "
        "the driver has staged them; pinned ones return once queued).",
        "GB/s (10^9 bytes/s): throughput of back-to-back copies, a batch between one event pair.",
        *_ceiling_notes(link, recorded[0].staged if recorded else None),
    ]
    return table(f"Transfers of {format_bytes(nbytes)}", TRANSFERS, rows, notes), remarks


def _ceiling_notes(link, staged: bool | None) -> list[str]:
    """What each row's ceiling is; staged: how the file recorded pageable's host side."""
    notes = [f"Of ceiling: pinned copies against the link: {detail_of(link)}."]
    if staged:
        notes.append(
            "Pageable copies against the lower of the link and the staging row of their "
            "direction: the driver stages them chunk by chunk through a small pinned buffer "
            "with one host thread (staging: that thread's work without the DMA, the pageable "
            "buffer copied into or out of a 256 KiB buffer, back to back, host clock, this "
            "run)."
        )
    elif staged is False:
        notes.append(
            "Pageable copies against the lower of the link and the memcpy row (memcpy: one "
            "thread, back-to-back copies between two pageable buffers of this size, host "
            "clock, this run; a file from an older memprof, whose pageable copies can beat "
            "it: docs/ceilings.md)."
        )
    else:
        notes.append(
            "Pageable copies against the link only: the host side of pageable copies was "
            "not recorded (a file from an older memprof)."
        )
    return notes


def _conclusion(
    median: dict[tuple[str, str], float],
    alloc_and_free: dict[str, float],
    nbytes: int,
    h2d_gb_per_s: dict[str, float],
) -> str:
    """Pinned against pageable, from the copies' per-copy times and their HtoD GB/s."""
    h2d_speedup = median["pageable", "h2d"] / median["pinned", "h2d"]
    d2h_speedup = median["pageable", "d2h"] / median["pinned", "d2h"]
    pinned_gbs, pageable_gbs = h2d_gb_per_s["pinned"], h2d_gb_per_s["pageable"]
    text = (
        f"Pinned memory copied {format_bytes(nbytes)} host → device {h2d_speedup:.2f}x "
        f"{'faster' if h2d_speedup >= 1 else 'slower'} than pageable "
        f"({format_gb_per_s(pinned_gbs)} vs {format_gb_per_s(pageable_gbs)} GB/s) "
        f"and device → host {d2h_speedup:.2f}x {'faster' if d2h_speedup >= 1 else 'slower'}. "
    )
    extra_cost_ms = alloc_and_free["pinned"] - alloc_and_free["pageable"]
    saved_per_round_trip_ms = (median["pageable", "h2d"] - median["pinned", "h2d"]) + (
        median["pageable", "d2h"] - median["pinned", "d2h"]
    )
    if extra_cost_ms <= 0:
        return text + (
            "Allocating and freeing pinned memory cost no more than pageable here: "
            "pin every buffer you transfer."
        )
    if saved_per_round_trip_ms <= 0:
        return (
            text + "Pinning did not speed up transfers here: it is not worth its allocation cost."
        )
    break_even = math.ceil(extra_cost_ms / saved_per_round_trip_ms)
    return text + (
        f"Allocating and freeing it cost {format_ms(alloc_and_free['pinned'])} against "
        f"{format_ms(alloc_and_free['pageable'])}, so pinning pays off from {break_even} round "
        f"trip{'s' if break_even > 1 else ''} (HtoD + DtoH) of this size: pin buffers you "
        f"reuse, allocate them once."
    )
