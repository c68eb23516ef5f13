"""What `memprof plot` draws for each command, as a Picture memprof.output.plot draws.

Every value drawn is one a table prints (a summary's Figure, or the experiment's own function
for its table), never arithmetic of its own; a command without a picture draws its tables.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from memprof.experiments import base
from memprof.model.ceilings import pcie_ceiling
from memprof.model.figures import Figure
from memprof.model.formatting import format_gb_per_s, format_ms, plural
from memprof.model.results import Measurement, Result
from memprof.model.statistics import NOISE_SIGMAS, noise_band
from memprof.model.summary import Summary, Table
from memprof.output.plot import (
    RUN_HATCHES,
    RUN_STYLES,
    Bar,
    Bars,
    Curves,
    HeatMap,
    Line,
    Mark,
    Panel,
    Picture,
    Reference,
    Span,
    Stacked,
    Timeline,
    Words,
    wrapped,
)

GB_PER_S = "GB/s (10^9 bytes/s)"
SIZE = "size of each operation"
ARRAY = "size of each array"
MOST_BARS = 40  # a trace's rows beyond these are summed into one bar
MOST_LINES = 12  # a trace's source lines drawn, the most GPU time first


def picture(result: Result, summary: Summary) -> Picture:
    """The picture of `result`, from its summary's figures (memprof.experiments.summarize)."""
    from memprof.experiments import picture_maker

    make = picture_maker(result.command) or default_panels
    if make in AGAINST_SIZE and len(result.parameters.powers) < 2:
        make = default_panels  # one size: nothing to draw a line through
    return Picture(f"memprof {result.command}: {run_label(result)}", make(result, summary))


def run_label(result: Result) -> str:
    """A run as its GPU and date: 'NVIDIA H200, 2026-11-20T10:00:00Z'."""
    return f"{result.gpu_name or 'no GPU recorded'}, {result.created_at}"


def run_labels(results: Sequence[Result]) -> list[str]:
    """Each run's label, led by its GPU where there are several, numbered where two coincide."""
    several = len({result.gpu_index for result in results}) > 1
    plain = [
        f"GPU {result.gpu_index}: {run_label(result)}" if several else run_label(result)
        for result in results
    ]
    return [
        name if plain.count(name) == 1 else f"{name} #{index + 1}"
        for index, name in enumerate(plain)
    ]


# -- several runs on one picture ---------------------------------------------------------------


def overlay(
    results: Sequence[Result], summaries: Sequence[Summary], labels: Sequence[str]
) -> Picture:
    """Runs of one command on one picture: curves overlaid, bars side by side, each figure's
    noise a band or whisker; a panel the runs do not share drawn once per run, tagged [1]..."""
    groups: dict[tuple, list[tuple[int, Panel]]] = {}
    for run, (result, summary) in enumerate(zip(results, summaries, strict=True)):
        seen: dict[tuple, int] = {}
        for panel in picture(result, summary).panels:
            key = (type(panel).__name__, panel.title, getattr(panel, "unit", None),
                   getattr(panel, "y_unit", None))  # fmt: skip
            seen[key] = seen.get(key, -1) + 1
            groups.setdefault((*key, seen[key]), []).append((run, panel))
    panels: list[Panel] = []
    for group in groups.values():
        first = group[0][1]
        if len(group) > 1 and isinstance(first, Curves):
            panels.append(_overlaid_curves(group))
        elif len(group) > 1 and isinstance(first, Bars):
            panels.append(_grouped_bars(group))
        else:
            for run, panel in group:
                panel.title = f"[{run + 1}] {panel.title}"
                panels.append(panel)
    title = f"memprof {results[0].command}: {plural(len(results), 'run')}"
    return Picture(title, [Words("Runs", _run_words(panels, labels)), *panels])


