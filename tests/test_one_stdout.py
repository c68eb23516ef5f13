"""One rule for who gets stdout, whatever the output: where --json, --csv or --junit is "-",
stdout holds that document alone (a parser reads it whole) and the tables and "saved" lines go
to stderr; two outputs on stdout are refused in one line (exit 2) before any work."""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import ExitCode

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
CHECK = str(FIXTURES / "h200_check.json")
RULE = "─" * 20  # under every table's header; no saved document holds it (JSON is ASCII)
COMMANDS = {  # a command line, the outputs it takes, and what marks its tables
    "report": (["report", CHECK], ("--json", "--csv", "--junit"), RULE),
    "diff": (["diff", CHECK, CHECK, "--verbose"], ("--json", "--junit"), RULE),
}


def words(text: str) -> str:
    return " ".join(text.split())


def parsed(option: str, text: str) -> object:
    """The document, read as its reader reads it: raises if anything else is mixed in."""
    if option == "--json":
        return json.loads(text)
    if option == "--junit":
        return ElementTree.fromstring(text)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and all(len(row) == len(rows[0]) for row in rows)
    return rows


@pytest.mark.parametrize(
    ("name", "option"), [(name, o) for name, (_, options, _) in COMMANDS.items() for o in options]
)
def test_an_output_on_stdout_has_stdout_to_itself(name, option):
    line, _, table = COMMANDS[name]
    ran = runner.invoke(app, [*line, option, "-"])
    assert ran.exit_code == 0, ran.output
    parsed(option, ran.stdout)
    assert table not in words(ran.stdout) and table in words(ran.stderr)
    assert "saved -" not in ran.stderr and "saved to stdout" in ran.stderr
    same = runner.invoke(app, [*line, option, "/dev/stdout"])  # another name of stdout
    assert same.exit_code == 0 and table not in words(same.stdout), same.output


@pytest.mark.parametrize("name", COMMANDS)
def test_the_tables_keep_stdout_where_every_output_is_a_file(name, tmp_path):
    line, options, table = COMMANDS[name]
    files = [word for o in options for word in (o, str(tmp_path / o.strip("-")))]
    ran = runner.invoke(app, [*line, *files])
    assert ran.exit_code == 0, ran.output
    assert table in words(ran.stdout) and table not in words(ran.stderr)


PAIRS = [
    (name, first, second, spelling)
    for name, (_, options, _) in COMMANDS.items()
    for first, second in itertools.combinations(options, 2)
    for spelling in ("-", "/dev/stdout")
] + [("check", first, second, "-") for first, second in itertools.combinations(
    ("--json", "--csv", "--junit"), 2
)]  # fmt: skip


@pytest.mark.parametrize(("name", "first", "second", "spelling"), PAIRS)
def test_two_outputs_on_stdout_are_refused_in_one_line_before_any_work(
    name, first, second, spelling, monkeypatch
):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # check: refused before asking for it
    line = COMMANDS[name][0] if name in COMMANDS else ["check"]
    ran = runner.invoke(app, [*line, first, "-", second, spelling])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stdout == "" and ran.stderr.count("\n") == 1 and "same stream" in ran.stderr


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("spelling", ["/dev/stderr", "/dev/fd/2"])
def test_an_output_beside_the_tables_on_stderr_is_refused_unless_they_are_not_shown(name, spelling):
    line, options, _ = COMMANDS[name]
    first, second = options[:2]  # the tables go to stderr, where the second would go too
    ran = runner.invoke(app, [*line, first, "-", second, spelling])
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stdout == "" and ran.stderr.count("\n") == 1 and "add --quiet" in ran.stderr
    quiet = runner.invoke(app, [*line, first, "-", second, spelling, "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    parsed(first, quiet.stdout)
    beside = runner.invoke(app, [*line, first, spelling])  # the tables on stdout: apart
    assert beside.exit_code == 0 and RULE in beside.stdout, beside.output


@pytest.fixture
def fake_cupti(monkeypatch):
    from memprof.trace import collect
    from tests.test_trace_cli import FakeCollector

    monkeypatch.setattr(collect, "CuptiCollector", FakeCollector)


@pytest.mark.parametrize("option", ["--json", "--csv"])
@pytest.mark.parametrize("spelling", ["-", "/dev/stdout", "/dev/stderr"])
def test_a_traced_programs_stdout_and_memprofs_stderr_are_not_outputs(
    option, spelling, fake_cupti, tmp_path
):
    program = tmp_path / "prog.py"
    program.write_text("print('the program ran')\n")
    line = ["trace", "--bandwidth", "none", option, spelling, str(program)]
    ran = runner.invoke(app, line)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stdout == "" and ran.stderr.count("\n") == 1  # refused before the program ran
    saved = runner.invoke(app, [*line[:3], option, str(tmp_path / "t.out"), str(program)])
    assert saved.exit_code == 0 and saved.stdout == "the program ran\n", saved.output
