"""`memprof trace` runs a program as `python` would, saves as every command saves, and its
advice says what the counters show, in words that agree with their numbers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import ExitCode
from memprof.experiments import load as load_result
from memprof.experiments import trace as trace_summary
from memprof.output import files
from memprof.trace import collect as tracing
from memprof.trace.collect import CopyGroup
from tests.test_trace import BANDWIDTH, MiB, counters
from tests.test_trace_cli import FakeCollector, script

runner = CliRunner()


@pytest.fixture
def fake_cupti(monkeypatch):
    """CUPTI replaced by test_trace_cli's fake collector."""
    FakeCollector.started = 0
    monkeypatch.setattr(tracing, "CuptiCollector", FakeCollector)
    return FakeCollector


def trace(*arguments: object):
    return runner.invoke(app, ["trace", "--bandwidth", "none", *map(str, arguments)])


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    """The working directory a user runs `memprof trace -m` from, holding their modules."""
    monkeypatch.chdir(tmp_path)
    modules = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - modules:  # the user's modules, imported by the run
        del sys.modules[name]


def test_a_module_in_the_working_directory_is_found_as_python_m_finds_it(in_folder, fake_cupti):
    script(in_folder, "import sys\nprint('ran with', sys.argv[1:])\n", "mymod_for_trace.py")
    assert str(in_folder) not in sys.path and "" not in sys.path[:1]
    ran = trace("-m", "mymod_for_trace", "x")
    assert ran.exit_code == 0, ran.output
    assert ran.stdout == "ran with ['x']\n"
    assert fake_cupti.started == 1


def test_a_package_whose_init_raises_fails_as_the_programs_own_exception(in_folder, fake_cupti):
    package = in_folder / "brokenpkg_for_trace"
    package.mkdir()
    (package / "__init__.py").write_text("print('init ran')\nraise RuntimeError('boom')\n")
    (package / "tool.py").write_text("print('never')\n")
    ran = trace("-m", "brokenpkg_for_trace.tool")
    assert ran.exit_code == 1  # as `python -m brokenpkg_for_trace.tool`, not 70
    assert ran.stdout == "init ran\n"  # once: finding the module ran none of it
    assert "RuntimeError: boom" in ran.stderr and "Traceback" in ran.stderr
    assert "internal error" not in ran.output
    assert "raised RuntimeError: boom (exit code 1)" in " ".join(ran.stderr.split())


def test_a_missing_top_level_module_is_one_line_before_cupti(in_folder, fake_cupti):
    ran = trace("-m", "no_such_module_for_trace.sub")
    assert ran.exit_code == ExitCode.USAGE
    assert ran.output == (
        "memprof: error: cannot run -m no_such_module_for_trace.sub: "
        "no module named no_such_module_for_trace\n"
    )
    assert fake_cupti.started == 0


def test_a_missing_submodule_fails_as_python_m_does(in_folder, fake_cupti):
    (in_folder / "pkg_for_trace").mkdir()
    (in_folder / "pkg_for_trace" / "__init__.py").write_text("")
    ran = trace("-m", "pkg_for_trace.missing")
    assert ran.exit_code == 1
    assert "No module named pkg_for_trace.missing" in ran.stderr


def test_trace_json_is_written_by_temporary_file_and_rename(tmp_path, fake_cupti, monkeypatch):
    saved = tmp_path / "trace.json"
    saved.write_text("the previous trace\n")
    inode = saved.stat().st_ino
    replaced = []
    real_replace = files.os.replace
    monkeypatch.setattr(files.os, "replace", lambda a, b: replaced.append(b) or real_replace(a, b))
    ran = trace("--json", saved, str(script(tmp_path, "pass\n")))
    assert ran.exit_code == 0, ran.output
    assert replaced == [saved] and saved.stat().st_ino != inode
    assert load_result(saved).command == "trace"


def test_trace_shows_the_profile_before_saving_and_a_failed_save_is_exit_5(tmp_path, fake_cupti):
    ran = trace("--json", "/dev/full", str(script(tmp_path, "print('hi')\n")))
    assert ran.exit_code == ExitCode.SAVE_FAILED
    assert ran.stdout == "hi\n"  # stdout stays the program's
    profile, error = ran.stderr.index("Profiling result:"), ran.stderr.index("memprof: error:")
    assert profile < error
    assert "--json /dev/full: not saved: No space left on device" in ran.stderr


def test_trace_refuses_a_destination_ending_in_a_slash_before_running(tmp_path, fake_cupti):
    ran = trace("--csv", f"{tmp_path}/out/", str(script(tmp_path, "print('ran')\n")))
    assert ran.exit_code == ExitCode.USAGE
    assert "names a directory" in ran.output and "ran" not in ran.stdout
    assert fake_cupti.started == 0


