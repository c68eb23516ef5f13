"""Results in notebooks: Result.to_frame() and memprof.frame() are the CSV with numbers as
numbers; a Result shows its command, GPU, date and one line per table; memprof's API is
what memprof.__all__ says."""

from __future__ import annotations

import csv
import importlib.util
import io
import math
import sys

import pytest

import memprof
from memprof.errors import MissingPackage, install_command
from memprof.experiments import load, summarize
from memprof.model.results import Result
from memprof.output.export import CSV_COLUMNS, csv_text
from tests.conftest import FIXTURES, replace

# What each column holds, written out here so that a column declared with the wrong type fails.
INTEGER_COLUMNS = ("pid", "gpu_index", "source_gpu", "destination_gpu", "bytes", "moved_bytes",
                   "calls", "source_line", "blocking_copies", "small_copies")  # fmt: skip
FLOAT_COLUMNS = ("median_ms", "min_ms", "max_ms", "mean_ms", "stdev_ms", "per_operation_ms",
                 "gb_per_s", "ceiling_gb_per_s", "ceiling_share", "ratio", "value", "gpu_ms",
                 "host_ms", "start_ms", "idle_ms")  # fmt: skip

# Found, not imported: a worker that runs none of these tests never pays pandas' import (0.6 s).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is None, reason="frames need pandas (the frames extra)"
)

SEVERAL = ("h200_sweep", "h200x2_peer", "h200_trace_torch", "legacy_v1_streams", "h200_check",
           "h200x2_hostlink", "h200_pinned_p20", "h200_info")  # fmt: skip


@pytest.mark.parametrize("stem", SEVERAL)
def test_a_frame_is_the_csv_with_numbers_as_numbers(stem):
    import pandas

    result = load(FIXTURES / f"{stem}.json")
    frame, summary = result.to_frame(), summarize(result)
    written = csv_text([result], [summary.figures], [summary.derived])  # as --csv writes it
    rows = list(csv.DictReader(io.StringIO(written)))
    assert list(frame.columns) == list(CSV_COLUMNS)
    # a trace's source lines, copy groups and idle gaps
    traced = [row for row in rows if row["group"] in ("line", "copies", "gap")]
    assert len(frame) == len(rows) == len(result.measurements) + len(traced) + len(summary.derived)
    for column in CSV_COLUMNS:
        for found, written in zip(frame[column], (row[column] for row in rows), strict=True):
            if column in FLOAT_COLUMNS:
                assert isinstance(found, float)
                assert math.isnan(found) if written == "" else found == float(written), column
            elif column in INTEGER_COLUMNS:
                assert found is pandas.NA if written == "" else found == int(written), column
            else:
                assert found == written, column
    assert {str(frame[c].dtype) for c in INTEGER_COLUMNS} == {"Int64"}
    assert {str(frame[c].dtype) for c in FLOAT_COLUMNS} == {"float64"}
    assert {c for c, kind in CSV_COLUMNS.items() if kind is not str} == {
        *INTEGER_COLUMNS,
        *FLOAT_COLUMNS,
    }


def test_a_frame_of_several_results_holds_each_ones_rows():
    first, second = load(FIXTURES / "h200_device.json"), load(FIXTURES / "h200_uva.json")
    frame = memprof.frame([first, second])
    assert list(frame["command"].unique()) == ["device", "uva"]
    derived = len(summarize(first).derived) + len(summarize(second).derived)
    assert len(frame) == len(first.measurements) + len(second.measurements) + derived
    assert memprof.frame(first).equals(first.to_frame())
    peer = load(FIXTURES / "h200x2_peer.json").to_frame()
    on = peer[peer["operation"] == "ce_on"]
    assert sorted(zip(on["source_gpu"], on["destination_gpu"], strict=True)) == [(0, 1), (1, 0)]


def test_no_results_are_an_empty_frame_with_every_column():
    frame = memprof.frame([])
    assert frame.empty and list(frame.columns) == list(CSV_COLUMNS)


