"""Results as CSV, for spreadsheets and scripts: one row per measurement, statistics derived.

Text cells are written as the terminal shows them (memprof.output.literal): a CSV is a text
file people `cat` and `head`, so a control character in a hostile result's name is written
as its escape (\\x1b) rather than obeyed by the terminal; memprof itself never puts one in
a name, so nothing real is lost, and --json keeps every string exactly (JSON escapes them).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from memprof.model.formatting import bandwidth_gb_per_s
from memprof.model.results import Result
from memprof.output.files import write_text_atomic
from memprof.output.literal import literal

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
                "command": literal(result.command),
                "device": literal(result.device.name) if result.device else "",
                "group": literal(m.group),
                "name": literal(m.name),
                "operation": literal(m.operation),
                "kind": literal(m.kind or ""),
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


def csv_text(results: list[Result]) -> str:
    """The CSV file's whole text: a header and one row per measurement of every result."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for result in results:
        writer.writerows(csv_rows(result))
    return buffer.getvalue()


def write_csv(results: list[Result], path: Path) -> None:
    """Save as CSV atomically: an existing file is replaced whole or left as it was."""
    write_text_atomic(path, csv_text(results))
