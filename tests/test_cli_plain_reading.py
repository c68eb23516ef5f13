"""How the command line reads its values without typer's adapters (memprof.cli_commands), where
a mutation round found it untested (issue 37: mutmut 3.8.1 on memprof/cli_commands.py): a bad
value refused in click's whole line naming its option, an option given twice refused after a
flag or an argument too, an option taken several times read as several, what typer bounds
or checks itself left to it; each command's help opening with its own words, the command
list one line a command within 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof import cli
from memprof.cli_commands import PlainValue, plain_reader
from tests.test_startup import Info

runner = CliRunner()


def test_a_bad_value_is_refused_in_clicks_whole_line_naming_its_option():
    ran = runner.invoke(cli.app, ["pinned", "--power", "many"])
    assert (ran.exit_code, ran.output) == (
        2,
        "memprof: error: Invalid value for '--power' / '-p': 'many' is not a valid integer. "
        "(see 'memprof pinned --help')\n",
    )


@pytest.mark.parametrize(
    "arguments",
    [
        ["pinned", "-q", "--power", "20", "--power", "21"],
        ["pinned", "--power", "20", "-q", "--power", "21"],
        ["report", "run.json", "--json", "a.json", "--json", "b.json"],
    ],
)
def test_an_option_given_twice_is_refused_whatever_comes_before_it(arguments):
    ran = runner.invoke(cli.app, arguments)
    assert ran.exit_code == 2
    twice = "--power / -p" if arguments[0] == "pinned" else "--json"
    assert ran.output.startswith(f"memprof: error: {twice} is given twice: give it once")


@pytest.mark.parametrize(("multiple", "nargs"), [(True, 1), (False, -1), (True, -1)])
def test_an_option_taken_several_times_reads_none_as_no_values(multiple, nargs):
    parameter = type("Parameter", (), {"multiple": multiple, "nargs": nargs})()
    assert PlainValue(lambda values: list(values)).coerce(None, parameter, None) == ()


def test_an_option_taken_once_reads_none_as_none():
    parameter = type("Parameter", (), {"multiple": False, "nargs": 1})()
    assert PlainValue(int).coerce(None, parameter, None) is None


@pytest.mark.parametrize(
    ("kind", "settings"),
    [
        (int, {"max": 10}),
        (float, {"max": 1.5}),
        (list[Path], {"exists": True}),
        (list[int], {"max": 3}),
        *((Path, {name: True}) for name in ("exists", "resolve_path", "writable", "allow_dash")),
        (Path, {"path_type": str}),
        (Path, {"file_okay": False}),
        (Path, {"dir_okay": False}),
    ],
)
def test_a_bound_or_a_check_typer_makes_itself_is_left_to_typer(kind, settings):
    """Only typer reads a value it bounds (max alone too) or a list of paths that must exist;
    without those settings the same kinds are read plainly."""
    assert plain_reader(kind, Info(**settings)) is None
    assert plain_reader(kind, Info()) is not None


@pytest.mark.parametrize(
    ("value", "text"), [("run.json", "run.json"), (b"caf\xc3\xa9.json", "café.json"), (5, "5")]
)
def test_a_word_is_read_as_text_bytes_decoded_as_file_names_are(value, text):
    parameter = type("Parameter", (), {"multiple": False, "nargs": 1})()
    assert PlainValue(plain_reader(str, Info())).coerce(value, parameter, None) == text


def test_a_boolean_given_for_a_number_is_read_as_the_number():
    parameter = type("Parameter", (), {"multiple": False, "nargs": 1})()
    read = PlainValue(plain_reader(int, Info())).coerce(True, parameter, None)
    assert (read, type(read)) == (1, int)


def test_a_path_that_exists_unreadable_is_refused_naming_it(tmp_path, monkeypatch):
    import typer

    from memprof import cli_commands

    saved = tmp_path / "run.json"
    saved.write_text("{}")
    monkeypatch.setattr(cli_commands.os, "access", lambda path, mode: False)  # root reads all
    parameter = type("Parameter", (), {"multiple": False, "nargs": 1})()
    with pytest.raises(typer.BadParameter) as refused:
        PlainValue(plain_reader(Path, Info())).coerce(str(saved), parameter, None)
    assert refused.value.message == f"path {str(saved)!r} is not readable."


# -- each command, built when first looked up ---------------------------------------------------


@pytest.mark.parametrize("name", ["report", "diff", "plot", "pinned", "trace"])
def test_each_commands_help_opens_with_its_own_words_and_offers_no_completion(name):
    """The words the command list shows open the command's own help; completion is installed
    from memprof alone, not offered again under each command."""
    from memprof.cli_commands import HELP

    shown = runner.invoke(cli.app, [name, "--help"])
    assert shown.exit_code == 0
    assert " ".join(HELP[name].split()) in " ".join(shown.output.split())
    assert "--install-completion" not in shown.output
    assert "--install-completion" in runner.invoke(cli.app, ["--help"]).output


def test_the_command_list_is_one_line_a_command_within_80_columns():
    """Each command's help is shortened to what its row leaves of 80 columns, not wrapped."""
    from memprof.cli_commands import HELP

    shown = runner.invoke(cli.app, ["--help"], terminal_width=80).output
    rows = shown.split("\nCommands:\n", 1)[1].split("\n\n")[0].splitlines()
    assert [row.split()[0] for row in rows] == list(HELP)
    assert max(map(len, rows)) <= 78
