"""What an experiment records, declared once per measure, and a loaded file held to it.

A Measure says what one operation is, moves, of which kinds, how its figure reads and what
bounds it: memprof.model.figures computes from it, check_declared() refuses a file against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

from memprof.model.formatting import format_bytes
from memprof.model.results import Group, Measurement, Result
from memprof.model.schema import SchemaError

# How a measure is timed.
Basis = Literal["one operation", "back to back", "host clock", "end to end", "driver call"]
# What its figure is: GB/s of back-to-back operations (one operation's where a file has no
# batches), one operation's time (and its GB/s), or only a time (allocations, driver calls).
Shows = Literal["throughput", "latency", "time"]
# What bounds it. "link": the PCIe link (pageable copies: the lower of the link and the host
# thread's staging, memprof.model.ceilings.host_ceiling); "hbm": device memory; "nvlink": the
# links between two GPUs (PCIe where there are none).
Bound = Literal["link", "hbm", "nvlink"]


@dataclass(frozen=True)
class Measure:
    """One kind of figure an experiment records: a (group, operation) and what it means."""

    group: Group
    operation: str
    what: str
    basis: Basis
    # False: only some runs record it (an option, a GPU capability); a Params field's name:
    # exactly the runs whose field lists its operation (sweep's directions)
    required: bool | str = True
    # What its bytes hold: that many arrays of the run's size (a tuple: one of these counts;
    # a Params field's name: as many as it says); 0: nothing; None: not declared (allocators)
    arrays: int | tuple[int, ...] | str | None = None
    size: str = "power"  # the Params field sizing its arrays, or a property ending in _bytes
    # bytes its GB/s counts per byte it records: a copy within device memory reads and
    # writes each (2); a kernel reading 2 of its 3 arrays over the link counts those (2/3);
    # 0: nothing to count (pages already resident). A mapping: by memory kind (else 1).
    traffic: float | Mapping[str, float] = 1
    kinds: tuple[str, ...] | str | None = None  # its memory kinds; a str: a field (extra.ways)
    gpus: int = 0  # on a run of several GPUs: the GPUs it names (1: with the host, 2: a pair)
    shows: Shows = "time"
    per_sample: int | str = 1  # operations one sample times (or a Params field's name)
    # which time its GB/s is of: the median, or the best (the minimum, as STREAM reports it)
    at: Literal["median", "best"] = "median"
    bound: Bound | Mapping[str, Bound] | None = None  # a mapping: by memory kind
    per_repeat: bool = True  # a whole number of samples per timed repetition (Params.repeat)
    # the "api" operation timing the same copies' calls on the host clock: a staged copy's
    # (pageable) figures are its call's, never CUPTI's record of its DMA alone
    call: str | None = None
    name: str | None = None  # its measurements' nvprof name, for every command (None: their own)
    required_kinds: tuple[str, ...] = ()  # memory kinds every run records it of (compare's)

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.operation)

    def moves(self) -> bool:
        return self.arrays not in (None, 0)

    def traffic_of(self, kind: str | None) -> float:
        if isinstance(self.traffic, Mapping):
            return self.traffic.get(kind or "", 1)
        return self.traffic

    def bound_of(self, kind: str | None) -> Bound | None:
        """What bounds a measurement of this kind (a kind the mapping lacks: nothing)."""
        if isinstance(self.bound, Mapping):
            return self.bound.get(kind or "")
        return self.bound


# The host copies' names, as nvprof prints them: spelled here once for every command.
COPY_NAMES = {"h2d": "[CUDA memcpy HtoD]", "d2h": "[CUDA memcpy DtoH]"}

ABOVE_BOUND = 1.05  # a figure this far above a physical bound is not a measurement
# Back-to-back operations overlap their launch, never their transfer: per operation, a
# batch takes less than this share of one operation alone, as CUPTI records it, only where
# the link or the GPU changed speed between the two (moved_during_run).
BATCH_AT_LEAST = 0.5
# The step of the clocks that time one operation: CUPTI's and the host's (perf_counter_ns)
# count whole nanoseconds, CUDA events ~0.5 us. A reading between 0 and a step was never made.
CLOCK_STEP_MS = 1e-6

SizesOf = Callable[[Measure], Sequence[int]]  # the bytes of one array at each size of a run


def check_declared(
    result: Result, declared: Sequence[Measure], sizes_of: SizesOf, several_gpus: bool
) -> None:
    """Refuse a file whose measurements contradict what its experiment declares."""
    params = result.parameters
    # files of memprof before schema 2 recorded warm-ups too: their counts say nothing
    repeat = getattr(params, "repeat", None) if result.written_as >= 2 else None
    plans = {
        measure.key: _Plan(measure, result, sizes_of, several_gpus, repeat) for measure in declared
    }
    found = _found_at_c_speed(result.measurements, plans, params)
    for index, m in enumerate(result.measurements if not found else ()):
        plan = plans.get((m.group, m.operation))
        if plan is None:
            raise SchemaError(
                f"measurements[{index}]",
                f"is of group {m.group!r}, operation {m.operation!r}, which "
                f"{result.command} does not record",
            )
        _check_resolution(m, f"measurements[{index}]")
        found.add(plan.measure.key)
        found.add((*plan.measure.key, m.kind))
        asked = plan.measure.required
        if isinstance(asked, str) and m.operation not in getattr(params, asked):
            raise SchemaError(
                f"measurements[{index}].operation",
                f"is {m.operation!r}, which parameters.{asked} did not ask for",
            )
        if plan.anything_to_check:
            plan.check(m, f"measurements[{index}]", repeat)
    every_run = f"every {result.command} run records"
    for measure in declared:
        asked = measure.required
        by_params = isinstance(asked, str) and measure.operation in getattr(params, asked)
        if (by_params or asked is True) and measure.key not in found:
            who = f"parameters.{asked} asked for" if by_params else every_run
            raise SchemaError(
                "measurements", f"has no {measure.group} {measure.operation!r}, which {who}"
            )
        for kind in measure.required_kinds:
            if (*measure.key, kind) not in found:
                raise SchemaError(
                    "measurements",
                    f"has no {measure.group} {measure.operation!r} of kind {kind!r}, which "
                    + every_run,
                )


def _found_at_c_speed(
    measurements: Sequence[Measurement], plans: Mapping[tuple[str, str], _Plan], params: Any
) -> set[tuple]:
    """The (group, operation) and (group, operation, kind) of every measurement, where the
    loop of check_declared would refuse none of them: no measurement needs a check of its own,
    and no time is under a clock's step (a trace's 10^5 in two comprehensions, not a call
    each). Empty where that loop must run, to find the first it refuses and fill `found`."""
    kinds = {(m.group, m.operation, m.kind) for m in measurements}
    keys = {key[:2] for key in kinds}
    for key in keys:
        plan = plans.get(key)
        if plan is None or plan.anything_to_check:
            return set()
        asked = plan.measure.required
        if isinstance(asked, str) and key[1] not in getattr(params, asked):
            return set()
    every_ms = [ms for m in measurements for ms in m.samples_ms + m.events_ms + m.throughput_ms]
    if min(filter(None, every_ms), default=CLOCK_STEP_MS) < CLOCK_STEP_MS:
        return set()  # a time under a clock's step (0 is a reading): _check_resolution says
    return keys | kinds


class _Plan:
    """What a measure's declaration asks of each of its measurements, worked out once."""

    def __init__(
        self, measure: Measure, result: Result, sizes_of: SizesOf, several_gpus: bool, repeat: Any
    ):
        self.measure, params = measure, result.parameters
        sized = measure.arrays not in (None, 0)
        self.sizes = sizes_of(measure) if sized else ()
        self.allowed_bytes = (
            _bytes_allowed(measure, params, self.sizes) if sized
            else {0} if measure.arrays == 0
            else None
        )  # fmt: skip
        kinds = measure.kinds
        if isinstance(kinds, str):
            field = kinds.removeprefix("extra.")
            kinds = getattr(params if field == kinds else result.extra, field)
        self.kinds = kinds
        self.gpus = measure.gpus if several_gpus else 0
        self.anything_to_check = bool(
            self.allowed_bytes is not None
            or self.kinds is not None
            or (measure.per_repeat and repeat)
            or self.gpus
            or measure.moves()
        )

    def check(self, m: Measurement, where: str, repeat: int | None) -> None:
        measure = self.measure
        if self.allowed_bytes is not None and m.bytes not in self.allowed_bytes:
            raise SchemaError(f"{where}.bytes", _bytes_refusal(m, measure, self.sizes))
        if self.kinds is not None and m.kind not in self.kinds:
            whose = "run" if isinstance(measure.kinds, str) else "experiment"
            raise SchemaError(
                f"{where}.kind",
                f"is {m.kind!r}, but {'an' if m.group == 'api' else 'a'} {m.group} "
                f"{m.operation!r} of this {whose} is one of "
                + ", ".join(repr(kind) for kind in self.kinds),
            )
        if measure.per_repeat and repeat and len(m.samples_ms) % repeat:
            raise SchemaError(
                f"{where}.samples_ms",
                f"holds {len(m.samples_ms)} samples, but parameters.repeat {repeat} makes a "
                f"multiple of {repeat}",
            )
        if self.gpus and len(m.gpus) != self.gpus:
            raise SchemaError(
                f"{where}.gpus",
                f"names {len(m.gpus)} GPUs, but a {m.operation!r} runs on {self.gpus}",
            )
        _check_times(m, measure, where)


