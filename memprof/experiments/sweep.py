"""`memprof sweep`: bandwidth against transfer size for each memory kind (bandwidthTest's shmoo).

Copies between device memory and each host kind, and for `zerocopy` a kernel reading
(host → device) or writing (device → host) mapped memory directly. Except from pageable
memory, every timed operation is queued behind a GPU-side gate (memprof.gate) and released
at once, so CUDA events time the operations alone, not Python's launch cost: that is what
makes small sizes honest. Pageable copies are synchronous and cannot be queued: they are
timed one by one. Every size is verified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from memprof.core import memory
from memprof.experiments.base import (
    FLOAT32_BYTES,
    LAUNCH_CALL,
    Experiment,
    Measure,
    Powers,
    Repeat,
    RunContext,
    Warmup,
    find,
    powers_param,
    repeat_param,
    warmup_param,
)
from memprof.experiments.common import size_label
from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
    plural,
)
from memprof.model.params import CommaList, NamedSets, param
from memprof.model.results import Check, Result
from memprof.model.summary import Chart, Summary, Table

# zerocopy is not a kind but a way of using mapped memory: a kernel reads or writes it.
ZEROCOPY, ZEROCOPY_MARKER = "zerocopy", "Z"
SWEEP_KINDS = (*(kind.name for kind in memory.kinds_where(lambda k: k.host_copies)), ZEROCOPY)
SweepKind = Literal[SWEEP_KINDS]  # type: ignore[valid-type]
ALLOCATED_AS = {ZEROCOPY: "mapped"}
DIRECTIONS = {"h2d": "host → device", "d2h": "device → host"}
NAMES = {
    ("copy", "h2d"): "[CUDA memcpy HtoD]",
    ("copy", "d2h"): "[CUDA memcpy DtoH]",
    ("zerocopy", "h2d"): "readSum(float*, float*, long long)",
    ("zerocopy", "d2h"): "fillValue(float*, float, long long)",
}


@dataclass(frozen=True)
class SweepParams:
    powers: Powers = powers_param(tuple(range(8, 27)), step=1)  # 1 KiB to 256 MiB
    kinds: tuple[SweepKind, ...] = param(SWEEP_KINDS, "Kinds to sweep.", form=CommaList())
    directions: tuple[Literal["h2d", "d2h"], ...] = param(
        ("h2d", "d2h"),
        "Copy direction(s).",
        flags=("--direction",),
        form=NamedSets({"h2d": ("h2d",), "d2h": ("d2h",), "both": ("h2d", "d2h")}),
    )
    repeat: Repeat = repeat_param(20)
    warmup: Warmup = warmup_param(2)


@dataclass(frozen=True)
class SweepExtra:
    # the kinds measured (those of params.kinds this GPU supports) and why others were skipped;
    # None in older files, which measured every kind asked for
    kinds: list[str] | None = None
    skipped: list[str] | None = None


H2D = Measure(
    "gpu", "h2d", "a copy or a zero-copy read host → device, at every size", "one operation"
)
D2H = Measure(
    "gpu", "d2h", "a copy or a zero-copy write device → host, at every size", "one operation"
)
COPIES = {"h2d": H2D, "d2h": D2H}


class Sweep(Experiment):
    name = "sweep"
    help = "Bandwidth against size per kind (default 2^8 to 2^26 floats): chart, table, crossovers."
    Params = SweepParams
    Extra = SweepExtra
    gpus = "one_or_every"
    measures = (H2D, D2H, LAUNCH_CALL)

    def run(self, ctx: RunContext) -> SweepExtra:
        import numpy as np

        from memprof.core.access import DirectAccess

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        facts = ctx.facts[session.device_index]
        cuda = session.cuda
        largest = 1 << max(params.powers)
        memory.require_memory(
            session, device_bytes=FLOAT32_BYTES * largest, host_bytes=4 * FLOAT32_BYTES * largest
        )
        kinds, skipped = _supported(params.kinds, facts.attributes)
        access = DirectAccess(session)
        values = np.random.default_rng(3).random(largest, dtype=np.float32)
        received = np.zeros(largest, np.float32)
        device = memory.allocate(session, "device", largest)
        cuda.memcpy_htod(device.device_pointer, values)
        total = len(kinds) * len(params.powers)
        for kind_index, kind in enumerate(kinds):
            host = memory.allocate(session, ALLOCATED_AS.get(kind, kind), largest)
            host.array[:] = values
            synchronous = memory.MEMORY_KINDS[ALLOCATED_AS.get(kind, kind)].synchronous_copies
            failures: dict[str, list[str]] = {direction: [] for direction in params.directions}
            for power_index, power in enumerate(params.powers):
                ctx.progress(
                    f"{kind} {size_label(power)}",
                    kind_index * len(params.powers) + power_index,
                    total,
                )
                n = 1 << power
                nbytes = n * FLOAT32_BYTES
                for direction in params.directions:
                    action = _action(cuda, access, kind, direction, host, device, n, power)
                    name = NAMES[ZEROCOPY if kind == ZEROCOPY else "copy", direction]
                    if direction == "d2h" and kind != ZEROCOPY:
                        host.array[:n] = np.nan  # poison: the copies must write every element

                    def step(
                        action=action,
                        name=name,
                        direction=direction,
                        kind=kind,
                        nbytes=nbytes,
                        synchronous=synchronous,
                    ) -> None:
                        if kind == ZEROCOPY:  # the kernel launch records itself
                            action(profiler.stream)
                            return
                        with profiler.events(
                            "gpu", name, direction, kind, nbytes, synchronous=synchronous
                        ):
                            action(profiler.stream)

                    profiler.repeat(step, params.warmup, params.repeat)
                    profiler.throughput(name, direction, kind, nbytes, action, synchronous)
                    problem = _verify(
                        cuda, access, kind, direction, host, device, values, received, n, power
                    )
                    if problem:
                        failures[direction].append(f"{size_label(power)}: {problem}")
            for direction, problems in failures.items():
                detail = (
                    problems[0]
                    if problems
                    else f"Check result success! ({plural(len(params.powers), 'size')})"
                )
                ctx.check(
                    Check(
                        f"{kind} {DIRECTIONS[direction]}", not problems, len(params.powers), detail
                    )
                )
            host.free()
        device.free()
        access.free()
        ctx.progress("done", total, total)
        return SweepExtra(kinds=kinds, skipped=skipped)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)


def _supported(names: tuple[str, ...], attributes: dict[str, int]) -> tuple[list[str], list[str]]:
    """The chosen kinds this GPU supports, and why each other one is skipped."""
    kinds, skipped = [], []
    for name in names:
        reason = memory.MEMORY_KINDS[ALLOCATED_AS.get(name, name)].unsupported_reason(attributes)
        if reason is None:
            kinds.append(name)
        else:
            skipped.append(f"{name}: {reason}")
    return kinds, skipped


def measured_kinds(result: Result) -> list[str]:
    """The kinds a sweep measured (older results recorded only the kinds asked for)."""
    return result.extra.kinds if result.extra.kinds is not None else result.parameters.kinds


def marker(kind: str) -> str:
    return ZEROCOPY_MARKER if kind == ZEROCOPY else memory.marker(kind)


def _fill_value(power: int) -> float:
    return 1.5 + power  # exact in float32, different for every size


def _action(cuda, access, kind, direction, host, device, n: int, power: int):
    """The operation to time once, on a stream (None: synchronous)."""
    if kind == ZEROCOPY:
        if direction == "h2d":
            return lambda stream: access.read(host.device_pointer, n, kind, stream, direction)
        return lambda stream: access.write(
            host.device_pointer, n, _fill_value(power), kind, stream, direction
        )
    return memory.host_copy(cuda, direction, host, device.device_pointer, n)[1]


def _verify(
    cuda, access, kind, direction, host, device, values, received, n: int, power: int
) -> str:
    """'' when the size's operations did what they should, else what went wrong."""
    import numpy as np

    if kind == ZEROCOPY and direction == "h2d":
        check = access.check_sum("", values[:n])
        return "" if check.passed else check.detail
    if kind == ZEROCOPY:
        cuda.Context.synchronize()
        wrong = np.flatnonzero(host.array[:n] != np.float32(_fill_value(power)))
        host.array[:n] = values[:n]  # restore for the next read
        return f"element {wrong[0]} not written" if wrong.size else ""
    cuda.Context.synchronize()
    if direction == "h2d":
        cuda.memcpy_dtoh(received[:n], device.device_pointer)
        wrong = np.flatnonzero(received[:n] != values[:n])
    else:
        wrong = np.flatnonzero(host.array[:n] != values[:n])
        host.array[:n] = values[:n]
    return f"element {wrong[0]} differs" if wrong.size else ""


