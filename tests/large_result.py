"""A large, structurally real result: a recorded trace's copies repeated at distinct sizes.

The copies of tests/fixtures/h200_trace_pycuda.json (their recorded durations, directions,
memory kinds and calls) are replayed as CUPTI records, each row at a new size, and passed
through `memprof trace`'s own collection (records -> measurements, copy groups, blocking
copies): the file is what memprof writes for a program making that many distinct copies.
Used by tests/test_scale.py (the structure) and benchmarks/startup.py (the time).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from memprof.core.activity import ApiRecord, GpuRecord
from memprof.experiments import load
from memprof.model.results import Result
from memprof.trace.collect import blocked_copies, copy_groups, measurements_from_records

RECORDED = Path(__file__).parent / "fixtures" / "h200_trace_pycuda.json"
COPY_ROW = "[CUDA memcpy "


def large_trace(measurements: int) -> str:
    """The JSON text of a trace holding `measurements` measurements in all."""
    recorded = load(RECORDED)
    rows = [m for m in recorded.measurements if m.name.startswith(COPY_ROW)]
    kept = [m for m in recorded.measurements if not m.name.startswith(COPY_ROW)]
    groups = {
        f"{COPY_ROW}{g.direction}] {g.source} -> {g.destination}": g for g in recorded.extra.copies
    }
    gpu: list[GpuRecord] = []
    api: list[ApiRecord] = []
    clock_ns = 0
    for index in range(measurements - len(kept)):
        row = rows[index % len(rows)]
        group = groups[row.name]
        size = row.bytes + 1 + index // len(rows)  # every row at sizes of its own
        call_ms = group.call_ms / group.calls
        for sample_ms in row.samples_ms[:1]:  # one copy of each size
            correlation = len(gpu) + 1
            end_ns = clock_ns + max(1, round(sample_ms * 1e6))
            direction = group.direction.upper()
            synchronous = group.blocking_calls == group.calls
            gpu.append(
                GpuRecord(
                    "memcpy",
                    direction,
                    clock_ns,
                    end_ns,
                    size,
                    group.source,
                    group.destination,
                    asynchronous=not synchronous,
                    correlation_id=correlation,
                )
            )
            name = f"cuMemcpy{group.direction}{'' if synchronous else 'Async'}_v2"
            api.append(ApiRecord(name, call_ms, correlation))
            clock_ns = end_ns + 1000
    copies = measurements_from_records(gpu, api)
    calls = {m.name for m in copies if m.group == "api"}
    result = Result(
        command="trace",
        # traced without stacks (--stack-depth 0): its lines would be the recorded program's
        parameters=dataclasses.replace(recorded.parameters, stack_depth=0),
        device=None,
        measurements=copies + [m for m in kept if m.name not in calls],
        checks=recorded.checks,
        extra=recorded.extra,
        timing=recorded.timing,
    )
    result.extra.copies = copy_groups(gpu, api)
    result.extra.blocked = blocked_copies(gpu, api)
    result.extra.lines, result.extra.lines_note = None, "not recorded (--stack-depth 0)"
    result.extra.timeline = None  # the recording's events are not these copies
    for field in ("memprof_version", "pid", "created_at", "host"):
        setattr(result, field, getattr(recorded, field))
    return result.to_json()


def write_large_trace(path: Path, measurements: int) -> Path:
    path.write_text(large_trace(measurements) + "\n")
    return path


if __name__ == "__main__":
    import sys

    text = large_trace(int(sys.argv[1]))
    print(f"{len(json.loads(text)['measurements'])} measurements, {len(text) >> 20} MiB")
