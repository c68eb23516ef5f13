"""A trace's Timeline (memprof.model.timeline) from CUPTI's records. Each event's line is
found by where.line_key, so an event and the Where table's row it is counted in agree.
"""

from __future__ import annotations

from memprof.core.activity import ApiRecord, GpuRecord
from memprof.model.lines import SourceLine
from memprof.model.timeline import GPU_CATEGORIES, NO_LINE, TIMELINE_VERSION, Timeline
from memprof.trace.stacks import call_kind
from memprof.trace.where import Stacks, activity_of, gpu_row_name, line_key, work_by_call


def timeline_of(
    gpu: list[GpuRecord],
    api: list[ApiRecord],
    stacks: Stacks | None,
    lines: list[SourceLine] | None,
    own: frozenset[int] = frozenset(),
) -> Timeline:
    """Every GPU record and API call as a Timeline row, in order of start; `own` without a line."""
    origin = min([r.start_ns for r in gpu] + [c.start_ns for c in api], default=0)
    names: dict[str, int] = {}

    def name(text: str) -> int:
        return names.setdefault(text, len(names))

    index = {line.key: at for at, line in enumerate(lines or [])}
    work = work_by_call(gpu)

    def line(correlation: int, activity: str | None) -> int:
        if activity is None or stacks is None:
            return NO_LINE
        return index.get(line_key(stacks, correlation, activity), NO_LINE)

    gpu_rows = [
        (
            GPU_CATEGORIES.index(r.category),
            name(gpu_row_name(r)),
            r.start_ns - origin,
            r.end_ns - r.start_ns,
            r.device,
            r.stream,
            r.bytes,
            line(r.correlation_id, None if r.category == "kernel" else activity_of(r)),
        )
        for r in sorted(gpu, key=lambda r: r.start_ns)
    ]
    api_rows = []
    for call in sorted(api, key=lambda c: c.start_ns):
        activities = [activity_of(record) for record in work.get(call.correlation_id, [])]
        activity = min(activities) if activities else call_kind(call.name)
        if not activities and call.correlation_id in own:
            activity = None
        duration = round(call.duration_ms * 1e6)
        row = (name(call.name), call.start_ns - origin, duration, call.thread)
        api_rows.append((*row, line(call.correlation_id, activity)))
    return Timeline(TIMELINE_VERSION, origin, list(names), gpu_rows, api_rows)
