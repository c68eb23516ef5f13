"""The command line without a GPU: help, validation, error lines and exit codes, report."""

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof import __version__
from memprof.cli import app
from memprof.core import session
from memprof.core.session import install_hint
from memprof.errors import InvalidArgument
from memprof.experiments import load as load_result
from memprof.experiments.zerocopy import SEED_SWEEP_POWERS
from memprof.model.params import Sizes
from tests.conftest import failing_check

FIXTURES = Path(__file__).parent / "fixtures"
runner = CliRunner()


def invoke(*arguments: str):
    return runner.invoke(app, list(arguments))


def test_version_and_help_need_no_gpu():
    assert invoke("--version").output.strip() == f"memprof {__version__}"
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("info", "pinned", "zerocopy", "report"):
        assert command in result.output
    assert "GB/s = 10^9 bytes/s" in result.output


@pytest.mark.parametrize("command", ["pinned", "zerocopy"])
def test_help_explains_units(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "2^N float32 elements" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["pinned", "--power", "31"], "31 is outside the allowed range 0 to 30"),
        (["pinned", "--power", "-1"], "-1 is outside the allowed range 0 to 30"),
        (["pinned", "--repeat", "0"], "0 is outside the allowed range 1 to 10000"),
        (["pinned", "--warmup", "-2"], "-2 is outside the allowed range 0 to 1000"),
        (["zerocopy", "--from", "40", "--to", "41"], "40 is outside the allowed range 0 to 30"),
        (["zerocopy", "--step", "0"], "0 is outside the allowed range 1 to 30"),
        (["info", "--device", "-1"], "-1 is outside the allowed range 0 to 63"),
        (["pinned", "--power", "many"], "Invalid value for '--power'"),
    ],
)
def test_out_of_range_arguments_name_the_allowed_range(arguments, message):
    result = invoke(*arguments)
    assert result.exit_code == 2
    assert result.output.startswith("memprof: error: ")
    assert message in result.output
    assert len(result.output.splitlines()) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["zerocopy", "--power", "20", "--from", "10"],
            "use either --power or --from/--to, not both",
        ),
        (["zerocopy", "--from", "10"], "a sweep needs both --from and --to"),
        (["zerocopy", "--from", "12", "--to", "10"], "--from 12 is larger than --to 10"),
    ],
)
def test_inconsistent_sizes_are_one_line_errors(arguments, message):
    result = invoke(*arguments)
    assert result.exit_code == 2
    assert result.output.strip() == f"memprof: error: {message}"


