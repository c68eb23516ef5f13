"""Start-up: the registry imports only the experiment a command needs, and the command line
reads its values without typer's pydantic adapters (memprof.cli_commands)."""

from __future__ import annotations

import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import get_origin

import pytest
import typer
from typer.testing import CliRunner

from memprof import cli
from memprof.cli_commands import BUILDERS, HELP, PlainValue, plain_reader
from memprof.experiments import COMMANDS

FIXTURE = Path(__file__).parent / "fixtures" / "h200_pinned_p20.json"

# One process, two commands: which experiment modules (and whether pydantic) each loaded.
IMPORTS = """
import contextlib, io, sys
from memprof.cli import app

def run(*args):
    with contextlib.redirect_stdout(io.StringIO()):
        code = app(list(args), standalone_mode=False)
    assert code == 0, (args, code)
    loaded = sorted(m for m in sys.modules if m.startswith("memprof.experiments."))
    others = ("pydantic", "memprof.output.diff", "memprof.output.junit")  # diff's, --junit's
    others += ("memprof.output.export", "memprof.output.timeline")  # --csv's, --timeline's
    others += ("memprof.model.upgrade",)  # an older file's
    options = ("memprof.cli_options", "memprof.model.params", "msgspec")  # a command's own
    print(
        " ".join(loaded) or "-",
        any(name in sys.modules for name in others),
        [name for name in options if name in sys.modules],
    )

run("--help")
run("report", sys.argv[1])
"""


def test_help_imports_no_experiment_and_report_only_its_own():
    ran = subprocess.run(
        [sys.executable, "-c", IMPORTS, str(FIXTURE)], capture_output=True, text=True, check=True
    )
    after_help, after_report = ran.stdout.splitlines()
    assert after_help == "- False []"  # the list needs no command's options
    *modules, pydantic = after_report.split(" [")[0].split()
    experiments = {f"memprof.experiments.{c.where.partition(':')[0]}" for c in COMMANDS}
    assert set(modules) & experiments == {"memprof.experiments.pinned"}  # helpers aside
    assert pydantic == "False"


# `pinned --quiet`, its run replaced by a recorded Result: which of rich's modules it loaded.
QUIET_RUN = """
import sys
from memprof import api
from memprof.cli import app
from memprof.experiments import load

result = load(sys.argv[1])
api.run_experiment = lambda experiment, params, options, progress: (result, [])
code = app(["pinned", "--power", "20", "--quiet"], standalone_mode=False)
print(code, sorted(name for name in sys.modules if name.split(".")[0] == "rich"))
"""


def test_a_quiet_run_imports_no_rich():
    """Rich draws what --quiet does not show (tables, the progress line): 25 ms on the H200."""
    ran = subprocess.run(
        [sys.executable, "-c", QUIET_RUN, str(FIXTURE)], capture_output=True, text=True, check=True
    )
    assert ran.stdout.split() == ["0", "[]"], ran.stderr


def test_the_command_list_is_every_registry_line_then_report_diff_and_plot():
    names = [name for command in COMMANDS for name in (command.name, *command.aliases)]
    assert list(typer.main.get_command(cli.app).commands) == [*names, "report", "diff", "plot"]
    assert HELP["wc"] == "Alias of writecombined."
    assert HELP["pinned"] == next(c.help for c in COMMANDS if c.name == "pinned")


def test_the_command_list_shows_each_line_without_building_a_command(monkeypatch):
    built = []
    for name in list(BUILDERS):
        monkeypatch.setitem(BUILDERS, name, lambda name=name: built.append(name))
    result = CliRunner().invoke(cli.app, ["--help"])
    assert result.exit_code == 0 and built == []
    assert "  pinned         Pageable vs pinned host memory: allocation cost," in result.output
    assert "  wc             Alias of writecombined." in result.output


def test_every_value_of_every_command_is_read_without_pydantic():
    for name, build in BUILDERS.items():
        command = build()
        context = command.make_context(name, ["--help"], resilient_parsing=True)
        for parameter in command.get_params(context):
            if hasattr(parameter, "_runtime_param"):  # typer 0.2x: its adapters replaced
                assert isinstance(parameter._runtime_param, PlainValue), (name, parameter.name)


class Timing(str, Enum):
    auto = "auto"
    events = "events"


class Info:
    """A typer ParameterInfo's settings, as plain_reader reads them."""

    def __init__(self, **settings):
        defaults = {"parser": None, "min": None, "max": None, "case_sensitive": True}
        defaults |= {"exists": False, "resolve_path": False, "writable": False}
        defaults |= {"allow_dash": False, "path_type": None, "file_okay": True, "dir_okay": True}
        self.__dict__.update(defaults | settings)


def read(kind, value, **settings):
    several = get_origin(kind) is list  # nargs=-1, as typer makes a list argument
    parameter = type("Parameter", (), {"multiple": False, "nargs": -1 if several else 1})()
    return PlainValue(plain_reader(kind, Info(**settings))).coerce(value, parameter, None)


@pytest.mark.parametrize(
    "kind, value, expected",
    [
        (int, "20", 20),
        (int, 22, 22),
        (float, "0.5", 0.5),
        (str, "out.json", "out.json"),
        (bool, "yes", True),
        (bool, "off", False),
        (Timing, "events", Timing.events),
        (Timing, Timing.auto, Timing.auto),
        (Path, "run.json", Path("run.json")),
        (list[Path], ("a.json", "b.json"), [Path("a.json"), Path("b.json")]),
        (int, None, None),
        (list[Path], None, ()),
    ],
)
def test_a_good_value_is_read_as_typer_reads_it(kind, value, expected):
    assert read(kind, value) == expected


@pytest.mark.parametrize(
    "kind, value, message",
    [
        (int, "many", "'many' is not a valid integer."),
        (int, "1.5", "'1.5' is not a valid integer."),
        (float, "fast", "'fast' is not a valid float."),
        (bool, "maybe", "'maybe' is not a valid boolean."),
        (Timing, "Events", "'Events' is not one of 'auto', 'events'."),
        (list[Path], "a.json", "Value must be an iterable."),
    ],
)
def test_a_bad_value_is_refused_in_clicks_words(kind, value, message):
    with pytest.raises(typer.BadParameter) as refused:
        read(kind, value)
    assert refused.value.message == message


def test_a_choice_ignores_case_only_where_told_to():
    assert read(Timing, "EVENTS", case_sensitive=False) == Timing.events


def test_what_plain_reading_does_not_cover_is_left_to_typer():
    assert plain_reader(int, Info(min=0)) is None  # typer's range
    assert plain_reader(Path, Info(exists=True)) is None
    assert plain_reader(int, Info(parser=int)) is None
    assert plain_reader(complex, Info()) is None


def test_a_command_kept_across_contexts_answers_to_each_ones_help_names():
    command = BUILDERS["diff"]()
    command.make_context("diff", ["--help"], resilient_parsing=True)  # a context of --help only
    result = CliRunner().invoke(cli.app, ["diff", "-h"])  # memprof's group: -h too
    assert result.exit_code == 0 and result.stdout.startswith("Usage: ")
