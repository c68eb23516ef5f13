"""--json and --csv onto a stream: "-" is stdout, and /dev/stdout, /dev/fd/N, /proc/self/fd/N
(or a link to one) are written through the descriptor the process holds, never renamed over,
so `>>` appends and a pipe gets every byte; the human output leaves stdout to the data."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof import cli
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import load as load_result
from memprof.output import files

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"
ROOT = Path(__file__).resolve().parent.parent


def invoke(*arguments: object):
    return CliRunner().invoke(cli.app, [str(argument) for argument in arguments])


@pytest.fixture
def no_pycuda(monkeypatch):
    """As on a machine without PyCUDA: a GPU command that got past its checks exits 3."""
    monkeypatch.setitem(sys.modules, "pycuda", None)


@pytest.fixture
def no_rename(monkeypatch):
    """A stream must never be written by renaming a file over it."""

    def refuse(*arguments):
        raise AssertionError(f"renamed: {arguments}")

    monkeypatch.setattr(files.os, "replace", refuse)


def test_json_dash_is_the_json_on_stdout_alone_and_the_tables_on_stderr(tmp_path, no_rename):
    ran = invoke("report", PINNED, "--json", "-")
    assert ran.exit_code == 0, ran.output
    copy = tmp_path / "copy.json"
    copy.write_text(ran.stdout)
    assert load_result(copy) == load_result(PINNED)  # stdout holds the JSON and nothing else
    assert "Transfers of 4 MiB" in ran.stderr and "saved to stdout" in ran.stderr


def test_csv_dash_reads_back_as_a_table(no_rename):
    ran = invoke("report", PINNED, "--csv", "-")
    assert ran.exit_code == 0, ran.output
    rows = [row for row in csv.DictReader(io.StringIO(ran.stdout)) if row["group"] != "derived"]
    assert len(rows) == len(load_result(PINNED).measurements)
    assert "Transfers of 4 MiB" not in ran.stdout and "Transfers of 4 MiB" in ran.stderr


def test_without_a_stream_destination_the_tables_stay_on_stdout(tmp_path):
    ran = invoke("report", PINNED, "--json", tmp_path / "run.json")
    assert ran.exit_code == 0
    assert "Transfers of 4 MiB" in ran.stdout and "Transfers of 4 MiB" not in ran.stderr


def test_json_and_csv_both_on_stdout_is_one_error_line_before_any_work(no_pycuda):
    for command in (["report", PINNED], ["pinned"]):
        ran = invoke(*command, "--json", "-", "--csv", "-")
        assert ran.exit_code == ExitCode.USAGE, ran.output
        assert ran.stdout == ""
        assert ran.stderr.count("\n") == 1 and "same stream" in ran.stderr, ran.stderr


def test_json_dash_and_csv_dev_stdout_are_one_stream_too(no_pycuda):
    ran = invoke("pinned", "--json", "-", "--csv", "/dev/stdout")
    assert ran.exit_code == ExitCode.USAGE and "same stream" in ran.stderr


def test_a_descriptor_opened_to_append_keeps_what_the_file_held(tmp_path, no_rename):
    """`memprof ... --json /dev/stdout >> log.txt`: the lines log.txt held stay."""
    log = tmp_path / "log.txt"
    log.write_text("line one\nline two\n")
    inode = log.stat().st_ino
    descriptor = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        for name in (f"/dev/fd/{descriptor}", f"/proc/self/fd/{descriptor}"):
            ran = invoke("report", "-q", PINNED, "--json", name)
            assert ran.exit_code == 0, ran.output
    finally:
        os.close(descriptor)
    assert log.stat().st_ino == inode  # the same file, never replaced
    text = log.read_text()
    assert text.startswith("line one\nline two\n{")
    first, end = json.JSONDecoder().raw_decode(text, len("line one\nline two\n"))
    second, _ = json.JSONDecoder().raw_decode(text, end + 1)
    assert first == second and first["command"] == "pinned"  # both runs, one after the other


def test_a_regular_file_reached_through_proc_self_fd_is_written_at_its_offset(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("header written by the caller\n")
    descriptor = os.open(target, os.O_WRONLY)
    os.lseek(descriptor, 0, os.SEEK_END)
    other = tmp_path / "other-name.csv"
    other.symlink_to(f"/proc/self/fd/{descriptor}")  # a link to the descriptor's name
    try:
        ran = invoke("report", "-q", PINNED, "--csv", other)
        assert ran.exit_code == 0, ran.output
    finally:
        os.close(descriptor)
    text = target.read_text()
    assert text.startswith("header written by the caller\ncommand,")
    assert other.is_symlink()


def test_a_closed_descriptor_is_refused_before_any_gpu_work(no_pycuda):
    spare = os.open(os.devnull, os.O_RDONLY)
    os.close(spare)  # now surely closed
    ran = invoke("pinned", "--json", f"/dev/fd/{spare}")
    assert ran.exit_code == ExitCode.USAGE, ran.output  # not 3: the GPU was never asked for
    assert ran.stderr == f"memprof: error: --json /dev/fd/{spare}: descriptor {spare} is not open\n"


def test_a_descriptor_open_for_reading_only_is_refused(no_pycuda, tmp_path):
    (tmp_path / "in.txt").write_text("x")
    descriptor = os.open(tmp_path / "in.txt", os.O_RDONLY)
    try:
        ran = invoke("pinned", "--csv", f"/proc/self/fd/{descriptor}")
    finally:
        os.close(descriptor)
    assert ran.exit_code == ExitCode.USAGE and "open for reading only" in ran.stderr


def test_a_stream_that_is_an_input_of_the_command_is_refused(tmp_path):
    copy = tmp_path / "run.json"
    copy.write_text(PINNED.read_text())
    descriptor = os.open(copy, os.O_WRONLY | os.O_APPEND)
    try:
        ran = invoke("report", copy, "--json", f"/dev/fd/{descriptor}")
    finally:
        os.close(descriptor)
    assert ran.exit_code == ExitCode.USAGE and "would overwrite the input" in ran.stderr
    assert copy.read_text() == PINNED.read_text()


@pytest.mark.parametrize(
    ("name", "descriptor"),
    [
        ("-", 1),
        ("/dev/stdout", 1),
        ("/dev/stderr", 2),
        ("/dev/fd/7", 7),
        ("/dev/fd/../fd/7", 7),
        ("/proc/self/fd/12", 12),
        ("/proc/thread-self/fd/3", 3),
        ("/proc/{pid}/fd/4", 4),  # this process's own number, filled in by the test
        ("/dev/null", None),
        ("run.json", None),
        ("/dev/fd/\u0661", None),  # an Arabic-Indic one is a name, not descriptor 1
    ],
)
def test_which_names_are_descriptors(name, descriptor):
    # the pid is read when the test runs, so its id is the same in every collecting process
    name = name.replace("{pid}", str(os.getpid()))
    assert files.destination(name, "--json").descriptor == descriptor


def test_a_chain_of_links_to_dev_stdout_is_stdout_and_an_ordinary_link_is_not(tmp_path):
    (tmp_path / "out").symlink_to("/dev/stdout")
    (tmp_path / "first").symlink_to("out")  # relative, as ln -s makes them
    (tmp_path / "folder").symlink_to("/dev/fd")
    (tmp_path / "file.json").write_text("")
    (tmp_path / "plain").symlink_to("file.json")
    assert files.destination(str(tmp_path / "first"), "--json").is_stdout
    assert files.destination(str(tmp_path / "folder" / "2"), "--json").descriptor == 2
    assert files.destination(str(tmp_path / "plain"), "--json").descriptor is None


def test_another_process_descriptor_is_refused():
    with pytest.raises(InvalidArgument, match="another process"):
        files.destination("/proc/1/fd/1" if os.getpid() != 1 else "/proc/2/fd/1", "--json")


def test_the_readmes_pipes_work_in_a_real_shell(tmp_path):
    """The issue's own commands, in a process whose stdout the shell opened: `| wc -c` gets
    every byte and `>> log.txt` appends, each exit 0."""
    script = (
        'set -e; m() { python -m memprof "$@"; }; '
        f"m report {PINNED} -q --json /dev/stdout | wc -c > count.txt; "
        "printf 'kept\\n' > log.txt; "
        f"m report {PINNED} -q --json /dev/stdout >> log.txt"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:"}
    env["PATH"] += os.environ.get("PATH", "")
    done = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert invoke("report", "-q", PINNED, "--json", tmp_path / "file.json").exit_code == 0
    count = int((tmp_path / "count.txt").read_text())
    assert count == (tmp_path / "file.json").stat().st_size  # every byte of the file
    log = (tmp_path / "log.txt").read_text()
    assert log.startswith("kept\n{") and json.loads(log[5:])["command"] == "pinned"
    assert len(log) == 5 + count


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_a_non_blocking_stdout_gets_every_byte_however_slowly_it_is_read(tmp_path, name):
    """A CI runner may leave its pipe non-blocking: a buffered write there kept the first
    64 KiB of 297 KB and still said 'saved'. Every byte arrives, whoever reads slowly."""
    import fcntl
    import threading
    import time

    sweep = ROOT / "tests" / "fixtures" / "h200_sweep.json"
    assert invoke("report", "-q", sweep, "--json", tmp_path / "file.json").exit_code == 0
    expected = (tmp_path / "file.json").read_bytes()
    assert len(expected) > 4 * 65536  # more than a pipe holds
    reader, writer = os.pipe()
    flags = fcntl.fcntl(writer, fcntl.F_GETFL)
    fcntl.fcntl(writer, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    received = bytearray()

    def read_slowly() -> None:
        time.sleep(0.2)  # the writer fills the pipe and finds it full first
        while chunk := os.read(reader, 65536):
            received.extend(chunk)

    thread = threading.Thread(target=read_slowly)
    thread.start()
    code = (
        "import os, sys; sys.argv = ['memprof', 'report', '-q', sys.argv[1], '--json', "
        "sys.argv[2]]; from memprof.__main__ import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(sweep), name],
        stdout=writer,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    os.close(writer)
    thread.join()
    os.close(reader)
    assert done.returncode == 0, done.stderr.decode()
    assert bytes(received) == expected
