"""Results as pandas DataFrames, for notebooks: the CSV's rows and columns, numbers as numbers.

A frame is memprof.output.export's rows, so it holds what the tables show and the CSV holds,
computed once (memprof.model.figures). Counts and GPU indices are integers (pandas' Int64,
empty where a row has none), times, GB/s and shares floats (NaN where a row has none), text
as the terminal shows it. pandas is an optional extra (`pip install -e ".[frames]"`),
imported here only when a frame is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memprof.errors import require_package
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.export import CSV_COLUMNS, csv_rows

PANDAS_AT_LEAST = (2, 0)
INTEGER_COLUMNS = (
    "pid",
    "gpu_index",
    "source_gpu",
    "destination_gpu",
    "bytes",
    "moved_bytes",
    "calls",
    "source_line",
    "blocking_copies",
    "small_copies",
)
FLOAT_COLUMNS = (
    "median_ms",
    "min_ms",
    "max_ms",
    "mean_ms",
    "stdev_ms",
    "per_operation_ms",
    "gb_per_s",
    "ceiling_gb_per_s",
    "ceiling_share",
    "ratio",
    "value",
    "gpu_ms",
    "host_ms",
    "start_ms",
    "idle_ms",
)


def pandas_for(purpose: str = "Result.to_frame()") -> Any:
    """pandas, or MissingPackage (an ImportError, exit 3) saying how to install it."""
    return require_package("pandas", PANDAS_AT_LEAST, "frames", purpose)


def frame(results: Sequence[Result], summaries: Sequence[Summary]) -> Any:
    """The CSV's rows of every result (each measurement's, then the figures its tables make
    of several: derived, reference and retry rows), in its columns (summaries: each
    result's, whose figures they are)."""
    pandas = pandas_for()
    rows = [
        row
        for result, summary in zip(results, summaries, strict=True)
        for row in csv_rows(result, summary.figures, summary.derived)
    ]
    columns: dict[str, Any] = {}
    for name in CSV_COLUMNS:
        values = [row.get(name, "") for row in rows]  # a column a row has not: empty
        if name in INTEGER_COLUMNS:
            columns[name] = pandas.array([None if v == "" else v for v in values], dtype="Int64")
        elif name in FLOAT_COLUMNS:
            numbers = [float("nan") if v == "" else float(v) for v in values]
            columns[name] = pandas.array(numbers, dtype="float64")
        else:
            columns[name] = values  # text: pandas' own string type
    return pandas.DataFrame(columns, columns=list(CSV_COLUMNS))
