"""What `memprof plot` draws for each command: the figures its tables show, as a Picture that
memprof.output.plot draws.

Every value comes from the figures the command's summary computed (memprof.model.figures) or
from the experiment's own functions for its tables (check's judged lines, smallcopies' cost per
copy), never from arithmetic of its own, so a picture agrees with the tables. Commands without
a picture of their own get bars of every measurement's GB/s (or time); one that measures
nothing, its tables as words. This module sits beside the experiments because it reads them;
drawing (and matplotlib) stays in the output layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from memprof.experiments import base
from memprof.model.figures import Figure
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import OPERATION_QUALIFIERS, Measurement, Result
from memprof.model.summary import Summary
from memprof.output.plot import (
    Bar,
    Bars,
    Curves,
    HeatMap,
    Line,
    Panel,
    Picture,
    Span,
    Timeline,
    Words,
    wrapped,
)

GB_PER_S = "GB/s (10^9 bytes/s)"
SIZE = "size of each operation"
MOST_BARS = 40  # a trace's rows beyond these are summed into one bar
MOST_LINES = 12  # a trace's source lines drawn, the most GPU time first


def picture(result: Result, summary: Summary) -> Picture:
    """The picture of `result`, from its summary's figures (memprof.experiments.summarize)."""
    make = PICTURES.get(result.command, default_panels)
    if make in AGAINST_SIZE and len(result.parameters.powers) < 2:
        make = default_panels  # one size: nothing to draw a line through
    return Picture(title=title(result), panels=make(result, summary))


def title(result: Result) -> str:
    """memprof COMMAND: GPU, date: what a picture is of."""
    gpu = result.device.name if result.device is not None else None
    gpu = gpu or getattr(result.extra, "gpu_name", None) or "no GPU recorded"
    return f"memprof {result.command}: {gpu}, {result.created_at}"


# -- GB/s against size -----------------------------------------------------------------------------


def rate_curves(title: str, series: dict[str, list[Figure]]) -> Curves:
    """GB/s against size, a line per series, and each ceiling the figures declare (the link,
    pageable copies' staging) as a dashed line."""
    lines, ceilings = [], {}
    for label, found in series.items():
        found = sorted((f for f in found if f.gb_per_s is not None), key=_size)
        if not found:
            continue
        lines.append(_line(label, [(f.measurement.bytes, f.gb_per_s) for f in found], found))
        for one in found:
            if one.ceiling is not None:
                points = ceilings.setdefault(one.ceiling.limiter, {})
                points.setdefault(one.measurement.bytes, one.ceiling.gb_per_s)
    for limiter, points in ceilings.items():
        lines.append(Line(f"{limiter} ceiling", sorted(points.items()), ceiling=True))
    return Curves(title, SIZE, GB_PER_S, lines)


def _line(label: str, points: list[tuple[float, float]], found: list[Figure]) -> Line:
    return Line(label, points, sources=[f.measurement for f in found])


def _size(one: Figure) -> int:
    return one.measurement.bytes


def _of(summary: Summary, group: str, operations: Iterable[str]) -> list[Figure]:
    wanted = set(operations)
    return [
        f
        for f in summary.figures
        if f.measurement.group == group and f.measurement.operation in wanted
    ]


def sweep_panels(result: Result, summary: Summary) -> list[Panel]:
    """One panel per direction: a line per memory kind, the link and staging ceilings."""
    kinds = sorted(
        {f.measurement.kind for f in _of(summary, "gpu", base.DIRECTIONS)},
        key=list(result.parameters.kinds).index,
    )
    panels: list[Panel] = []
    for direction, words in base.DIRECTIONS.items():
        found = _of(summary, "gpu", [direction])
        if found:
            series = {kind: [f for f in found if f.measurement.kind == kind] for kind in kinds}
            panels.append(rate_curves(f"GB/s {words} against size", series))
    return panels


ZEROCOPY_SERIES = {  # (operation, kind) -> what a line of zerocopy shows
    ("kernel", "mapped"): "kernel reading mapped memory (zero-copy)",
    ("kernel", "device"): "kernel reading device memory",
}


def zerocopy_panels(result: Result, summary: Summary) -> list[Panel]:
    """GB/s against size of the kernels and each path's copies."""
    found = _of(summary, "gpu", ["kernel", *base.DIRECTIONS])
    series: dict[str, list[Figure]] = {}
    for one in found:
        m = one.measurement
        label = ZEROCOPY_SERIES.get((m.operation, m.kind)) or (
            f"copy {base.DIRECTIONS[m.operation]}, {m.kind}"
        )
        series.setdefault(label, []).append(one)
    ordered = dict(sorted(series.items(), key=lambda item: not item[0].startswith("kernel")))
    return [rate_curves("GB/s against size: the kernels, and each path's copies", ordered)]


# -- time against size --------------------------------------------------------------------------


