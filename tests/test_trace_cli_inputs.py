"""trace's command line where a mutation round found it untested (issue 37: mutmut 3.8.1 on
memprof/cli_trace.py): the files the traced program reads, which no output may be written
over, found as Python finds them; the advice's figures read from memprof's own sweep and
smallcopies, and what is said when they are not there."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from memprof import cli_trace
from memprof.cli import app
from memprof.experiments.smallcopies import per_copy_walls
from memprof.trace.stacks import MAX_STACK_DEPTH
from tests.conftest import load_fixture
from tests.test_trace_cli import fake_cupti, invoke, runner  # noqa: F401 (a fixture)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The working directory, as `python -m` puts it first on the path."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_script_and_each_file_it_is_given_are_the_programs_files_once_each(folder):
    for name in ("prog.py", "data.csv", "a=b.csv", "other.csv"):
        (folder / name).write_text("")
    words = ["prog.py", "data.csv", "--in=a=b.csv", "--out=missing.csv", "-x", "absent.txt"]
    assert cli_trace.program_files(words, None) == [
        Path("prog.py"),
        Path("data.csv"),
        Path("a=b.csv"),
    ]


def test_a_folder_run_as_a_script_is_its_main(folder):
    (folder / "app").mkdir()
    (folder / "app" / "__main__.py").write_text("")
    assert cli_trace.program_files(["app"], None) == [Path("app/__main__.py")]


def test_a_modules_files_are_the_one_python_m_runs_and_its_arguments(folder, monkeypatch):
    monkeypatch.delitem(sys.modules, "tool_here", raising=False)
    (folder / "tool_here.py").write_text("")
    (folder / "data.csv").write_text("")
    assert cli_trace.program_files(["data.csv"], "tool_here") == [
        Path(folder / "tool_here.py"),
        Path("data.csv"),
    ]


def test_a_package_is_its_main_found_from_the_working_directory(folder):
    package = folder / "pkg_here"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("")
    assert cli_trace.module_file("pkg_here") == [str(package / "__main__.py")]
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    assert cli_trace.module_file("pkg_here.sub") == []  # no __main__: trace says so itself


def test_a_module_that_is_no_file_on_disk_has_no_file_to_protect(folder, monkeypatch):
    """A module inside a zip on the path is found, but is no file memprof could overwrite."""
    archive = folder / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_tool.py", "")
    monkeypatch.syspath_prepend(str(archive))
    assert cli_trace.module_file("zipped_tool") == []


# -- the advice's figures -----------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_a_sweep_without_pinned_copies_one_way_says_which(direction):
    sweep = load_fixture("sweep")
    sweep.measurements = [
        m
        for m in sweep.measurements
        if (m.group, m.operation, m.kind) != ("gpu", direction, "pinned")
    ]
    with pytest.raises(KeyError) as missing:
        cli_trace.pinned_bandwidth_of(sweep)
    assert missing.value.args == (f"no pinned {direction} copies in the sweep",)


def test_a_size_without_batched_copies_is_kept_without_them():
    """Batched copies are where they were measured; pinned, pageable and gathered are needed."""
    result = load_fixture("smallcopies")
    result.measurements = [m for m in result.measurements if (m.kind, m.bytes) != ("batched", 4096)]
    assert "batched" not in per_copy_walls(result)[4096]
    costs = cli_trace.small_copy_costs(result)["costs"]
    assert [cost["bytes"] for cost in costs] == [4096, 16384, 65536, 262144]
    assert costs[0]["batched_ms"] is None and costs[1]["batched_ms"] is not None


def test_smallcopies_without_gathered_copies_says_so():
    result = load_fixture("smallcopies")
    result.measurements = [m for m in result.measurements if m.kind != "gathered"]
    with pytest.raises(KeyError) as missing:
        cli_trace.small_copy_costs(result)
    assert missing.value.args == (
        "no size with pinned, pageable and gathered copies in the result",
    )


# -- the output options, passed on to what shows and saves the trace ----------------------------


@pytest.mark.usefixtures("fake_cupti")
def test_quiet_no_color_and_verbose_reach_what_shows_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    program = tmp_path / "program.py"
    program.write_text("pass\n")
    shown = invoke(str(program))
    assert "Profiling result:" in shown.stderr and "\x1b[" in shown.stderr
    plain = invoke("--no-color", str(program))
    assert "Profiling result:" in plain.stderr and "\x1b[" not in plain.stderr
    quiet = invoke("-q", str(program))
    assert (quiet.exit_code, quiet.stderr) == (0, "")
    both = invoke("-q", "--verbose", str(program))
    assert both.exit_code == 2 and "give one of them" in both.stderr


@pytest.mark.usefixtures("fake_cupti")
@pytest.mark.parametrize(("depth", "taken"), [(-1, False), (0, True), (64, True), (65, False)])
def test_the_stack_depth_is_taken_from_0_to_64_and_refused_beyond(tmp_path, depth, taken):
    assert MAX_STACK_DEPTH == 64
    program = tmp_path / "program.py"
    program.write_text("pass\n")
    ran = invoke("-q", "--stack-depth", str(depth), str(program))
    if taken:
        assert (ran.exit_code, ran.stderr) == (0, "")
    else:
        assert (ran.exit_code, ran.stderr) == (
            2,
            f"memprof: error: Invalid value for '--stack-depth': {depth} is outside the "
            "allowed range 0 to 64 (see 'memprof trace --help')\n",
        )


@pytest.mark.usefixtures("fake_cupti")
@pytest.mark.parametrize("spelt", ["-m", "--module"])
def test_a_module_is_named_by_either_spelling(folder, monkeypatch, spelt):
    monkeypatch.delitem(sys.modules, "ran_here", raising=False)
    (folder / "ran_here.py").write_text("open('ran.txt', 'w').close()\n")
    ran = invoke("-q", spelt, "ran_here")
    assert ran.exit_code == 0, ran.output
    assert (folder / "ran.txt").exists()


@pytest.mark.usefixtures("fake_cupti")
def test_every_gpu_is_refused_naming_trace_as_a_command_of_one_gpu(tmp_path):
    program = tmp_path / "program.py"
    program.write_text("pass\n")
    ran = invoke("--device", "all", str(program))
    assert ran.exit_code == 2
    assert ran.stderr.startswith(
        "memprof: error: Invalid value for '-d' / '--device': memprof trace measures one GPU: "
        "give its index (0, 1, ...); 'all' is taken by "
    )


@pytest.mark.usefixtures("fake_cupti")
def test_the_timeline_is_saved_where_timeline_names(tmp_path):
    program = tmp_path / "program.py"
    program.write_text("pass\n")
    saved = tmp_path / "run.trace.json"
    ran = invoke("-q", "--timeline", str(saved), str(program))
    assert (ran.exit_code, ran.stderr) == (0, "")
    assert json.loads(saved.read_text())["traceEvents"]


def test_traces_help_says_where_its_options_go_and_shows_its_own_examples():
    shown = " ".join(runner.invoke(app, ["trace", "--help"]).output.split())
    assert " ".join(cli_trace.DESCRIPTION.split()) in shown
    assert shown.endswith(
        "Examples: memprof trace train.py --epochs 1 "
        "memprof trace --json run.json --module mypackage.train"
    )