def curves(result: Result) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """(kind, direction) -> [(power, latency ms, GB/s)] in size order.

    Latency: the median of single operations. GB/s: back-to-back throughput where it was
    measured (a batch between one event pair), else the single operations.
    """
    found = {}
    for kind in measured_kinds(result):
        for direction in result.parameters.directions:
            points = []
            for power in result.parameters.powers:
                nbytes = FLOAT32_BYTES << power
                measurement = find(result, COPIES[direction], kind, nbytes)
                latency = measurement.stats.median_ms
                throughput = measurement.throughput_stats
                per_operation = throughput.median_ms if throughput else latency
                points.append((power, latency, bandwidth_gb_per_s(nbytes, per_operation)))
            found[kind, direction] = points
    return found


def chart_lines(series: dict[str, list[tuple[int, float, float]]], height: int = 12) -> list[str]:
    """A bandwidth-against-size plot in text, log scale on both axes (sizes are powers of 2).

    One marker letter per kind; `*` where several kinds fall on one point.
    """
    powers = [power for power, _, _ in next(iter(series.values()))]
    values = [gbs for points in series.values() for _, _, gbs in points if gbs > 0]
    low, high = math.log10(min(values)), math.log10(max(values))
    span = max(high - low, 1e-9)
    # three columns per size where the chart then fits 80 columns, else two (--from 0 --to 30)
    columns = 3 if CHART_LEFT + 3 * len(powers) <= CHART_WIDTH else 2
    grid = [[" "] * (columns * len(powers)) for _ in range(height)]
    for kind, points in series.items():
        for index, (_, _, gbs) in enumerate(points):
            level = round((math.log10(max(gbs, min(values))) - low) / span * (height - 1))
            row, column = grid[height - 1 - level], index * columns + 1
            row[column] = marker(kind) if row[column] == " " else "*"
    lines = []
    for row_index, row in enumerate(grid):
        value = 10 ** (high - span * row_index / (height - 1))
        label = (
            f"{format_gb_per_s(value):>7}"
            if row_index % 4 == 0 or row_index == height - 1
            else " " * 7
        )
        lines.append(f"{label} |{''.join(row)}")
    lines.append(" " * 8 + "+" + "-" * (columns * len(powers)))
    axis = (" " * CHART_LEFT + "".join(f"{p:<{columns * 2}}" for p in powers[::2])).rstrip()
    if len(axis) + len(AXIS_UNIT) <= CHART_WIDTH:
        lines.append(axis + AXIS_UNIT)
    else:
        lines += [axis, " " * CHART_LEFT + AXIS_UNIT.strip()]
    return lines


