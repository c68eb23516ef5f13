"""The Python API's functions that take Results refuse anything else in a TypeError naming the
function and the argument (never an AttributeError from inside memprof), a picture is never
written over the file its Result was loaded from, a file is judged as a file whatever folder
holds it, and --device all is answered on every command."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memprof
from memprof import api
from memprof.cli import app
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import COMMANDS, PROGRAM_COMMAND, experiment_class, summarize

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"
runner = CliRunner()

# Every function of the API, and which of its arguments are Results (one or several)
TAKES_RESULTS = {
    name: [p for p in inspect.signature(getattr(api, name)).parameters if "result" in p]
    + (["first", "second"] if name == "diff" else [])
    for name in memprof.API
    if name not in ("run", "load", "load_all")
}
NOT_RESULTS = [str(PINNED), PINNED, b"run.json", None, 5, {"command": "pinned"}, [None]]


def test_every_api_function_that_takes_results_is_listed():
    assert set(TAKES_RESULTS) == {"render", "diff", "frame", "plot"}
    assert all(TAKES_RESULTS.values())


@pytest.mark.parametrize(
    ("function", "argument"), [(f, a) for f, args in TAKES_RESULTS.items() for a in args]
)
@pytest.mark.parametrize("value", NOT_RESULTS, ids=repr)
def test_anything_but_a_result_is_a_type_error_naming_the_argument(function, argument, value):
    good = memprof.load(PINNED)
    arguments = {a: good for a in TAKES_RESULTS[function]} | {argument: value}
    if function == "frame" and isinstance(value, list):
        arguments[argument] = [good, *value]  # one bad item among good ones
    with pytest.raises(TypeError, match=f"memprof.{function}: {argument}"):
        getattr(memprof, function)(**arguments)


def test_frame_still_takes_one_result_or_several():
    pytest.importorskip("pandas")
    one = memprof.load(PINNED)
    rows = len(one.measurements) + len(summarize(one).derived)  # the CSV's: pinned's ratios
    assert len(memprof.frame(one)) == len(memprof.frame((one,))) == rows
    assert len(memprof.frame(iter([one, one]))) == 2 * rows


def test_a_picture_of_no_results_is_refused_in_a_sentence():
    for nothing in ([], (), iter([])):
        with pytest.raises(InvalidArgument, match=r"memprof\.plot: results is empty"):
            memprof.plot(nothing)


@pytest.fixture
def saved(tmp_path):
    """A Result saved under a picture's name, as a user might, and loaded from there."""
    pytest.importorskip("matplotlib")
    names = {}
    for suffix in (".svg", ".png", ".html"):
        path = tmp_path / f"run{suffix}"
        path.write_bytes(PINNED.read_bytes())
        names[suffix] = path
    return names


def test_a_picture_is_never_drawn_over_the_file_its_result_came_from(saved, monkeypatch):
    monkeypatch.chdir(next(iter(saved.values())).parent)
    for path in saved.values():
        (path.parent / f"link{path.suffix}").symlink_to(path)
        os.link(path, path.parent / f"hard{path.suffix}")
        before = path.read_bytes()
        for loaded in (path, Path(path.name)):
            result = memprof.load(loaded)
            for target in (path, path.name, Path(f"link{path.suffix}"), f"hard{path.suffix}"):
                with pytest.raises(InvalidArgument, match="would overwrite the input"):
                    memprof.plot(result, target)
        assert path.read_bytes() == before
    relative = memprof.load("run.svg")  # then the notebook changes folder
    monkeypatch.chdir(FIXTURES)
    with pytest.raises(InvalidArgument, match="would overwrite the input"):
        memprof.plot(relative, saved[".svg"])
    other = saved[".svg"].parent / "elsewhere.svg"
    memprof.plot(memprof.load(saved[".svg"]), other)  # the same call, to another file
    assert other.read_text().lstrip().startswith("<?xml")


def test_a_result_made_here_has_no_file_to_protect():
    assert memprof.load(PINNED).loaded_from == PINNED.absolute()
    assert memprof.load(str(PINNED)).find is not None
    made = type(memprof.load(PINNED))(command="pinned", parameters=None, device=None)
    assert made.loaded_from is None


# -- a file is judged as a file, wherever it lives ---------------------------------------------


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no writable /dev/shm")
def test_a_regular_file_under_dev_is_a_file(tmp_path):
    pytest.importorskip("matplotlib")
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:
        source = Path(folder) / "r.json"
        source.write_bytes(PINNED.read_bytes())
        ran = runner.invoke(app, ["plot", str(source)])
        assert ran.exit_code == 0, ran.output
        assert (Path(folder) / "r.svg").is_file()


def test_a_stream_is_not_a_file_even_where_it_reads_one(tmp_path):
    pytest.importorskip("matplotlib")
    copy = tmp_path / "r.json"
    copy.write_bytes(PINNED.read_bytes())
    link = tmp_path / "stdin.json"
    link.symlink_to("/dev/stdin")
    kept = os.dup(0)
    try:
        with open(copy, "rb") as handle:
            os.dup2(handle.fileno(), 0)  # `memprof plot /dev/stdin < r.json`: a regular file
        for name in ("/dev/stdin", "/proc/self/fd/0", str(link)):
            assert Path(name).is_file()
            ran = runner.invoke(app, ["plot", name])
            assert ran.exit_code == ExitCode.USAGE, ran.output
            assert "give -o FILE.svg" in ran.stderr
    finally:
        os.dup2(kept, 0)
        os.close(kept)
    assert set(tmp_path.iterdir()) == {copy, link}


# -- --device all -----------------------------------------------------------------------------


def every_gpu_commands() -> list[str]:
    return [line.name for line in COMMANDS if experiment_class(line.name).gpus == "one_or_every"]


@pytest.mark.parametrize("command", [line.name for line in COMMANDS])
def test_device_all_runs_or_names_the_commands_that_take_it(command, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    experiment = experiment_class(command)
    program = tmp_path / "x.py"
    program.write_text("pass\n")
    line = [command, "--device", "all"] + ([str(program)] if command == PROGRAM_COMMAND else [])
    ran = runner.invoke(app, line)
    if experiment.gpus == "one_or_every":
        assert ran.exit_code == ExitCode.ENVIRONMENT, ran.output  # taken: on to PyCUDA
    elif experiment.gpus == "every":
        assert ran.exit_code == ExitCode.USAGE and "No such option" in ran.stderr
    else:
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stderr.count("\n") == 1 and "valid integer" not in ran.stderr
        assert f"memprof {command} measures one GPU" in ran.stderr
        named = ran.stderr.split("'all' is taken by ")[1].split(" (see")[0]
        assert named.split(", ") == every_gpu_commands()
        good = runner.invoke(app, [command, "--device", "1", *line[3:]])
        assert good.exit_code != ExitCode.USAGE, good.output  # an index still is one


def test_memprof_run_answers_device_all_too():
    with pytest.raises(InvalidArgument, match="run_each_gpu runs every GPU"):
        memprof.run("zerocopy", device="all")
