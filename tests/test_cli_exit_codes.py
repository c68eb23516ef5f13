"""Every way a command line ends is one exit code and at most one stderr line, in these words:
a bug 70 (re-raised under MEMPROF_DEBUG), a CUDA driver error 1, Ctrl-C 130 (also where it
came back as memprof's own error), memprof's refusal its own code, a usage error naming the
command's help, a closed stdout 0 (issue 37: mutmut 3.8.1 on memprof/cli.py run_command)."""

from __future__ import annotations

import errno
import sys
import types

import pytest
import typer
from typer.testing import CliRunner

from memprof import cli
from memprof.cli import click_exceptions
from memprof.errors import ExitCode, InvalidArgument, OutOfMemory

runner = CliRunner()


def ended_by(monkeypatch, error: BaseException, *arguments: str):
    """`memprof pinned` (or `arguments`) whose run raises `error`."""

    def run(*given):
        raise error

    monkeypatch.setattr(cli, "_run", run)
    return runner.invoke(cli.app, list(arguments or ("pinned",)))


def test_a_bug_is_exit_70_in_one_line_that_says_how_to_see_where(monkeypatch):
    monkeypatch.delenv("MEMPROF_DEBUG", raising=False)
    result = ended_by(monkeypatch, ZeroDivisionError("division by zero"))
    assert result.exit_code == ExitCode.INTERNAL == 70
    assert result.output == (
        "memprof: error: internal error, a bug in memprof: ZeroDivisionError: division by "
        "zero (MEMPROF_DEBUG=1 shows where)\n"
    )


def test_memprof_debug_lets_a_bug_through_with_its_traceback(monkeypatch):
    monkeypatch.setenv("MEMPROF_DEBUG", "1")
    result = ended_by(monkeypatch, ZeroDivisionError("division by zero"))
    assert isinstance(result.exception, ZeroDivisionError)
    assert "internal error" not in result.output


def test_a_cuda_driver_error_is_exit_1_said_once_without_its_padding(monkeypatch):
    driver = fake_driver(monkeypatch)
    result = ended_by(monkeypatch, driver.Error("  cuLaunchKernel failed: launch timeout \n"))
    assert result.exit_code == ExitCode.CHECK_FAILED == 1
    assert (
        result.output
        == "memprof: error: CUDA driver error: cuLaunchKernel failed: launch timeout\n"
    )
    other = ended_by(monkeypatch, RuntimeError("not the driver's"))
    assert other.exit_code == ExitCode.INTERNAL


def test_without_pycuda_loaded_an_error_is_no_cuda_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "pycuda.driver", raising=False)
    assert ended_by(monkeypatch, RuntimeError("x")).exit_code == ExitCode.INTERNAL


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("wrapped")])
def test_ctrl_c_is_exit_130_in_one_line(monkeypatch, error):
    if isinstance(error, RuntimeError):
        error.__cause__ = KeyboardInterrupt()
    result = ended_by(monkeypatch, error)
    assert result.exit_code == ExitCode.INTERRUPTED == 130
    assert result.output == f"memprof: error: {cli.INTERRUPTED}\n"


def test_memprofs_own_error_keeps_its_code_unless_ctrl_c_was_pressed(monkeypatch):
    monkeypatch.setattr(cli, "pressed", lambda: False)
    refused = ended_by(monkeypatch, InvalidArgument("--power 99: too large"))
    assert (refused.exit_code, refused.output) == (2, "memprof: error: --power 99: too large\n")
    full = ended_by(monkeypatch, OutOfMemory("4 GiB: out of memory"))
    assert (full.exit_code, full.output) == (4, "memprof: error: 4 GiB: out of memory\n")
    monkeypatch.setattr(cli, "pressed", lambda: True)
    stopped = ended_by(monkeypatch, OutOfMemory("4 GiB: out of memory"))
    assert (stopped.exit_code, stopped.output) == (130, f"memprof: error: {cli.INTERRUPTED}\n")


def test_a_closed_stdout_ends_quietly_with_0(monkeypatch):
    monkeypatch.setattr(cli.terminal, "silence_closed_stdout", lambda: None)
    result = ended_by(monkeypatch, BrokenPipeError())
    assert (result.exit_code, result.output) == (0, "")


@pytest.mark.parametrize(
    ("arguments", "help"),
    [
        (["pinned", "--bogus"], "memprof pinned"),
        (["pinned", "--power", "x"], "memprof pinned"),
        (["bogus"], "memprof"),
        (["--bogus"], "memprof"),
    ],
)
def test_a_usage_error_is_exit_2_naming_the_help_to_read(arguments, help):
    result = runner.invoke(cli.app, arguments)
    assert result.exit_code == ExitCode.USAGE == 2
    [line] = result.output.splitlines()
    assert line.startswith("memprof: error: ") and line.endswith(f" (see '{help} --help')")