def alloc_panels(result: Result, summary: Summary) -> list[Panel]:
    """Allocation and free time against size, a line per memory kind."""
    keys = {measure.key for measure in base.ALLOCATIONS}
    panels: list[Panel] = []
    for operation, words in (("alloc", "Allocate"), ("free", "Free")):
        found = [
            f
            for f in summary.figures
            if (f.measurement.group, f.measurement.operation) in keys
            and f.measurement.operation == operation
        ]
        lines = []
        for kind in result.extra.kinds:
            mine = sorted((f for f in found if f.measurement.kind == kind), key=_size)
            if mine:
                lines.append(_line(kind, [(f.measurement.bytes, f.median_ms) for f in mine], mine))
        panels.append(
            Curves(
                f"{words} time against size (median of {result.parameters.repeat})",
                "size allocated",
                "time",
                lines,
                y_unit="ms",
            )
        )
    return panels


def smallcopies_panels(result: Result, summary: Summary) -> list[Panel]:
    """Wall clock per copy against its size, a line per way, per direction (the table the
    ways are ranked by)."""
    from memprof.experiments.smallcopies import per_copy_walls

    copies, panels = result.parameters.copies, []
    for direction in result.parameters.directions:
        costs = per_copy_walls(result, direction)
        lines = []
        for way in result.extra.ways:
            points = [(nbytes, by_way[way]) for nbytes, by_way in costs.items() if way in by_way]
            if points:
                lines.append(Line(way, sorted(points)))
        panels.append(
            Curves(
                f"{copies} copies {base.DIRECTIONS[direction]}: wall clock per copy, by way",
                "size of each copy",
                "wall clock per copy",
                lines,
                y_unit="ms",
            )
        )
    return panels


# -- GPU pairs, streams, checks, traces ----------------------------------------------------------


def peer_panels(result: Result, summary: Summary) -> list[Panel]:
    """A heat map of GB/s per method, source GPU by destination GPU, on one colour scale."""
    from memprof.experiments.peer import METHODS

    indices = [device.index for device in result.extra.devices]
    names = [f"GPU {index}" for index in indices]
    maps = {}
    for method in METHODS:
        found = _of(summary, "gpu", [method])
        if found:
            rates = {f.measurement.gpus: f.gb_per_s for f in found}
            maps[method] = [[rates.get((a, b)) for b in indices] for a in indices]
    brightest = max((v for grid in maps.values() for row in grid for v in row if v), default=1.0)
    panels: list[Panel] = [
        HeatMap(
            f"{method}: {METHODS[method].split(' (')[0]} (GB/s)",
            "from (source)",
            "to (destination)",
            names,
            names,
            grid,
            brightest,
        )
        for method, grid in maps.items()
    ]
    return panels or default_panels(result, summary)


def streams_panels(result: Result, summary: Summary) -> list[Panel]:
    """Each mode's run of median time: every chunk's copies and kernel on its stream."""
    from memprof.experiments.streams import MODES, mode_labels

    labels, streams = mode_labels(result.parameters.streams), result.parameters.streams
    kinds = {"h2d": "copy in (HtoD)", "kernel": "kernel", "d2h": "copy out (DtoH)"}
    panels: list[Panel] = []
    for mode in MODES:
        timeline = getattr(result.extra.timelines, mode)
        lanes = 1 if mode == "serial" else streams
        spans = [Span(lane, start, end, stage) for lane, _, stage, start, end in timeline]
        panels.append(
            Timeline(
                f"{labels[mode]}: the run of median time ({result.extra.timeline_source})",
                [f"stream {lane}" for lane in range(lanes)],
                spans,
                kinds,
            )
        )
    return panels


def check_panels(result: Result, summary: Summary) -> list[Panel]:
    """Every line's verdict, and each figure a line judged against what it expected."""
    from memprof.experiments import check

    if result.command == "check":
        found = check.lines(result, check.reference_for(result)[0])
    else:
        found = check.pair_lines(result)
    verdicts = Words(
        "Verdicts",
        [
            part
            for line in found
            for part in wrapped(
                f"{line.verdict:<4}  {line.what}: {line.measured} (expected {line.expected})",
                indent=" " * 6,
            )
        ],
    )
    bars = [
        Bar(what, measured, expected=least, verdict=line.verdict)
        for line in found
        for what, measured, least in line.judged
    ]
    if not bars:
        return [verdicts]
    return [verdicts, Bars("Measured GB/s against the least expected", GB_PER_S, bars)]


def trace_panels(result: Result, summary: Summary) -> list[Panel]:
    """GPU time by activity over the whole program: the profile's GPU rows (copies by memory
    kinds, each kernel, memsets), largest first, as `memprof trace` prints them; then the
    source lines that spent it."""
    from memprof.output.profile import PROFILE_GROUPS, profile_rows

    rows = [r for r in profile_rows(result.measurements) if r.group == PROFILE_GROUPS["gpu"]]
    shown = [(row.name, row.stats.total_ms) for row in rows[:MOST_BARS]]
    if len(rows) > MOST_BARS:
        rest = rows[MOST_BARS:]
        shown.append((f"{len(rest)} other rows", math.fsum(row.stats.total_ms for row in rest)))
    busy = math.fsum(row.stats.total_ms for row in rows)
    heading = (
        f"GPU time by activity: {format_ms(busy)} over the program's {result.extra.wall_s:.2f} s"
    )
    if not shown:
        return [Words(heading, ["The program did no GPU work that CUPTI recorded."])]
    bars = [Bar(name, total_ms) for name, total_ms in shown]
    return [Bars(heading, "GPU time, every call summed", bars, unit="ms"), *_line_panels(result)]


