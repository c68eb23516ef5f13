"""Narrow and odd terminals: a figure is never split, titles wrap at the console's width, a
COLUMNS that is no width is ignored, and --no-color holds for --help on a terminal too."""

from __future__ import annotations

import functools
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from memprof.cli import app
from memprof.experiments import load, summarize
from memprof.experiments.sweep import chart_lines
from memprof.model.formatting import format_ms, format_percent
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.profile import profile_rows
from memprof.output.render import render_result
from tests.conftest import FIXTURES

ROOT = Path(__file__).parent.parent
FIXTURE_PATHS = sorted(FIXTURES.glob("*.json"))
SIZE_LABEL = re.compile(r"2\^\d+ \(\d+ [KMG]?i?B\)")


def report(path: Path, columns: str | None, *options: str) -> tuple[int, str, str]:
    ran = CliRunner().invoke(app, ["report", *options, str(path)], env={"COLUMNS": columns})
    return ran.exit_code, ran.stdout, ran.stderr


def as_a_terminal_shows(text: str, width: int) -> list[str]:
    """The lines a terminal of `width` columns shows: longer lines wrap at its edge."""
    shown = []
    for line in text.splitlines():
        line = line.rstrip()
        while cell_len(line) > width:
            shown.append(line[:width])
            line = line[width:]
        shown.append(line)
    return shown


@functools.cache
def loaded(path: Path) -> tuple[Result, Summary, frozenset[str]]:
    """A fixture, its summary, and every figure the report shows: figure cells of the tables
    (and size labels), and the profile's times and percentages where it is shown."""
    result = load(path)
    summary = summarize(result)
    found = set()
    for table in summary.tables:
        for column in range(len(table.headers)):
            cells = [row[column] for row in table.rows if row[column].strip() not in ("", "-")]
            if cells and all(cell[:1].isdigit() for cell in cells):
                found |= set(cells)
            found |= {cell for cell in cells if SIZE_LABEL.fullmatch(cell)}
    for row in profile_rows(result.measurements) if summary.show_profile else []:
        found |= {format_percent(row.time_fraction), format_ms(row.stats.total_ms)}
        found |= {format_ms(row.stats.mean_ms), format_ms(row.stats.max_ms)}
    return result, summary, frozenset(found)


def rendered(path: Path, width: int) -> str:
    """What `COLUMNS=width memprof report PATH | cat` prints (the CLI's path is the same
    console, which test_a_columns_that_is_a_width_is_kept checks)."""
    result, summary, _ = loaded(path)
    console = Console(width=width, file=io.StringIO(), color_system=None)
    render_result(result, summary, console)
    return console.file.getvalue()


@pytest.mark.parametrize("width", [20, 24, 28, 33, 40])
@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda path: path.stem)
def test_no_figure_is_split_on_a_narrow_terminal(path, width):
    lines = as_a_terminal_shows(rendered(path, width), width)
    figures = [f for f in loaded(path)[2] if len(f) <= width]  # a wider one must break
    split = [figure for figure in figures if not any(figure in line for line in lines)]
    assert not split, split[:5]


def test_the_cli_renders_as_the_console_at_a_narrow_width():
    path = FIXTURES / "h200_zerocopy_p20.json"
    assert report(path, "24") == (0, rendered(path, 24), "")


@pytest.mark.parametrize("width", [1, 5, 12, 19])
def test_even_absurd_widths_render(width):
    assert rendered(FIXTURES / "h200_compare.json", width).strip()


@pytest.mark.parametrize("columns", ["0", "-5", "abc", "", " 80", "1e3"])
def test_a_columns_that_is_no_width_is_treated_as_unset(columns):
    path = FIXTURES / "h200_pinned_p20.json"
    assert report(path, columns) == report(path, None)  # piped: memprof's own 160 columns
    code, text, errors = report(Path("missing.json"), columns)
    assert code == 2 and errors.startswith("memprof: error: ") and text == ""
    help = CliRunner().invoke(app, ["pinned", "--help"], env={"COLUMNS": columns})
    assert help.exit_code == 0 and "--power" in help.stdout


def test_a_columns_that_is_a_width_is_kept():
    path = FIXTURES / "h200_pinned_p20.json"
    assert report(path, "90") != report(path, None)
    assert max(len(line.rstrip()) for line in report(path, "90")[1].splitlines()[:3]) <= 90


def test_titles_wrap_at_the_consoles_width_not_the_tables():
    _, text, _ = report(FIXTURES / "h200x2_peer.json", "80")
    lines = text.splitlines()
    for title in [
        "Copy engine, peer access off (the driver stages through host memory), GB/s",
        "Kernel on the source GPU writing the destination GPU's memory (fillValue), GB/s",
    ]:
        assert title in lines
    _, text, _ = report(FIXTURES / "h200x2_peer.json", "40")
    assert "Copy engine, peer access off (the driver" in text.splitlines()


