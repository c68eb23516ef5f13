"""The terminal contract: colour only when wanted, any locale, a closed pipe is no failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.output.console import ASCII_LOOKALIKES
from tests.conftest import failing_check

FIXTURES = Path(__file__).parent / "fixtures"
ALL_FIXTURES = [str(path) for path in sorted(FIXTURES.glob("*.json"))]
runner = CliRunner()
ESCAPE = "\x1b["


def memprof(*arguments: str, **environment: str) -> subprocess.CompletedProcess:
    """memprof in its own process, as a user runs it (python -m memprof)."""
    env = {**os.environ, "NO_COLOR": "", **environment}
    return subprocess.run(
        [sys.executable, "-m", "memprof", *arguments], capture_output=True, env=env, timeout=60
    )


def report(arguments: list[str], env: dict[str, str]) -> str:
    result = runner.invoke(app, ["report", str(FIXTURES / "h200_info.json"), *arguments], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_colour_is_on_for_a_terminal_that_wants_it():
    assert ESCAPE in report([], {"FORCE_COLOR": "1", "NO_COLOR": ""})  # empty NO_COLOR: unset


@pytest.mark.parametrize(
    ("arguments", "env"),
    [
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}),
        (["--no-color"], {"FORCE_COLOR": "1", "NO_COLOR": ""}),
    ],
)
def test_no_color_and_the_flag_turn_every_escape_code_off(arguments, env):
    assert ESCAPE not in report(arguments, env)


def test_an_error_line_honours_no_color_too():
    result = runner.invoke(
        app, ["pinned", "--power", "99"], env={"FORCE_COLOR": "1", "NO_COLOR": "1"}
    )
    assert result.output.startswith("memprof: error: Invalid value for '--power'")
    assert ESCAPE not in result.output


@pytest.mark.parametrize(
    "arguments",
    [
        ["pinned", "--power", "99"],  # refused while its options are read
        ["report", "missing.json"],  # refused once they are
        ["diff", str(FIXTURES / "h200_info.json"), str(FIXTURES / "h200_pinned_p20.json")],
    ],
)
def test_the_flag_takes_the_colour_off_the_last_line_too(arguments):
    """--no-color asked on the command line: the error line is as plain as the output (it
    was bold red on a terminal whatever the flag said)."""
    coloured = runner.invoke(app, arguments, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    plain = runner.invoke(app, [*arguments, "--no-color"], env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert coloured.exit_code == plain.exit_code != 0
    assert ESCAPE in coloured.output and "memprof: error: " in coloured.output
    assert ESCAPE not in plain.output and "memprof: error: " in plain.output


def test_an_ascii_only_stream_gets_ascii_lookalikes_not_a_crash():
    result = memprof("report", *ALL_FIXTURES, PYTHONIOENCODING="ascii")
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode("ascii")  # would raise if anything else got through
    assert "host -> device" in text
    assert "Profiling result:" in text
    assert result.stderr == b""


def test_an_error_line_naming_a_non_ascii_path_survives_an_ascii_stream(tmp_path):
    target = tmp_path / "m\u00e9sure" / "r\u2192.json"
    result = memprof("report", ALL_FIXTURES[0], "--json", str(target), PYTHONIOENCODING="ascii")
    assert result.returncode == 2
    line = result.stderr.decode("ascii")
    assert line.startswith("memprof: error: --json ") and "r->.json" in line
    assert line.count("\n") == 1


def test_every_lookalike_is_ascii():
    assert all(replacement.isascii() for replacement in ASCII_LOOKALIKES.values())


@pytest.mark.parametrize("arguments", [["report", *ALL_FIXTURES], ["--help"], []])
def test_a_reader_that_stops_early_is_not_a_failure(arguments):
    """`memprof report ... | head -1`: exit 0, nothing on stderr (1 would mean "did not verify")."""
    process = subprocess.Popen(
        [sys.executable, "-m", "memprof", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 0
    assert stderr == b""


def test_a_closed_pipe_does_not_hide_a_failed_verification(tmp_path):
    broken = tmp_path / "failed.json"
    text = (FIXTURES / "h200_pinned_p20.json").read_text()
    broken.write_text(failing_check(text))
    process = subprocess.Popen(
        [sys.executable, "-m", "memprof", "report", str(broken), "--csv", str(tmp_path / "r.csv")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1
    assert stderr.endswith("memprof: error: 1 of 2 results did not verify\n")
    assert (tmp_path / "r.csv").stat().st_size > 0  # and the run was still saved


def test_an_error_line_shows_a_file_names_line_break_as_it_is_spelt(tmp_path):
    missing = tmp_path / "two\nlines.json"
    ran = CliRunner().invoke(app, ["report", str(missing)])
    assert ran.exit_code == 2
    assert ran.stderr.count("\n") == 1 and "two\\nlines.json" in ran.stderr, ran.stderr
    assert "two lines.json" not in ran.stderr