def test_the_version_and_memprof_alone_are_exit_0():
    version = runner.invoke(cli.app, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("memprof ")
    alone = runner.invoke(cli.app, [])
    assert alone.exit_code == 0 and "Usage:" in alone.output


def test_a_usage_error_names_memprof_where_no_program_name_is_given(capsys):
    group = typer.main.get_command(cli.app)
    assert cli.run_command(group, ["pinned", "--bogus"], None, {}) == ExitCode.USAGE
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" (see 'memprof pinned --help')")


def test_a_click_error_raised_by_a_run_names_its_command(monkeypatch):
    result = ended_by(monkeypatch, click_exceptions.ClickException("no such thing"))
    assert result.exit_code == 1
    assert result.output == "memprof: error: no such thing (see 'memprof pinned --help')\n"


def fake_driver(monkeypatch) -> types.ModuleType:
    """A loaded pycuda.driver whose Error is the driver's failure."""
    driver = types.ModuleType("pycuda.driver")
    driver.Error = type("Error", (Exception,), {})
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    return driver


DISK_FULL = OSError(errno.ENOSPC, "No space left on device")


def test_stdout_on_a_full_disk_is_exit_5_in_one_line(monkeypatch):
    result = ended_by(monkeypatch, DISK_FULL)
    assert result.exit_code == ExitCode.SAVE_FAILED == 5
    assert result.output == "memprof: error: stdout: not written: No space left on device\n"


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (None, "No such option: --bogus"),
        (InvalidArgument("--power 99: too large"), "--power 99: too large"),
        (KeyboardInterrupt(), cli.INTERRUPTED),
        (ZeroDivisionError("x"), "internal error, a bug in memprof: ZeroDivisionError: x"),
        ("cuda", "CUDA driver error: launch timeout"),
        (DISK_FULL, "stdout: not written: No space left on device"),
    ],
)
def test_no_color_leaves_the_error_line_plain_however_it_ends(monkeypatch, error, line):
    """Where colour is forced, --no-color (or NO_COLOR) still holds for the one line, read
    before the options are: a refusal, Ctrl-C, a bug, the driver's failure, a lost stdout."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("MEMPROF_DEBUG", raising=False)
    if error == "cuda":
        error = fake_driver(monkeypatch).Error(" launch timeout ")
    for plain in ("", "--no-color", "NO_COLOR"):
        monkeypatch.delenv("NO_COLOR", raising=False)
        if plain == "NO_COLOR":
            monkeypatch.setenv("NO_COLOR", "1")
        arguments = ["pinned", *([plain] if plain == "--no-color" else [])]
        if error is None:
            result = runner.invoke(cli.app, [*arguments, "--bogus"])
        else:
            result = ended_by(monkeypatch, error, *arguments)
        assert ("\x1b[" in result.output) is not bool(plain)
        if plain:
            assert result.output.startswith(f"memprof: error: {line}")
            assert result.output.count("\n") == 1


def test_a_click_error_that_cannot_describe_itself_is_said_in_its_words_or_its_kind(
    monkeypatch,
):
    """Some typer and click pairings fail inside format_message: the line still says what."""

    class Unsayable(click_exceptions.ClickException):
        def format_message(self) -> str:
            raise TypeError("this click cannot format its own message")

    worded = ended_by(monkeypatch, Unsayable("no such thing"))
    assert (worded.exit_code, worded.output) == (
        1,
        "memprof: error: no such thing (see 'memprof pinned --help')\n",
    )
    wordless = ended_by(monkeypatch, Unsayable(""))
    assert (wordless.exit_code, wordless.output) == (
        1,
        "memprof: error: Unsayable (see 'memprof pinned --help')\n",
    )


def test_a_usage_error_names_the_program_as_it_was_called(capsys):
    """`python -m memprof` names itself so: the help to read is under the name typed."""
    group = typer.main.get_command(cli.app)
    assert cli.run_command(group, ["pinned", "--bogus"], "python -m memprof", {}) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" (see 'python -m memprof pinned --help')")


@pytest.mark.parametrize(
    ("arguments", "help"),
    [(["--no-color", "pinned"], "memprof pinned"), (["nosuch"], "memprof")],
)
def test_a_click_error_without_its_context_names_the_first_word_only_where_a_command(
    monkeypatch, capsys, arguments, help
):
    """Without click's context the help named is the first word that is not an option, and
    only where that word is a command."""
    group = typer.main.get_command(cli.app)

    def refuse(*given, **extra):
        raise click_exceptions.ClickException("refused")

    monkeypatch.setattr(group, "make_context", refuse)
    assert cli.run_command(group, arguments, None, {}) == 1
    assert capsys.readouterr().err == f"memprof: error: refused (see '{help} --help')\n"


def test_what_a_caller_gives_click_for_the_context_reaches_it(capsys):
    """MemprofGroup.main takes click's main's keywords: a help asked at 40 columns wraps there."""
    group = typer.main.get_command(cli.app)
    narrow = {"terminal_width": 40, "max_content_width": 40}
    assert cli.run_command(group, ["--help"], None, narrow) == ExitCode.OK
    assert "\n  Measure what each kind of CUDA memory\n" in capsys.readouterr().out