def _run_words(panels: list[Panel], labels: Sequence[str]) -> list[str]:
    """Which run is which: its tag, how its lines and bars are drawn, its label."""
    lines = any(isinstance(p, Curves) and any(x.run is not None for x in p.lines) for p in panels)
    bars = any(isinstance(p, Bars) and any(x.run is not None for x in p.bars) for p in panels)
    said = []
    for run, label in enumerate(labels):
        styles = [f"{RUN_STYLES[run % len(RUN_STYLES)][1]} lines"] * lines
        styles += [RUN_HATCHES[run % len(RUN_HATCHES)][2]] * bars
        drawn = f" ({', '.join(styles)})" if styles else ""
        said += wrapped(
            f"[{run + 1}]{drawn}{', the reference' * (run == 0)}: {label}", indent="    "
        )
    if lines or bars:
        said += wrapped(
            f"Bands and whiskers: each figure's noise, {NOISE_SIGMAS}x its median's (as "
            "`memprof diff` judges a change)",
            indent="    ",
        )
    return said


def _noise_about(value: float, source: Measurement | None) -> tuple[float, float] | None:
    """The band about a figure its run's noise could explain (statistics.noise_band)."""
    if source is None:
        return None
    noise = noise_band(source.throughput_ms or source.samples_ms)
    return (max(0.0, value * (1 - noise)), value * (1 + noise))


def _overlaid_curves(group: list[tuple[int, Panel]]) -> Curves:
    """Every run's lines on the first run's axes; a ceiling every run draws alike, once."""
    panels = [panel for _, panel in group if isinstance(panel, Curves)]
    first, lines = panels[0], []
    ceilings = [{_drawn(c) for c in panel.lines if c.ceiling} for panel in panels]
    shared = [c for c in first.lines if c.ceiling and all(_drawn(c) in d for d in ceilings)]
    for (run, _), panel in zip(group, panels, strict=True):  # one type: the group's key
        for line in panel.lines:
            if line.ceiling and _drawn(line) in {_drawn(c) for c in shared}:
                continue
            band = [
                _noise_about(y, m) for (_, y), m in zip(line.points, line.sources, strict=False)
            ]
            whole = len(band) == len(line.points) and None not in band
            lines.append(replace(line, run=run, band=band if whole else []))
    return replace(first, lines=lines + shared)


def _drawn(line: Line) -> tuple:
    """What two runs' ceilings must share to be drawn once: their label and points."""
    return (line.label, tuple(line.points))


def _grouped_bars(group: list[tuple[int, Panel]]) -> Bars:
    """Each bar of every run beside the same bar of the others, in the first run's order."""
    panels = [(run, panel) for run, panel in group if isinstance(panel, Bars)]
    rows: dict[tuple[str, int], list[Bar]] = {}
    for run, panel in panels:
        seen: dict[str, int] = {}
        for bar in panel.bars:
            seen[bar.label] = seen.get(bar.label, -1) + 1
            rows.setdefault((bar.label, seen[bar.label]), []).append(
                replace(bar, run=run, spread=_noise_about(bar.value, bar.source))
            )
    first = panels[0][1]
    alike = all(panel.reference == first.reference for _, panel in panels)
    shared = first.reference if alike else None
    return replace(first, bars=[bar for row in rows.values() for bar in row], reference=shared)


# -- GB/s against size -----------------------------------------------------------------------------


def rate_curves(
    title: str, series: dict[str, list[Figure]], size: Callable[[Figure], int] | None = None
) -> Curves:
    """GB/s against size, a line per series, and each ceiling the figures declare, dashed."""
    size = size or _size
    lines, ceilings = [], {}
    for label, found in series.items():
        found = sorted((f for f in found if f.gb_per_s is not None), key=_size)
        if not found:
            continue
        lines.append(_line(label, [(size(f), f.gb_per_s) for f in found], found))
        for one in found:
            if one.ceiling is not None:
                points = ceilings.setdefault(one.ceiling.limiter, {})
                points.setdefault(size(one), one.ceiling.gb_per_s)
    for limiter, points in ceilings.items():
        values = set(points.values())
        label = f"{limiter} ceiling"
        if len(values) == 1:
            label += f", {format_gb_per_s(values.pop())} GB/s"
        lines.append(Line(label, sorted(points.items()), ceiling=True))
    return Curves(title, SIZE, GB_PER_S, lines)


def _line(label: str, points: list[tuple[float, float]], found: list[Figure]) -> Line:
    kinds = {f.measurement.kind for f in found}
    kind = kinds.pop() if len(kinds) == 1 else None
    return Line(label, points, sources=[f.measurement for f in found], kind=kind)


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