def _bytes_allowed(measure: Measure, params: Any, sizes: Sequence[int]) -> set[int]:
    counts = measure.arrays
    if isinstance(counts, str):
        counts = getattr(params, counts)
    counts = counts if isinstance(counts, tuple) else (counts,)
    return {count * size for count in counts for size in sizes}


def _bytes_refusal(m: Measurement, measure: Measure, sizes: Sequence[int]) -> str:
    if measure.arrays == 0:
        return f"is {m.bytes}, but a {m.group} {m.operation!r} moves no bytes"
    count = measure.arrays
    if isinstance(count, tuple):
        count = " or ".join(map(str, count))
    arrays = f"{count} x " if isinstance(count, str) or count > 1 else ""
    shown = ", ".join(format_bytes(size) for size in sorted(sizes)[:4])
    more = ", ..." if len(sizes) > 4 else ""
    return (
        f"is {m.bytes}, but a {m.group} {m.operation!r} of this run moves {arrays}one array "
        f"of parameters.{measure.size} ({shown}{more})"
    )


def _check_resolution(m: Measurement, where: str) -> None:
    """Refuse a positive time under what a clock can read: CLOCK_STEP_MS for one operation,
    that divided among a batch's for throughput_ms (and for samples_ms, which hold the
    batches' where a measurement timed no single operation)."""
    every_time = m.samples_ms + m.events_ms + m.throughput_ms
    if not every_time or min(every_time) >= CLOCK_STEP_MS:
        return  # the pass a trace's 100,000 measurements take: one min() each, at C speed
    batch = m.batch or 1
    for field, times, operations in (
        ("samples_ms", m.samples_ms, batch),
        ("events_ms", m.events_ms, 1),
        ("throughput_ms", m.throughput_ms, batch),
    ):
        least_ms = CLOCK_STEP_MS / operations
        for number, ms in enumerate(times):
            if 0 < ms < least_ms:
                batch_of = (
                    f"a batch of {operations} operations as 0 or at least {CLOCK_STEP_MS:g} ms "
                    f"({least_ms!r} ms each)" if operations > 1
                    else f"0 or at least {CLOCK_STEP_MS:g} ms"
                )  # fmt: skip
                raise SchemaError(
                    f"{where}.{field}[{number}]", f"is {ms!r} ms, but a clock reads {batch_of}"
                )


