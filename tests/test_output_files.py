"""--json and --csv never cost a run: checked before any work, written whole or not at all."""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof import cli
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import load as load_result
from memprof.output import files
from tests.conftest import failing_check

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"
runner = CliRunner()


def invoke(*arguments: object):
    return runner.invoke(cli.app, [str(argument) for argument in arguments])


def one_error_line(result) -> str:
    errors = [line for line in result.output.splitlines() if line.startswith("memprof: error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.fixture
def no_pycuda(monkeypatch):
    """As on a machine without PyCUDA: a GPU command that got past its checks exits 3."""
    monkeypatch.setitem(sys.modules, "pycuda", None)


@pytest.mark.parametrize("option", ["--json", "--csv"])
@pytest.mark.parametrize(
    ("make_destination", "message"),
    [
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: tmp / "no" / "such" / "x.out", "such does not exist"),
        (lambda tmp: tmp / ("n" * 300 + ".out"), "File name too long"),
        (lambda tmp: (tmp / "file").touch() or tmp / "file" / "x.out", "Not a directory"),
    ],
)
def test_an_unusable_destination_is_refused_before_any_gpu_work(
    tmp_path, no_pycuda, option, make_destination, message
):
    destination = make_destination(tmp_path)
    result = invoke("pinned", option, destination)
    assert result.exit_code == ExitCode.USAGE  # not 3: the GPU was never asked for
    assert message in one_error_line(result)
    assert f"{option} {destination}" in result.output


def test_a_directory_that_refuses_new_files_is_refused(tmp_path, no_pycuda, monkeypatch):
    def read_only(**kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(files.tempfile, "mkstemp", read_only)
    result = invoke("pinned", "--json", tmp_path / "x.json")
    assert result.exit_code == ExitCode.USAGE
    assert f"cannot write in {tmp_path}: Read-only file system" in one_error_line(result)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused(tmp_path, no_pycuda):
    tmp_path.chmod(0o555)
    try:
        result = invoke("pinned", "--csv", tmp_path / "x.csv")
    finally:
        tmp_path.chmod(0o755)
    assert result.exit_code == ExitCode.USAGE
    assert "Permission denied" in one_error_line(result)


def test_a_read_only_file_is_not_replaced(tmp_path, no_pycuda):
    target = tmp_path / "kept.json"
    target.write_text("mine")
    target.chmod(0o444)
    result = invoke("report", PINNED, "--json", target)
    assert result.exit_code == ExitCode.USAGE
    assert "the file is read-only" in one_error_line(result)
    assert target.read_text() == "mine"


def test_a_usable_destination_reaches_the_gpu_check_and_leaves_nothing_behind(tmp_path, no_pycuda):
    result = invoke("pinned", "--json", tmp_path / "x.json", "--csv", tmp_path / "x.csv")
    assert result.exit_code == ExitCode.ENVIRONMENT
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--json", "--csv"])
def test_report_never_writes_over_its_input(tmp_path, monkeypatch, option):
    copy = tmp_path / "run.json"
    copy.write_bytes(PINNED.read_bytes())
    (tmp_path / "link.json").symlink_to(copy)
    monkeypatch.chdir(tmp_path)
    for spelling in ("run.json", f"./../{tmp_path.name}/run.json", "link.json"):
        result = invoke("report", "run.json", option, spelling)
        assert result.exit_code == ExitCode.USAGE
        assert "would overwrite the input run.json" in one_error_line(result)
    assert copy.read_bytes() == PINNED.read_bytes()


def test_diff_never_writes_over_an_input(tmp_path):
    copy = tmp_path / "b.json"
    copy.write_bytes(PINNED.read_bytes())
    result = invoke("diff", PINNED, copy, "--json", copy)
    assert result.exit_code == ExitCode.USAGE
    assert "would overwrite the input" in one_error_line(result)
    assert copy.read_bytes() == PINNED.read_bytes()


def test_json_and_csv_cannot_share_a_file(tmp_path):
    same = tmp_path / "out"
    result = invoke("report", PINNED, "--json", same, "--csv", same)
    assert result.exit_code == ExitCode.USAGE
    assert "--csv" in one_error_line(result) and "--json file" in result.output
    assert not same.exists()


def test_report_json_saves_the_one_input_again_validated(tmp_path):
    target = tmp_path / "again.json"
    result = invoke("report", PINNED, "--json", target, "--quiet")
    assert result.exit_code == 0, result.output
    assert result.output == ""  # quiet: not even "saved"
    assert load_result(target) == load_result(PINNED)


def test_report_json_of_several_inputs_is_refused(tmp_path):
    result = invoke("report", PINNED, FIXTURES / "h200_info.json", "--json", tmp_path / "x.json")
    assert result.exit_code == ExitCode.USAGE
    assert "--json saves one result" in one_error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_report_quiet_prints_nothing_but_still_checks(tmp_path):
    assert invoke("report", PINNED, "-q").output == ""
    broken = tmp_path / "failed.json"
    broken.write_text(failing_check(PINNED.read_text()))
    result = invoke("report", broken, "--quiet")
    assert result.exit_code == ExitCode.CHECK_FAILED
    assert result.output == "memprof: error: 1 of 2 results did not verify\n"


def test_diff_json_saves_the_comparison_as_shown(tmp_path):
    target = tmp_path / "diff.json"
    result = invoke("diff", PINNED, PINNED, "--json", target, "--verbose")
    assert result.exit_code == 0, result.output
    saved = json.loads(target.read_text())
    assert saved["format"] == "memprof diff"
    assert (saved["a"], saved["b"]) == (str(PINNED), str(PINNED))
    table = saved["tables"][0]
    # the medians range from 843ns to 1.8ms: each column in one unit, named in its header
    assert table["headers"] == [
        "Measurement", "Bytes", "A median (us)", "B median (us)", "A GB/s", "B GB/s",
        "B of ceiling", "B / A", "Change",
    ]  # fmt: skip
    assert all(re.fullmatch(r"[\d.,]+", row[2]) for row in table["rows"])
    assert len(table["rows"]) == len(load_result(PINNED).measurements)
    assert {row[7] for row in table["rows"]} == {"1.000x"}
    assert saved["conclusions"][0] in " ".join(result.output.split())


def test_a_failed_save_still_shows_the_run_and_exits_5(tmp_path):
    kept = tmp_path / "kept.json"
    result = invoke("report", PINNED, "--csv", "/dev/full", "--json", kept)
    assert result.exit_code == ExitCode.SAVE_FAILED == 5
    assert "Profiling result:" in result.output  # the run was shown
    assert result.output.index("Profiling result:") < result.output.index("memprof: error:")
    line = one_error_line(result)
    assert line == "memprof: error: --csv /dev/full: not saved: No space left on device"
    assert load_result(kept) == load_result(PINNED)  # the other file was saved


def test_a_failed_junit_save_is_one_line_and_exit_5_after_the_rest_is_saved(tmp_path):
    kept = tmp_path / "kept.json"
    result = invoke("report", PINNED, "--junit", "/dev/full", "--json", kept)
    assert result.exit_code == ExitCode.SAVE_FAILED == 5
    line = one_error_line(result)
    assert line == "memprof: error: --junit /dev/full: not saved: No space left on device"
    assert load_result(kept) == load_result(PINNED)


def test_a_failed_render_still_saves(tmp_path, monkeypatch):
    import memprof.output.render

    def broken(result, summary, console, **options):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(memprof.output.render, "render_result", broken)
    target = tmp_path / "run.csv"
    result = invoke("report", PINNED, "--csv", target)
    assert result.exit_code == ExitCode.INTERNAL
    assert "ValueError: cannot draw this" in one_error_line(result)
    rows = [row for row in csv.DictReader(target.open()) if row["group"] != "derived"]
    assert len(rows) == len(load_result(PINNED).measurements)


def test_a_crash_while_writing_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "run.csv"
    target.write_text("the previous run\n")

    def disk_full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    result = invoke("report", PINNED, "--csv", target)
    assert result.exit_code == ExitCode.SAVE_FAILED
    assert target.read_text() == "the previous run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.csv"]  # no temporary file left


def test_an_atomic_write_replaces_the_whole_file_and_keeps_its_mode(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("x" * 10_000)
    target.chmod(0o640)
    files.write_text_atomic(target, "short\n")
    assert target.read_text() == "short\n"
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_file_of_one_name_is_replaced_whole_so_a_reader_keeps_the_old_one(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("old\n")
    with target.open() as reader:
        inode = target.stat().st_ino
        files.write_text_atomic(target, "new\n")
        assert reader.read() == "old\n"  # the old file, whole, for whoever holds it
    assert target.read_text() == "new\n" and target.stat().st_ino != inode


def test_a_new_file_gets_the_usual_permissions(tmp_path):
    old_umask = os.umask(0o022)
    try:
        files.write_text_atomic(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(old_umask)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644


def test_devices_and_pipes_are_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    files.check_destination(fifo, "--json")  # not refused, not replaced by a file
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        files.write_text_atomic(fifo, "through the pipe\n")
        assert os.read(reader, 100) == b"through the pipe\n"
    finally:
        os.close(reader)
    assert fifo.is_fifo()


def test_check_distinct_names_the_clash():
    with pytest.raises(InvalidArgument, match=r"--json a.json would overwrite the input a.json"):
        files.check_distinct({"--json": files.Destination("a.json")}, [Path("a.json")])
    files.check_distinct({"--json": files.Destination("a.json"), "--csv": None}, [Path("b.json")])
