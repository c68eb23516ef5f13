"""`memprof sweep`: bandwidth against transfer size for each memory kind (bandwidthTest's shmoo).

Copies, and for `zerocopy` a kernel reading or writing mapped memory, are queued behind a
GPU-side gate so events time the operations, not Python's launch cost; pageable copies are
synchronous and timed one by one. Every size is verified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Literal

from memprof.core import memory
from memprof.errors import MemprofError
from memprof.experiments import base
from memprof.experiments.common import measure_host_staging, size_label
from memprof.model.ceilings import detail_of, pcie_ceiling
from memprof.model.figures import Derived, Figure, HostSide, figure, host_side
from memprof.model.formatting import format_bytes, format_gb_per_s, plural
from memprof.model.params import CommaList, param
from memprof.model.results import Check, Result
from memprof.model.schema import DISTINCT, NON_EMPTY
from memprof.model.summary import Chart, Column, Summary, Table, table

# zerocopy is not a kind but a way of using mapped memory: a kernel reads or writes it.
ZEROCOPY, ZEROCOPY_MARKER = "zerocopy", "Z"
SWEEP_KINDS = (*(kind.name for kind in memory.kinds_where(lambda k: k.host_copies)), ZEROCOPY)
SweepKind = Literal[SWEEP_KINDS]  # type: ignore[valid-type]
ALLOCATED_AS = {ZEROCOPY: "mapped"}
DIRECTIONS = base.DIRECTIONS
NAMES = {
    **{("copy", direction): name for direction, name in base.COPY_NAMES.items()},
    ("zerocopy", "h2d"): "readSum(float*, float*, long long)",
    ("zerocopy", "d2h"): "fillValue(float*, float, long long)",
}


@dataclass(frozen=True)
class SweepParams:
    powers: base.Powers = base.powers_param(tuple(range(8, 27)), step=1)  # 1 KiB to 256 MiB
    kinds: Annotated[tuple[SweepKind, ...], NON_EMPTY, DISTINCT] = param(
        SWEEP_KINDS, "Kinds to sweep.", form=CommaList()
    )
    directions: base.Directions = base.directions_param()
    repeat: base.Repeat = base.repeat_param(20)
    warmup: base.Warmup = base.warmup_param(2)


@dataclass(frozen=True)
class SweepExtra:
    # why the kinds asked for but not measured were skipped (None: older files)
    skipped: list[str] | None = None


# A copy, or a zero-copy kernel reading or writing the whole buffer over the link.
H2D, D2H = (
    base.Measure(
        "gpu", direction, f"a copy or a zero-copy {way} {words}, at every size", "one operation",
        arrays=1, kinds="kinds", shows="throughput", bound="link",
        required="directions",  # recorded exactly where parameters.directions asks
    )
    for direction, words, way in (
        ("h2d", "host → device", "read"), ("d2h", "device → host", "write")
    )
)  # fmt: skip
COPIES = {"h2d": H2D, "d2h": D2H}


class Sweep(base.Experiment):
    name = "sweep"
    Params = SweepParams
    Extra = SweepExtra
    gpus = "one_or_every"
    measures = (H2D, D2H, base.LAUNCH_CALL, *base.HOST_SIDE)

    def run(self, ctx: base.RunContext) -> SweepExtra:
        import numpy as np

        from memprof.core.access import DirectAccess

        session, params = ctx.session, ctx.params
        largest = 1 << max(params.powers)
        memory.require_memory(
            session,
            # the copies' buffer, the reference and the NaNs that poison host memory
            device_bytes=3 * base.FLOAT32_BYTES * largest,
            host_bytes=4 * base.FLOAT32_BYTES * largest,
        )
        kinds, skipped = _supported(params.kinds, ctx.facts[session.device_index].attributes)
        access = DirectAccess(session)
        values = np.random.default_rng(3).random(largest, dtype=np.float32)
        checker = _Checker(session, values, np.zeros(largest, np.float32))
        device = memory.allocate(session, "device", largest)
        checker.restore(device.device_pointer, largest)  # from the checked reference, on the GPU
        step = ctx.steps(len(kinds) * len(params.powers))
        for kind in kinds:
            host = memory.allocate(session, ALLOCATED_AS.get(kind, kind), largest)
            checker.fill_host(host, largest)
            failures: dict[str, list[str]] = {direction: [] for direction in params.directions}
            for power in params.powers:
                step(f"{kind} {size_label(power)}")
                found = _measure_size(ctx, access, checker, kind, host, device, power)
                for direction, problem in found.items():
                    if problem:
                        failures[direction].append(f"{size_label(power)}: {problem}")
            _check_kind(ctx, kind, failures)
            host.free()
        device.free()
        checker.free()
        access.free()
        step("done")
        return SweepExtra(skipped=skipped)

    def derived(self, result: Result) -> dict:
        return {"kinds": measured_kinds(result)}


def _measure_size(
    ctx: base.RunContext, access, checker: _Checker, kind: str, host, device, power: int
) -> dict[str, str]:
    """One kind at one size, each direction timed one operation at a time, then back to
    back, then verified: direction -> '' or what went wrong."""
    from memprof.core.verify import NAN_BITS

    cuda, profiler, params = ctx.session.cuda, ctx.measure, ctx.params
    synchronous = memory.MEMORY_KINDS[ALLOCATED_AS.get(kind, kind)].synchronous_copies
    n = 1 << power
    nbytes = n * base.FLOAT32_BYTES
    if kind == "pageable":  # the pageable copies' host side at this size
        measure_host_staging(profiler, checker.received[:n])
    problems = {}
    for direction in params.directions:
        action = _action(cuda, access, kind, direction, host, device, n, power)
        name = NAMES[ZEROCOPY if kind == ZEROCOPY else "copy", direction]
        if direction == "d2h" and kind != ZEROCOPY:
            checker.fill_host(host, n, poison=True)  # the copies must write every element
        elif kind != ZEROCOPY:  # the device buffer held the values already: poison it too
            cuda.memset_d32(device.device_pointer, NAN_BITS, n)

        def step(action=action, name=name, direction=direction) -> None:
            if kind == ZEROCOPY:  # the kernel launch records itself
                action(profiler.stream)
                return
            with profiler.events("gpu", name, direction, kind, nbytes, synchronous=synchronous):
                action(profiler.stream)

        profiler.repeat(step, params.warmup, params.repeat)
        profiler.throughput(name, direction, kind, nbytes, action, synchronous)
        problems[direction] = checker.verify(access, kind, direction, host, device, n, power)
    return problems


def _check_kind(ctx: base.RunContext, kind: str, failures: dict[str, list[str]]) -> None:
    """A check per direction of one kind: its first failure, or the success of every size."""
    sizes = len(ctx.params.powers)
    for direction, problems in failures.items():
        detail = problems[0] if problems else f"Check result success! ({plural(sizes, 'size')})"
        ctx.check(Check(f"{kind} {DIRECTIONS[direction]}", not problems, sizes, detail))


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
    """The kinds a sweep measured: those asked for that its copies are of, in order."""
    measured = {m.kind for m in result.measurements if m.group == "gpu"}
    return [kind for kind in result.parameters.kinds if kind in measured]


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


class _Checker:
    """Whether a size's operations did what they should: on the GPU against a device copy of
    the values where it can read what was written, else on the host."""

    def __init__(self, session, values, received) -> None:
        from memprof.core.verify import NAN_BITS, GpuVerifier

        self.cuda, self.values, self.received = session.cuda, values, received
        self.gpu = GpuVerifier(session)
        with session.profiler.paused():
            self.reference = memory.allocate(session, "device", values.size)
            self.nans = memory.allocate(session, "device", values.size)
        self.cuda.memset_d32(self.nans.device_pointer, NAN_BITS, values.size)
        self.cuda.memcpy_htod(self.reference.device_pointer, values)
        self.cuda.memcpy_dtoh(received, self.reference.device_pointer)
        wrong = differs_at(received, values)
        if wrong is not None:
            raise MemprofError(f"the sweep's reference values differ on the GPU at element {wrong}")
        self.sums: dict[int, float] = {0: 0.0}  # element count -> float64 sum of the first ones

    def sum_of_first(self, n: int) -> float:
        """The float64 sum of the first n values, extending the longest prefix summed before."""
        from memprof.core.access import float64_sum

        if n not in self.sums:
            before = max(count for count in self.sums if count < n)
            self.sums[n] = self.sums[before] + float64_sum(self.values[before:n])
        return self.sums[n]

    def verify(self, access, kind: str, direction: str, host, device, n: int, power: int) -> str:
        """'' when the size's operations did what they should, else what went wrong."""
        import numpy as np

        cuda, values, nbytes = self.cuda, self.values, n * base.FLOAT32_BYTES
        if kind == ZEROCOPY and direction == "h2d":
            check = access.check_sum("", n, self.sum_of_first(n))
            return "" if check.passed else check.detail
        cuda.Context.synchronize()
        if kind == ZEROCOPY:
            fill = np.float32(_fill_value(power)).view(np.uint32)
            wrong = self.gpu.first_not_word(host.device_pointer, nbytes, fill)
            host.array[:n] = values[:n]  # for the next read (by numpy: its lines as before)
            return f"element {wrong} not written" if wrong is not None else ""
        written = device.device_pointer if direction == "h2d" else host.device_pointer
        if written is not None:  # where the GPU can read what was written
            wrong = self.gpu.first_difference(written, self.reference.device_pointer, nbytes)
        else:
            wrong = differs_at(host.array[:n], values[:n])
        if wrong is not None:  # restore, so the next direction and size are checked alone
            if direction == "d2h":  # (where every element came, they hold the values already)
                self.fill_host(host, n)
            else:
                self.restore(device.device_pointer, n)
        return f"element {wrong} differs" if wrong is not None else ""

    def fill_host(self, host, n: int, poison: bool = False) -> None:
        """The first n elements of a host buffer set to the values, or to NaN (poison).
        Page-locked memory is filled by a DMA from device memory (numpy at one thread's speed
        was most of a size's time on the H200); pageable memory by numpy, so the driver's
        staging finds its lines in the CPU's cache."""
        import numpy as np

        if host.kind.synchronous_copies:
            host.array[:n] = np.nan if poison else self.values[:n]
        else:
            source = self.nans if poison else self.reference
            self.cuda.memcpy_dtoh(host.array[:n], source.device_pointer)

    def restore(self, address: int, n: int) -> None:
        """The first n values into device memory at `address`, copied from the reference."""
        self.cuda.memcpy_dtod(address, self.reference.device_pointer, n * base.FLOAT32_BYTES)

    def free(self) -> None:
        self.reference.free()
        self.nans.free()
        self.gpu.free()