def _check_times(m: Measurement, measure: Measure, where: str) -> None:
    """Moving bytes takes time, and so does a latency whose bytes are no arrays (peer's chase of
    dependent loads). A median above 0 is at least half of what _check_resolution lets a time
    be, so dividing it among a sample's operations (figures.figure) leaves more than 0. Back
    to back far faster than alone loads: moved_during_run."""
    if not m.bytes or not (measure.moves() or measure.shows == "latency"):
        return
    times = m.throughput_ms or m.samples_ms
    if median(times) == 0:
        field = "throughput_ms" if m.throughput_ms else "samples_ms"
        raise SchemaError(
            f"{where}.{field}", f"has a median of 0 ms, but moving {m.bytes} bytes takes time"
        )
    if m.throughput_ms and measure.basis != "back to back":
        alone, each = _alone_and_each(m)
        if alone == 0:
            raise SchemaError(
                f"{where}.samples_ms",
                f"has a median of 0 ms, but moving {m.bytes} bytes takes time (back to back: "
                f"{each:.6g} ms each)",
            )


def _alone_and_each(m: Measurement) -> tuple[float, float]:
    """The (upper) median of one operation alone and of one back to back, in ms."""
    return (
        sorted(m.samples_ms)[len(m.samples_ms) // 2],
        sorted(m.throughput_ms)[len(m.throughput_ms) // 2],
    )


def moved_during_run(result: Result, declared: Sequence[Measure]) -> list[str]:
    """A warning for each transfer whose back-to-back operations took less than BATCH_AT_LEAST
    of one alone (an H100 sweep, 2026-11-27: 36.6 us alone, 13.1 us each)."""
    from memprof.model.formatting import format_ms

    measures = {measure.key: measure for measure in declared}
    warnings = []
    for m in result.measurements:
        if not (m.throughput_ms and m.samples_ms and m.bytes and m.source == "cupti"):
            continue
        measure = measures.get((m.group, m.operation))
        if measure is None or not measure.moves() or measure.basis == "back to back":
            continue
        alone, each = _alone_and_each(m)
        if each < BATCH_AT_LEAST * alone:
            kind = f" ({m.kind})" if m.kind else ""
            warnings.append(
                f"warning: {m.name}{kind}, {format_bytes(m.bytes)}: one alone took "
                f"{format_ms(alone)}, back to back {format_ms(each)} each, less than "
                f"{BATCH_AT_LEAST:.0%} of that: the link or the GPU changed speed during the "
                "run, so its figures disagree; measure again"
            )
    return warnings