def zerocopy_panels(result: Result, summary: Summary) -> list[Panel]:
    """The zero-copy kernel's read GB/s, and each path's time end to end."""
    reads = [f for f in _of(summary, "gpu", ["kernel"]) if f.measurement.kind == "mapped"]
    title = "Zero-copy read GB/s against size: the sumArrays kernel reading mapped host memory"
    rates = rate_curves(title, {"zero-copy read": reads}, _array_bytes)
    rates.x_label = ARRAY
    paths = _of(summary, "span", ["end_to_end"])
    kinds = dict.fromkeys(f.measurement.kind for f in paths)
    lines = _time_lines(paths, kinds, _array_bytes, lambda f: f.measurement.name)
    title = "End to end: each path from its copies in to its copy out, median time"
    return [rates] + [Curves(title, ARRAY, "time", lines, y_unit="ms")] * bool(lines)


def _array_bytes(one: Figure) -> int:
    """The size of one of the arrays its measure declares (the tables' Size), else its bytes."""
    arrays = one.measure.arrays if one.measure is not None else None
    return one.measurement.bytes // arrays if isinstance(arrays, int) and arrays else _size(one)


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
        lines = _time_lines(found, result.extra.kinds, _size, lambda f: f.measurement.kind)
        title = f"{words} time against size (median of {result.parameters.repeat})"
        panels.append(Curves(title, "size allocated", "time", lines, y_unit="ms"))
    return panels


def _time_lines(
    found: list[Figure],
    kinds: Iterable[str],
    size: Callable[[Figure], int],
    label: Callable[[Figure], str],
) -> list[Line]:
    """A line per memory kind of `found` that has any: its median times against `size`."""
    lines = []
    for kind in kinds:
        mine = sorted((f for f in found if f.measurement.kind == kind), key=_size)
        if mine:
            lines.append(_line(label(mine[0]), [(size(f), f.median_ms) for f in mine], mine))
    return lines


def smallcopies_panels(result: Result, summary: Summary) -> list[Panel]:
    """Wall clock per copy against its size, a line per way, per direction."""
    from memprof.experiments.smallcopies import per_copy_walls

    copies, panels = result.parameters.copies, []
    for direction in result.parameters.directions:
        costs = per_copy_walls(result, direction)
        lines = []
        for way in result.extra.ways:
            points = [(nbytes, by_way[way]) for nbytes, by_way in costs.items() if way in by_way]
            if points:
                lines.append(Line(way, sorted(points), kind=way))
        title = f"{copies} copies {base.DIRECTIONS[direction]}: wall clock per copy, by way"
        panels.append(Curves(title, "size of each copy", "wall clock per copy", lines, y_unit="ms"))
    return panels


# -- GPU pairs, streams, checks, traces ----------------------------------------------------------


def peer_panels(result: Result, summary: Summary) -> list[Panel]:
    """A heat map of GB/s per method, on one scale: 0 to the NVLink ceiling, or the fastest
    figure where it is faster or no ceiling is known."""
    from memprof.experiments.peer import METHODS

    indices = [device.index for device in result.extra.devices]
    names = [f"GPU {index}" for index in indices]
    maps, ceilings = {}, []
    for method in METHODS:
        found = _of(summary, "gpu", [method])
        if found:
            rates = {f.measurement.gpus: f.gb_per_s for f in found}
            maps[method] = [[rates.get((a, b)) for b in indices] for a in indices]
            ceilings += [f.ceiling for f in found if f.ceiling is not None]
    brightest = max((v for grid in maps.values() for row in grid for v in row if v), default=1.0)
    scale = f"0 to the fastest, {format_gb_per_s(brightest)} GB/s"
    ceiling = max(ceilings, key=lambda c: c.gb_per_s, default=None)
    if ceiling is not None and ceiling.gb_per_s >= brightest:
        brightest = ceiling.gb_per_s
        scale = f"0 to the {ceiling.limiter} ceiling, {format_gb_per_s(brightest)} GB/s"
    pairs = ("from (source)", "to (destination)", names, names)  # rows and columns
    panels: list[Panel] = [
        HeatMap(f"{METHODS[method]}, GB/s", *pairs, grid, brightest, scale_words=scale)
        for method, grid in maps.items()
    ]
    return panels or default_panels(result, summary)


