"""A traced program's events in time: every kernel, copy and memset on its GPU stream, every
recorded driver and runtime call on its host thread, each with the line that made it.

`memprof trace` keeps them (memprof.trace.timeline makes them from CUPTI's records) so that
a saved trace can be drawn as a timeline (`--timeline`, memprof.output.timeline) and its
wall time split into GPU computing, copying and idle (breakdown), on any machine.

A training loop makes hundreds of thousands of events, so they are kept compact: one row
of integers per event, names by index, times in CUPTI's nanoseconds from the first event.
`version` says what the rows hold; a reader refuses a version it does not know.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Annotated, Literal

from memprof.model.schema import MAX_COUNT, Range, SchemaError

TIMELINE_VERSION = 1
GPU_CATEGORIES = ("kernel", "memcpy", "memset")  # a GPU row's category, by index
MAX_NS = 7 * 24 * 3600 * 10**9  # a week, as schema.MAX_MS
NO_LINE = -1

Category = Annotated[int, Range(0, len(GPU_CATEGORIES) - 1)]
Index = Annotated[int, Range(0, MAX_COUNT)]
LineIndex = Annotated[int, Range(NO_LINE, MAX_COUNT)]
Nanoseconds = Annotated[int, Range(0, MAX_NS)]
Id = Annotated[int, Range(0, 2**63 - 1)]  # CUPTI's device, stream and thread ids
ByteCount = Annotated[int, Range(0, MAX_COUNT)]

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
        """Every name index names something (schema.check_dataclass runs it)."""
        count = len(self.names)
        for rows, at, where in ((self.gpu, 1, "gpu"), (self.api, 0, "api")):
            for index, row in enumerate(rows):
                if row[at] >= count:
                    raise SchemaError(
                        f"{where}[{index}][{at}]", f"is {row[at]}, but there are {count} names"
                    )

    def line_indexes(self) -> list[int]:
        return [row[7] for row in self.gpu] + [row[4] for row in self.api]


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


def covered_ns(intervals: list[Interval]) -> int:
    return sum(end - start for start, end in merged(intervals))


def overlap_ns(first: list[Interval], second: list[Interval]) -> int:
    """How long both unions hold at once."""
    a, b = merged(first), merged(second)
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, high - low)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class Gap:
    """A stretch in which a GPU did nothing, and the line the host was at: the recorded call
    with a line that overlapped it most (during), else the last one before it (NO_LINE:
    none)."""

    start_ns: int
    duration_ns: int
    line: int
    during: bool


@dataclass(frozen=True)
class Breakdown:
    """One GPU's share of the run: wall_ns split into only computing (kernels), only
    copying (copies and memsets), both at once, and idle; the longest idle gaps between its
    work, longest first; and the idle time outside them all, before its first piece of work
    and after its last (the program's start-up and exit)."""

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


def breakdown(timeline: Timeline, wall_ns: int, gaps: int = 3) -> list[Breakdown]:
    """Each GPU's breakdown of the program's wall time (wall_ns: the host's clock around the
    program; its GPU work, in CUPTI's clock, lies within it), by device id."""
    devices = sorted({row[4] for row in timeline.gpu})
    calls = [
        (row[1], row[1] + row[2], row[4]) for row in timeline.api if row[4] != NO_LINE
    ]  # start, end, line
    out = []
    for device in devices:
        rows = [row for row in timeline.gpu if row[4] == device]
        kernels = [(r[2], r[2] + r[3]) for r in rows if r[0] == 0]
        memory = [(r[2], r[2] + r[3]) for r in rows if r[0] != 0]
        both = overlap_ns(kernels, memory)
        busy = merged(kernels + memory)
        wall = max(wall_ns, busy[-1][1] - busy[0][0] if busy else 0)
        idle = [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
        longest = sorted(idle, key=lambda g: (g[0] - g[1], g[0]))[:gaps]
        out.append(
            Breakdown(
                device=device,
                wall_ns=wall,
                computing_ns=covered_ns(kernels) - both,
                copying_ns=covered_ns(memory) - both,
                both_ns=both,
                gaps=[Gap(a, b - a, *host_line(calls, a, b)) for a, b in longest],
                outside_ns=wall - (busy[-1][1] - busy[0][0] if busy else 0),
            )
        )
    return out


def host_line(calls: list[tuple[int, int, int]], start_ns: int, end_ns: int) -> tuple[int, bool]:
    """(line, during) of the call that overlapped [start_ns, end_ns) most; where none did,
    the last call that ended before it, not during; (NO_LINE, False) where none did either."""
    best, line = 0, NO_LINE
    before, last = None, NO_LINE
    for call_start, call_end, call_line in calls:
        held = min(end_ns, call_end) - max(start_ns, call_start)
        if held > best:
            best, line = held, call_line
        elif call_end <= start_ns and (before is None or call_end >= before):
            before, last = call_end, call_line
    return (line, True) if best > 0 else (last, False)