def test_trace_saves_through_a_symlink(tmp_path, fake_cupti):
    target = tmp_path / "kept.csv"
    (tmp_path / "link.csv").symlink_to(target)
    ran = trace("--csv", tmp_path / "link.csv", "-q", str(script(tmp_path, "pass\n")))
    assert ran.exit_code == 0, ran.output
    assert (tmp_path / "link.csv").is_symlink() and target.read_text().startswith("command,")


def test_trace_options_and_help_are_unchanged():
    ran = runner.invoke(app, ["trace", "--help"], env={"COLUMNS": "120"})
    text = " ".join(ran.output.replace("│", " ").split())
    for words in [
        "Usage: memprof trace [OPTIONS] [target]...",
        "memprof's options go before SCRIPT; the program's output and exit code pass through.",
        "SCRIPT.py and its arguments (or the module's).",
        "-m, --module",
        "Run a module, as python -m does.",
        "This GPU's pinned bandwidth and small-copy costs for the advice: cache (measured "
        "once, then cached per GPU and driver), measure (now), none. [default: cache]",
        "-d, --device",
        "--json",
        "--no-color",
    ]:
        assert words in text, words
    assert "--timing" not in text and "--no-affinity" not in text
    bad = runner.invoke(app, ["trace", "--bandwidth", "sometimes", "x.py"])
    assert bad.exit_code == ExitCode.USAGE
    assert "--bandwidth 'sometimes': choose from cache, measure, none" in bad.output
    assert runner.invoke(app, ["trace", "--device", "64", "x.py"]).exit_code == ExitCode.USAGE


# -- the advice's words ----------------------------------------------------------------------


def test_one_copy_is_one_copy():
    pageable = CopyGroup("HtoD", "pageable", "device", 1, 4 * MiB, 1.0, 1.1, 1)
    small = CopyGroup("DtoH", "device", "pinned", 1, 4096, 0.01, 0.02, 0, 1, 4096, 0.01)
    lines = trace_summary.advice([pageable, small], BANDWIDTH, None)
    text = " ".join(lines)
    assert "1 pageable HtoD copy moved 4 MiB" in text
    assert "1 copy under 64 KiB" in text
    assert "1 copy blocked the host until it finished: 1 made with a synchronous call" in text
    for wrong in ("1 copies", "HtoD copies", "1 asynchronous calls", "synchronous calls"):
        assert wrong not in text, wrong
    staged = CopyGroup("HtoD", "pageable", "device", 1, 4 * MiB, 1.0, 1.1, 0)
    (line,) = trace_summary.blocking_advice([staged])
    assert line.startswith("1 copy blocked the host until it finished: 1 asynchronous call ")


def test_two_copies_are_copies():
    groups = [CopyGroup("HtoD", "pageable", "device", 2, 8 * MiB, 2.0, 2.2, 2)]
    text = " ".join(trace_summary.advice(groups, BANDWIDTH, None))
    assert "2 pageable HtoD copies moved 8 MiB" in text
    assert "2 copies blocked the host until they finished: 2 made with synchronous calls" in text


def test_managed_memory_figures_are_lower_bounds_and_no_advice_rests_on_a_zero():
    """CUPTI missed the migration a faulting kernel causes (the H200's managed_touch: 18 ms on
    64 MiB, 0 B to the GPU): each figure is 'at least', and a zero changes no word."""
    assert trace_summary.unified_memory_advice(counters()) == []  # nothing recorded at all
    (touched,) = trace_summary.unified_memory_advice(counters(GPU_PAGE_FAULT=(28, 300)))
    assert (
        "migrated at least 0 B to the GPU and at least 0 B back, on at least 28 GPU "
        "page-fault groups and 0 CPU page faults (lower bounds: CUPTI's counters can miss "
        "the migration a faulting kernel causes, docs/trace.md)" in touched
    )
    assert "first touch" not in touched and "nothing" not in touched
    moved = counters(BYTES_TRANSFER_HTOD=(2, 4 * MiB), GPU_PAGE_FAULT=(28, 300))
    (line,) = trace_summary.unified_memory_advice(moved)
    assert "migrated at least 4 MiB to the GPU and at least 0 B back" in line

    def words(sentence: str) -> str:
        return re.sub(r"\d+(\.\d+)? (B|MiB)", "N", sentence)

    assert words(line) == words(touched)  # the advice is the same with or without the zero
    (one,) = trace_summary.unified_memory_advice(counters(GPU_PAGE_FAULT=(1, 1)))
    assert "on at least 1 GPU page-fault group and 0 CPU page faults" in one


def test_the_cli_module_stays_within_350_lines():
    source = Path(__file__).parent.parent / "memprof" / "cli.py"
    assert len(source.read_text().splitlines()) <= 350