CHART_WIDTH = 80  # the narrowest console the chart is drawn for
CHART_LEFT = 9  # the value labels and the axis before the first size
AXIS_UNIT = "  (2^n floats)"


def _ninety_percent_size(points: list[tuple[int, float, float]]) -> int:
    peak = max(gbs for _, _, gbs in points)
    return next(power for power, _, gbs in points if gbs >= 0.9 * peak)


CLEAR_LEAD = 0.05  # a kind leads another only when it is at least 5% faster


def crossovers(series: dict[str, list[tuple[int, float, float]]]) -> list[str]:
    """Where one kind stops clearly beating another (by CLEAR_LEAD) between sizes.

    Sizes where the two are within 5% of each other lead to nothing, so curves that lie
    on top of each other (pinned, registered, write-combined) produce no false crossings.
    """
    found = []
    kinds = list(series)
    for i, first in enumerate(kinds):
        for second in kinds[i + 1 :]:
            previous = None  # (power, leader) of the last size with a clear leader
            for (power, _, a), (_, _, b) in zip(series[first], series[second], strict=True):
                if max(a, b) < (1 + CLEAR_LEAD) * min(a, b):
                    continue
                leader, other = (first, second) if a > b else (second, first)
                if previous is not None and leader != previous[1]:
                    found.append(
                        f"{leader} overtakes {other} between 2^{previous[0]} and 2^{power} "
                        f"(at {format_bytes(FLOAT32_BYTES << power)}: "
                        f"{format_gb_per_s(max(a, b))} vs {format_gb_per_s(min(a, b))} GB/s)"
                    )
                previous = (power, leader)
    return found