def differs_at(got, expected) -> int | None:
    """The first element whose bits differ from what was expected (None: none), compared
    eight bytes at a time, large arrays in parts at once (verify.in_parts)."""
    import numpy as np

    from memprof.core.verify import in_parts

    a, b = np.ascontiguousarray(got).view(np.uint32), np.ascontiguousarray(expected).view(np.uint32)
    wide = a.size % 2 == 0
    x, y = (a.view(np.uint64), b.view(np.uint64)) if wide else (a, b)
    return None if in_parts(np.array_equal, x, y) else int(np.argmax(a != b))


def curve_figures(result: Result) -> dict[tuple[str, str], list[Figure]]:
    """(kind, direction) -> each size's figures, in size order."""
    return {
        (kind, direction): [
            figure(result, base.find(result, measure, kind, base.FLOAT32_BYTES << power), measure)
            for power in result.parameters.powers
        ]
        for kind in measured_kinds(result)
        for direction, measure in COPIES.items()
        if direction in result.parameters.directions
    }


def curves(
    result: Result, figures: dict[tuple[str, str], list[Figure]] | None = None
) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """(kind, direction) -> [(power, latency ms, GB/s)] in size order (figures: curve_figures',
    where the caller has them). GB/s: back-to-back throughput where measured, else single
    operations."""
    powers = result.parameters.powers
    return {
        key: [
            (power, one.latency_ms, one.gb_per_s) for power, one in zip(powers, points, strict=True)
        ]
        for key, points in (figures or curve_figures(result)).items()
    }


