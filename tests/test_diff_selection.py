"""`memprof diff` as a gate people can keep on: --only picks the figures compared and gated,
the table lists only what changed unless --verbose, each row's GB/s is its run's own figure,
unmatched rows are named, and memprof.diff returns what it found. Recorded fixtures, edited
in tmp_path as a second run would record them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import memprof
from memprof.api import compared_runs, declared
from memprof.cli import app
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import load, summarize
from memprof.model.formatting import format_gb_per_s
from memprof.output.diff import CHANGE_NOTE, Compared, compare, selected
from tests.conftest import FIXTURES

SWEEP = FIXTURES / "h200_sweep.json"


def edited(tmp_path: Path, edit, source: Path = SWEEP) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    return path


def slower(group: str, factor: float = 3.0):
    """Every measurement of `group` taking `factor` times as long (its batches too)."""

    def edit(data: dict) -> None:
        for m in data["measurements"]:
            if m["group"] == group:
                for field in ("samples_ms", "throughput_ms", "events_ms"):
                    m[field] = [t * factor for t in m.get(field) or []]

    return edit


def diff(*arguments: object) -> object:
    return CliRunner().invoke(app, ["diff", *map(str, arguments)], env={"COLUMNS": "80"})


def test_a_gate_on_gbps_ignores_driver_call_jitter(tmp_path):
    jitter = edited(tmp_path, slower("api"))
    assert diff(SWEEP, jitter, "--fail-above", 5).exit_code == ExitCode.CHECK_FAILED
    assert diff(SWEEP, jitter, "--fail-above", 5, "--only", "api").exit_code == 1
    ran = diff(SWEEP, jitter, "--fail-above", 5, "--only", "gbps")
    assert ran.exit_code == 0, ran.output
    assert "cuLaunchKernel" not in ran.output


def test_a_gate_on_gbps_still_fails_a_slower_copy(tmp_path):
    copies = edited(tmp_path, slower("gpu"))
    ran = diff(SWEEP, copies, "--fail-above", 5, "--only", "gbps")
    assert ran.exit_code == ExitCode.CHECK_FAILED
    assert "regressed: [CUDA memcpy" in ran.stderr
    assert diff(SWEEP, copies, "--fail-above", 5, "--only", "api").exit_code == 0


def test_only_takes_kinds_and_patterns_and_any_of_several_selects():
    def row(label: str, group: str, rate: float | None) -> Compared:
        return Compared(label, 1.0, 1.0, 1.0, 0.02, group, rate, rate, None)

    rows = [
        row("[CUDA memcpy HtoD] (pinned) [gpu], 4 MiB", "gpu", 50.0),
        row("cuLaunchKernel [api], -", "api", None),
        row("staging memcpy (pageable) [host], 4 MiB", "host", 3.0),
        row("[CUDA memcpy DtoH] (pinned) [gpu], 4 MiB", "gpu", 50.0),
    ]

    def labels(*only: str) -> list[str]:
        return [r.label for r in selected(rows, only)]

    assert labels() == [r.label for r in rows]
    assert labels("gbps") == [rows[0].label, rows[2].label, rows[3].label]
    assert labels("api") == [rows[1].label]
    assert labels("host") == [rows[2].label]
    assert labels("*htod*") == [rows[0].label]  # patterns ignore case
    assert labels("*HtoD*", "api") == [rows[0].label, rows[1].label]
    assert labels("*, 4 MiB") == [rows[0].label, rows[2].label, rows[3].label]
    # a GB/s in one run only (B's command declares none) is no GB/s to compare
    one_sided = Compared(rows[0].label, 1.0, 1.0, 1.0, 0.02, "gpu", 50.0, None, None)
    assert selected([one_sided, rows[2]], ["gbps"]) == [rows[2]]


def test_only_that_selects_nothing_is_refused_in_one_line():
    ran = diff(SWEEP, SWEEP, "--only", "*no such copy*")
    assert ran.exit_code == ExitCode.USAGE
    assert ran.output.count("\n") == 1 and "--only *no such copy*" in ran.output


def test_two_runs_of_one_build_fit_a_screen_and_verbose_lists_every_row():
    short = diff(SWEEP, SWEEP)
    assert short.exit_code == 0
    assert len(short.stdout.splitlines()) <= 24, short.stdout
    assert "311 measurements in both runs" in short.stdout
    assert "--verbose lists every row" in short.stdout
    assert "A = NVIDIA H200" in short.stdout  # the runs are named all the same
    every = diff(SWEEP, SWEEP, "--verbose")
    assert every.stdout.count("within noise") > 311
    assert "--verbose lists" not in every.stdout


def test_the_short_table_keeps_exactly_the_rows_that_changed(tmp_path):
    def one_slower(data: dict) -> None:
        m = next(m for m in data["measurements"] if m["group"] == "gpu" and m["bytes"])
        for field in ("samples_ms", "throughput_ms"):
            m[field] = [t * 2 for t in m.get(field) or []]

    ran = diff(SWEEP, edited(tmp_path, one_slower))
    assert ran.exit_code == 0
    assert ran.stdout.count("B slower") == 1 and "within noise" not in ran.stdout.split(
        "measurements in both runs"
    )[0].replace("'within noise'", "")


def test_gb_per_s_columns_are_each_runs_own_figures(tmp_path):
    a, b = load(SWEEP), load(edited(tmp_path, slower("gpu", 2.0)))
    comparison = memprof.diff(a, b, Console(file=io.StringIO()), verbose=True)
    a_figures, b_figures = summarize(a).figures, summarize(b).figures
    assert len(comparison.rows) == len(a_figures) == len(b_figures)  # one build: every row
    moving = 0
    for row, in_a, in_b in zip(comparison.rows, a_figures, b_figures, strict=True):
        assert (row.a_gb_per_s, row.b_gb_per_s) == (in_a.gb_per_s, in_b.gb_per_s), row.label
        assert row.b_share == in_b.share
        if row.group == "gpu" and row.a_gb_per_s is not None:
            assert row.b_gb_per_s == pytest.approx(row.a_gb_per_s / 2, rel=1e-6)
            moving += 1
    assert moving > 100
    shown = (
        CliRunner()
        .invoke(app, ["diff", str(SWEEP), str(SWEEP), "--verbose"], env={"COLUMNS": "300"})
        .stdout
    )
    first = next(f for f in a_figures if f.gb_per_s is not None and f.share is not None)
    assert f"{format_gb_per_s(first.gb_per_s)}" in shown and f"{first.share:.0%}" in shown


def test_the_python_api_returns_what_it_found(tmp_path):
    a = load(SWEEP)
    quiet = Console(file=io.StringIO())
    same = memprof.diff(a, a, quiet, fail_above=5)
    assert same.verdict == "passed" and same.regressions == [] and same.improvements == []
    assert len(same.rows) == len(a.measurements)
    b = load(edited(tmp_path, slower("gpu")))
    worse = memprof.diff(a, b, quiet, fail_above=5, only="gbps")
    assert worse.verdict == "regressed"
    assert worse.regressions and all(r.a_gb_per_s is not None for r in worse.rows)
    assert all(r.ratio > 1.05 for r in worse.regressions)
    better = memprof.diff(b, a, quiet, fail_above=5)
    assert better.verdict == "passed" and better.improvements and not better.regressions
    # a gate above the change passes what a gate below it fails
    assert memprof.diff(a, b, quiet, fail_above=250, only="gbps").verdict == "passed"
    assert memprof.diff(a, b, quiet, fail_above=150, only="gbps").verdict == "regressed"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((SWEEP, None), TypeError),
        ((None, str(SWEEP)), TypeError),
        ((None, None, "console"), TypeError),
    ],
)
def test_the_python_api_checks_its_arguments(arguments, error):
    a = load(SWEEP)
    first, second, *rest = arguments
    with pytest.raises(error, match=r"memprof\.diff"):
        memprof.diff(first or a, second or a, *rest)


@pytest.mark.parametrize("fail_above", [-1, 1001, True, "5"])
def test_the_python_api_refuses_a_gate_outside_the_command_lines_range(fail_above):
    a = load(SWEEP)
    with pytest.raises(InvalidArgument, match="fail_above"):
        memprof.diff(a, a, fail_above=fail_above)


def test_a_figure_with_a_gb_per_s_in_one_run_only_gets_the_columns_and_dashes():
    """B's command declares no measures (a command this memprof does not know): A's GB/s
    is shown, B's and its share of a ceiling are '-', never another run's figure."""
    a = load(SWEEP)
    comparison = compare(a, a, declared_a=declared(a))
    [table, *_] = comparison.summary.tables
    assert table.headers[4:7] == ["A GB/s", "B GB/s", "B of ceiling"]
    row = comparison.rows[0]
    assert row.a_gb_per_s is not None and row.b_gb_per_s is None
    assert table.rows[0][4:7] == [format_gb_per_s(row.a_gb_per_s), "-", "-"]
    assert table.notes[0] == CHANGE_NOTE
    assert table.notes[1].startswith("GB/s: each run's own figure, as its tables print it;")
    assert table.notes[1].endswith("B's GB/s over the ceiling B's tables name.")
    plain_times = compare(a, a).summary.tables[0]
    assert "A GB/s" not in plain_times.headers
    assert not any(note.startswith("GB/s") for note in plain_times.notes)


def test_the_conclusion_names_what_only_selected():
    a = load(SWEEP)
    comparison = compare(a, a, only=("api", "*cuMemcpyHtoD*"))
    assert comparison.summary.conclusions[0].startswith(
        f"{len(comparison.rows)} measurements (api, *cuMemcpyHtoD*) in both runs:"
    )
    assert compare(a, a).summary.conclusions[0].startswith("311 measurements in both runs:")


def test_only_is_refused_where_it_selects_nothing_on_every_gpu_and_taken_where_one_gpu_has_it():
    """--device all: --only needs a figure on some GPU, not on each (a GPU without the kind
    still shows its pair); refused only where every pair has none."""
    pinned = memprof.load(FIXTURES / "h200_pinned_p20.json")
    uva = memprof.load(FIXTURES / "h200_uva.json")
    pairs = [("GPU 0", pinned, pinned), ("GPU 1", uva, uva)]
    compared = compared_runs(pairs, None, False, ["*cuMemHostAlloc*"], False, "--only")
    assert [len(comparison.rows) for _, comparison in compared] == [2, 0]
    with pytest.raises(InvalidArgument, match=r"^--only: no figure in both runs"):
        compared_runs(pairs[1:] * 2, None, False, ["*cuMemHostAlloc*"], False, "--only")
