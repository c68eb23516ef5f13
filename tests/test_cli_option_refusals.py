"""The shared options' refusals word for word: --device's for a command that runs every GPU in
turn (offering 'all') and for one that measures one GPU (naming those that take 'all'), and
--max-noise beside --repeat (issue 37: mutmut 3.8.1 on memprof/cli_options.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memprof import cli
from tests.conftest import FIXTURES

runner = CliRunner()
DEVICE = "memprof: error: Invalid value for '-d' / '--device': "


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            ["pinned", "--device", "x"],
            f"{DEVICE}'x' is not a device index (0, 1, ...) or 'all' (see 'memprof pinned --help')",
        ),
        (
            ["zerocopy", "--device", "x"],
            f"{DEVICE}'x' is not a device index (0, 1, ...) (see 'memprof zerocopy --help')",
        ),
        (
            ["zerocopy", "--device", "all"],
            f"{DEVICE}memprof zerocopy measures one GPU: give its index (0, 1, ...); 'all' is "
            "taken by check, pinned, compare, sweep (see 'memprof zerocopy --help')",
        ),
        (
            ["pinned", "--max-noise", "2", "--repeat", "5"],
            "memprof: error: --max-noise decides when repetitions stop, but --repeat repeats "
            "exactly: give one of them",
        ),
    ],
)
def test_a_shared_option_is_refused_in_these_words_with_exit_2(arguments, line):
    result = runner.invoke(cli.app, arguments)
    assert (result.exit_code, result.output) == (2, f"{line}\n")


@pytest.mark.parametrize("option", ["--json", "--timeline"])
def test_report_saves_one_input_again_and_refuses_two(tmp_path, option):
    """--json and --timeline save one result: one input is taken, two refused; --csv and a
    report of two inputs without them are not."""
    pinned = str(FIXTURES / "h200_pinned_p20.json")
    trace = str(FIXTURES / "h200_trace_pycuda.json")
    one = pinned if option == "--json" else trace
    other = str(FIXTURES / "h200_pinned_p20_events.json")
    taken = runner.invoke(cli.app, ["report", one, option, str(tmp_path / "a.json"), "-q"])
    assert taken.exit_code == 0, taken.output
    two = runner.invoke(cli.app, ["report", one, other, option, str(tmp_path / "b.json")])
    assert (two.exit_code, two.output) == (
        2,
        f"memprof: error: {option} saves one result, and 2 files were given: report them one "
        "at a time (--csv takes several)\n",
    )
    assert not (tmp_path / "b.json").exists()
    csv = runner.invoke(cli.app, ["report", pinned, other, "--csv", str(tmp_path / "c.csv")])
    assert csv.exit_code == 0, csv.output
    assert runner.invoke(cli.app, ["report", pinned, other, "-q"]).exit_code == 0
