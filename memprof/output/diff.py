"""`memprof diff`: two runs (two machines, two drivers, before and after) side by side.

Measurements are matched by what they are (group, name, operation, memory kind, bytes).
A change is marked only beyond run-to-run noise: the ratio of medians must differ from 1
by more than three times the two runs' combined relative spread, and by at least 2%.
"""

from __future__ import annotations

import math

from memprof.model.formatting import format_bytes, format_ms, plural
from memprof.model.results import Measurement, Result
from memprof.model.statistics import Statistics
from memprof.model.summary import Summary, Table

MIN_CHANGE = 0.02  # below this a ratio is never a change, however quiet the runs
NOISE_SIGMAS = 3  # a change must exceed this many combined relative standard deviations


def _key(m: Measurement) -> tuple:
    return (m.group, m.name, m.operation, m.kind, m.bytes, m.gpus)


def noise(a: Statistics, b: Statistics) -> float:
    """The relative change the two runs' own spread could explain."""
    spread = math.hypot(a.relative_spread, b.relative_spread)
    return max(MIN_CHANGE, NOISE_SIGMAS * spread)


def ratio_of_medians(a: Statistics, b: Statistics) -> float:
    """B's median over A's: 1 when both took no measurable time, infinite when only A did."""
    if a.median_ms > 0:
        return b.median_ms / a.median_ms
    return 1.0 if b.median_ms == 0 else math.inf


def _stats(m: Measurement) -> Statistics | None:
    """The samples' statistics, or None where there are none to trust (NaN, negative, empty)."""
    try:
        return m.stats
    except ValueError:
        return None


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
            f"Change: B/A beyond {NOISE_SIGMAS}x the runs' combined relative standard deviation "
            f"(and {MIN_CHANGE:.0%}); 'within noise' otherwise. Below 1x B was faster."
        ],
    )
    faster = slower = unusable = 0
    for key in common:
        a, b = a_by_key[key], b_by_key[key]
        a_stats, b_stats = _stats(a), _stats(b)
        label = (f"{a.display_name} [{a.group}]", format_bytes(a.bytes) if a.bytes else "-")
        if a_stats is None or b_stats is None:
            unusable += 1
            medians = (format_ms(s.median_ms) if s else "-" for s in (a_stats, b_stats))
            table.add_row(*label, *medians, "-", "no valid samples")
            continue
        ratio = ratio_of_medians(a_stats, b_stats)
        if abs(ratio - 1) > noise(a_stats, b_stats):
            change = "B faster" if ratio < 1 else "B slower"
            faster += ratio < 1
            slower += ratio > 1
        else:
            change = "within noise"
        table.add_row(
            *label,
            format_ms(a_stats.median_ms),
            format_ms(b_stats.median_ms),
            f"{ratio:.3f}x" if math.isfinite(ratio) else "-",
            change,
        )
    only_a, only_b = len(a_by_key) - len(common), len(b_by_key) - len(common)
    conclusions = [
        f"{plural(len(common), 'measurement')} in both runs: B was faster in {faster}, slower in "
        f"{slower}, and within noise in {len(common) - faster - slower - unusable}."
    ]
    if unusable:
        conclusions.append(f"{plural(unusable, 'measurement')} had no valid samples to compare.")
    if first.command != second.command:
        conclusions.append(
            f"The runs are of different commands ({first.command}, {second.command})."
        )
    if only_a or only_b:
        conclusions.append(
            f"Unmatched: {only_a} only in A, {only_b} only in B (other sizes or kinds)."
        )
    return Summary(tables=[table], conclusions=conclusions, show_profile=False)
