"""`memprof diff`: two runs (two machines, two drivers, before and after) side by side.

Measurements are matched by what they are (group, name, operation, memory kind, bytes).
A change is marked only beyond run-to-run noise: the ratio of medians must differ from 1
by more than three times the two runs' combined relative spread, and by at least 2%.
"""

from __future__ import annotations

import math

from memprof.formatting import format_bytes, format_ms
from memprof.results import Measurement, Result
from memprof.summary import Summary, Table

MIN_CHANGE = 0.02


def _key(m: Measurement) -> tuple:
    return (m.group, m.name, m.operation, m.kind, m.bytes)


def noise(a: Measurement, b: Measurement) -> float:
    """The relative change the two runs' own spread could explain."""
    spread = math.hypot(a.stats.relative_spread, b.stats.relative_spread)
    return max(MIN_CHANGE, 3 * spread)


def diff(first: Result, second: Result) -> Summary:
    """A table of every measurement in both runs, with the ratio and whether it changed."""
    a_by_key = {_key(m): m for m in first.measurements}
    b_by_key = {_key(m): m for m in second.measurements}
    common = [key for key in a_by_key if key in b_by_key]
    a_name = first.device.name if first.device else first.host
    b_name = second.device.name if second.device else second.host
    table = Table(
        f"memprof {first.command}: A = {a_name} ({first.created_at}), "
        f"B = {b_name} ({second.created_at})",
        ["Measurement", "Bytes", "A median", "B median", "B / A", "Change"],
        notes=[
            "Change: B/A beyond 3x the runs' combined relative standard deviation (and 2%); "
            "'within noise' otherwise. Below 1x B was faster."
        ],
    )
    faster = slower = 0
    for key in common:
        a, b = a_by_key[key], b_by_key[key]
        ratio = b.stats.median_ms / a.stats.median_ms if a.stats.median_ms > 0 else math.inf
        if abs(ratio - 1) > noise(a, b):
            change = "B faster" if ratio < 1 else "B slower"
            faster += ratio < 1
            slower += ratio > 1
        else:
            change = "within noise"
        table.add_row(
            f"{a.display_name} [{a.group}]",
            format_bytes(a.bytes) if a.bytes else "-",
            format_ms(a.stats.median_ms),
            format_ms(b.stats.median_ms),
            f"{ratio:.3f}x",
            change,
        )
    only_a, only_b = len(a_by_key) - len(common), len(b_by_key) - len(common)
    conclusions = [
        f"{len(common)} measurements in both runs: B was faster in {faster}, slower in {slower}, "
        f"and within noise in {len(common) - faster - slower}."
    ]
    if first.command != second.command:
        conclusions.append(
            f"The runs are of different commands ({first.command}, {second.command})."
        )
    if only_a or only_b:
        conclusions.append(
            f"Unmatched: {only_a} only in A, {only_b} only in B (other sizes or kinds)."
        )
    return Summary(tables=[table], conclusions=conclusions, show_profile=False)