def test_sweep_sizes():
    assert SEED_SWEEP_POWERS == (10, 12, 14, 16, 18, 20, 22, 24)
    assert Sizes.value(None, None, 2, SEED_SWEEP_POWERS) == SEED_SWEEP_POWERS
    assert Sizes.value(3, 9, 3, SEED_SWEEP_POWERS) == (3, 6, 9)
    assert Sizes.value(5, 5, 1, ()) == (5,)
    with pytest.raises(InvalidArgument):
        Sizes.value(9, 3, 1, ())


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["pinned", "--power", "10"],
        ["zerocopy"],
        ["uva"],
        ["managed"],
        ["wc"],
        ["register"],
        ["alloc"],
    ],
)
def test_gpu_commands_without_pycuda_say_how_to_install_it(command, monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # as if PyCUDA were not installed
    monkeypatch.setattr(session, "driver_installed", lambda: True)
    result = invoke(*command)
    assert result.exit_code == 3
    assert result.output.strip() == f"memprof: error: {install_hint()}"


@pytest.mark.parametrize("command", [["info"], ["pinned", "--power", "10"], ["compare"]])
def test_gpu_commands_without_a_driver_say_so_before_naming_a_pycuda_build(command, monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setattr(session, "driver_installed", lambda: False)
    result = invoke(*command)
    assert result.exit_code == 3
    line = result.output.strip()
    assert line == f"memprof: error: {session.no_driver_line()}"
    assert "\n" not in line and "no NVIDIA driver" in line
    assert "report, diff and plot" in line and install_hint() not in line


@pytest.mark.parametrize(
    ("loads", "devices", "installed"),
    [(True, [], True), (False, ["/dev/nvidiactl"], True), (False, [], False)],
)
def test_the_driver_is_found_by_its_library_or_its_devices(loads, devices, installed, monkeypatch):
    import ctypes
    import glob

    from memprof.core import driver

    def cdll(name):
        assert name == "libcuda.so.1"
        if not loads:
            raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(driver, "libcuda", driver.libcuda.__wrapped__)  # loaded again, here
    monkeypatch.setattr(glob, "glob", lambda pattern: devices)
    assert session.driver_installed() is installed


def test_report_renders_recorded_results():
    paths = [str(p) for p in sorted(FIXTURES.glob("*.json"))]
    result = invoke("report", *paths)
    assert result.exit_code == 0, result.output
    assert result.output.count("memprof ") >= len(paths)
    assert "Profiling result:" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{", "is not a memprof result"),
        ('{"schema_version": 99}', "schema version 99"),
    ],
)
def test_report_of_a_bad_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "result.json"
    if content is not None:
        path.write_text(content)
    result = invoke("report", str(path))
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_report_of_a_failed_verification_exits_1(tmp_path):
    text = (FIXTURES / "h200_pinned_p20.json").read_text()
    broken = failing_check(text)
    path = tmp_path / "failed.json"
    path.write_text(broken)
    result = invoke("report", str(path))
    assert result.exit_code == 1
    assert "memprof: error: 1 of 2 results did not verify" in result.output


def test_report_writes_csv_with_one_row_per_measurement(tmp_path):
    import csv

    path = tmp_path / "out.csv"
    fixture = FIXTURES / "h200_pinned_p20.json"
    result = invoke("report", str(fixture), "--csv", str(path))
    assert result.exit_code == 0, result.output
    everything = list(csv.DictReader(path.open()))
    rows = [r for r in everything if r["group"] != "derived"]
    recorded = load_result(fixture)
    assert len(rows) == len(recorded.measurements)
    # then the ratios the table prints (vs pageable), each kind and direction once
    derived = everything[len(rows) :]
    assert [(r["group"], r["operation"]) for r in derived] == [("derived", "ratio")] * 4
    h2d = next(
        r for r in rows if r["group"] == "gpu" and r["operation"] == "h2d" and r["kind"] == "pinned"
    )
    stats = recorded.find("h2d", "pinned", "gpu").stats
    assert float(h2d["median_ms"]) == pytest.approx(stats.median_ms)
    assert int(h2d["calls"]) == stats.count
    batches = recorded.find("h2d", "pinned", "gpu").throughput_stats  # what GB/s means
    assert float(h2d["gb_per_s"]) == pytest.approx(
        int(h2d["bytes"]) / batches.median_ms / 1e6, rel=1e-9
    )


def test_diff_of_a_run_with_itself_changes_nothing():
    path = str(FIXTURES / "h200_pinned_p20.json")
    result = invoke("diff", path, path)
    assert result.exit_code == 0, result.output
    assert "B was faster in 0, slower in 0" in result.output
    assert "within noise" in result.output


def test_diff_marks_a_change_beyond_noise(tmp_path):
    import json

    data = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())
    for measurement in data["measurements"]:
        if measurement["operation"] == "h2d" and measurement["kind"] == "pageable":
            for times in ("samples_ms", "throughput_ms"):  # B twice as slow
                measurement[times] = [s * 2 for s in measurement[times]]
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(data))
    result = invoke("diff", str(FIXTURES / "h200_pinned_p20.json"), str(slower))
    assert result.exit_code == 0, result.output
    assert "slower in 2" in result.output  # the HtoD GPU activity and its API call
    assert "2.000x" in result.output
