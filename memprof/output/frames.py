"""Results as pandas DataFrames, for notebooks: the CSV's rows and columns (export.py's),
numbers as numbers (counts as Int64, the rest float, empty or NaN where a row has none).
pandas is an optional extra, imported only when a frame is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memprof.errors import require_package
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.export import CSV_COLUMNS, csv_rows

PANDAS_AT_LEAST = (2, 0)


def frame(results: Sequence[Result], summaries: Sequence[Summary]) -> Any:
    """The CSV's rows of every result, in its columns (summaries: each result's)."""
    pandas = require_package("pandas", PANDAS_AT_LEAST, "frames", "Result.to_frame()")
    rows = [
        row
        for result, summary in zip(results, summaries, strict=True)
        for row in csv_rows(result, summary.figures, summary.derived)
    ]
    columns: dict[str, Any] = {}
    for name, kind in CSV_COLUMNS.items():
        values = [row.get(name, "") for row in rows]  # a column a row has not: empty
        if kind is int:
            columns[name] = pandas.array([None if v == "" else v for v in values], dtype="Int64")
        elif kind is float:
            numbers = [float("nan") if v == "" else float(v) for v in values]
            columns[name] = pandas.array(numbers, dtype="float64")
        else:
            columns[name] = values  # text: pandas' own string type
    return pandas.DataFrame(columns, columns=list(CSV_COLUMNS))
