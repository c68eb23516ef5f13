"""Results as CSV, for spreadsheets and scripts: one row per measurement, statistics derived."""

from __future__ import annotations

import csv
from pathlib import Path

from memprof.formatting import bandwidth_gb_per_s
from memprof.results import Result

CSV_COLUMNS = (
    "command",
    "device",
    "group",
    "name",
    "operation",
    "kind",
    "bytes",
    "calls",
    "total_ms",
    "min_ms",
    "median_ms",
    "mean_ms",
    "max_ms",
    "stdev_ms",
    "gb_per_s_at_median",
)


def csv_rows(result: Result) -> list[dict[str, object]]:
    """Every measurement with its statistics; GB/s = bytes per call over the median (10^9 B/s)."""
    rows = []
    for m in result.measurements:
        stats = m.stats
        rows.append(
            {
                "command": result.command,
                "device": result.device.name if result.device else "",
                "group": m.group,
                "name": m.name,
                "operation": m.operation,
                "kind": m.kind or "",
                "bytes": m.bytes,
                "calls": stats.count,
                "total_ms": stats.total_ms,
                "min_ms": stats.min_ms,
                "median_ms": stats.median_ms,
                "mean_ms": stats.mean_ms,
                "max_ms": stats.max_ms,
                "stdev_ms": stats.stdev_ms,
                "gb_per_s_at_median": (
                    round(bandwidth_gb_per_s(m.bytes, stats.median_ms), 6) if m.bytes else ""
                ),
            }
        )
    return rows


def write_csv(results: list[Result], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for result in results:
            writer.writerows(csv_rows(result))
