"""The contract every registered experiment keeps (memprof.experiments.base), checked for each.

- Params round-trip through JSON and the loader's checks, and every field says how the
  command line offers it;
- the command's options are exactly its Params fields (as memprof.model.params offers them)
  plus the shared options of its kind, with the Params defaults;
- every declared measurement is in each fixture recorded for it on a GPU, and nothing
  undeclared is;
- each fixture renders at 60, 80 and 120 columns (the last two: as tests/golden holds them)
  without a line wider than the console (a single unbreakable word, such as a long kernel
  name, excepted).
"""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
import typer
import typer.testing
from rich.console import Console

from memprof import cli
from memprof import cli_trace as tracing
from memprof.cli_gates import JUNIT_COMMANDS
from memprof.experiments import COMMANDS, command_named, experiment_class, load, shape_of, summarize
from memprof.experiments.base import declared_keys, declared_measures
from memprof.model import params as declared
from memprof.model.schema import check
from memprof.output.profile import profile_rows
from memprof.output.render import render_result
from tests.conftest import FIXTURES, plain

EXPERIMENTS = {c.name: experiment_class(c.name) for c in COMMANDS}
GOLDEN = FIXTURES.parent / "golden"
RECORDED_WIDTHS = (80, 120)  # every fixture's rendering at these is in GOLDEN (test_golden)
OUTPUT_OPTIONS = {"json", "csv", "quiet", "no_color", "verbose"}


def fixtures_of(name: str) -> list:
    """The results recorded on a GPU for one command (legacy files included)."""
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        if json.loads(path.read_text()).get("command") == name:
            found.append(path)
    return found


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if n != "trace"])
def test_params_round_trip_and_declare_their_command_line(name):
    experiment = EXPERIMENTS[name]
    defaults = experiment.Params()
    saved = json.loads(json.dumps(plain(defaults)))
    assert check(saved, experiment.Params, "parameters") == defaults
    assert declared.validated(defaults) is defaults  # the defaults keep their own rules
    for field in dataclasses.fields(experiment.Params):
        face = declared.option_of(field)
        assert "option" in field.metadata, f"{name}.{field.name} declares no option"
        assert face.help.strip(), f"{name}.{field.name} has no help"


def test_trace_declares_its_command_line_beside_what_it_records():
    """trace's Params record what ran (program, arguments, device), not its options: its
    command (memprof.cli_trace) declares those, and takes exactly them and the shared
    ones; its Experiment only reads what it saved."""
    experiment = EXPERIMENTS["trace"]
    defaults = experiment.Params()
    saved = json.loads(json.dumps(plain(defaults)))
    assert check(saved, experiment.Params, "parameters") == defaults
    own = tracing.own_options()
    assert all(option.help.strip() for option in own)
    command = typer.main.get_command(cli.app).commands["trace"]
    names = {parameter.name for parameter in command.params} - {"help"}
    assert names == {option.name for option in own} | {"device"} | OUTPUT_OPTIONS


def expected_options(experiment) -> set[str]:
    """The parameter names a command must take: its Params' and its kind's shared ones."""
    names = {option.name for option in declared.cli_options(experiment.Params)}
    if experiment.gpus in ("one", "one_or_every"):
        names.add("device")
    if experiment.timing_option:
        names.add("timing")
    if experiment.affinity_option:
        names.add("no_affinity")
    if experiment.name in JUNIT_COMMANDS:
        names.add("junit")
    fields = dataclasses.fields(experiment.Params)
    if any(field.name == "repeat" and field.default is None for field in fields):
        names.add("max_noise")  # repeats until the noise target unless --repeat N
    return names | OUTPUT_OPTIONS


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if n != "trace"])
def test_the_command_takes_exactly_its_params_and_its_shared_options(name, monkeypatch):
    experiment = EXPERIMENTS[name]
    command = typer.main.get_command(cli.app).commands[name]
    assert {parameter.name for parameter in command.params} - {"help"} == expected_options(
        experiment
    )
    for alias in command_named(name).aliases:
        aliased = typer.main.get_command(cli.app).commands[alias]
        assert [p.name for p in aliased.params] == [p.name for p in command.params]
    ran = []
    monkeypatch.setattr(cli, "_run", lambda *arguments: ran.append(arguments))
    outcome = typer.testing.CliRunner().invoke(cli.app, [name])
    assert outcome.exit_code == 0, outcome.output
    assert ran[0][1] == experiment.Params()  # the command's defaults are the Params'


def test_every_hidden_field_is_set_by_another_option():
    for experiment in EXPERIMENTS.values():
        for field in dataclasses.fields(experiment.Params):
            if declared.option_of(field).hidden_from_cli:
                setters = [
                    f.name
                    for f in dataclasses.fields(experiment.Params)
                    if isinstance(declared.option_of(f).form, declared.Sizes)
                    and declared.option_of(f).form.single == field.name
                ]
                assert setters, f"{experiment.name}.{field.name} is set by no option"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_a_recorded_fixture_holding_what_it_declares(name):
    experiment = EXPERIMENTS[name]
    paths = fixtures_of(name)
    assert paths, f"no result of {name} recorded on a GPU in tests/fixtures/"
    shape_of(name)
    for path in paths:
        result = load(path)
        found = {(m.group, m.operation) for m in result.measurements}
        required = {m.key for m in declared_measures(experiment) if m.required is True}
        assert required <= found, path.name
        assert found <= declared_keys(experiment), path.name


@pytest.mark.parametrize("width", [60, *RECORDED_WIDTHS])
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_fits_the_console(path, width):
    """At 80 and 120 columns, what tests/golden recorded, which test_golden finds is what the
    fixture renders: rendering each again here cost the suite 2 CPU seconds."""
    result = load(path)
    if width in RECORDED_WIDTHS:
        text = (GOLDEN / f"{path.stem}.{width}.txt").read_text(encoding="utf-8")
    else:
        console = Console(width=width, file=io.StringIO(), color_system=None)
        render_result(result, summarize(result), console)
        text = console.file.getvalue()
    names = {row.name for row in profile_rows(result.measurements)}  # printed whole, by design
    for line in text.splitlines():
        assert len(line) <= width or line.strip() in names, f"{len(line)} > {width}: {line}"