def test_infos_frame_is_the_device_facts_its_tables_print():
    """A run without measurements: its rows are the facts memprof info prints."""
    result = load(FIXTURES / "h200_info.json")
    frame = result.to_frame()
    assert set(frame["group"]) == {"device"}
    by_name = frame.set_index("name")
    assert by_name.loc["multiprocessors", "value"] == result.device.multiprocessors
    assert by_name.loc["L2 cache", "bytes"] == result.device.l2_cache_bytes
    assert by_name.loc["asyncEngineCount", "value"] == result.device.attributes["asyncEngineCount"]


def test_without_pandas_the_error_says_how_to_install_it(monkeypatch):
    result = load(FIXTURES / "h200_device.json")
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ImportError) as raised:
        result.to_frame()
    assert isinstance(raised.value, MissingPackage) and raised.value.exit_code == 3
    assert str(raised.value) == (
        "Result.to_frame() needs pandas, which is not installed: "
        + install_command('"pandas>=2.0"', "frames")
    )


def test_a_notebook_shows_the_run_and_one_line_per_table():
    result = load(FIXTURES / "h200_pinned_p20.json")
    shown = result._repr_html_()
    summary = summarize(result)
    assert shown.count("<details>") == len(summary.tables) == 2
    assert f"memprof pinned on NVIDIA H200, {result.created_at} ({result.host})" in shown
    assert "<summary>Transfers of 4 MiB (6 rows)</summary>" in shown
    assert summary.conclusions[0].split(" ")[0] in shown
    assert repr(result).splitlines() == [
        f"<memprof 'pinned' Result: NVIDIA H200, {result.created_at}, "
        f"{len(result.measurements)} measurements, verified>",
        *(f"  {table.title} ({len(table.rows)} rows)" for table in summary.tables),
    ]


def test_a_traced_programs_repr_and_notebook_name_the_gpu_it_ran_on():
    result = load(FIXTURES / "h200_trace_torch.json")
    assert result.device is None  # a trace records no device facts, only the GPU's name
    assert repr(result).startswith("<memprof 'trace' Result: NVIDIA H200, ")
    assert "Where: copies HtoD pageable -> device (1 row)" in repr(result)
    assert "memprof trace on NVIDIA H200, " in result._repr_html_()


def test_a_repr_never_raises_on_a_result_that_cannot_be_summarized():
    result = replace(load(FIXTURES / "h200_pinned_p20.json"), measurements=[])
    assert repr(result) == (
        f"<memprof 'pinned' Result: NVIDIA H200, {result.created_at}, 0 measurements, verified>"
    )


def test_strings_in_the_notebook_view_are_shown_never_run():
    result = replace(load(FIXTURES / "h200_device.json"), host="<script>alert(1)</script>\x1b")
    shown = result._repr_html_()
    assert "<script>" not in shown and "\x1b" not in shown
    assert "(&lt;script&gt;alert(1)&lt;/script&gt;\\x1b)" in shown


def test_without_the_experiments_a_result_says_what_its_frame_needs(monkeypatch):
    result = load(FIXTURES / "h200_device.json")
    monkeypatch.setattr(Result, "views", None)
    assert result._repr_html_() is None  # the notebook falls back to the short repr
    assert "\n" not in repr(result)  # the headline alone: no tables without the experiment
    with pytest.raises(TypeError, match=r"need memprof\.experiments"):
        result.to_frame()


def test_the_api_is_what_all_says():
    assert memprof.__all__ == [
        "__version__",
        "run",
        "load",
        "load_all",
        "render",
        "diff",
        "frame",
        "plot",
    ]
    assert set(memprof.__all__) <= set(dir(memprof))
    for name in memprof.__all__[1:]:
        assert callable(getattr(memprof, name))
    with pytest.raises(AttributeError):
        memprof.summarize  # noqa: B018


def test_diff_prints_the_comparison_as_the_command_does():
    from rich.console import Console

    first = load(FIXTURES / "h200_pinned_p20.json")
    console = Console(record=True, width=120, color_system=None)
    memprof.diff(first, first, console)
    assert "within noise" in console.export_text()