def test_sweep_charts_fit_80_columns_however_many_sizes():
    for count in (1, 19, 23, 24, 31):
        series = {"pinned": [(power, 1.0, 1.0 + power) for power in range(count)]}
        for width in (60, 80):
            lines = chart_lines(series, width)
            assert max(len(line) for line in lines) <= width, (count, width)
            assert "(2^n floats)" in lines[-1]


def _on_a_terminal(args: list[str], environment: dict[str, str]) -> bytes:
    """What memprof writes when stdout and stderr are a terminal (a pseudo-terminal)."""
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "100", **environment})
    process = subprocess.Popen(
        [sys.executable, "-m", "memprof", *args], stdout=slave, stderr=slave, env=env, cwd=ROOT
    )
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert process.wait(timeout=60) == 0, output[-500:]
    return output


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_help_on_a_terminal_is_plain_text():
    """memprof's help is plain (rich_markup_mode=None): no boxes, no colours, nothing for
    --no-color or NO_COLOR to turn off, on a terminal too."""
    for args, environment in [
        (["pinned", "--help"], {}),
        (["pinned", "--help", "--no-color"], {}),
        (["--help"], {"NO_COLOR": "1"}),
    ]:
        output = _on_a_terminal(args, environment)
        assert b"--power" in output or b"pinned" in output
        assert b"\x1b" not in output, (args, environment)


def test_prose_wraps_exactly_as_rich_wraps_it_when_every_word_fits():
    """memprof wraps prose itself only to keep over-long words whole: elsewhere it must
    break lines exactly where rich would (the golden files were recorded with rich's)."""
    import random

    from rich.console import Console
    from rich.text import Text

    from memprof.output.render import _wrapped

    words = ["a", "GPU", "copies", "3.9680us", "(4 MiB),", "host → device", "µs", "x" * 11]
    generator = random.Random(18)
    console = Console(width=200)
    for _ in range(300):
        text = " ".join(generator.choice(words) for _ in range(generator.randint(1, 30)))
        text = generator.choice(["", "  "]) + text + generator.choice(["", " "])
        width = generator.randint(12, 60)
        ours = [line.plain for line in _wrapped(Text(text), width)]
        theirs = [line.plain for line in Text(text).wrap(console, width)]
        assert ours == theirs, (text, width)


def test_a_word_wider_than_the_line_stays_whole_or_breaks_after_its_commas():
    from rich.text import Text

    from memprof.output.render import _wrapped

    lines = [line.plain for line in _wrapped(Text("at 2026-11-22T01:42:09+00:00, here"), 12)]
    assert lines == ["at ", "2026-11-22T01:42:09+00:00,", "here"]
    lines = [line.plain for line in _wrapped(Text("powers=8,9,10,11,12,13 done"), 10)]
    assert lines == ["powers=8,", "9,10,11,", "12,13 done"]
    assert [line.plain for line in _wrapped(Text("x"), 1, indent=4)] == ["    x"]


def test_figures_split_between_columns_only_where_they_must():
    from memprof.output.render import Figures

    figures = Figures([["Time(%)", "Time", "Calls"], ["48.30%", "4.2887ms", "20"]])
    assert figures.widths == [7, 8, 5]
    assert figures.width() == 7 + 2 + 8 + 2 + 5
    assert figures.lines(["48.30%", "4.2887ms", "20"], 24) == [" 48.30%  4.2887ms     20"]
    assert figures.lines(["48.30%", "4.2887ms", "20"], 23) == [" 48.30%  4.2887ms", "   20"]
    # one figure a line, never cut
    assert figures.lines(["48.30%", "4.2887ms", "20"], 3) == [" 48.30%", "4.2887ms", "   20"]


def test_the_results_console_is_160_wide_when_piped_else_the_terminals(monkeypatch):
    from memprof.output import console

    monkeypatch.delenv("COLUMNS", raising=False)
    assert console.results_console().width == console.PIPE_WIDTH == 160  # stdout: a pipe here
    assert console.results_console(stderr=True).width == 160
    assert console.results_console(stderr=True).file is sys.stderr
    monkeypatch.setenv("COLUMNS", "97")
    assert console.results_console().width == 97
    monkeypatch.setenv("COLUMNS", "0")
    console.prepare_streams()
    assert "COLUMNS" not in os.environ and console.results_console().width == 160
    monkeypatch.setenv("LINES", "-3")
    console.forget_unusable_width()
    assert "LINES" not in os.environ
    monkeypatch.setenv("LINES", "40")
    console.forget_unusable_width()
    assert os.environ["LINES"] == "40"
