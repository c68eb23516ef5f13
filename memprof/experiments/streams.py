"""`memprof streams`: hiding copies behind kernels with streams (seed 004).

The data is cut into K chunks; each chunk is copied in (HtoD), worked on by a kernel whose
time is tuned to match a copy, and copied out (DtoH). Three ways:
  serial:     every chunk on one stream, so nothing overlaps;
  overlapped: chunk i on stream i (pinned memory), so one chunk's kernel runs while the
              next chunk copies in and the previous one copies out, on separate engines;
  pageable:   the overlapped issue order from pageable memory, where the driver makes
              every copy synchronous and the overlap is lost.
Every copy and kernel is stamped with CUDA events, giving a timeline per stream.

Ideal overlapped time, from the serial run's stage times: the longest stage's total
(all chunks) plus one chunk of each of the two other stages, which cannot overlap at the
pipeline's start and end.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Annotated, Literal

from memprof.experiments import consistency
from memprof.experiments.base import (
    FLOAT32_BYTES,
    Experiment,
    Measure,
    Power,
    Repeat,
    RunContext,
    Warmup,
    find,
    power_param,
    repeat_param,
    warmup_param,
)
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s, format_ms
from memprof.model.params import Range, param
from memprof.model.results import Check, Result
from memprof.model.schema import ByteCount, Count, Milliseconds
from memprof.model.summary import Chart, Summary, Table

if TYPE_CHECKING:
    import numpy as np

STAGES = {
    "h2d": ("[CUDA memcpy HtoD]", "H"),
    "kernel": ("busyWork", "K"),
    "d2h": ("[CUDA memcpy DtoH]", "D"),
}
MODES = {
    "serial": "pinned, 1 stream",
    "overlapped": "pinned, K streams",
    "pageable": "pageable, K streams",
}
CALIBRATION_ITERATIONS = 64
SAMPLE_ELEMENTS = 4096  # elements checked against numpy's float32 arithmetic
MAX_KERNEL_MS = 10_000.0


@dataclass(frozen=True)
class StreamsParams:
    power: Power = power_param(26)
    streams: Annotated[int, Range(2, 32)] = param(
        4, "Chunks and streams (2 to 32).", flags=("--streams", "-k")
    )
    kernel_ms: (
        Annotated[float, Range(0, MAX_KERNEL_MS, low_open=True, unit="milliseconds")] | None
    ) = param(
        None,
        "Kernel time over all the data in ms, up to 10000 "
        "(default: the data's measured HtoD time).",
    )
    repeat: Repeat = repeat_param(5)
    warmup: Warmup = warmup_param(1)


Stage = Literal["h2d", "kernel", "d2h"]  # STAGES' keys
Lane = Annotated[int, Range(0, 31)]  # a stream: at most 32
Timeline = list[tuple[Lane, Count, Stage, Milliseconds, Milliseconds]]  # ..., start, end


@dataclass(frozen=True)
class Timelines:
    """Per mode, the run of median total time."""

    serial: Timeline
    overlapped: Timeline
    pageable: Timeline


@dataclass(frozen=True)
class StreamsExtra:
    bytes_per_array: ByteCount
    chunks: list[Count]  # elements in each chunk
    iterations: Count
    kernel_target_ms: Milliseconds
    timelines: Timelines


TOTAL = Measure("span", "total", "all chunks of one mode, end to end", "end to end")


def mode_labels(streams: int) -> dict[str, str]:
    """The way each mode issues its work, as shown in tables and profile rows."""
    return {mode: label.replace("K streams", f"{streams} streams") for mode, label in MODES.items()}


def engine_timeline(stamps: list[list]) -> list[list]:
    """When each operation really ran: [lane, chunk, stage, start, end] in ms.

    An event before an operation records when its stream reached it, not when an engine
    took it: operations of one kind (copies in, kernels, copies out) wait for each other.
    So each starts at the later of its stream's event and the end of the operation of the
    same kind that finished before it.
    """
    corrected = []
    for stage in STAGES:
        previous_end = 0.0
        for lane, index, _, ready, end in sorted(
            (row for row in stamps if row[2] == stage), key=lambda row: row[4]
        ):
            corrected.append([lane, index, stage, max(ready, previous_end), end])
            previous_end = end
    return sorted(corrected, key=lambda row: (row[0], row[3]))


def chunk_bounds(elements: int, chunks: int) -> list[tuple[int, int]]:
    """(start, count) of each chunk; the last chunk takes the remainder."""
    size = -(-elements // chunks)
    return [(start, min(size, elements - start)) for start in range(0, elements, size)]


def reference(values: np.ndarray, iterations: int) -> np.ndarray:
    """What busyWork computes, in numpy float32 (no fused multiply-add on either side)."""
    import numpy as np

    x = values.copy()
    for _ in range(iterations):
        x = x * np.float32(0.999) + np.float32(0.001)
    return x


class Streams(Experiment):
    name = "streams"
    help = "Overlap copies with kernels on streams: serial, overlapped, pageable, and a timeline."
    Params = StreamsParams
    Extra = StreamsExtra
    measures = (
        Measure("gpu", "h2d", "each chunk's copy in", "one operation"),
        Measure("gpu", "kernel", "each chunk's busyWork", "one operation"),
        Measure("gpu", "d2h", "each chunk's copy out", "one operation"),
        TOTAL,
        # memprof 0.1 before schema 2 also recorded the buffers' allocations
        *(
            Measure(group, operation, "allocating the buffers (older files)", "host clock", False)
            for group in ("api", "host")
            for operation in ("alloc", "free")
        ),
    )

    def run(self, ctx: RunContext) -> StreamsExtra:
        import numpy as np

        from memprof.core import memory
        from memprof.core.kernels import load_kernel

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        cuda = session.cuda
        elements = 1 << params.power
        nbytes = elements * FLOAT32_BYTES
        memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=6 * nbytes)
        kernel = load_kernel(session, "busy_work.cu", "busyWork")
        values = np.random.default_rng(11).random(elements, dtype=np.float32)
        host = {
            "pinned": (
                memory.allocate(session, "pinned", elements),
                memory.allocate(session, "pinned", elements),
            ),
            "pageable": (
                memory.allocate(session, "pageable", elements),
                memory.allocate(session, "pageable", elements),
            ),
        }
        for source, _ in host.values():
            source.array[:] = values
        d_in, d_out = (memory.allocate(session, "device", elements) for _ in range(2))
        chunks = chunk_bounds(elements, params.streams)
        streams = [cuda.Stream() for _ in range(params.streams)]
        labels = mode_labels(params.streams)

        ctx.progress("calibrating the kernel", 0, 4)
        whole_h2d_ms = statistics.median(
            profiler.time_once(
                lambda: cuda.memcpy_htod_async(
                    d_in.device_pointer, host["pinned"][0].array, profiler.stream
                )
            )
            for _ in range(3)
        )
        target_ms = params.kernel_ms if params.kernel_ms is not None else whole_h2d_ms
        iterations = _calibrate(session, kernel, d_in, d_out, elements, target_ms)

        def issue(mode: str) -> tuple[float, list[list]]:
            """Queue every chunk, wait, return the total and the timeline (ms from the start)."""
            source, target = host["pageable" if mode == "pageable" else "pinned"]
            lanes = streams[:1] if mode == "serial" else streams
            origin = cuda.Event()
            origin.record()
            stamps = []
            for index, (start, count) in enumerate(chunks):
                stream = lanes[index % len(lanes)]
                offset = start * FLOAT32_BYTES
                events = [cuda.Event() for _ in range(4)]
                events[0].record(stream)
                cuda.memcpy_htod_async(
                    d_in.device_pointer + offset, source.array[start : start + count], stream
                )
                events[1].record(stream)
                kernel.function.prepared_async_call(
                    (-(-count // 256), 1),
                    (256, 1, 1),
                    stream,
                    d_in.device_pointer + offset,
                    d_out.device_pointer + offset,
                    count,
                    iterations,
                )
                events[2].record(stream)
                cuda.memcpy_dtoh_async(
                    target.array[start : start + count], d_out.device_pointer + offset, stream
                )
                events[3].record(stream)
                stamps.append((lanes.index(stream), index, count, events))
            end = cuda.Event()
            end.record()  # the legacy default stream waits for every other stream
            end.synchronize()
            timeline = engine_timeline(
                [
                    [lane, index, stage, first.time_since(origin), last.time_since(origin)]
                    for lane, index, _, events in stamps
                    for stage, (first, last) in zip(STAGES, pairwise(events), strict=True)
                ]
            )
            for _, index, stage, start, finish in timeline:
                name = kernel.signature.display if stage == "kernel" else STAGES[stage][0]
                count = chunks[index][1]
                profiler.add_sample(
                    "gpu", name, stage, labels[mode], count * FLOAT32_BYTES, finish - start
                )
            total = end.time_since(origin)
            profiler.add_sample("span", "all chunks", "total", labels[mode], nbytes, total)
            return total, timeline

        timelines = {}
        for step, mode in enumerate(MODES, start=1):
            ctx.progress(labels[mode], step, 4)
            target = host["pageable" if mode == "pageable" else "pinned"][1]
            with profiler.paused():
                for _ in range(params.warmup):
                    issue(mode)
            runs = []
            for _ in range(params.repeat):
                target.array.fill(np.nan)  # poison: every chunk must come back
                runs.append(issue(mode))
            ctx.check(_verify(target.array, values, iterations, labels[mode]))
            runs.sort(key=lambda run: run[0])
            timelines[mode] = runs[len(runs) // 2][1]  # the run of median total time
        for buffer in (*host["pinned"], *host["pageable"], d_in, d_out):
            buffer.free()
        ctx.progress("done", 4, 4)
        return StreamsExtra(
            bytes_per_array=nbytes,
            chunks=[count for _, count in chunks],
            iterations=iterations,
            kernel_target_ms=target_ms,
            timelines=Timelines(**timelines),
        )

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        params, extra = result.parameters, result.extra
        nbytes = consistency.array_bytes(result)
        chunks = [count for _, count in chunk_bounds(1 << params.power, params.streams)]
        consistency.equal(
            "extra.chunks", extra.chunks, chunks, "2^power elements cut for parameters.streams are"
        )
        if extra.iterations < 1:
            consistency.refuse("extra.iterations", "is 0: busyWork runs its loop at least once")
        if params.kernel_ms is not None:
            consistency.equal(
                "extra.kernel_target_ms",
                extra.kernel_target_ms,
                params.kernel_ms,
                "parameters.kernel_ms asked for",
            )
        chunk_bytes = sorted({FLOAT32_BYTES * count for count in chunks})
        moves = {("gpu", stage): 1 for stage in STAGES}
        consistency.measured_bytes(result, moves, chunk_bytes, "one chunk of extra.chunks")
        totals = {("span", "total"): 1, **{(g, o): 1 for g in ("api", "host") for o in ALLOCATION}}
        consistency.measured_bytes(result, totals, [nbytes])
        labels = list(mode_labels(params.streams).values())
        consistency.kinds_among(result, {key: labels for key in (*moves, ("span", "total"))})
        for mode in MODES:
            lanes = 1 if mode == "serial" else params.streams
            check_timeline(getattr(extra.timelines, mode), lanes, len(chunks), mode)


ALLOCATION = ("alloc", "free")  # older files' buffer allocations: one array each


def check_timeline(timeline: list, lanes: int, chunks: int, mode: str) -> None:
    """Each chunk's three stages once, on one of the mode's streams, none ending before it
    starts: what timeline_lines draws."""
    where = f"extra.timelines.{mode}"
    seen = set()
    for index, (lane, chunk, stage, start, end) in enumerate(timeline):
        if end < start:
            consistency.refuse(f"{where}[{index}]", f"ends at {end} ms, before it starts ({start})")
        if lane >= lanes:
            consistency.refuse(f"{where}[{index}][0]", f"is stream {lane}, but {mode} uses {lanes}")
        if chunk >= chunks:
            consistency.refuse(
                f"{where}[{index}][1]", f"is chunk {chunk}, but extra.chunks has {chunks}"
            )
        if (chunk, stage) in seen:
            consistency.refuse(f"{where}[{index}]", f"is chunk {chunk}'s {stage} again")
        seen.add((chunk, stage))
    if len(seen) != 3 * chunks:
        consistency.refuse(where, f"has {len(seen)} stages, but {chunks} chunks make {3 * chunks}")
    if not max(row[4] for row in timeline) > 0:
        consistency.refuse(where, "ends at 0 ms: a timeline takes time")


def _calibrate(session, kernel, d_in, d_out, elements: int, target_ms: float) -> int:
    """Iterations of busyWork's loop that make one pass over the data take about target_ms."""
    iterations = CALIBRATION_ITERATIONS
    for _ in range(3):
        measured = session.profiler.time_once(
            lambda iterations=iterations: kernel.function.prepared_async_call(
                (-(-elements // 256), 1),
                (256, 1, 1),
                session.profiler.stream,
                d_in.device_pointer,
                d_out.device_pointer,
                elements,
                iterations,
            )
        )
        iterations = max(1, round(iterations * target_ms / measured))
    return iterations


def _verify(received: np.ndarray, values: np.ndarray, iterations: int, name: str) -> Check:
    """Every element written (no NaN poison left), and a sample exact against numpy."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    if np.isnan(received).any():
        missing = int(np.flatnonzero(np.isnan(received))[0])
        return Check(name, False, received.size, f"element {missing} was never copied back")
    picks = np.linspace(0, received.size - 1, min(SAMPLE_ELEMENTS, received.size)).astype(np.int64)
    check = compare_arrays(name, received[picks], reference(values[picks], iterations))
    check.elements = received.size
    if check.passed:
        check.detail = f"Check result success! (all written; {picks.size} elements checked exactly)"
    return check


def stage_times(result: Result, mode: str) -> dict[str, tuple[float, float]]:
    """Per stage: (total over all chunks, mean per chunk), from each chunk's median time."""
    labels = mode_labels(result.parameters.streams)
    times = {}
    for stage in STAGES:
        medians = [
            result.find(stage, labels[mode], "gpu", count * FLOAT32_BYTES).stats.median_ms
            for count in sorted(set(result.extra.chunks))
            for _ in range(result.extra.chunks.count(count))
        ]
        times[stage] = (sum(medians), sum(medians) / len(medians))
    return times


def ideal_overlapped_ms(times: dict[str, tuple[float, float]]) -> float:
    """The longest stage's total plus one chunk of each other stage (pipeline fill and drain)."""
    longest = max(times, key=lambda stage: times[stage][0])
    return times[longest][0] + sum(
        per_chunk for stage, (_, per_chunk) in times.items() if stage != longest
    )


def timeline_lines(timeline: list[list], streams: int, width: int = 72) -> list[str]:
    """One text row per stream: H = HtoD, K = kernel, D = DtoH, placed by their event times."""
    end = max(row[4] for row in timeline)
    rows = [[" "] * width for _ in range(streams)]
    for lane, _, stage, start, finish in timeline:
        first = min(width - 1, int(start / end * width))
        last = max(first + 1, min(width, round(finish / end * width)))
        for column in range(first, last):
            rows[lane][column] = STAGES[stage][1]
    return [f"stream {lane:<2} |{''.join(row)}|" for lane, row in enumerate(rows)] + [
        f"{'':9} 0{format_ms(end):>{width + 1}}"
    ]


def summarize(result: Result) -> Summary:
    nbytes = result.extra.bytes_per_array
    streams = result.parameters.streams
    attributes = result.device.attributes
    serial_stages = stage_times(result, "serial")
    stages = Table(
        f"Stages on one stream: {format_bytes(nbytes)} in {len(result.extra.chunks)} chunks",
        ["Stage", "Total", "Per chunk", "GB/s"],
        notes=[
            f"busyWork runs {result.extra.iterations} iterations per element, tuned to take "
            f"about {format_ms(result.extra.kernel_target_ms)} over all the data "
            + (
                "(the measured HtoD time of the whole data)."
                if result.parameters.kernel_ms is None
                else "(--kernel-ms)."
            ),
            "CUDA events around each chunk's copy and kernel; medians per chunk, summed.",
        ],
    )
    for stage, (total, per_chunk) in serial_stages.items():
        rate = format_gb_per_s(bandwidth_gb_per_s(nbytes, total)) if stage != "kernel" else "-"
        stages.add_row(STAGES[stage][0], format_ms(total), format_ms(per_chunk), rate)

    labels = mode_labels(streams)
    totals = {mode: find(result, TOTAL, labels[mode]).stats.median_ms for mode in MODES}
    ideal = ideal_overlapped_ms(serial_stages)
    modes = Table(
        "Whole pipeline (HtoD -> kernel -> DtoH for every chunk)",
        ["Issue", "Median time", "vs serial", "Ideal / measured"],
        notes=[
            f"Ideal overlapped time {format_ms(ideal)}: the longest stage's total plus one chunk "
            "of each other stage, from the one-stream stage times above.",
            f"This GPU: asyncEngineCount = {attributes.get('asyncEngineCount')} (copy engines), "
            f"concurrentKernels = {attributes.get('concurrentKernels')}. Events on the legacy "
            "default stream bracket each run.",
        ],
    )
    labels = {
        mode: label.replace("K streams", f"{streams} streams") for mode, label in MODES.items()
    }
    for mode in MODES:
        modes.add_row(
            labels[mode],
            format_ms(totals[mode]),
            f"{totals['serial'] / totals[mode]:.2f}x",
            f"{ideal / totals[mode]:.0%}",
        )
    modes.add_row("ideal overlap", format_ms(ideal), f"{totals['serial'] / ideal:.2f}x", "100%")
    charts = [
        Chart(
            f"Timeline, {labels[mode]} (the run of median time)",
            timeline_lines(
                getattr(result.extra.timelines, mode), 1 if mode == "serial" else streams
            ),
        )
        for mode in ("serial", "overlapped", "pageable")
    ]
    charts[-1].notes.append(
        "H = copy in (HtoD), K = kernel, D = copy out (DtoH), from CUDA events."
    )
    achieved = ideal / totals["overlapped"]
    conclusion = (
        f"{streams} streams ran the pipeline in {format_ms(totals['overlapped'])} against "
        f"{format_ms(totals['serial'])} on one stream "
        f"({totals['serial'] / totals['overlapped']:.2f}x), "
        f"{achieved:.0%} of the ideal overlap; from pageable memory the same issue order took "
        f"{format_ms(totals['pageable'])}: "
        + (
            "overlap needs pinned memory."
            if totals["pageable"] > 1.15 * totals["overlapped"]
            else "here pageable memory kept most of the overlap."
        )
    )
    return Summary(tables=[stages, modes], conclusions=[conclusion], charts=charts)