AXIS_NOTE = "(2^n floats)"
LABEL_WIDTH = 9  # "   55.5 |": the GB/s label and the axis line


def chart_lines(
    series: dict[str, list[tuple[int, float, float]]], width: int = 120, height: int = 12
) -> list[str]:
    """A bandwidth-against-size plot in text, log scale on both axes, no wider than `width`
    (3, 2 or 1 columns per size); a marker letter per kind, `*` where several meet."""
    powers = [power for power, _, _ in next(iter(series.values()))]
    values = [gbs for points in series.values() for _, _, gbs in points if gbs > 0]
    low, high = math.log10(min(values)), math.log10(max(values))
    span = max(high - low, 1e-9)
    columns = max(1, min(3, (width - LABEL_WIDTH) // len(powers)))
    grid = [[" "] * (columns * len(powers)) for _ in range(height)]
    for kind, points in series.items():
        for index, (_, _, gbs) in enumerate(points):
            level = round((math.log10(max(gbs, min(values))) - low) / span * (height - 1))
            row, column = grid[height - 1 - level], index * columns + columns // 2
            row[column] = marker(kind) if row[column] == " " else "*"
    lines = []
    for row_index, row in enumerate(grid):
        value = 10 ** (high - span * row_index / (height - 1))
        label = (
            f"{format_gb_per_s(value):>7}"
            if row_index % 4 == 0 or row_index == height - 1
            else " " * 7
        )
        lines.append(f"{label} |{''.join(row)}".rstrip())
    lines.append(" " * 8 + "+" + "-" * (columns * len(powers)))
    every = max(2, math.ceil(3 / columns))  # a size label every `every` sizes, room for "26 "
    axis = "".join(f"{power:<{columns * every}}" for power in powers[::every]).rstrip()
    labels = " " * (LABEL_WIDTH + columns // 2) + axis
    if len(labels) + 2 + len(AXIS_NOTE) <= width:
        return [*lines, f"{labels}  {AXIS_NOTE}"]
    return [*lines, labels, " " * LABEL_WIDTH + AXIS_NOTE]


def _ninety_percent_size(points: list[tuple[int, float, float]]) -> int:
    peak = max(gbs for _, _, gbs in points)
    return next(power for power, _, gbs in points if gbs >= 0.9 * peak)


CLEAR_LEAD = 0.05  # a kind leads another only when it is at least 5% faster


def crossovers(series: dict[str, list[tuple[int, float, float]]]) -> list[str]:
    """Where one kind stops clearly beating another (by CLEAR_LEAD) between sizes; sizes
    within 5% lead to nothing, so curves on top of each other make no false crossings."""
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
                        f"(at {format_bytes(base.FLOAT32_BYTES << power)}: "
                        f"{format_gb_per_s(max(a, b))} vs {format_gb_per_s(min(a, b))} GB/s)"
                    )
                previous = (power, leader)
    return found


def summarize(result: Result) -> Summary:
    figures = curve_figures(result)
    found = curves(result, figures)
    kinds, directions = measured_kinds(result), result.parameters.directions
    tables, charts, conclusions = [], [], []
    sides = _host_sides(result, kinds)
    for direction in directions:
        tables += _bandwidth_tables(result, figures, direction, sides and sides[direction])
        series = {kind: found[kind, direction] for kind in kinds}
        markers = ", ".join(f"{marker(k)} = {k}" for k in kinds)
        title = f"GB/s {DIRECTIONS[direction]} against size (log scales): {markers}"
        draw = partial(chart_lines, series)
        charts.append(Chart(f"{title}, * = several at one point", chart_lines(series), draw=draw))
        conclusions += [f"{DIRECTIONS[direction]}: {line}." for line in crossovers(series)]
    cupti = result.timing is not None and result.timing.source == "cupti"
    timed = "CUPTI's records of them" if cupti else "gated CUDA events around each"
    rows = []
    for kind in kinds:
        for direction in directions:
            shown = figures[kind, direction]
            ninety = result.parameters.powers.index(_ninety_percent_size(found[kind, direction]))
            reach = Derived(f"{kind} {direction} 90% of peak", (shown[ninety],), "reach")
            rows.append(
                {"kind": kind, "direction": DIRECTIONS[direction], "first": shown[0],
                 "peak": max(shown, key=lambda one: one.gb_per_s), "ninety": reach}
            )  # fmt: skip
    notes = [
        "zerocopy: a kernel reading (host → device) or writing (device → host) mapped host "
        "memory. GB/s: throughput of back-to-back operations, batches between one event "
        "pair queued behind a GPU-side gate (pageable copies block the host: timed as "
        "they return). Latency: one operation, median of "
        f"{base.repetitions(result)}, from {timed}; pageable: its call's, back "
        "to back (CUPTI records the DMA of data the driver has staged already).",
        *(f"Skipped: {reason}." for reason in result.extra.skipped or []),
    ]
    shape = table(
        "Per kind: latency, peak, and where 90% of the peak is reached", SHAPE, rows, notes
    )
    tables += [shape, _against_ceilings(result, figures, sides is not None)]
    if not conclusions:
        conclusions.append("No crossovers: the order of the kinds was the same at every size.")
    return Summary(tables=tables, conclusions=conclusions, charts=charts, show_profile=False)


def _host_sides(result: Result, kinds: list[str]) -> dict[str, dict[int, HostSide]] | None:
    """Pageable's host side per direction and size; None where pageable was not swept, a
    size lacks it, or a file mixes the older memcpy with staging."""
    if "pageable" not in kinds:
        return None
    sides: dict[str, dict[int, HostSide]] = {}
    for direction in result.parameters.directions:
        for power in result.parameters.powers:
            side = host_side(result, base.FLOAT32_BYTES << power, direction)
            if side is None:
                return None
            sides.setdefault(direction, {})[power] = side
    kinds_of_side = {side.staged for by_power in sides.values() for side in by_power.values()}
    return sides if len(kinds_of_side) == 1 else None


# The kinds whose curves differ, then pinned memory allocated other ways beside pinned: two
# tables that each fit a terminal of 80 columns where one of every kind would not.
PINNED_VARIANTS = ("portable", "writecombined", "mapped", "registered")


def _size_of(one: Figure | Derived) -> str:
    """A point's size in words from its figure's bytes, as the cell's CSV row holds them."""
    nbytes = getattr(one, "parts", (one,))[0].measurement.bytes
    return size_label((nbytes // base.FLOAT32_BYTES).bit_length() - 1)


SHAPE = (
    Column("Kind", "kind"),
    Column("Direction", "direction"),
    Column("Latency at smallest", "first", "latency_ms"),
    Column("Peak GB/s", "peak", "gb_per_s"),
    Column("at", "peak", _size_of),
    Column("90% of peak from", "ninety", _size_of),
)


def _bandwidth_tables(
    result: Result, figures: dict[tuple[str, str], list[Figure]], direction: str, sides
) -> list[Table]:
    """One direction's bandwidth tables: the kinds that differ, then pinned's variants."""
    kinds = measured_kinds(result)
    variants = [kind for kind in kinds if kind in PINNED_VARIANTS]
    main = [kind for kind in kinds if kind not in PINNED_VARIANTS]
    title = f"Bandwidth {DIRECTIONS[direction]}, GB/s = 10^9 bytes/s, back-to-back throughput"
    if not variants or not main:
        return [_bandwidth_table(result, figures, direction, sides, kinds, title)]
    pinned = ["pinned"] if "pinned" in main else []
    return [
        _bandwidth_table(result, figures, direction, sides, main, title),
        _bandwidth_table(
            result, figures, direction, None, pinned + variants,
            f"Pinned memory allocated other ways, {DIRECTIONS[direction]}, GB/s",
        ),
    ]  # fmt: skip


def _bandwidth_table(
    result: Result,
    figures: dict[tuple[str, str], list[Figure]],
    direction: str,
    sides,
    kinds: list[str],
    title: str,
) -> Table:
    """GB/s of these kinds at every size, pageable's host side beside it where recorded
    (sides: size's power -> HostSide)."""
    staged = sides is not None and next(iter(sides.values())).staged
    columns = [Column("Size", "size")]
    for kind in kinds:
        columns.append(Column(kind, kind, "gb_per_s"))
        if kind == "pageable" and sides is not None:  # its host side beside it
            columns.append(Column("staging" if staged else "memcpy", "host side", "gb_per_s"))
    rows = [
        {"size": format_bytes(base.FLOAT32_BYTES << power),
         "host side": sides[power] if sides is not None else None,
         **{kind: figures[kind, direction][index] for kind in kinds}}
        for index, power in enumerate(result.parameters.powers)
    ]  # fmt: skip
    made = table(title, columns, rows)
    if staged:
        made.notes.append(
            "staging: one host thread copying the pageable buffer "
            + ("into" if direction == "h2d" else "out of")
            + " a 256 KiB buffer chunk by chunk, this run: the host side of pageable copies, "
            "which the driver stages so."
        )
    elif sides is not None:
        made.notes.append(
            "memcpy: one host thread copying between two pageable buffers of that size, "
            "this run (a file from an older memprof: pageable copies can beat it, "
            "docs/ceilings.md)."
        )
    return made


def _against_ceilings(
    result: Result, figures: dict[tuple[str, str], list[Figure]], with_host_side: bool
) -> Table:
    """Each kind's peak as a share of its ceiling (pageable: at the peak's own size)."""
    kinds, directions = measured_kinds(result), result.parameters.directions
    columns = [Column("Kind", "kind"), *(Column(DIRECTIONS[d], d, "share") for d in directions)]
    rows = [
        {
            "kind": kind,
            **{d: max(figures[kind, d], key=lambda one: one.gb_per_s) for d in directions},
        }
        for kind in kinds
    ]
    notes = [f"Each kind's peak GB/s as a share of the link, {detail_of(pcie_ceiling(result))}."]
    if "pageable" in kinds:
        notes.append(
            "pageable: of the lower of the link and its host side (the column beside it) at "
            "the peak's size; above 100%, that model does not hold there."
            if with_host_side
            else "pageable: of the link only (the host side of pageable copies was not "
            "recorded in this file)."
        )
    return table("Each kind's peak against its ceiling", columns, rows, notes)