def summarize(result: Result) -> Summary:
    found = curves(result)
    kinds, directions = measured_kinds(result), result.parameters.directions
    tables, charts, conclusions = [], [], []
    for direction in directions:
        table = Table(
            f"Bandwidth {DIRECTIONS[direction]}, GB/s = 10^9 bytes/s, back-to-back throughput",
            ["Size", *kinds],
        )
        for index, power in enumerate(result.parameters.powers):
            table.add_row(
                size_label(power),
                *(format_gb_per_s(found[kind, direction][index][2]) for kind in kinds),
            )
        tables.append(table)
        series = {kind: found[kind, direction] for kind in kinds}
        charts.append(
            Chart(
                f"GB/s {DIRECTIONS[direction]} against size (log scales): "
                + ", ".join(f"{marker(k)} = {k}" for k in kinds)
                + ", * = several at one point",
                chart_lines(series),
            )
        )
        conclusions += [f"{DIRECTIONS[direction]}: {line}." for line in crossovers(series)]
    shape = Table(
        "Per kind: latency, peak, and where 90% of the peak is reached",
        ["Kind", "Direction", "Latency at smallest", "Peak GB/s", "at", "90% of peak from"],
        notes=[
            "zerocopy: a kernel reading (host → device) or writing (device → host) mapped host "
            "memory. GB/s: throughput of back-to-back operations, batches between one event "
            "pair queued behind a GPU-side gate (pageable copies block the host: timed as "
            "they return). Latency: one operation, median of "
            f"{result.parameters.repeat}, from {_source(result)}.",
        ]
        + [f"Skipped: {reason}." for reason in result.extra.skipped or []],
    )
    for kind in kinds:
        for direction in directions:
            points = found[kind, direction]
            peak_power, _, peak = max(points, key=lambda point: point[2])
            shape.add_row(
                kind,
                DIRECTIONS[direction],
                format_ms(points[0][1]),
                format_gb_per_s(peak),
                size_label(peak_power),
                size_label(_ninety_percent_size(points)),
            )
    tables.append(shape)
    if not conclusions:
        conclusions.append("No crossovers: the order of the kinds was the same at every size.")
    return Summary(tables=tables, conclusions=conclusions, charts=charts, show_profile=False)


def _source(result: Result) -> str:
    """How single operations were timed, in words."""
    if result.timing is not None and result.timing.source == "cupti":
        return "CUPTI's records of them"
    return "gated CUDA events around each"
