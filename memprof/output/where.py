"""A trace's source lines for the CSV and for `diff`: plain rows (text literally, as
export.py writes it), and the lines two traces share, paired (memprof.model.lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memprof.model.formatting import bandwidth_gb_per_s
from memprof.model.lines import SourceLine, lines_of
from memprof.model.timeline import NO_LINE, Gap, breakdown_of
from memprof.output.literal import literal


def where_rows(result: object) -> list[dict[str, object]]:
    """One row per source line of a trace, in the CSV's columns: its commonest callers as
    `main.py:80 main < main.py:95 <module>`."""
    rows = []
    for line in lines_of(result) or []:
        callers = line.chains[0].frames if line.chains else []
        file, function = literal(line.file), literal(line.function)
        rows.append(
            {
                "name": f"{file}:{line.line} {function}",
                "operation": literal(line.activity),
                "kind": line.origin,
                "bytes": line.bytes,
                "calls": line.calls,
                "source_file": file,
                "source_line": line.line,
                "source_function": function,
                "gpu_ms": line.gpu_ms if line.gpu_ms_each else "",
                "host_ms": line.host_ms if line.host_ms_each else "",
                "callers": literal(" < ".join(f"{f.file}:{f.line} {f.function}" for f in callers)),
            }
        )
    return rows


def copy_name(g: Any) -> str:
    """A copy group (memprof.trace.collect.CopyGroup) as its table and CSV row name it."""
    return f"{g.direction} {g.source} -> {g.destination}"


def copy_gb_per_s(g: Any) -> float | None:
    """A copy group's bytes over its GPU time; None where CUPTI recorded none."""
    return bandwidth_gb_per_s(g.bytes, g.gpu_ms) if g.gpu_ms > 0 else None


def copy_blocked_ms(g: Any) -> float | None:
    """Its blocking copies' calls, summed; None where the trace did not record them."""
    return g.blocked_ms if g.blocked_ms > 0 else None


def copy_group_rows(copies: list) -> list[dict[str, object]]:
    """One row per copy group of a trace (memprof.trace.collect.CopyGroup), as its Copies
    by memory kind table prints it (host_ms: the blocking copies' calls)."""
    return [
        {
            "name": copy_name(g),
            "operation": g.direction,
            "kind": g.host_kind or "",
            "bytes": g.bytes,
            "calls": g.calls,
            "gpu_ms": g.gpu_ms,
            "gb_per_s": "" if copy_gb_per_s(g) is None else copy_gb_per_s(g),
            "blocking_copies": g.blocking_copies,
            "host_ms": "" if copy_blocked_ms(g) is None else copy_blocked_ms(g),
            "small_copies": g.small_calls,
        }
        for g in copies
    ]


def gap_place(gap: Gap, lines: list[SourceLine]) -> str:
    """The line the host was at during an idle gap, or before it."""
    if gap.line == NO_LINE:
        return "(no recorded call)"
    line = lines[gap.line]
    return f"{'' if gap.during else 'after '}{line.place} ({line.activity})"


def gap_rows(result: object) -> list[dict[str, object]]:
    """Each GPU's longest idle gaps (memprof.model.timeline.breakdown_of), as the trace's
    Longest idle gaps table prints them, the place literally."""
    lines = lines_of(result) or []
    return [
        {
            "gpu_index": share.device,
            "name": literal(gap_place(gap, lines)),
            "operation": "idle",
            "start_ms": gap.start_ms,
            "idle_ms": gap.idle_ms,
        }
        for share in (breakdown_of(result) if getattr(result, "command", "") == "trace" else [])
        for gap in share.gaps
    ]


@dataclass
class LinePair:
    """One line of one activity in both traces."""

    a: SourceLine
    b: SourceLine

    @property
    def label(self) -> str:
        return f"{self.a.place} {self.a.activity}"

    def samples(self, line: SourceLine) -> list[float]:
        """The per-call times compared: GPU time of the work, or the calls' host time."""
        return line.gpu_ms_each if self.a.timed_on_gpu else line.host_ms_each


def paired_lines(first: object, second: object) -> tuple[list[LinePair], int, int]:
    """The lines both traces recorded (same activity, place and function), and how many
    only A and only B have; ([], 0, 0) unless both are traces with lines."""
    a_lines, b_lines = lines_of(first), lines_of(second)
    if a_lines is None or b_lines is None:
        return [], 0, 0
    b_by_key = {line.key: line for line in b_lines}
    pairs = [LinePair(line, b_by_key[line.key]) for line in a_lines if line.key in b_by_key]
    return pairs, len(a_lines) - len(pairs), len(b_lines) - len(pairs)
