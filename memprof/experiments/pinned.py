"""`memprof pinned`: pageable against pinned host memory (seeds 000, 001, 003).

For each host kind: the cost of allocating and freeing a buffer (host clock), then
the seeds' whole flow, timed with CUDA events: copy a and b to the device, run
sumArrays, copy the result back, verify it against numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from memprof.core import memory
from memprof.core.devicefacts import collect
from memprof.core.kernels import load_kernel
from memprof.core.session import GpuSession
from memprof.core.verify import compare_arrays
from memprof.experiments.common import (
    FLOAT32_BYTES,
    POISON_BYTE,
    Progress,
    input_arrays,
    no_progress,
)
from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_ratio,
)
from memprof.model.results import ByteCount, Count, Result
from memprof.model.summary import Summary, Table

HOST_KINDS = ("pageable", "pinned")
DIRECTIONS = {"h2d": "host → device", "d2h": "device → host"}


@dataclass(frozen=True)
class PinnedParams:
    power: int = 22  # 2^22 float32 = 16 MiB, as the memTransfer example
    repeat: int = 10
    warmup: int = 2
    host_buffer: str = "numpy"  # where pageable memory comes from: numpy, malloc, hugepages


# What a saved Result holds: `parameters` (every field) and `extra`, checked at load.
PARAMS = PinnedParams
EXTRA_FIELDS = {
    "elements": Count,
    "bytes_per_array": ByteCount,
}


def run(session: GpuSession, params: PinnedParams, progress: Progress = no_progress) -> Result:
    elements = 1 << params.power
    nbytes = elements * FLOAT32_BYTES
    facts = collect(session)
    # device: a, b, res; host: a, b, res of one kind at a time plus numpy's inputs
    memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=7 * nbytes)
    profiler = session.profiler
    kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
    a_values, b_values, expected = input_arrays(elements)
    d_a, d_b, d_res = (memory.allocate(session, "device", elements) for _ in range(3))
    checks = []
    for step, kind in enumerate(HOST_KINDS):
        progress(f"{kind}: allocation", 2 * step, 2 * len(HOST_KINDS))

        def allocate(kind: str = kind) -> memory.Buffer:
            return memory.allocate(session, kind, elements, host_buffer=params.host_buffer)

        profiler.repeat(lambda allocate=allocate: allocate().free(), params.warmup, params.repeat)

        a, b, res = (allocate() for _ in range(3))
        a.array[:] = a_values
        b.array[:] = b_values
        progress(f"{kind}: transfers", 2 * step + 1, 2 * len(HOST_KINDS))

        def flow(kind: str = kind, a=a, b=b, res=res) -> None:
            memory.memset(session, d_res, POISON_BYTE)
            with profiler.events("span", "2 HtoD + sumArrays + DtoH", "flow", kind, 3 * nbytes):
                memory.copy(session, d_a, a)
                memory.copy(session, d_b, b)
                kernel.launch(
                    session,
                    elements,
                    d_a.device_pointer,
                    d_b.device_pointer,
                    d_res.device_pointer,
                    elements,
                    nbytes=3 * nbytes,
                )
                memory.copy(session, res, d_res)

        res.array.fill(np.nan)
        profiler.repeat(flow, params.warmup, params.repeat)
        checks.append(compare_arrays(f"sumArrays, {kind} host memory", res.array, expected))
        synchronous = memory.MEMORY_KINDS[kind].synchronous_copies
        _, h2d = memory.host_copy(session.cuda, "h2d", a, d_a.device_pointer)
        _, d2h = memory.host_copy(session.cuda, "d2h", res, d_res.device_pointer)
        profiler.throughput("[CUDA memcpy HtoD]", "h2d", kind, nbytes, h2d, synchronous)
        profiler.throughput("[CUDA memcpy DtoH]", "d2h", kind, nbytes, d2h, synchronous)
        for buffer in (a, b, res):
            buffer.free()
    for buffer in (d_a, d_b, d_res):
        buffer.free()
    progress("done", 2 * len(HOST_KINDS), 2 * len(HOST_KINDS))
    return Result(
        command="pinned",
        parameters=asdict(params),
        device=facts,
        measurements=profiler.measurements(),
        checks=checks,
        extra={"elements": elements, "bytes_per_array": nbytes},
    )


def summarize(result: Result) -> Summary:
    nbytes = result.extra["bytes_per_array"]
    source = (
        "CUPTI's record of each copy (DMA only)"
        if result.timing is not None and result.timing.source == "cupti"
        else "gated CUDA events around each copy (pageable: staging included)"
    )
    transfers = Table(
        f"Transfers of {format_bytes(nbytes)}",
        ["Memory", "Direction", "One copy", "Host blocked", "GB/s", "vs pageable"],
        notes=[
            f"One copy: GPU time of a single copy, median, from {source}.",
            "Host blocked: host clock around the driver call (pageable copies block until "
            "the driver has staged them; pinned ones return once queued).",
            "GB/s (10^9 bytes/s): throughput of back-to-back copies, a batch between one "
            "event pair.",
        ],
    )
    median = {}
    for kind in HOST_KINDS:
        for direction in DIRECTIONS:
            median[kind, direction] = _per_copy_ms(result, direction, kind)
    for kind in HOST_KINDS:
        for direction, label in DIRECTIONS.items():
            time_ms = median[kind, direction]
            transfers.add_row(
                kind,
                label,
                format_ms(result.find(direction, kind, "gpu").stats.median_ms),
                format_ms(result.find(direction, kind, "api").stats.median_ms),
                format_gb_per_s(bandwidth_gb_per_s(nbytes, time_ms)),
                format_ratio(median["pageable", direction] / time_ms),
            )

    costs = Table(
        f"Allocation of {format_bytes(nbytes)}",
        ["Memory", "Allocate", "Free", "Calls", "Flow (2 HtoD + kernel + DtoH)", "Result"],
        notes=[
            "Allocate/free: host clock around the call, median. Pageable = numpy.empty plus a "
            "write to every page; after the first, malloc and the kernel reuse freed pages, "
            "so repeated pageable allocations are cheap.",
            "Flow: CUDA events around the whole sequence, median.",
        ],
    )
    round_trip = {}
    for kind in HOST_KINDS:
        allocation = result.find("alloc", kind).stats
        release = result.find("free", kind).stats
        flow = result.find("flow", kind, "span").stats
        check = next((c for c in result.checks if kind in c.name), None)
        round_trip[kind] = allocation.median_ms + release.median_ms
        costs.add_row(
            kind,
            format_ms(allocation.median_ms),
            format_ms(release.median_ms),
            str(allocation.count),
            format_ms(flow.median_ms),
            "verified" if check and check.passed else "FAILED",
        )
    return Summary(tables=[transfers, costs], conclusions=[_conclusion(median, round_trip, nbytes)])


def _conclusion(
    median: dict[tuple[str, str], float], alloc_and_free: dict[str, float], nbytes: int
) -> str:
    h2d_speedup = median["pageable", "h2d"] / median["pinned", "h2d"]
    d2h_speedup = median["pageable", "d2h"] / median["pinned", "d2h"]
    pinned_gbs = bandwidth_gb_per_s(nbytes, median["pinned", "h2d"])
    pageable_gbs = bandwidth_gb_per_s(nbytes, median["pageable", "h2d"])
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


def _per_copy_ms(result: Result, direction: str, kind: str) -> float:
    """Per-copy time of back-to-back copies (what bandwidth means), else one copy's."""
    measurement = result.find(direction, kind, "gpu")
    throughput = measurement.throughput_stats
    return throughput.median_ms if throughput else measurement.stats.median_ms