def streams_panels(result: Result, summary: Summary) -> list[Panel]:
    """Each mode's run of median time, all on the longest one's axis so they compare."""
    from memprof.experiments.streams import MODES, mode_labels

    labels, streams = mode_labels(result.parameters.streams), result.parameters.streams
    kinds = {"h2d": "copy in (HtoD)", "kernel": "kernel", "d2h": "copy out (DtoH)"}
    panels: list[Panel] = []
    for mode in MODES:
        timeline = getattr(result.extra.timelines, mode)
        lanes = [f"stream {lane}" for lane in range(1 if mode == "serial" else streams)]
        spans = [Span(lane, start, end, stage) for lane, _, stage, start, end in timeline]
        title = f"{labels[mode]}: the run of median time ({result.extra.timeline_source})"
        panels.append(Timeline(title, lanes, spans, kinds))
    longest = max((span.end_ms for panel in panels for span in panel.spans), default=None)
    for panel in panels:
        panel.until_ms = longest
    return panels


def check_panels(result: Result, summary: Summary) -> list[Panel]:
    """Every line's verdict, and each figure a line judged against what it expected."""
    from memprof.experiments import check

    _, found, _ = check.judged(result)  # as the table: the run's own reference and floors
    said = [
        f"{line.verdict:<4}  {line.what}: {line.measured} (expected {line.expected})"
        for line in found
    ]
    verdicts = Words("Verdicts", [part for one in said for part in wrapped(one, indent=" " * 6)])
    bars = [
        Bar(what, measured, expected=least, verdict=line.verdict)
        for line in found
        for what, measured, least in line.judged
    ]
    if not bars:
        return [verdicts]
    return [verdicts, Bars("Measured GB/s against the least expected", GB_PER_S, bars)]


def trace_panels(result: Result, summary: Summary) -> list[Panel]:
    """GPU time by activity (the profile's GPU rows), then the source lines that spent it."""
    from memprof.output.profile import PROFILE_GROUPS, profile_rows

    rows = [r for r in profile_rows(result.measurements) if r.group == PROFILE_GROUPS["gpu"]]
    bars = [Bar(row.name, row.stats.total_ms) for row in rows[:MOST_BARS]]
    if len(rows) > MOST_BARS:
        rest = rows[MOST_BARS:]
        bars.append(Bar(f"{len(rest)} other rows", math.fsum(row.stats.total_ms for row in rest)))
    busy = math.fsum(row.stats.total_ms for row in rows)
    heading = (
        f"GPU time by activity: {format_ms(busy)} over the program's {result.extra.wall_s:.2f} s"
    )
    if not bars:
        return [Words(heading, ["The program did no GPU work that CUPTI recorded."])]
    panels = [Bars(heading, "GPU time, every call summed", bars, unit="ms"), *_line_panels(result)]
    return panels + _time_panels(result, summary)


PART_WORDS = {"computing": "computing", "copying": "copying", "both": "both at once",
              "idle": "idle"}  # fmt: skip


def _time_panels(result: Result, summary: Summary) -> list[Panel]:
    """Where the time went, per GPU: its run in bins (adding up to the Where table's), its
    longest idle gaps marked and listed; where no timeline was kept, why."""
    from memprof.model.timeline import breakdown_of, over_time
    from memprof.output.timeline import timeline_missing
    from memprof.output.where import gap_place

    timeline = result.extra.timeline
    if timeline is None:
        return [Words("Where the time went", wrapped(timeline_missing(result) or ""))]
    tables = {table.title: table for table in summary.tables}
    if not timeline.gpu or "Where the time went" not in tables:
        return []
    shares = breakdown_of(result)
    panels: list[Panel] = []
    for share, binned, row in zip(
        shares, over_time(timeline), tables["Where the time went"].rows, strict=True
    ):
        marks = [
            Mark(gap.start_ns / 1e6, (gap.start_ns + gap.duration_ns) / 1e6, number)
            for number, gap in enumerate(share.gaps, 1)
        ]
        bins = [
            [ns / 1e6 for ns in (*parts, binned.idle_ns(index))]
            for index, parts in enumerate(binned.parts)
        ]
        title = f"GPU {share.device} over the run: {', '.join(PART_WORDS.values())}"
        ends_ms = (binned.bin_ns / 1e6, binned.end_ns / 1e6)
        panels.append(Stacked(title, *ends_ms, PART_WORDS, bins, marks))
        totals = ", ".join(
            f"{words} {cell}" for words, cell in zip(PART_WORDS.values(), row[1:], strict=True)
        )
        lines = wrapped(
            f"The run, as Where the time went prints it: {totals}. Drawn from the first "
            "recorded event to the end of the last: before it (start-up) and after, the GPU "
            "was idle too.",
            indent="  ",
        )
        for number, gap in enumerate(share.gaps, 1):  # as Longest idle gaps lists them
            lines += wrapped(
                f"{number}  idle for {format_ms(gap.idle_ms)} at {format_ms(gap.start_ms)}: "
                f"host at {gap_place(gap, result.extra.lines or [])}",
                indent="   ",
            )
        panels.append(Words(f"GPU {share.device}: the run and its longest idle gaps", lines))
    return panels


