"""Saved results are untrusted input: every hostile file is refused in one line or shown.

The sweep: every field of every recorded fixture replaced by a value of the wrong type, out
of range, contradicting the file, huge, or full of control bytes and markup (tests/hostile.py
makes them). `memprof report` of each ends with exit 0 (the value was harmless: a name, a
note) or exit 2 with one `memprof: error:` line naming the file and nothing on stdout; never
70, never a traceback, and never by the registry's last resort (a summary that failed on a
file no check refused). Then the cases issue 18 names, each refused by its own check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from tests.hostile import CONTROL, Hostile, all_cases

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent
CASES = list(all_cases())
runner = CliRunner()


def report(path: Path, *options: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["report", str(path), *options])
    return result.exit_code, result.stdout, result.stderr


def problems_of(case: Hostile, code: int, stdout: str, stderr: str, path: Path) -> list[str]:
    """What is wrong with how memprof ended on a hostile file (nothing, if all is well)."""
    found = []
    lines = stderr.splitlines()
    # exit 1, documented: the file records a verification that failed, or a check's FAIL line
    failed_check = (
        code == 1
        and len(lines) == 1
        and (
            lines[0].endswith("results did not verify")
            or lines[0].startswith("memprof: error: check failed:")
        )
    )
    if code not in (0, 2) and not failed_check:
        found.append(f"exit {code}")
    if code == 2:
        if stdout:
            found.append("output before the refusal")
        if len(lines) != 1 or not lines[0].startswith("memprof: error: "):
            found.append(f"{len(lines)} lines on stderr")
        elif str(path) not in lines[0]:
            found.append("the refusal does not name the file")
        elif "no check refused" in lines[0]:
            found.append("refused by the summary's last resort, not by a check")
    if code == 0 and stderr:
        found.append("stderr after a shown file")
    if "Traceback" in stderr:
        found.append("a traceback")
    return found


def test_there_are_enough_hostile_files_of_every_kind():
    assert len(CASES) >= 150
    assert len({case.name.rpartition(": ")[2] for case in CASES}) >= 30  # mutators and files
    assert len({case.name.partition(":")[0] for case in CASES}) >= 20  # fixtures, whole files


@pytest.fixture(scope="module")
def sweep_folder(tmp_path_factory) -> Path:
    """One folder for the sweep's cases, each writing its file over the last one's: a
    tmp_path each cost pytest a listing of every folder made before it (1,250 cases)."""
    return tmp_path_factory.mktemp("hostile")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_hostile_file_is_refused_in_one_line_or_shown(case, sweep_folder):
    """Shown means its tables and its CSV (every measurement's figures) both made."""
    path = case.write(sweep_folder)
    csv = sweep_folder / "figures.csv"
    csv.unlink(missing_ok=True)  # the last case's: this one's must be made by this report
    code, stdout, stderr = report(path, "--csv", str(csv))
    saved = f"saved {csv}"
    if code == 0:
        assert csv.is_file() and stderr.splitlines()[-1:] == [saved], stderr[-600:]
        stderr = stderr.removesuffix(saved + "\n").removesuffix(saved)
    assert problems_of(case, code, stdout, stderr, path) == [], stderr[-600:]


def test_hostile_files_end_the_same_in_a_process_of_their_own(tmp_path):
    """A sample of the sweep through `python -m memprof report`: the exit code the shell
    sees, and no traceback, whatever the interpreter prints at exit."""
    sample = CASES[:: max(1, len(CASES) // 12)]
    for case in sample:
        path = case.write(tmp_path)
        ended = subprocess.run(
            [sys.executable, "-m", "memprof", "report", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "100"},
        )
        assert (
            problems_of(
                case, ended.returncode, ended.stdout if ended.returncode else "", ended.stderr, path
            )
            == []
        ), case.name


# -- the cases issue 18 names, each refused by the check that names its field ------------------


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def refusal(document: dict | str, tmp_path: Path) -> str:
    path = tmp_path / "run.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    code, stdout, stderr = report(path)
    assert (code, stdout, stderr.count("\n")) == (2, "", 1), stderr
    assert stderr.startswith(f"memprof: error: {path}")
    return stderr


def pinned(change) -> dict:
    document = fixture("h200_pinned_p20.json")
    change(document)
    return document


def test_extra_bytes_that_disagree_with_the_measurements_are_refused(tmp_path):
    """It printed "Transfers of 4 GiB" at 54,687 GB/s (a file of before memprof derived the
    bytes from the parameters, which held them in extra)."""
    document = fixture("legacy_v2_pinned_p20.json")
    document["extra"].update(bytes_per_array=4 << 30)
    assert (
        "extra.bytes_per_array is 4294967296, but the parameters and measurements make 4194304"
        in (refusal(document, tmp_path))
    )
    document["parameters"]["power"] = 30
    assert "measurements[0].bytes is 4194304, but a host 'alloc' of this run moves" in (
        refusal(document, tmp_path)
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("power", 22, "measurements[0].bytes is 4194304, but a host 'alloc' of this run moves"),
        ("power", 99, "parameters.power is 99: expected an integer 0 to 30"),
        ("repeat", -5, "parameters.repeat is -5: expected an integer 1 to 10000"),
        ("host_buffer", "gpu", "parameters.host_buffer is the string 'gpu': expected one of"),
    ],
)
def test_parameters_outside_their_rules_or_the_bytes_are_refused(tmp_path, field, value, message):
    assert message in refusal(pinned(lambda d: d["parameters"].update({field: value})), tmp_path)


def test_free_memory_larger_than_total_is_refused(tmp_path):
    document = fixture("h200_info.json")
    document["device"]["memory_free_bytes"] = 2 * document["device"]["memory_total_bytes"]
    assert "device.memory_free_bytes is 300219760640, more than memory_total_bytes" in (
        refusal(document, tmp_path)
    )


@pytest.mark.parametrize("field", ["calls", "blocking_calls", "small_calls"])
def test_negative_call_counts_are_refused(tmp_path, field):
    document = fixture("h200_trace_pycuda.json")
    document["extra"]["copies"][0][field] = -3
    assert f"extra.copies[0].{field} is -3: expected an integer 0 to 2^53" in (
        refusal(document, tmp_path)
    )


def test_call_counts_that_disagree_with_the_copies_are_refused(tmp_path):
    document = fixture("h200_trace_pycuda.json")
    document["extra"]["copies"][0]["calls"] += 1
    assert "extra.copies[0].calls is 65, but its copies make 64" in refusal(document, tmp_path)


def test_a_copy_direction_sideways_is_refused(tmp_path):
    document = fixture("h200_trace_pycuda.json")
    document["extra"]["copies"][0]["direction"] = "sideways"
    assert "extra.copies[0].direction is the string 'sideways': expected one of HtoD" in (
        refusal(document, tmp_path)
    )


def test_a_unified_memory_counter_with_count_0_but_a_total_is_refused(tmp_path):
    document = fixture("h200_managed.json")
    counter = document["timing"]["unified_memory"]["BYTES_TRANSFER_HTOD"]
    counter.update(count=0, total=4096, min=0, max=0, time_ms=0.0)
    assert "timing.unified_memory.BYTES_TRANSFER_HTOD.total is 4096, but count is 0" in (
        refusal(document, tmp_path)
    )


def test_a_managed_run_missing_one_unified_memory_key_is_refused_before_anything_prints(tmp_path):
    """It printed 28 lines, then exited 70."""
    document = fixture("h200_managed.json")
    del document["timing"]["unified_memory"]["BYTES_TRANSFER_HTOD"]["min"]
    assert "timing.unified_memory.BYTES_TRANSFER_HTOD.min is missing" in refusal(document, tmp_path)


def test_a_streams_timeline_that_ends_before_it_starts_is_refused(tmp_path):
    document = fixture("h200_streams.json")
    row = document["extra"]["timelines"]["overlapped"][2]
    row[3], row[4] = row[4], row[3]
    assert "extra.timelines.overlapped[2] ends at" in refusal(document, tmp_path)


def test_zero_threads_per_block_is_refused(tmp_path):
    document = fixture("legacy_v2_device.json")  # today's files derive the launch
    document["extra"]["launch"]["block_size"] = 0
    assert "extra.launch.block_size is 0, but the parameters and measurements make 256" in (
        refusal(document, tmp_path)
    )


def test_a_peer_run_with_no_devices_is_refused(tmp_path):
    """It still said "peer access possible between every pair: yes"."""
    document = fixture("h200x2_peer.json")
    document["extra"].update(devices=[], peer_access=[])
    assert "extra.devices names 0 GPUs, but a peer run uses at least two" in (
        refusal(document, tmp_path)
    )


def test_peer_figures_where_peer_access_was_impossible_are_refused(tmp_path):
    document = fixture("h200x2_peer.json")
    document["extra"]["peer_access"] = [[True, False], [True, True]]
    assert "but extra.peer_access says GPU 0 cannot access GPU 1" in refusal(document, tmp_path)


def test_samples_of_1e308_ms_are_refused(tmp_path):
    document = pinned(lambda d: d["measurements"][9].update(samples_ms=[1e308] * 10))
    assert "measurements[9].samples_ms[0] is 1e+308: expected a number 0 to 604800000 ms" in (
        refusal(document, tmp_path)
    )


def test_copies_that_took_no_time_are_refused(tmp_path):
    """Summaries divide by a copy's time: 4 MiB in 0 ms is no copy (it was a ZeroDivisionError)."""

    def zero(document: dict) -> None:
        for m in document["measurements"]:
            if (m["group"], m["operation"], m["kind"]) == ("gpu", "h2d", "pinned"):
                m["throughput_ms"] = [0.0] * len(m["throughput_ms"])

    assert "throughput_ms has a median of 0 ms, but moving 4194304 bytes takes time" in (
        refusal(pinned(zero), tmp_path)
    )


def test_an_integer_of_5000_digits_is_refused(tmp_path):
    text = (FIXTURES / "h200_pinned_p20.json").read_text()
    text = text.replace('"repeat": 10', '"repeat": 1' + "0" * 5000, 1)
    assert "is not a memprof result: it holds an integer beyond 64 bits" in refusal(text, tmp_path)


def test_an_integer_too_large_for_any_count_is_refused_in_a_short_line(tmp_path):
    document = pinned(lambda d: d["measurements"][0].update(bytes=10**4000))
    message = refusal(document, tmp_path)
    assert "measurements[0].bytes is an integer of about 4001 digits" in message
    assert len(message) < 300


def test_control_bytes_in_a_refused_value_are_not_printed_raw(tmp_path):
    message = refusal(pinned(lambda d: d["parameters"].update(host_buffer=CONTROL)), tmp_path)
    assert "\x1b" not in message and "\x07" not in message


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_is_refused_without_reading_it(device):
    code, stdout, stderr = report(Path(device))
    assert (code, stdout) == (2, "")
    assert (
        stderr
        == f"memprof: error: cannot read {device}: it is a character device, not a result file\n"
    )


def test_a_fifo_without_a_writer_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, _, stderr = report(fifo)
    assert (code, stderr) == (2, f"memprof: error: {fifo} is not a memprof result: it is empty\n")


def test_a_pipe_is_read_like_a_file():
    text = (FIXTURES / "h200_info.json").read_bytes()
    ended = subprocess.run(
        [sys.executable, "-m", "memprof", "report", "/dev/stdin"],
        input=text,
        capture_output=True,
        cwd=ROOT,
    )
    assert ended.returncode == 0 and b"memprof info on NVIDIA H200" in ended.stdout


def test_a_directory_is_refused(tmp_path):
    assert report(tmp_path) == (2, "", f"memprof: error: cannot read {tmp_path}: Is a directory\n")


def test_a_file_larger_than_any_result_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    import memprof.model.results

    monkeypatch.setattr(memprof.model.results, "MAX_RESULT_BYTES", 1000)
    path = tmp_path / "big.json"
    path.write_text(" " * 1001)
    assert report(path)[2] == f"memprof: error: {path} is not a memprof result: larger than 0 MiB\n"


# -- output that cannot be written: exit 5, one line, the files saved -------------------------


def run_memprof(arguments: list[str], stdout) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memprof", *arguments],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.parametrize("arguments", [["report"], ["diff"], ["--help"], ["--version"]])
def test_stdout_on_a_full_disk_is_exit_5_in_one_line(tmp_path, arguments):
    if arguments == ["report"]:
        arguments = ["report", str(FIXTURES / "h200_info.json"), "--json", str(tmp_path / "a.json")]
    elif arguments == ["diff"]:
        arguments = [
            "diff",
            str(FIXTURES / "h200_pinned_p20.json"),
            str(FIXTURES / "h200_pinned_p20_events.json"),
        ]
    with open("/dev/full", "w") as full:
        ended = run_memprof(arguments, full)
    lines = [line for line in ended.stderr.splitlines() if not line.startswith("saved ")]
    assert ended.returncode == 5, ended.stderr
    assert lines == ["memprof: error: stdout: " + lines[0].split("stdout: ", 1)[1]]
    assert "No space left on device" in lines[0]
    if arguments[0] == "report":
        assert json.loads((tmp_path / "a.json").read_text())["command"] == "info"


def test_a_closed_stdout_is_exit_5_in_one_line_with_the_files_saved(tmp_path):
    saved = tmp_path / "a.json"
    ended = subprocess.run(
        [
            sys.executable,
            "-m",
            "memprof",
            "report",
            str(FIXTURES / "h200_info.json"),
            "--json",
            str(saved),
        ],
        stdin=subprocess.DEVNULL,
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        pass_fds=(),
        preexec_fn=lambda: os.close(1),
    )
    assert ended.returncode == 5
    assert ended.stderr.splitlines() == [
        f"saved {saved}",
        "memprof: error: stdout: not shown: it is closed",
    ]
    assert saved.exists()


# -- the registry's last resort: never hides a bug ----------------------------------------------


def test_a_summary_that_fails_on_a_checked_file_says_where_and_that_it_is_memprofs(monkeypatch):
    from memprof.experiments import pinned

    def broken(result, *rest):
        return result.parameters.power / 0  # a bug planted in what the summary calls

    monkeypatch.setattr(pinned, "figure", broken)
    path = FIXTURES / "h200_pinned_p20.json"
    code, stdout, stderr = report(path)
    assert (code, stdout) == (2, "")
    assert "which no check refused (ZeroDivisionError: division by zero, in" in stderr
    assert "in pinned.py:" in stderr and stderr.endswith("please report it\n")
    monkeypatch.setenv("MEMPROF_DEBUG", "1")  # a developer sees the traceback instead
    result = runner.invoke(app, ["report", str(path)])
    assert isinstance(result.exception, ZeroDivisionError)
