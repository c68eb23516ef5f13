"""`memprof streams`: hiding copies behind kernels with streams (seed 004).

The data is cut into K chunks; each is copied in, worked on by a kernel tuned to take as
long as a copy, and copied out: serial (one stream), overlapped (chunk i on stream i, pinned)
and pageable (the overlapped order from pageable memory, whose copies are synchronous: that
run cannot wait behind the gate and is timed as the calls return). Profiler.on_streams places
every operation on one clock: CUPTI's records, or gated events moved to when the engine was free.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Literal

from memprof.errors import InvalidArgument
from memprof.experiments import base
from memprof.model.ceilings import detail_of, pcie_ceiling
from memprof.model.figures import Derived, figure
from memprof.model.formatting import format_bytes, format_ms, format_ratio
from memprof.model.params import Range, param
from memprof.model.results import Check, Result
from memprof.model.schema import MAX_COUNT, Count, Milliseconds, SchemaError
from memprof.model.summary import Chart, Column, Summary, Table, table

if TYPE_CHECKING:
    import numpy as np

    from memprof.core.measure import Profiler, Span, StreamOperation, StreamsRun

STAGES = {
    "h2d": (base.COPY_NAMES["h2d"], "H"),
    "kernel": ("busyWork", "K"),
    "d2h": (base.COPY_NAMES["d2h"], "D"),
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
    power: base.Power = base.power_param(26)
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
    repeat: base.Repeat = base.repeat_param(5)
    warmup: base.Warmup = base.warmup_param(1)

    @property
    def chunk_bytes(self) -> list[int]:
        """The bytes of one chunk of each size the cut makes (its measures' sizes)."""
        return sorted({base.FLOAT32_BYTES * count for count in chunk_elements(self)})


Stage = Literal["h2d", "kernel", "d2h"]  # STAGES' keys
Lane = Annotated[int, Range(0, 31)]  # a stream: at most 32
Timeline = list[tuple[Lane, Count, Stage, Milliseconds, Milliseconds]]  # ..., start, end


@dataclass(frozen=True)
class Timelines:
    """Per mode, the run of median total time."""

    serial: Timeline
    overlapped: Timeline
    pageable: Timeline


# Where the stage times and timelines came from: CUPTI's records; CUDA events held behind
# one gate (the pageable run cannot be); or, in files saved before streams timed through the
# measuring core, ungated events on each stream with the legacy default stream's around a run.
TimelineSource = Literal["cupti", "gated events", "ungated events"]


@dataclass(frozen=True)
class StreamsExtra:
    iterations: Annotated[int, Range(1, MAX_COUNT)]  # busyWork runs its loop at least once
    kernel_target_ms: Milliseconds
    timelines: Timelines
    timeline_source: TimelineSource = "ungated events"


TOTAL = base.Measure("span", "total", "all chunks of one mode, end to end", "end to end", arrays=1)


def mode_labels(streams: int) -> dict[str, str]:
    """The way each mode issues its work, as shown in tables and profile rows."""
    return {mode: label.replace("K streams", f"{streams} streams") for mode, label in MODES.items()}


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


# Each chunk's stages, of one chunk's bytes, in the mode it ran in (kinds: the mode's label);
# the kernel moves nothing over the link.
STAGE_MEASURES = {
    stage: base.Measure(
        "gpu", stage, f"each chunk's {what}", "one operation", arrays=1, size="chunk_bytes",
        **moves,
    )
    for stage, what, moves in (
        ("h2d", "copy in", {"bound": "link"}),
        ("kernel", "busyWork", {"traffic": 0}),
        ("d2h", "copy out", {"bound": "link"}),
    )
}  # fmt: skip


def chunk_elements(params: Any) -> list[int]:
    """Elements in each chunk: 2^power cut for parameters.streams."""
    return [count for _, count in chunk_bounds(1 << params.power, params.streams)]


def fewer_chunks(params: Any) -> str:
    """Why parameters.streams makes fewer chunks than streams ('' where it makes as many)."""
    made = len(chunk_elements(params))
    if made == params.streams:
        return ""
    size = -(-(1 << params.power) // params.streams)
    return (
        f"{params.streams}: 2^{params.power} floats cut into chunks of {size} make {made}, "
        f"not {params.streams}"
    )


class Streams(base.Experiment):
    name = "streams"
    Params = StreamsParams
    Extra = StreamsExtra
    measures = (
        *STAGE_MEASURES.values(),
        TOTAL,
        # memprof 0.1 before schema 2 also recorded the buffers' allocations
        *(
            base.Measure(
                group, operation, "allocating the buffers (older files)", "host clock", False, 1
            )
            for group in ("api", "host")
            for operation in ("alloc", "free")
        ),
    )

    def read_inputs(self, params: StreamsParams) -> None:
        """--streams K where the cut makes fewer chunks than K (8 floats in 5 make 4 of 2) is
        refused before the GPU is asked for: its tables would say K streams where fewer ran."""
        fewer = fewer_chunks(params)
        if fewer:
            raise InvalidArgument(f"--streams {fewer}: give a larger --power or fewer --streams")

    def run(self, ctx: base.RunContext) -> StreamsExtra:
        import numpy as np

        from memprof.core import memory
        from memprof.core.kernels import load_kernel
        from memprof.core.measure import Span

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        cuda = session.cuda
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=6 * nbytes)
        kernel = load_kernel(session, "busy_work.cu", "busyWork")
        values = np.random.default_rng(11).random(elements, dtype=np.float32)
        host, device = _buffers(session, values)
        chunks = chunk_bounds(elements, params.streams)
        labels = mode_labels(params.streams)

        ctx.progress(f"pinned memory, {format_bytes(nbytes)}: calibrating the kernel", 0, 4)
        target_ms = params.kernel_ms
        if target_ms is None:  # the measured HtoD time of the whole data
            whole_h2d = partial(
                cuda.memcpy_htod_async, device[0].device_pointer, host["pinned"][0].array
            )
            target_ms = statistics.median(
                profiler.time_once(partial(whole_h2d, profiler.stream)) for _ in range(3)
            )
        iterations = _calibrate(session, kernel, *device, elements, target_ms)

        timelines = {}
        for step, mode in enumerate(MODES, start=1):
            ctx.progress(f"pinned memory, {format_bytes(nbytes)}: {labels[mode]}", step, 4)
            source, target = host["pageable" if mode == "pageable" else "pinned"]
            lanes = 1 if mode == "serial" else params.streams
            arrays = (source.array, target.array)
            operations = _pipeline(
                cuda, kernel, arrays, device, chunks, iterations, lanes, labels[mode]
            )
            span = Span("all chunks", "total", labels[mode], nbytes)
            median = _median_run(
                profiler, operations, span, mode == "pageable", params, target.array
            )
            ctx.check(_verify(target.array, values, iterations, labels[mode]))
            timelines[mode] = [
                (row.lane, row.chunk, row.operation, row.start_ms, row.end_ms)
                for row in median.timeline
            ]
        for buffer in (*host["pinned"], *host["pageable"], *device):
            buffer.free()
        ctx.progress("done", 4, 4)
        return StreamsExtra(
            iterations=iterations,
            kernel_target_ms=target_ms,
            timelines=Timelines(**timelines),
            timeline_source="cupti" if median.source == "cupti" else "gated events",
        )

    def derived(self, result: Result) -> dict:
        params = result.parameters
        return {"bytes_per_array": base.array_bytes(params), "chunks": chunk_elements(params)}

    def check_consistency(self, result: Result) -> None:
        params, extra = result.parameters, result.extra
        fewer = fewer_chunks(params)
        if fewer:  # memprof refuses to run it: its tables would say streams that never ran
            raise SchemaError("parameters.streams", f"is {fewer}")
        labels = list(mode_labels(params.streams).values())
        for index, m in enumerate(result.measurements):
            if m.group in ("gpu", "span") and m.kind not in labels:
                raise SchemaError(
                    f"measurements[{index}].kind",
                    f"is {m.kind!r}, but a streams run's are {', '.join(map(repr, labels))}",
                )
        if params.kernel_ms is not None and extra.kernel_target_ms != params.kernel_ms:
            raise SchemaError(
                "extra.kernel_target_ms",
                f"is {extra.kernel_target_ms!r}, but parameters.kernel_ms asked for "
                f"{params.kernel_ms!r}",
            )
        spans = {m.kind: m.samples_ms for m in result.measurements if m.group == "span"}
        for mode, label in mode_labels(params.streams).items():
            lanes = 1 if mode == "serial" else params.streams
            timeline = getattr(extra.timelines, mode)
            check_timeline(timeline, lanes, len(chunk_elements(params)), mode)
            runs_ms = spans.get(label)
            end_ms = max(row[4] for row in timeline)
            if runs_ms and end_ms > max(runs_ms) + EPSILON_MS:
                raise SchemaError(  # it is one of the runs its span measured end to end
                    f"extra.timelines.{mode}",
                    f"ends at {end_ms} ms, but the longest run of {label!r} took {max(runs_ms)} ms",
                )


EPSILON_MS = 1e-6  # a timeline's end and its run's span: the same times, summed apart


def check_timeline(timeline: list, lanes: int, chunks: int, mode: str) -> None:
    """Each chunk's three stages once, on one of the mode's streams, none ending before it
    starts: what timeline_lines draws."""
    where = f"extra.timelines.{mode}"
    seen = set()
    for index, (lane, chunk, stage, start, end) in enumerate(timeline):
        if end < start:
            raise SchemaError(f"{where}[{index}]", f"ends at {end} ms, before it starts ({start})")
        if lane >= lanes:
            raise SchemaError(f"{where}[{index}][0]", f"is stream {lane}, but {mode} uses {lanes}")
        if chunk >= chunks:
            raise SchemaError(
                f"{where}[{index}][1]", f"is chunk {chunk}, but parameters.streams cuts {chunks}"
            )
        if (chunk, stage) in seen:
            raise SchemaError(f"{where}[{index}]", f"is chunk {chunk}'s {stage} again")
        seen.add((chunk, stage))
    if len(seen) != 3 * chunks:
        raise SchemaError(where, f"has {len(seen)} stages, but {chunks} chunks make {3 * chunks}")
    if not max(row[4] for row in timeline) > 0:
        raise SchemaError(where, "ends at 0 ms: a timeline takes time")


def _buffers(session: Any, values: np.ndarray) -> tuple[dict[str, tuple], tuple]:
    """A source (holding `values`) and a target in pinned and in pageable memory, by kind;
    and the two device arrays the kernel reads and writes."""
    from memprof.core import memory

    host = {
        kind: tuple(memory.allocate(session, kind, values.size) for _ in range(2))
        for kind in ("pinned", "pageable")
    }
    for source, _ in host.values():
        source.array[:] = values
    return host, tuple(memory.allocate(session, "device", values.size) for _ in range(2))


def _median_run(
    profiler: Profiler,
    operations: list[StreamOperation],
    span: Span,
    pageable: bool,
    params: StreamsParams,
    target: np.ndarray,
) -> StreamsRun:
    """Warm-ups unrecorded, then the recorded runs, the target poisoned before each so every
    chunk must come back; the run of median total time (pageable: not gated, synchronous)."""
    import numpy as np

    with profiler.paused():
        for _ in range(params.warmup):
            profiler.on_streams(operations, pageable, span)
    runs: list[StreamsRun] = []
    loop = profiler.repetitions.given(params.repeat).loop()  # until its total is settled
    while loop.more(lambda: [[run.total_ms for run in runs]]):
        target.fill(np.nan)
        runs.append(profiler.on_streams(operations, pageable, span))
    runs.sort(key=lambda run: run.total_ms)
    return runs[len(runs) // 2]


def _pipeline(
    cuda: Any,
    kernel: Any,
    host_arrays: tuple[np.ndarray, np.ndarray],
    device: tuple[Any, Any],
    chunks: list[tuple[int, int]],
    iterations: int,
    lanes: int,
    kind: str,
) -> list[StreamOperation]:
    """Every chunk's copy in, busyWork and copy out, chunk i on stream i mod lanes, chunk by
    chunk as a program would issue them."""
    from memprof.core.measure import StreamOperation

    (source, target), (d_in, d_out) = host_arrays, device
    operations = []
    for index, (start, count) in enumerate(chunks):
        offset, chunk_bytes = start * base.FLOAT32_BYTES, count * base.FLOAT32_BYTES
        device_in, device_out = d_in.device_pointer + offset, d_out.device_pointer + offset
        actions = {
            "h2d": partial(cuda.memcpy_htod_async, device_in, source[start : start + count]),
            "kernel": partial(_busy_work, kernel, device_in, device_out, count, iterations),
            "d2h": partial(cuda.memcpy_dtoh_async, target[start : start + count], device_out),
        }
        for stage, action in actions.items():
            name = kernel.signature.display if stage == "kernel" else STAGES[stage][0]
            operations.append(
                StreamOperation(index % lanes, index, stage, name, kind, chunk_bytes, action)
            )
    return operations


def _busy_work(
    kernel: Any, device_in: int, device_out: int, count: int, iterations: int, stream: Any
) -> None:
    """Queue busyWork over `count` elements on `stream`."""
    kernel.function.prepared_async_call(
        (-(-count // 256), 1), (256, 1, 1), stream, device_in, device_out, count, iterations
    )


def _calibrate(session, kernel, d_in, d_out, elements: int, target_ms: float) -> int:
    """Iterations of busyWork's loop that make one pass over the data take about target_ms."""
    iterations = CALIBRATION_ITERATIONS
    profiler = session.profiler
    over_the_data = partial(_busy_work, kernel, d_in.device_pointer, d_out.device_pointer, elements)
    for _ in range(3):
        measured = profiler.time_once(partial(over_the_data, iterations, profiler.stream))
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
    got, expected = received[picks], reference(values[picks], iterations)
    check = compare_arrays(name, got, expected)
    check.elements = received.size
    if check.passed:
        check.detail = f"Check result success! (all written; {picks.size} elements checked exactly)"
    else:  # named by its place in the array, not in the sample
        wrong = np.flatnonzero(got != expected)
        first = int(wrong[0])
        check.detail = (
            f"Arrays do not match! {wrong.size} of {picks.size} sampled elements differ; first "
            f"at index {int(picks[first])}: host {expected[first]}, gpu {got[first]}"
        )
    return check


def stage_sums(result: Result, mode: str) -> dict[str, Derived]:
    """Per stage: its chunks' median times added up and their GB/s, in the mode's run."""
    label = mode_labels(result.parameters.streams)[mode]
    sizes = sorted(base.FLOAT32_BYTES * count for count in chunk_elements(result.parameters))
    return {
        stage: Derived(
            f"{STAGES[stage][0]}, every chunk",
            tuple(
                figure(result, result.find(stage, label, "gpu", size), measure) for size in sizes
            ),
            "chunks",
        )
        for stage, measure in STAGE_MEASURES.items()
    }


TIMELINE_COLUMNS = 72  # the widest a timeline is drawn (the 120-column layout)
MIN_TIMELINE_COLUMNS = 24  # narrower says nothing: the chart is then wider than the console
TIMELINE_FRAME = len("stream 0  |") + len("|")  # what each row adds to its columns

# How each source places the stages, as the notes say it.
STAGE_TIMES = {
    "cupti": "CUPTI's record of each chunk's copy and kernel (the GPU's own times)",
    "gated events": (
        "CUDA events around each chunk's copy and kernel, every stream held behind one gate "
        "until all was queued, each operation starting when its engine was free"
    ),
    "ungated events": "CUDA events around each chunk's copy and kernel",
}
TIMELINE_LEGEND = "H = copy in (HtoD), K = kernel, D = copy out (DtoH)"
TIMELINE_PLACES = {
    "cupti": f"{TIMELINE_LEGEND}, where CUPTI's records place them (the engines' own times).",
    "gated events": (
        f"{TIMELINE_LEGEND}, from CUDA events: each starts at the later of its stream's event "
        "and the end of the previous operation of its kind (one engine per kind assumed; "
        "--timing cupti shows the engines' own times)."
    ),
    "ungated events": f"{TIMELINE_LEGEND}, from CUDA events.",
}


def timeline_lines(timeline: list, streams: int, width: int = TIMELINE_COLUMNS) -> list[str]:
    """One text row per stream, `width` columns of time: H = HtoD, K = kernel, D = DtoH."""
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


def fitted_timeline_lines(timeline: list, streams: int, console_width: int) -> list[str]:
    """The timeline as wide as the console allows, at most TIMELINE_COLUMNS of time."""
    columns = max(MIN_TIMELINE_COLUMNS, min(TIMELINE_COLUMNS, console_width - TIMELINE_FRAME))
    return timeline_lines(timeline, streams, columns)


def profile_note(result: Result) -> str | None:
    """The profile's footnote where the run-wide one would be wrong: older files' ungated
    events."""
    if result.extra.timeline_source != "ungated events" or result.timing is None:
        return None  # the run-wide note is true (a file without a timing source says events)
    return (
        "Timing: GPU activities are CUDA events around each chunk's copy and kernel on its "
        "stream, not held behind a gate, each starting when its engine was free (memprof "
        "streams timed so when this file was saved); only the timed repetitions are counted "
        "(Calls = --repeat per operation)."
    )


def summarize(result: Result) -> Summary:
    streams = result.parameters.streams
    attributes = result.device.attributes
    stages = stage_sums(result, "serial")
    labels = mode_labels(streams)
    totals = {mode: figure(result, base.find(result, TOTAL, labels[mode]), TOTAL) for mode in MODES}
    ideal = Derived("ideal overlap of the one-stream stages", tuple(stages.values()), "overlap")
    bracket = (
        "Events on the legacy default stream bracket each run."
        if result.extra.timeline_source == "ungated events"
        else "Each run lasts from its first operation's start to its last one's end; copies "
        "from pageable memory block the host, so the pageable run cannot wait behind the "
        "gate: it is queued as the calls return."
    )
    against = {  # how many times faster than one stream, and the ideal's share of each
        mode: Derived(f"{labels[mode]} vs serial", (totals["serial"], totals[mode]), "ratio")
        for mode in MODES
    }
    reached = {
        mode: Derived(f"ideal / {labels[mode]}", (ideal, totals[mode]), "ratio") for mode in MODES
    }
    against["ideal"] = Derived("ideal overlap vs serial", (totals["serial"], ideal), "ratio")
    rows = [
        {"issue": labels[mode], "total": totals[mode], "against": against[mode],
         "reached": reached[mode]}
        for mode in MODES
    ] + [{"issue": "ideal overlap", "total": ideal, "against": against["ideal"]}]  # fmt: skip
    notes = [
        f"Ideal overlapped time {format_ms(ideal.median_ms)}: the longest stage's total "
        "plus one chunk of each other stage, from the one-stream stage times above.",
        f"This GPU: asyncEngineCount = {attributes.get('asyncEngineCount')} (copy engines), "
        f"concurrentKernels = {attributes.get('concurrentKernels')}. {bracket}",
    ]
    title = "Whole pipeline (HtoD -> kernel -> DtoH for every chunk)"
    serial, overlapped, pageable = (totals[mode].median_ms for mode in MODES)
    conclusion = (
        f"{streams} streams ran the pipeline in {format_ms(overlapped)} against "
        f"{format_ms(serial)} on one stream ({format_ratio(against['overlapped'].ratio)}), "
        f"{reached['overlapped'].ratio:.0%} of the ideal overlap; from pageable memory the "
        f"same issue order took {format_ms(pageable)}: "
        + (
            "overlap needs pinned memory."
            if pageable > 1.15 * overlapped
            else "here pageable memory kept most of the overlap."
        )
    )
    return Summary(
        tables=[stages_table(result, stages), table(title, MODES_TABLE, rows, notes)],
        conclusions=[conclusion],
        charts=timeline_charts(result),
        timing_note=profile_note(result),
    )


MODES_TABLE = (
    Column("Issue", "issue"),
    Column("Median time", "total", "median_ms"),
    Column("vs serial", "against", "ratio"),
    Column("Ideal / measured", "reached", "ratio_percent"),
)


STAGES_TABLE = (
    Column("Stage", "stage"),
    Column("Total", "total", "median_ms"),
    Column("Per chunk", "per_chunk", "median_ms"),
    Column("GB/s", "total", "gb_per_s"),
    Column("Of ceiling", "total", "share"),
)


def stages_table(result: Result, stages: dict[str, Derived]) -> Table:
    """The stage times on one stream, and how the kernel was tuned and the stages timed."""
    nbytes = base.array_bytes(result.parameters)
    rows = [
        {"stage": STAGES[stage][0], "total": summed,
         "per_chunk": Derived(f"{STAGES[stage][0]}, per chunk", summed.parts, "mean")}
        for stage, summed in stages.items()
    ]  # fmt: skip
    notes = [
        f"busyWork runs {result.extra.iterations} iterations per element, tuned to take "
        f"about {format_ms(result.extra.kernel_target_ms)} over all the data "
        + (
            "(the measured HtoD time of the whole data)."
            if result.parameters.kernel_ms is None
            else "(--kernel-ms)."
        ),
        f"{STAGE_TIMES[result.extra.timeline_source]}; medians per chunk, summed.",
        f"Of ceiling: the copies (pinned) against the link, {detail_of(pcie_ceiling(result))}.",
    ]
    chunks = len(chunk_elements(result.parameters))
    title = f"Stages on one stream: {format_bytes(nbytes)} in {chunks} chunks"
    return table(title, STAGES_TABLE, rows, notes)


def timeline_charts(result: Result) -> list[Chart]:
    """A timeline per mode, each drawn as wide as the console it is printed on."""
    labels = mode_labels(result.parameters.streams)
    charts = []
    for mode in MODES:
        lanes = 1 if mode == "serial" else result.parameters.streams
        timeline = getattr(result.extra.timelines, mode)  # check_timeline: it can be drawn
        draw = partial(fitted_timeline_lines, timeline, lanes)
        charts.append(Chart(f"Timeline, {labels[mode]} (the run of median time)", draw=draw))
    charts[-1].notes.append(TIMELINE_PLACES[result.extra.timeline_source])
    return charts
