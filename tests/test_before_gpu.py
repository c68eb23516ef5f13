"""Everything that needs no GPU is done before the GPU is asked for: output paths and the files
a run reads (check's --reference) are refused in one line, exit 2, on a machine without PyCUDA
too, from the command line (one GPU or --device all) and from memprof.run alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memprof
from memprof import api
from memprof.cli import app
from memprof.cli_gates import JUNIT_COMMANDS
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import COMMANDS, experiment_class

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def no_pycuda(monkeypatch):
    """As on a machine without PyCUDA: anything that asks for the GPU ends in exit 3."""
    monkeypatch.setitem(sys.modules, "pycuda", None)


def not_check(tmp_path: Path) -> Path:
    bad = tmp_path / "pinned.json"
    bad.write_bytes((FIXTURES / "h200_pinned_p20.json").read_bytes())
    return bad


def bad_references(tmp_path: Path) -> dict[str, Path]:
    """A reference that is no check, each way, and the words that must name it."""
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    return {
        "missing": tmp_path / "missing.json",
        "folder": tmp_path,
        "sweep": FIXTURES / "h200_sweep.json",
        "pinned": not_check(tmp_path),
        "junk": junk,
        "check-pairs": FIXTURES / "h200x2_check_pairs.json",
    }


@pytest.mark.parametrize("device", ["0", "all"])
def test_a_bad_reference_is_refused_naming_it_without_a_gpu(tmp_path, device):
    for kind, path in bad_references(tmp_path).items():
        ran = runner.invoke(app, ["check", "--device", device, "--reference", str(path)])
        assert ran.exit_code == ExitCode.USAGE, (kind, ran.output)
        assert ran.stderr.count("\n") == 1 and str(path) in ran.stderr, (kind, ran.stderr)


def test_a_good_reference_gets_as_far_as_the_gpu(tmp_path):
    for device in ("0", "all"):
        ran = runner.invoke(
            app, ["check", "--device", device, "--reference", str(FIXTURES / "h200_check.json")]
        )
        assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output  # PyCUDA: read first, then


def test_memprof_run_reads_the_reference_before_the_gpu(tmp_path):
    for path in bad_references(tmp_path).values():
        with pytest.raises(InvalidArgument, match=str(path).replace(".", r"\.")):
            memprof.run("check", reference=str(path))
        with pytest.raises(InvalidArgument):
            api.run_each_gpu("check", experiment_class("check").Params(reference=str(path)))
    with pytest.raises(Exception) as found:
        memprof.run("check", reference=str(FIXTURES / "h200_check.json"))
    assert not isinstance(found.value, InvalidArgument)  # read, then the GPU was asked for


OUTPUTS = [
    (line.name, option)
    for line in COMMANDS
    if line.name != "trace"  # no GPU session of memprof's: tests/test_inputs_protected.py
    for option in ("--json", "--csv", *(("--junit",) if line.name in JUNIT_COMMANDS else ()))
]


@pytest.mark.parametrize(("command", "option"), OUTPUTS)
def test_every_output_is_checked_before_the_gpu(command, option, tmp_path):
    ran = runner.invoke(app, [command, option, str(tmp_path / "no" / "such" / "x.out")])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr.count("\n") == 1 and "does not exist" in ran.stderr
    ran = runner.invoke(app, [command, option, str(tmp_path / "x.out")])
    assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output  # the same run, a good path


PINNED = str(FIXTURES / "h200_pinned_p20.json")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["report", ""], "Invalid value for 'paths': the file name is empty"),
        (["report", PINNED, ""], "Invalid value for 'paths': the file name is empty"),
        (["diff", PINNED, ""], "Invalid value for 'second': the file name is empty"),
        (["plot", "", "-o", "x.svg"], "Invalid value for 'paths': the file name is empty"),
        (["check", "--reference", ""], "--reference: the file name is empty"),
        (["check", "--device", "all", "--reference", ""], "--reference: the file name is empty"),
        (["check", "--thresholds", ""], "--thresholds: the file name is empty"),
        (["trace", ""], "memprof trace: the program's file name is empty"),
        (["trace", "-m", ""], "-m '': not a module name"),
    ],
)
def test_an_empty_name_is_refused_as_empty_not_read_as_the_working_folder(args, words):
    """Path("") is ".": read as a name, it was 'cannot read .: Is a directory' (or, traced,
    'a folder without __main__.py'), naming neither the option nor what was wrong."""
    ran = runner.invoke(app, args)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr.count("\n") == 1 and words in ran.stderr, ran.stderr
    assert "cannot read ." not in ran.stderr


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: memprof.load(""), "memprof.load: path is empty"),
        (lambda: memprof.load_all(""), "memprof.load_all: path is empty"),
        (lambda: memprof.plot(memprof.load(PINNED), ""), "memprof.plot: path is empty"),
        (lambda: memprof.run("check", reference=""), "--reference: the file name is empty"),
    ],
)
def test_the_api_refuses_an_empty_name_naming_the_argument(call, words):
    with pytest.raises(InvalidArgument, match=words):
        call()


def test_a_cap_below_one_step_is_refused_before_the_gpu():
    """pinlimit's plan refused it inside the GPU session: on a machine without PyCUDA, a
    wrong pair of arguments was answered 'PyCUDA is not installed' (exit 3)."""
    ran = runner.invoke(app, ["pinlimit", "--step", "10", "--cap", "9"])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr.strip() == "memprof: error: --cap 9 is below one --step of 10 GiB"
    with pytest.raises(InvalidArgument, match="--cap 1 is below one --step of 2 GiB"):
        memprof.run("pinlimit", cap=1, step=2)
    ran = runner.invoke(app, ["pinlimit", "--step", "10", "--cap", "10"])  # one step: measured
    assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output


@pytest.mark.parametrize(
    ("power", "streams", "made"), [(0, 32, 1), (3, 5, 4), (6, 28, 22), (4, 17, 16)]
)
def test_more_streams_than_the_cut_makes_chunks_is_refused_before_the_gpu(power, streams, made):
    """2^power floats cut into chunks of ceil(2^power / K) make fewer than K where K does not
    fit: the run went on with fewer chunks, its tables saying 'pinned, K streams'."""
    args = ["streams", "--power", str(power), "--streams", str(streams)]
    ran = runner.invoke(app, args)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr.count("\n") == 1 and f"make {made}, not {streams}:" in ran.stderr
    with pytest.raises(InvalidArgument, match=f"--streams {streams}: 2\\^{power} floats"):
        memprof.run("streams", power=power, streams=streams)


@pytest.mark.parametrize(("power", "streams"), [(3, 4), (5, 32), (22, 3), (22, 32), (4, 16)])
def test_as_many_chunks_as_streams_get_as_far_as_the_gpu(power, streams):
    ran = runner.invoke(app, ["streams", "--power", str(power), "--streams", str(streams)])
    assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output
