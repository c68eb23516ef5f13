"""Where a traced program asked for its copies, memsets, allocations, frees, registrations,
prefetches and waits: CUPTI's records joined with the calls' stacks by correlation id, which
a call's API record, its GPU work's records and its stack all carry (a runtime call and the
driver call it makes share one), so each call is one join.
"""

from __future__ import annotations

import math
from collections import Counter

from memprof.core.activity import ApiRecord, GpuRecord
from memprof.model.lines import CallChain, Frame, Origin, SourceLine
from memprof.trace.stacks import base_name, call_kind

MAX_CHAINS = 10  # callers kept per line: the commonest
Stacks = dict[int, tuple[Origin, tuple[Frame, ...]]]  # by correlation id, innermost first
NONE: tuple[Origin, tuple[Frame, ...]] = ("none", ())  # a call without a recorded stack


def copy_direction(copy_kind: str) -> str:
    """CUPTI's copy kind as nvprof wrote it: HTOD -> HtoD, PTOP -> PtoP."""
    if len(copy_kind) == 4 and copy_kind[1:3] == "TO":
        return f"{copy_kind[0]}to{copy_kind[3]}"
    return copy_kind.title()


def copy_row_name(direction: str, source: str, destination: str) -> str:
    """`[CUDA memcpy HtoD] pageable -> device`: a copy's profile row, a copy group's too."""
    return f"[CUDA memcpy {direction}] {source} -> {destination}"


def gpu_row_name(record: GpuRecord) -> str:
    """The profile row a GPU record is counted in (collect.measurements_from_records)."""
    if record.category == "memcpy":
        return copy_row_name(copy_direction(record.name), record.src_kind, record.dst_kind)
    return "[CUDA memset]" if record.category == "memset" else record.name


def activity_of(record: GpuRecord) -> str:
    """A copy's activity, `HtoD pageable -> device`, or `memset`."""
    if record.category == "memset":
        return "memset"
    return f"{copy_direction(record.name)} {record.src_kind} -> {record.dst_kind}"


def line_key(stacks: Stacks, correlation: int, activity: str) -> tuple:
    """The SourceLine.key a call's work of this activity is counted under (timeline's too)."""
    origin, frames = stacks.get(correlation, NONE)
    site = (frames[0].file, frames[0].line, frames[0].function) if frames else ("", 0, "")
    return (activity, origin, *site)


def outermost_calls(api: list[ApiRecord]) -> dict[int, ApiRecord]:
    """Each correlation id's longest call: a runtime call (cudaMemcpy) encloses the driver
    call it made, which shares its id, and is what the program waited for."""
    calls: dict[int, ApiRecord] = {}
    for call in api:
        held = calls.get(call.correlation_id)
        if call.correlation_id and (held is None or call.duration_ms > held.duration_ms):
            calls[call.correlation_id] = call
    return calls


def work_by_call(gpu: list[GpuRecord]) -> dict[int, list[GpuRecord]]:
    """Each call's copies and memsets, by correlation id (kernels are launched, not asked)."""
    work: dict[int, list[GpuRecord]] = {}
    for record in gpu:
        if record.category != "kernel" and record.correlation_id:
            work.setdefault(record.correlation_id, []).append(record)
    return work


def source_lines(
    gpu: list[GpuRecord], api: list[ApiRecord], stacks: Stacks, own: frozenset[int] = frozenset()
) -> list[SourceLine]:
    """Every copy, memset and CALL_KINDS call, folded by activity and by the line that made
    it. Calls in `own` (memprof's) are left out unless they made GPU work: every copy and
    memset is somewhere. A batch of two activities counts in each, its host time in the first."""
    calls, work = outermost_calls(api), work_by_call(gpu)
    unlinked = [r for r in gpu if r.category != "kernel" and not r.correlation_id]  # no call
    lines: dict[tuple, list[tuple]] = {}  # line_key -> its calls, as _made reads them

    def add(correlation: int, activity: str, records: list[GpuRecord], call: ApiRecord | None):
        frames = stacks.get(correlation, NONE)[1]  # innermost first: the line, then callers
        callers = tuple((f.file, f.line, f.function) for f in frames[1:])
        gpu_ms = math.fsum(record.duration_ms for record in records) if records else None
        host = None if call is None else (call.duration_ms, base_name(call.name))
        nbytes = sum(record.bytes for record in records)
        lines.setdefault(line_key(stacks, correlation, activity), []).append(
            (nbytes, gpu_ms, host, callers)
        )

    for correlation, records in work.items():  # memprof's own too: every copy is somewhere
        call = calls.get(correlation)
        by_activity: dict[str, list[GpuRecord]] = {}
        for record in records:
            by_activity.setdefault(activity_of(record), []).append(record)
        for activity in sorted(by_activity):
            add(correlation, activity, by_activity[activity], call)
            call = None
    for correlation, call in calls.items():
        kind = call_kind(call.name)
        if kind is not None and correlation not in work and correlation not in own:
            add(correlation, kind, [], call)
    for record in unlinked:
        add(0, activity_of(record), [record], None)
    return sorted(
        (_made(key, calls) for key, calls in lines.items()),
        key=lambda s: (s.activity, -(s.gpu_ms + s.host_ms), s.file, s.line),
    )


def _made(key: tuple, calls: list[tuple]) -> SourceLine:
    """A line from its calls' (bytes, GPU ms or None, (host ms, call name) or None, callers)."""
    activity, origin, file, number, function = key
    sizes = [nbytes for nbytes, _, _, _ in calls]
    hosts = [host for _, _, host, _ in calls if host is not None]
    chains = Counter(callers for _, _, _, callers in calls if callers)
    return SourceLine(
        activity=activity,
        file=file,
        line=number,
        function=function,
        origin=origin,
        calls=len(calls),
        api=sorted({name for _, name in hosts}),
        bytes=sum(sizes),
        smallest_bytes=min(sizes),
        largest_bytes=max(sizes),
        gpu_ms_each=[gpu_ms for _, gpu_ms, _, _ in calls if gpu_ms is not None],
        host_ms_each=[host_ms for host_ms, _ in hosts],
        chains=[
            CallChain(count, [Frame(*frame) for frame in callers])
            for callers, count in chains.most_common(MAX_CHAINS)
        ],
    )