def _line_panels(result: Result) -> list[Panel]:
    """The program's source lines with the most GPU time, a bar per line's activity."""
    from memprof.model.lines import lines_of

    timed = [line for line in lines_of(result) or [] if line.gpu_ms_each]
    timed.sort(key=lambda line: line.gpu_ms, reverse=True)
    if not timed:
        return []
    bars = [Bar(f"{line.place} {line.activity}", line.gpu_ms) for line in timed[:MOST_LINES]]
    heading = "GPU time by source line"
    if len(timed) > len(bars):
        heading += f": the {len(bars)} with the most, of {len(timed)}"
    return [Bars(heading, "GPU time, the line's calls summed", bars, unit="ms")]


def info_panels(result: Result, summary: Summary) -> list[Panel]:
    """The theoretical ceilings its table prints: device memory's and the PCIe link's."""
    from memprof.model.ceilings import hbm_ceiling

    found = [
        Bar(words, ceiling.gb_per_s, kind=kind)
        for words, ceiling, kind in (
            ("device memory", hbm_ceiling(result.device), "device"),
            ("PCIe link, one direction", pcie_ceiling(result), None),
        )
        if ceiling is not None
    ]
    title = "This GPU's ceilings (theoretical): what bounds copies in its memory and over the link"
    return [Bars(title, GB_PER_S, found)] if found else default_panels(result, summary)


# -- every other command ---------------------------------------------------------------------------


def default_panels(result: Result, summary: Summary) -> list[Panel]:
    """Each table's figures as bars, ceilings exceeded said; else its tables as words."""
    panels = table_panels(summary, summary.tables)
    if panels:
        return _with_exceeded(panels)
    return [
        Words(table.title, [line for row in table.rows for line in wrapped(" | ".join(row))])
        for table in summary.tables
    ] or [Words("Nothing measured", ["This result holds no measurement to draw."])]


NAMING = ("label", "moved_bytes")  # a table's leading columns of words and sizes name its row
# What a declared column shows of its figure (memprof.model.summary.SHOWS), as a value drawn in
# a unit: the table's GB/s where it shows any, else its times
DRAWN = (
    ("GB/s", {"gb_per_s": lambda f: f.gb_per_s}),
    ("ms", {"median_ms": lambda f: f.median_ms, "per_operation_ms": lambda f: f.per_operation_ms}),
)


def table_panels(summary: Summary, tables: list[Table], by_column: bool = False) -> list[Panel]:
    """Each built table's figures (memprof.model.summary.table), as bars (_bars)."""
    of = {id(f.measurement): f for f in summary.figures}
    return [panel for table in tables for panel in _bars(table, of, by_column)]


