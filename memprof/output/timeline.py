"""A trace's timeline in the Chrome trace event format, for Perfetto or chrome://tracing:
each GPU a process and each stream a thread; the program's host threads in one process.
Every event is complete ("X"), in microseconds from the first, its source line in args
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprof.errors import InvalidArgument
from memprof.model.lines import SourceLine
from memprof.model.results import Result
from memprof.model.timeline import GPU_CATEGORIES, NO_LINE, Timeline

HOST_PID = 0  # the program's process; GPU d is process d + 1
GPU_PID_BASE = 1


def _meta(kind: str, pid: int, tid: int, name: str, sort: int) -> list[dict[str, Any]]:
    """A process's or thread's name and place, as complete-event-shaped metadata."""
    base = {"ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": tid}
    return [
        {**base, "name": f"{kind}_name", "args": {"name": name}},
        {**base, "name": f"{kind}_sort_index", "args": {"sort_index": sort}},
    ]


def _args(line: int, lines: list[SourceLine], nbytes: int | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if line != NO_LINE:
        args["line"] = lines[line].place
    if nbytes:
        args["bytes"] = nbytes
    return args


def chrome_events(timeline: Timeline, lines: list[SourceLine], title: str, gpu: str) -> list:
    """The names of processes and threads, then every call and GPU operation."""
    events: list[dict[str, Any]] = _meta("process", HOST_PID, 0, f"host: {title}", 0)
    for thread in sorted({row[3] for row in timeline.api}):
        events += _meta("thread", HOST_PID, thread, f"thread {thread}", thread)
    for device in sorted({row[4] for row in timeline.gpu}):
        pid = GPU_PID_BASE + device
        events += _meta("process", pid, 0, f"GPU {device}{f' ({gpu})' if gpu else ''}", pid)
        for stream in sorted({row[5] for row in timeline.gpu if row[4] == device}):
            events += _meta("thread", pid, stream, f"stream {stream}", stream)
    for name, start, duration, thread, line in timeline.api:
        where = (HOST_PID, thread, _args(line, lines))
        events.append(_complete(timeline.names[name], "api", start, duration, *where))
    for category, name, start, duration, device, stream, nbytes, line in timeline.gpu:
        what = (timeline.names[name], GPU_CATEGORIES[category], start, duration)
        events.append(_complete(*what, GPU_PID_BASE + device, stream, _args(line, lines, nbytes)))
    return events


def _complete(
    name: str, category: str, start_ns: int, duration_ns: int, pid: int, tid: int, args: dict
) -> dict[str, Any]:
    """A complete event ("X"), its times in microseconds."""
    times = {"ts": start_ns / 1000, "dur": duration_ns / 1000}
    return {"name": name, "cat": category, "ph": "X", **times, "pid": pid, "tid": tid, "args": args}


def chrome_trace(result: Result) -> str:
    """A trace Result's timeline as Chrome trace JSON (ValueError: it holds none)."""
    extra = result.extra
    timeline = getattr(extra, "timeline", None)
    if timeline is None:
        raise ValueError(timeline_missing(result))
    title = result.parameters.program or "the program"
    events = chrome_events(timeline, extra.lines or [], title, extra.gpu_name)
    document = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "program": title,
            "gpu": extra.gpu_name,
            "clock": "CUPTI's, in microseconds from the first event",
            "origin_ns": timeline.origin_ns,
        },
    }
    return json.dumps(document, separators=(",", ":")) + "\n"


def timeline_missing(result: Result) -> str | None:
    """Why a Result has no timeline to draw, or None where it has one."""
    if result.command != "trace":
        return f"a `{result.command}` result has no timeline: only `memprof trace` records one"
    if getattr(result.extra, "timeline", None) is None:
        return (
            "this trace was saved before memprof kept each event's time: trace the "
            "program again to draw its timeline"
        )
    return None


def require_timeline(result: Result, path: Path) -> None:
    """InvalidArgument, in one line, where a saved Result has no timeline to draw."""
    why_not = timeline_missing(result)
    if why_not is not None:
        raise InvalidArgument(f"--timeline: {path}: {why_not}")