def _line_panels(result: Result) -> list[Panel]:
    """The program's source lines with the most GPU time (the Where tables' lines, each
    activity of a line a bar of its own): where in the program the GPU time was spent."""
    from memprof.model.lines import lines_of

    timed = sorted(
        (line for line in lines_of(result) or [] if line.gpu_ms_each),
        key=lambda line: line.gpu_ms,
        reverse=True,
    )
    if not timed:
        return []
    bars = [Bar(f"{line.place} {line.activity}", line.gpu_ms) for line in timed[:MOST_LINES]]
    heading = "GPU time by source line"
    if len(timed) > len(bars):
        heading += f": the {len(bars)} with the most, of {len(timed)}"
    return [Bars(heading, "GPU time, the line's calls summed", bars, unit="ms")]


# -- every other command ---------------------------------------------------------------------------


def default_panels(result: Result, summary: Summary) -> list[Panel]:
    """Bars of the GB/s of every measurement whose tables show one (with its ceiling), then
    the median time of every other (the profile's driver calls aside); a command that
    measured nothing: its tables, as words."""
    rates, times = [], []
    for one in summary.figures:
        if one.gb_per_s is not None and one.measure is not None and one.measure.shows != "time":
            rates.append(one)
        elif one.measure is None or one.measure.key != base.DRIVER_CALLS.key:
            times.append(one)
    panels: list[Panel] = []
    if rates:
        bars = [
            Bar(
                bar_label(f.measurement),
                f.gb_per_s,
                ceiling=f.ceiling.gb_per_s if f.ceiling is not None else None,
                source=f.measurement,
            )
            for f in rates
        ]
        panels.append(Bars("GB/s, from back-to-back operations where timed so", GB_PER_S, bars))
    if times:
        bars = [Bar(bar_label(f.measurement), f.median_ms, source=f.measurement) for f in times]
        panels.append(Bars("Median time of one operation", "time", bars, "ms"))
    if panels:
        return panels
    return [
        Words(table.title, [line for row in table.rows for line in wrapped(" | ".join(row))])
        for table in summary.tables
    ] or [Words("Nothing measured", ["This result holds no measurement to draw."])]


def bar_label(m: Measurement) -> str:
    """A measurement as a bar's label, what tells bars apart first (labels are cut at the
    end): '4 MiB, pinned: [CUDA memcpy HtoD]'."""
    route = " → ".join(f"GPU {index}" for index in m.gpus)
    qualifiers = [m.kind, OPERATION_QUALIFIERS.get(m.operation), route]
    words = ", ".join([format_bytes(m.bytes)] * bool(m.bytes) + [q for q in qualifiers if q])
    return f"{words}: {m.name}" if words else m.name


def pinlimit_panels(result: Result, summary: Summary) -> list[Panel]:
    """Time per GiB against the amount pinned, a line per way of pinning; the host's copies
    with nothing pinned and with everything held (memprof.experiments.pinlimit's figures)."""
    from memprof.experiments import pinlimit

    panels: list[Panel] = []
    climb = pinlimit.climb_of(result)
    if climb is not None:
        ways = {"cuMemHostAlloc + touch": climb.alloc, "touch + cuMemHostRegister": climb.register}
        lines = [
            Line(way, list(zip(climb.held_bytes, costs, strict=True)))
            for way, costs in ways.items()
        ]
        panels.append(
            Curves(
                "Time per GiB as pinned memory grows", "pinned", "ms per GiB", lines, y_unit="ms"
            )
        )
    bars = [
        Bar(
            f"{name}, {'nothing' if phase == 'idle' else 'all'} pinned",
            f.gb_per_s,
            source=f.measurement,
        )
        for name, pair in pinlimit.host_figures(result).items()
        for phase, f in zip(pinlimit.PHASES, pair, strict=True)
        if f.gb_per_s is not None
    ]
    panels.append(Bars("The host's pageable copies", GB_PER_S, bars))
    return panels


PICTURES: dict[str, Callable[[Result, Summary], list[Panel]]] = {
    "pinlimit": pinlimit_panels,
    "sweep": sweep_panels,
    "zerocopy": zerocopy_panels,
    "alloc": alloc_panels,
    "smallcopies": smallcopies_panels,
    "peer": peer_panels,
    "streams": streams_panels,
    "check": check_panels,
    "check-pairs": check_panels,
    "trace": trace_panels,
}
AGAINST_SIZE = (sweep_panels, zerocopy_panels, alloc_panels, smallcopies_panels)