def _bars(table: Table, of: dict[int, Figure], by_column: bool) -> list[Panel]:
    """Each figure a column shows (GB/s where any, else times), a bar labelled by its row
    (and column where a row shows several); `by_column`: a panel per column."""
    naming = list(itertools.takewhile(lambda c: c.shows in NAMING, table.columns))
    for unit, values in DRAWN:
        bars: dict[int, list[Bar]] = {}  # by column where by_column, else all under -1
        for row in table.figures:
            found = []
            for index, column in enumerate(table.columns):
                one = row.get(column.of) if column.shows in values else None
                f = of.get(id(getattr(one, "measurement", one))) if one is not None else None
                value = values[column.shows](f) if f is not None else None
                if value is not None:
                    found.append((index, f, value))
            words = ", ".join(c.cell(row) for c in naming if c.cell(row) != "-")
            for index, f, value in found:
                header = table.columns[index].header
                label = f"{words}: {header}" if len(found) > 1 and not by_column else words
                ceiling = f.ceiling.gb_per_s if unit == "GB/s" and f.ceiling else None
                kind = f.measurement.kind
                bar = Bar(label, value, ceiling=ceiling, source=f.measurement, kind=kind)
                bars.setdefault(index if by_column else -1, []).append(bar)
        if bars:  # titled by their column (by_column), else by the table (under -1)
            titles = {i: f"{table.title}: {c.header}" for i, c in enumerate(table.columns)}
            value_label = GB_PER_S if unit == "GB/s" else "time"
            return [
                Bars(titles.get(index, table.title), value_label, found, unit=unit)
                for index, found in sorted(bars.items())
            ]
    return []


def compare_panels(result: Result, summary: Summary) -> list[Panel]:
    """Its first table a panel per operation, a bar per memory kind."""
    panels = table_panels(summary, summary.tables[:1], by_column=True)
    return _with_exceeded(panels) or default_panels(result, summary)


def _with_exceeded(panels: list[Panel]) -> list[Panel]:
    """Each panel of bars followed by words naming every figure above its ceiling or bound."""
    shown: list[Panel] = []
    for panel in panels:
        shown.append(panel)
        if not isinstance(panel, Bars) or panel.unit != "GB/s":
            continue
        lines = []
        for bar in panel.bars:
            bounds = [(bar.ceiling, "its ceiling")] if bar.ceiling else []
            if panel.reference is not None:
                bounds.append((panel.reference.value, panel.reference.words))
            for bound, words in bounds:
                if bar.value > bound:
                    lines += wrapped(
                        f"{bar.label}: {format_gb_per_s(bar.value)} GB/s, above {words} "
                        f"({format_gb_per_s(bound)} GB/s)",
                        indent="  ",
                    )
        if lines:
            shown.append(Words("Figures above a ceiling drawn (see the table's notes)", lines))
    return shown


def managed_panels(result: Result, summary: Summary) -> list[Panel]:
    """Its table's GB/s, against the link every page brought over crosses (one direction)."""
    panels = table_panels(summary, summary.tables)
    link = pcie_ceiling(result)
    for panel in panels:
        if isinstance(panel, Bars) and panel.unit == "GB/s" and link is not None:
            panel.reference = Reference(link.gb_per_s, f"{link.limiter}, one direction")
    return _with_exceeded(panels) or default_panels(result, summary)


def pinlimit_panels(result: Result, summary: Summary) -> list[Panel]:
    """Time per GiB against the amount pinned, a line per way; the host's copies by phase."""
    from memprof.experiments import pinlimit

    panels: list[Panel] = []
    climb = pinlimit.climb_of(result)
    if climb is not None:
        ways = {"cuMemHostAlloc + touch": climb.alloc, "touch + cuMemHostRegister": climb.register}
        lines = [
            Line(
                way, [(n, cost.median_ms) for n, cost in zip(climb.held_bytes, costs, strict=True)]
            )
            for way, costs in ways.items()
        ]
        title = "Time per GiB as pinned memory grows"
        panels.append(Curves(title, "pinned", "ms per GiB", lines, y_unit="ms", linear=True))
    phases = ("nothing pinned", "all pinned", "freed again")  # idle, held, after
    bars = [
        Bar(f"{name}, {words}", f.gb_per_s, source=f.measurement)
        for name, work in pinlimit.host_figures(result).items()
        for f, words in zip((work.idle, work.held, work.after), phases, strict=True)
        if f.gb_per_s is not None
    ]
    panels.append(Bars("The host's pageable copies", GB_PER_S, bars))
    return panels


AGAINST_SIZE = (sweep_panels, zerocopy_panels, alloc_panels, smallcopies_panels)
