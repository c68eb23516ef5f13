"""A traced program's events in time: every kernel, copy and memset on its GPU stream, every
recorded call on its host thread, each with the line that made it (memprof.trace.timeline).

Hundreds of thousands of events: a row of integers each, names by index, CUPTI's nanoseconds
from the first event.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from memprof.model.schema import MAX_COUNT, Count, Range, SchemaError

TIMELINE_VERSION = 1
GPU_CATEGORIES = ("kernel", "memcpy", "memset")  # a GPU row's category, by index
MAX_NS = 7 * 24 * 3600 * 10**9  # a week, as schema.MAX_MS
NO_LINE = -1

Category = Annotated[int, Range(0, len(GPU_CATEGORIES) - 1)]
Index = ByteCount = Count
LineIndex = Annotated[int, Range(NO_LINE, MAX_COUNT)]
Nanoseconds = Annotated[int, Range(0, MAX_NS)]
Id = Annotated[int, Range(0, 2**63 - 1)]  # CUPTI's device, stream and thread ids

# category, name, start_ns, duration_ns, device, stream, bytes, line
GpuEvent = tuple[Category, Index, Nanoseconds, Nanoseconds, Id, Id, ByteCount, LineIndex]
# name, start_ns, duration_ns, thread, line
ApiEvent = tuple[Index, Nanoseconds, Nanoseconds, Id, LineIndex]


@dataclass
class Timeline:
    """Version 1. `gpu` rows: (category, name, start_ns, duration_ns, device, stream, bytes,
    line); `api` rows: (name, start_ns, duration_ns, thread, line). A name is an index into
    `names` (a GPU row's is its profile row: the kernel's name, "[CUDA memcpy HtoD] pageable
    -> device", "[CUDA memset]"; a call's is CUPTI's); start_ns counts from origin_ns, the
    first event's CUPTI timestamp; line is an index into the trace's extra.lines, -1 where
    none was recorded (kernel launches take no stack)."""

    version: Literal[1]
    origin_ns: Annotated[int, Range(0, 2**63 - 1)]
    names: list[str] = field(default_factory=list)
    gpu: list[GpuEvent] = field(default_factory=list)
    api: list[ApiEvent] = field(default_factory=list)

    def check_consistency(self) -> None:
        """Every name index names something (schema.check runs it)."""
        count = len(self.names)
        for rows, at, where in ((self.gpu, 1, "gpu"), (self.api, 0, "api")):
            for index, row in enumerate(rows):
                if row[at] >= count:
                    raise SchemaError(
                        f"{where}[{index}][{at}]", f"is {row[at]}, but there are {count} names"
                    )


# -- where the time went -------------------------------------------------------------------

Interval = tuple[int, int]  # start_ns, end_ns


def merged(intervals: list[Interval]) -> list[Interval]:
    """The union of intervals, as disjoint ones in order."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class Covered:
    """Disjoint intervals in order, and how much of any window they cover: by bisection and
    running totals, so 100,000 events are cut into bins at once."""

    def __init__(self, intervals: list[Interval]) -> None:
        self.intervals = merged(intervals)
        self.starts = [start for start, _ in self.intervals]
        self.ends = [end for _, end in self.intervals]
        self.running = [0, *itertools.accumulate(e - s for s, e in self.intervals)]

    def within(self, start_ns: int | None = None, end_ns: int | None = None) -> int:
        """Nanoseconds covered in [start_ns, end_ns) (None: unbounded on that side)."""
        first = 0 if start_ns is None else bisect.bisect_right(self.ends, start_ns)
        after = len(self.starts) if end_ns is None else bisect.bisect_left(self.starts, end_ns)
        if first >= after:
            return 0
        total = self.running[after] - self.running[first]
        if start_ns is not None:
            total -= max(0, start_ns - self.starts[first])
        if end_ns is not None:
            total -= max(0, self.ends[after - 1] - end_ns)
        return total


@dataclass(frozen=True)
class Work:
    """One GPU's kernels, copies and memsets, and either, each a union of its streams: one
    rule for the Where table and the picture's bins, so the bins add up to the table."""

    kernels: Covered
    memory: Covered
    busy: Covered

    @classmethod
    def of(cls, timeline: Timeline, device: int) -> Work:
        rows = [row for row in timeline.gpu if row[4] == device]
        kernels = [(r[2], r[2] + r[3]) for r in rows if r[0] == 0]
        memory = [(r[2], r[2] + r[3]) for r in rows if r[0] != 0]
        return cls(Covered(kernels), Covered(memory), Covered(kernels + memory))

    def parts_ns(self, start_ns: int | None = None, end_ns: int | None = None) -> Parts:
        """(computing alone, copying alone, both at once) in [start_ns, end_ns): the time
        both held is the time each held, less the time either did."""
        kernels = self.kernels.within(start_ns, end_ns)
        memory = self.memory.within(start_ns, end_ns)
        both = kernels + memory - self.busy.within(start_ns, end_ns)
        return kernels - both, memory - both, both


Parts = tuple[int, int, int]  # computing alone, copying alone, both at once: ns


@dataclass(frozen=True)
class Gap:
    """A stretch in which a GPU did nothing, and the line the host was at (host_line)."""

    start_ns: int
    duration_ns: int
    line: int
    during: bool

    @property
    def start_ms(self) -> float:
        """From the first recorded event."""
        return self.start_ns / 1e6

    @property
    def idle_ms(self) -> float:
        return self.duration_ns / 1e6


@dataclass(frozen=True)
class Breakdown:
    """One GPU's share of the run: wall_ns split into computing alone, copying alone, both
    and idle; its longest idle gaps; and the idle before its first work and after its last."""

    device: int
    wall_ns: int
    computing_ns: int
    copying_ns: int
    both_ns: int
    gaps: list[Gap]
    outside_ns: int = 0

    @property
    def idle_ns(self) -> int:
        return max(0, self.wall_ns - self.computing_ns - self.copying_ns - self.both_ns)

    def share(self, part_ns: int) -> float:
        return part_ns / self.wall_ns if self.wall_ns > 0 else 0.0


GAPS_SHOWN = 3  # idle gaps named per GPU, the longest first


def breakdown_of(result: Any) -> list[Breakdown]:
    """A trace's breakdown per GPU, as tables, pictures and CSV show it (none: no GPU work)."""
    timeline = getattr(result.extra, "timeline", None)
    if timeline is None or not timeline.gpu:
        return []
    return breakdown(timeline, round(result.extra.wall_s * 1e9), GAPS_SHOWN)


def breakdown(timeline: Timeline, wall_ns: int, gaps: int = GAPS_SHOWN) -> list[Breakdown]:
    """Each GPU's breakdown of the program's wall time (the host's clock around it), by id."""
    devices = sorted({row[4] for row in timeline.gpu})
    # start, end, line
    calls = [(row[1], row[1] + row[2], row[4]) for row in timeline.api if row[4] != NO_LINE]
    out = []
    for device in devices:
        work = Work.of(timeline, device)
        computing, copying, both = work.parts_ns()
        busy = work.busy.intervals
        span = busy[-1][1] - busy[0][0] if busy else 0
        wall = max(wall_ns, span)
        idle = [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
        longest = sorted(idle, key=lambda g: (g[0] - g[1], g[0]))[:gaps]
        out.append(
            Breakdown(
                device=device,
                wall_ns=wall,
                computing_ns=computing,
                copying_ns=copying,
                both_ns=both,
                gaps=[Gap(a, b - a, *host_line(calls, a, b)) for a, b in longest],
                outside_ns=wall - span,
            )
        )
    return out


def host_line(calls: list[tuple[int, int, int]], start_ns: int, end_ns: int) -> tuple[int, bool]:
    """(line, True) of the call overlapping [start_ns, end_ns) most, else (line, False) of the
    last that ended before it, else (NO_LINE, False)."""
    best, line = 0, NO_LINE
    before, last = None, NO_LINE
    for call_start, call_end, call_line in calls:
        held = min(end_ns, call_end) - max(start_ns, call_start)
        if held > best:
            best, line = held, call_line
        elif call_end <= start_ns and (before is None or call_end >= before):
            before, last = call_end, call_line
    return (line, True) if best > 0 else (last, False)


BINS_AT_MOST = 100  # bins of time a picture of a run is cut into, at most


def bin_ns(span_ns: int, at_most: int = BINS_AT_MOST) -> int:
    """The shortest round bin (1, 2 or 5 x 10^k ns) cutting span_ns into at most `at_most`."""
    wanted = max(1, -(-span_ns // at_most))
    power = 1
    while True:
        for step in (1, 2, 5):
            if step * power >= wanted:
                return step * power
        power *= 10


@dataclass(frozen=True)
class Binned:
    """A GPU's parts per bin, from the first recorded event to the end of the last (the last
    bin may be shorter)."""

    device: int
    bin_ns: int
    end_ns: int
    parts: list[Parts]

    def width_ns(self, index: int) -> int:
        return min(self.bin_ns, self.end_ns - index * self.bin_ns)

    def idle_ns(self, index: int) -> int:
        computing, copying, both = self.parts[index]
        return self.width_ns(index) - computing - copying - both


def over_time(timeline: Timeline, at_most: int = BINS_AT_MOST) -> list[Binned]:
    """Each GPU's parts per bin, on one axis for every GPU: they add up to its breakdown."""
    ends = [row[2] + row[3] for row in timeline.gpu] + [row[1] + row[2] for row in timeline.api]
    end_ns = max(ends, default=0)
    width = bin_ns(end_ns, at_most)
    count = -(-end_ns // width)
    out = []
    for device in sorted({row[4] for row in timeline.gpu}):
        work = Work.of(timeline, device)
        parts = [work.parts_ns(k * width, min((k + 1) * width, end_ns)) for k in range(count)]
        out.append(Binned(device, width, end_ns, parts))
    return out
