"""Every figure of a measurement, from its declaration: the one place a time becomes GB/s and
GB/s a share of a ceiling, so tables, CSV, frames and pictures agree.

GB/s is the bytes an operation moves (times its traffic) over the per-operation time of its
back-to-back batches where timed, else of one operation; the ceiling is its measure's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Literal

from memprof.model.ceilings import Ceiling, hbm_ceiling, host_ceiling, pcie_ceiling, peer_ceiling
from memprof.model.formatting import bandwidth_gb_per_s
from memprof.model.measures import ABOVE_BOUND, Measure
from memprof.model.results import Measurement, Result
from memprof.model.schema import SchemaError
from memprof.model.statistics import Statistics

# The host side of pageable copies, per direction (memprof.experiments.common), and in older
# files one memcpy between two pageable buffers.
STAGING_OPERATIONS = {"staging_h2d": "h2d", "staging_d2h": "d2h"}
OLDER_HOST_MEMCPY = "memcpy"
GIB = 1 << 30
# Kinds whose copies the driver stages through its own pinned buffer before the DMA that CUPTI
# records: the caller waits for the whole call (6.68 us for 1 KiB on the H200, its DMA 0.83).
STAGED_KINDS = ("pageable",)


@dataclass(frozen=True)
class Figure:
    """One measurement's figures, as its measure declares them."""

    measurement: Measurement
    measure: Measure | None
    # back-to-back batches' median where measured, else one operation's (the minimum, where
    # its measure reads the best time)
    per_operation_ms: float
    back_to_back: bool  # per_operation_ms came from back-to-back batches
    gb_per_s: float | None  # None: it moves no bytes (a launch, an allocation, a driver call)
    ceiling: Ceiling | None
    # a staged copy whose samples are CUPTI's record of its DMA alone: its call's time, the
    # host clock around the call where recorded, else back to back (timed as the calls return)
    call_ms: float | None = None

    @property
    def latency_ms(self) -> float:
        """One operation's time as its caller waits for it (a staged copy: its call's)."""
        return self.call_ms if self.call_ms is not None else self.median_ms

    @functools.cached_property
    def stats(self) -> Statistics:
        """Of its samples, one operation each (made when first asked: a large report asks few)."""
        return self.measurement.stats

    @property
    def moved_bytes(self) -> int | None:
        """The bytes its GB/s counts (its bytes times its declared traffic), or None."""
        if self.gb_per_s is None or self.measure is None:
            return None
        return round(self.measure.traffic_of(self.measurement.kind) * self.measurement.bytes)

    @property
    def share(self) -> float | None:
        """GB/s as a share of its ceiling (1.0 = all of it)."""
        if self.gb_per_s is None or self.ceiling is None or self.ceiling.gb_per_s <= 0:
            return None
        return self.gb_per_s / self.ceiling.gb_per_s

    @property
    def median_ms(self) -> float:
        return self.stats.median_ms


def figure(result: Result, m: Measurement, measure: Measure | None) -> Figure:
    """The figures of measurement `m` of `result`, read as `measure` declares."""
    best = measure is not None and measure.at == "best"
    times = m.throughput_ms or m.samples_ms
    count = measure.per_sample if measure is not None else 1
    if isinstance(count, str):  # a sample times as many operations as a Params field says
        count = getattr(result.parameters, count)
    per_operation_ms = (min(times) if best else median(times)) / count
    call_ms = _call_ms(result, m, measure, per_operation_ms)
    if call_ms is not None and not m.throughput_ms:
        per_operation_ms = call_ms
    traffic = measure.traffic_of(m.kind) if measure is not None and measure.moves() else 0
    gb_per_s = None
    if traffic and m.bytes > 0 and per_operation_ms > 0:
        gb_per_s = bandwidth_gb_per_s(traffic * m.bytes, per_operation_ms)
    ceiling = ceiling_of(result, m, measure) if gb_per_s is not None else None
    return Figure(m, measure, per_operation_ms, bool(m.throughput_ms), gb_per_s, ceiling, call_ms)


def _call_ms(
    result: Result, m: Measurement, measure: Measure | None, per_operation_ms: float
) -> float | None:
    """A staged copy's call (None: not a staged copy CUPTI recorded, or no call recorded)."""
    if measure is None or m.kind not in STAGED_KINDS or m.source != "cupti" or not m.bytes:
        return None
    for call in result._by_operation().get(measure.call or "", ()):
        if (call.group, call.kind, call.bytes) == ("api", m.kind, m.bytes):
            return median(call.samples_ms)
    return per_operation_ms if m.throughput_ms else None


def figures(result: Result, declared: Iterable[Measure]) -> list[Figure]:
    """Every measurement's figures, in the order recorded."""
    return list(map(figure_finder(result, declared), result.measurements))


