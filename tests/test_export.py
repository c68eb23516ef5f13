"""CSV export: one row per measurement, every statistic derived from the samples."""

import csv
import math

import pytest

from memprof.model.results import Measurement, Result
from memprof.output.export import CSV_COLUMNS, csv_rows, write_csv
from tests.conftest import load_fixture


def built_result() -> Result:
    copy = Measurement(
        group="gpu",
        name="[CUDA memcpy HtoD]",
        operation="h2d",
        kind="pinned",
        bytes=4_000_000,
        samples_ms=[4.0, 1.0, 10.0, 2.0],  # mean 4.25, median 3
    )
    launch = Measurement(
        group="api",
        name="cuLaunchKernel",
        operation="launch",
        kind=None,
        bytes=0,
        samples_ms=[0.5],
    )
    return Result(command="pinned", parameters={}, device=None, measurements=[copy, launch])


def test_csv_row_holds_every_statistic_in_its_own_column():
    first, second = csv_rows(built_result())
    assert first == {
        "command": "pinned",
        "device": "",
        "group": "gpu",
        "name": "[CUDA memcpy HtoD]",
        "operation": "h2d",
        "kind": "pinned",
        "bytes": 4_000_000,
        "calls": 4,
        "total_ms": 17.0,
        "min_ms": 1.0,
        "median_ms": 3.0,
        "mean_ms": 4.25,
        "max_ms": 10.0,
        "stdev_ms": pytest.approx(math.sqrt(((0.25**2) + 3.25**2 + 5.75**2 + 2.25**2) / 3)),
        "gb_per_s_at_median": round(4_000_000 / 3e-3 / 1e9, 6),
    }
    assert (second["kind"], second["bytes"], second["gb_per_s_at_median"]) == ("", 0, "")
    assert second["calls"] == 1


def test_csv_rows_name_the_device():
    result = load_fixture("pinned_p20")
    rows = csv_rows(result)
    assert len(rows) == len(result.measurements)
    assert {row["device"] for row in rows} == {"NVIDIA H200"}


def test_csv_file_has_the_header_and_one_row_per_measurement_of_every_result(tmp_path):
    path = tmp_path / "out.csv"
    write_csv([built_result(), built_result()], path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert len(rows) == 4
    assert [row["name"] for row in rows[:2]] == ["[CUDA memcpy HtoD]", "cuLaunchKernel"]
    assert (rows[0]["min_ms"], rows[0]["max_ms"], rows[0]["median_ms"]) == ("1.0", "10.0", "3.0")
