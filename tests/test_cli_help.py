"""Help a person reads: every --help ends with examples that are real command lines, -h works
like --help, defaults are shown whole (never broken inside), a sweep's --from/--to say their
defaults, and shell completion is on."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shlex

import pytest
import typer
from typer.testing import CliRunner

from memprof import cli_commands, cli_options
from memprof.cli import app
from memprof.experiments import COMMANDS, experiment_class
from memprof.model import params as declared

runner = CliRunner()
COMMAND = typer.main.get_command(app)
NAMES = sorted(COMMAND.commands)
ALIASES = {command.name: command.aliases for command in COMMANDS}


def help_of(*words: str, flag: str = "--help", width: int = 80) -> str:
    ran = runner.invoke(app, [*words, flag], env={"COLUMNS": str(width)})
    assert ran.exit_code == 0, ran.output
    return ran.stdout


def parsed(words: list[str]):
    """The command's context after parsing `memprof WORDS...` as the shell split them, the
    options' own checks run, the command not."""
    root = type(COMMAND.context_class(COMMAND))(COMMAND, info_name="memprof")
    command = COMMAND.get_command(root, words[0])
    return command.make_context(words[0], list(words[1:]), parent=root)


def parses(line: str) -> None:
    words = shlex.split(line)
    assert words[0] == "memprof", line
    parsed(words[1:])


@pytest.mark.parametrize("name", ["", *NAMES])
def test_every_help_ends_with_examples_that_parse_dash_h_is_help_and_defaults_read_whole(name):
    words = [name] if name else []
    text = help_of(*words, width=60)
    assert help_of(*words, flag="-h", width=60) == text
    head, _, tail = text.rpartition("Examples:\n\n")
    assert head, f"memprof {name} --help has no examples"
    examples = [line.strip() for line in tail.splitlines() if line.strip()]
    assert examples == list(cli_commands.examples_of(name))
    aliases = {name, *ALIASES.get(name, ())}
    for line in examples:
        assert not name or shlex.split(line)[1] in aliases, line
        parses(line)
    for line in text.splitlines():  # a default never broken inside, at 60 columns too
        if "[default:" in line:
            assert re.search(r"\[default:\u00a0[^\]]+\]", line), line
    assert "[default: (" not in text


def test_every_command_has_its_own_examples():
    """The command line's, report's, diff's and plot's in cli_commands; an experiment's on its
    registry line (an alias shows the generic pair)."""
    pair = {name: (f"memprof {name}", f"memprof {name} --json {name}.json") for name in NAMES}
    generic = [name for name in NAMES if cli_commands.examples_of(name) == pair[name]]
    assert generic == ["wc"]


def sweep_default(experiment) -> tuple[int, ...]:
    return next(
        f.default
        for f in dataclasses.fields(experiment.Params)
        if isinstance(declared.option_of(f).form, declared.Sizes)
    )


@pytest.mark.parametrize(
    "experiment",
    [
        e
        for e in (experiment_class(c.name) for c in COMMANDS)
        if any(o.name == "from_power" for o in declared.cli_options(e.Params))
    ],
    ids=lambda e: e.name,
)
def test_from_and_to_say_their_defaults(experiment):
    sizes = sweep_default(experiment)
    text = re.sub(r"[ \n]+", " ", help_of(experiment.name, width=200))  # NBSP kept
    assert f"Sweep: first size, N of 2^N floats. [default:\u00a0{min(sizes)}]" in text
    assert f"Sweep: last size, N of 2^N floats. [default:\u00a0{max(sizes)}]" in text


def test_a_list_of_every_choice_reads_all():
    text = help_of("sweep", width=80)
    assert "[default:\u00a0all]" in text
    assert "pagea\n" not in text


def test_default_words_of_each_kind_of_option():
    assert cli_options.default_words(None, ("--from",)) == ""
    assert cli_options.default_words(False, ("--quiet",)) == ""
    assert cli_options.default_words(True, ("--prefetch/--no-prefetch",)) == "prefetch"
    assert cli_options.default_words(False, ("--prefetch/--no-prefetch",)) == "no-prefetch"
    assert cli_options.default_words(cli_options.Timing.auto, ("--timing",)) == "auto"
    assert cli_options.default_words(20, ("--repeat",)) == "20"


def test_shell_completion_is_offered_and_answers(monkeypatch):
    text = help_of()
    assert "--install-completion" in text and "--show-completion" in text
    # with shellingham, typer reads the shell from the process tree, and a run orphaned in
    # the background (a mutation run's suite) has none: the shell here is bash
    if importlib.util.find_spec("shellingham") is not None:
        import shellingham

        monkeypatch.setattr(shellingham, "detect_shell", lambda *_, **__: ("bash", "/bin/bash"))
    shown = runner.invoke(app, ["--show-completion", "bash"])
    assert "_MEMPROF_COMPLETE" in shown.stdout
    monkeypatch.setenv("_MEMPROF_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "memprof sw")
    monkeypatch.setenv("COMP_CWORD", "1")
    with pytest.raises(SystemExit) as ended:
        COMMAND.main([], prog_name="memprof")
    assert ended.value.code == 0


def test_completion_names_the_commands(monkeypatch, capsys):
    monkeypatch.setenv("_MEMPROF_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "memprof sw")
    monkeypatch.setenv("COMP_CWORD", "1")
    with pytest.raises(SystemExit):
        COMMAND.main([], prog_name="memprof")
    assert capsys.readouterr().out.split() == ["sweep"]


def test_trace_passes_dash_h_after_the_script_to_it():
    context = parsed(["trace", "train.py", "-h"])
    assert list(context.params["target"]) == ["train.py", "-h"]