@dataclass(frozen=True)
class Derived:
    """A figure made of others, its formula written here once for the table's cell and the CSV's
    row (the arithmetic of each is below). Beyond the code: "sum" is parts done one after another;
    "chunks" parts that each move their own bytes, bounded by the ceiling they share; "per_gib"
    with `step` one step of pinlimit's climb (each part's sample of it, not its median); "total"
    parts done at once or apart (hostlink's GPUs); "attempt" a line measured again (check
    --retries), no measurement of the run; "lines" a trace's source lines summed (line_total);
    "reach" the size where a sweep's curve first reaches 90% of its peak, its one part there."""

    name: str
    parts: tuple[Figure | Derived, ...]
    formula: Literal[
        "sum",
        "chunks",
        "mean",
        "overlap",
        "per_gib",
        "steady",
        "total",
        "ratio",
        "floor",
        "reference",
        "attempt",
        "lines",
        "reach",
    ] = "sum"
    share: float | None = None  # "floor": of the part's ceiling
    reference_gb_per_s: float | None = None  # "reference": the known-good machine's figure
    step: int | None = None  # "per_gib": the index of the one sample of each part it adds up

    def line_total(self, figure: str) -> float | None:
        """A "lines" figure's calls, bytes, gpu_ms or host_ms: its lines' summed (None: a time
        none of them recorded)."""
        if figure in ("gpu_ms", "host_ms"):
            if not any(getattr(line, f"{figure}_each") for line in self.parts):
                return None
            return math.fsum(getattr(line, figure) for line in self.parts)
        return sum(getattr(line, figure) for line in self.parts)

    @property
    def ratio(self) -> float:
        first, second = self.parts
        if isinstance(first, Derived) and first.formula == "total":
            return second.gb_per_s / first.gb_per_s
        return first.per_operation_ms / second.per_operation_ms

    @property
    def median_ms(self) -> float:
        return self._time("median_ms")

    @property
    def per_operation_ms(self) -> float:
        return self._time("per_operation_ms")

    def _time(self, which: str) -> float:
        if self.step is not None:
            times = [part.measurement.samples_ms[self.step] for part in self.parts]
        else:
            times = [getattr(part, which) for part in self.parts]
        if self.formula == "per_gib":
            return math.fsum(times) * GIB / self.parts[0].measurement.bytes
        if self.formula == "steady":
            return steady_ms(self.parts[0].measurement.samples_ms)
        if self.formula == "mean":
            return math.fsum(times) / len(times)
        if self.formula != "overlap":
            return math.fsum(times)
        chunks = [len(part.parts) for part in self.parts]
        return ideal_overlapped_ms([(t, t / n) for t, n in zip(times, chunks, strict=True)])

    @property
    def moved_bytes(self) -> int | None:
        """The bytes a "chunks" figure's GB/s counts: its parts' (None: a part moves none)."""
        moved = [part.moved_bytes for part in self.parts] if self.formula == "chunks" else [None]
        return None if None in moved else sum(moved)

    @property
    def ceiling(self) -> Ceiling | None:
        """What bounds a "chunks" figure: the ceiling its parts share (None: none, or several)."""
        found = {part.ceiling for part in self.parts} if self.formula == "chunks" else set()
        return found.pop() if len(found) == 1 else None

    @property
    def gb_per_s(self) -> float | None:
        """A "chunks", "total", "floor" or "reference" figure's GB/s (see the class); else None."""
        if self.formula == "chunks":
            moved, took_ms = self.moved_bytes, self.per_operation_ms
            return None if moved is None or took_ms <= 0 else bandwidth_gb_per_s(moved, took_ms)
        if self.formula == "total":
            rates = [part.gb_per_s for part in self.parts]
            return None if None in rates else math.fsum(rates)
        if self.formula == "floor":
            ceiling = self.parts[0].ceiling
            return None if ceiling is None or self.share is None else self.share * ceiling.gb_per_s
        return self.reference_gb_per_s if self.formula == "reference" else None


def steady_ms(samples_ms: Sequence[float]) -> float:
    """The median of all but the first (cold) time: an allocator's first finds its pools empty."""
    return median(samples_ms[1:]) if len(samples_ms) > 1 else samples_ms[0]


def ideal_overlapped_ms(stages: Sequence[tuple[float, float]]) -> float:
    """A pipeline's stages (total, per chunk) ideally overlapped: the longest stage's total
    plus one chunk of each other (fill and drain)."""
    longest = max(range(len(stages)), key=lambda stage: stages[stage][0])
    return stages[longest][0] + math.fsum(
        per_chunk for stage, (_, per_chunk) in enumerate(stages) if stage != longest
    )


FigureOf = Callable[[Measurement], Figure]


