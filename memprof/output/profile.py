"""nvprof's tables from Measurements: the profile rows and the Unified Memory section."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Measurement
from memprof.model.statistics import Statistics


@dataclass(frozen=True)
class ProfileRow:
    """One line of nvprof's table: a name with its calls and their times."""

    group: str  # "GPU activities" or "API calls"
    name: str
    stats: Statistics
    time_fraction: float  # of the group's total time


PROFILE_GROUPS: dict[str, str] = {"gpu": "GPU activities", "api": "API calls"}
# CUPTI's records of every driver call, by name: a run's (memprof.core.measure) and a trace's.
DRIVER_CALL_ROWS = ("driver_call", "api_call")


def profile_rows(measurements: list[Measurement]) -> list[ProfileRow]:
    """nvprof's rows: GPU activities then API calls, each by total time, largest first, one
    row per name and kind (sizes folded, as nvprof folds calls); the API rows are CUPTI's
    records of every driver call where it made them, else memprof's host clock."""
    samples_by_key: dict[tuple, list[float]] = {}
    first: dict[tuple, Measurement] = {}  # one measurement of each key, for its display_name
    for m in measurements:  # one pass: a large trace holds 10^5 of them
        key = (m.group, m.operation, m.name, m.kind, tuple(m.gpus))
        samples = samples_by_key.get(key)
        if samples is None:
            samples = samples_by_key[key] = []
            first[key] = m
        samples.extend(m.samples_ms)
    cupti_api = any(group == "api" and op in DRIVER_CALL_ROWS for group, op, *_ in first)
    by_group: dict[str, dict[str, list[float]]] = {group: {} for group in PROFILE_GROUPS}
    for key, samples in samples_by_key.items():  # a row's samples in any order: sorted after
        samples_by_name = by_group.get(key[0])
        timed_call = key[0] == "api" and key[1] not in DRIVER_CALL_ROWS
        if samples_by_name is None or (cupti_api and timed_call):
            continue
        samples_by_name.setdefault(first[key].display_name, []).extend(samples)
    rows: list[ProfileRow] = []
    for group, title in PROFILE_GROUPS.items():
        samples_by_name = by_group[group]
        group_total = math.fsum(chain.from_iterable(samples_by_name.values()))
        group_rows = []
        for name, samples in samples_by_name.items():
            stats = Statistics.of(samples)  # its total_ms is math.fsum(samples), exactly
            fraction = stats.total_ms / group_total if group_total > 0 else 0.0
            group_rows.append(ProfileRow(title, name, stats, fraction))
        rows.extend(sorted(group_rows, key=lambda r: (-r.stats.total_ms, r.name)))
    return rows


UNIFIED_MEMORY_HEADERS = (
    "Count",
    "Avg Size",
    "Min Size",
    "Max Size",
    "Total Size",
    "Total Time",
    "Name",
)
_MIGRATIONS = {"BYTES_TRANSFER_HTOD": "Host To Device", "BYTES_TRANSFER_DTOH": "Device To Host"}


def unified_memory_rows(counters: dict[str, dict[str, float]]) -> tuple[list[list[str]], str]:
    """nvprof's `Unified Memory profiling result` rows, and its CPU page-fault line."""
    rows = []
    for counter, name in _MIGRATIONS.items():
        stats = counters.get(counter)
        if stats and stats["count"]:  # average, smallest, largest and total bytes
            sizes = (stats["total"] / stats["count"], stats["min"], stats["max"], stats["total"])
            shown = [format_bytes(int(size)) for size in sizes]
            rows.append([str(int(stats["count"])), *shown, format_ms(stats["time_ms"]), name])
    faults = counters.get("GPU_PAGE_FAULT")
    if faults and faults["count"]:
        rows.append(
            [str(int(faults["count"])), "-", "-", "-", "-", format_ms(faults["time_ms"]),
             "Gpu page fault groups"]
        )  # fmt: skip
    cpu_faults = int(counters.get("CPU_PAGE_FAULT_COUNT", {}).get("count", 0))
    return rows, f"Total CPU Page faults: {cpu_faults}"