def figure_finder(result: Result, declared: Iterable[Measure]) -> FigureOf:
    """figure() for any measurement of `result`, each computed once."""
    by_key = {measure.key: measure for measure in declared}
    made: dict[int, Figure] = {}

    def of(m: Measurement) -> Figure:
        found = made.get(id(m))
        if found is None:
            found = made[id(m)] = figure(result, m, by_key.get((m.group, m.operation)))
        return found

    return of


# -- ceilings --------------------------------------------------------------------------------------


def ceiling_of(result: Result, m: Measurement, measure: Measure | None) -> Ceiling | None:
    """What bounds measurement `m`, as its measure declares (None: not declared or known)."""
    bound = measure.bound_of(m.kind) if measure is not None else None
    if bound == "link":
        link = pcie_ceiling(result, m.gpus[0] if m.gpus else None)
        side = host_side(result, m.bytes, direction_of(m)) if m.kind == "pageable" else None
        if side is not None:
            return host_ceiling(side.gb_per_s, link, staged=side.staged)
        return link
    if bound == "hbm":
        return hbm_ceiling(result.device)
    if bound == "nvlink" and len(m.gpus) == 2:
        return peer_ceiling(result, *m.gpus)
    return None


# What an L2 cache serves at most, as a multiple of its HBM (or GDDR) rate: generous (the H200's
# and H100's stay under 1x, a large L2 beside slow GDDR about 5x): only the impossible is refused.
CACHE_BOUND = 8


def hard_ceiling(result: Result, m: Measurement, measure: Measure | None) -> Ceiling | None:
    """The physical bound a figure can never pass, unlike a model's (docs/ceilings.md)."""
    bound = measure.bound_of(m.kind) if measure is not None else None
    if bound == "link":
        return pcie_ceiling(result, m.gpus[0] if m.gpus else None)
    if bound == "hbm":
        hbm = hbm_ceiling(result.device)  # None without the device's facts
        if hbm is None or m.bytes * measure.traffic_of(m.kind) > 2 * result.device.l2_cache_bytes:
            return hbm  # no cache serves it
        # data the L2 cache can hold may beat HBM, but no cache serves a thousand times it
        rate = CACHE_BOUND * hbm.gb_per_s
        detail = f"L2 cache: at most {CACHE_BOUND}x HBM's {hbm.gb_per_s:,.0f} GB/s"
        return Ceiling(rate, "L2 cache", detail)
    return ceiling_of(result, m, measure)


def check_bounds(result: Result, declared: Iterable[Measure]) -> None:
    """Refuse a figure above a physical bound beyond noise (ABOVE_BOUND): not a measurement."""
    bounded = {measure.key: measure for measure in declared if measure.bound is not None}
    if not bounded:
        return
    for index, m in enumerate(result.measurements):
        measure = bounded.get((m.group, m.operation))
        if measure is None or measure.bound_of(m.kind) is None:
            continue
        found = figure(result, m, measure)
        limit = hard_ceiling(result, m, measure)
        if found.gb_per_s is None or limit is None or limit.gb_per_s <= 0:
            continue
        share = found.gb_per_s / limit.gb_per_s
        if share > ABOVE_BOUND:
            field = "throughput_ms" if found.back_to_back else "samples_ms"
            raise SchemaError(
                f"measurements[{index}].{field}",
                f"makes {found.gb_per_s:,.1f} GB/s, {share:.0%} of its {limit.limiter} ceiling "
                f"of {limit.gb_per_s:,.1f} GB/s: nothing moves faster than its "
                f"{limit.limiter}",
            )


# -- the host side of pageable copies -------------------------------------------------------------


def direction_of(m: Measurement) -> str:
    """'h2d' or 'd2h' for a host copy (its operation, or the one its name says)."""
    if m.operation.startswith(("h2d", "d2h")):
        return m.operation[:3]
    return "d2h" if "DtoH" in m.name else "h2d"


@dataclass(frozen=True)
class HostSide:
    """The host side of pageable copies: one direction's staging, or older files' memcpy."""

    measurement: Measurement
    gb_per_s: float
    staged: bool  # False: the older whole-buffer memcpy
    ceiling: None = None  # itself a ceiling (of pageable copies), bounded by none here

    @property
    def latency_ms(self) -> float:
        """One memcpy's time, as a table's copy column reads it."""
        return self.measurement.stats.median_ms


def host_side(result: Result, nbytes: int, direction: str) -> HostSide | None:
    """The host side of pageable copies of `nbytes` in `direction` (None: not recorded)."""
    staging = next(op for op, way in STAGING_OPERATIONS.items() if way == direction)
    for operation, staged in ((staging, True), (OLDER_HOST_MEMCPY, False)):
        for m in result._by_operation().get(operation, ()):
            if m.group == "host" and m.bytes == nbytes:
                stats = m.throughput_stats or m.stats
                return HostSide(m, bandwidth_gb_per_s(nbytes, stats.median_ms), staged)
    return None
