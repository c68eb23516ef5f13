"""Where a command's results go: the terminal, --json and --csv, in an order that loses nothing.

Destinations are checked before any work (Output.check). Afterwards results are shown
first, so a run is seen even if saving fails, and saved even if showing fails or the
reader closed the pipe; a failed save is one line and exit code 5, after the output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from memprof.errors import SaveFailed, VerificationFailed
from memprof.model.formatting import plural
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.console import print_error, print_note, results_console, silence_closed_stdout
from memprof.output.files import check_destination, check_distinct, destination, write_text_atomic

DIFF_FORMAT = "memprof diff"


@dataclass(frozen=True)
class Output:
    """What a command does with its results besides rendering them."""

    json: Path | None = None
    csv: Path | None = None
    quiet: bool = False
    no_color: bool = False
    on_stderr: bool = False  # results on stderr: `trace`, whose stdout is the program's

    @classmethod
    def named(cls, json: str | None, csv: str | None, quiet: bool, no_color: bool) -> Output:
        """From the command line's words: a name ending in "/" is refused, not made a file."""
        names = {"--json": json, "--csv": csv}
        paths = [None if text is None else destination(text, o) for o, text in names.items()]
        return cls(*paths, quiet, no_color)

    def destinations(self) -> dict[str, Path | None]:
        return {"--json": self.json, "--csv": self.csv}

    def check(self, inputs: Sequence[Path] = ()) -> None:
        """Before any work: each destination writable, none an input, no two the same file."""
        for option, path in self.destinations().items():
            if path is not None:
                check_destination(path, option)
        check_distinct(self.destinations(), inputs)


def emit(results: list[Result], summarize: Callable[[Result], Summary], output: Output) -> None:
    """Show, save, then fail if a save failed (exit 5) or a result did not verify (exit 1).

    summarize: each Result's tables and conclusions (its experiment's).
    """
    from memprof.output.export import csv_text
    from memprof.output.render import render_result

    def render(console: Console) -> None:
        for index, result in enumerate(results):
            if index:
                console.print()
            render_result(result, summarize(result), console)

    texts: dict[str, Callable[[], str]] = {
        "--json": lambda: results[0].to_json() + "\n",
        "--csv": lambda: csv_text(results),
    }
    _show_then_save(render, texts, output)
    checks = [check for result in results for check in result.checks]
    failed = [check for check in checks if not check.passed]
    if failed:
        raise VerificationFailed(f"{len(failed)} of {plural(len(checks), 'result')} did not verify")


def emit_diff(summary: Summary, first: Path, second: Path, output: Output) -> None:
    """Show a diff and save it (--json) as the tables shown: strings, not a Result."""
    from memprof.output.render import render_summary

    def diff_json() -> str:
        document = {
            "format": DIFF_FORMAT,
            "a": str(first),
            "b": str(second),
            "tables": [asdict(table) for table in summary.tables],
            "conclusions": summary.conclusions,
        }
        return json.dumps(document, indent=1) + "\n"

    _show_then_save(lambda console: render_summary(summary, console), {"--json": diff_json}, output)


def _show_then_save(
    render: Callable[[Console], None], texts: dict[str, Callable[[], str]], output: Output
) -> None:
    wanted = {option: path for option, path in output.destinations().items() if path is not None}
    try:
        if not output.quiet:
            try:
                render(results_console(output.no_color, output.on_stderr))
            except BrokenPipeError:  # `memprof ... | head`: the reader has what it wanted
                silence_closed_stdout(output.on_stderr)
    except BaseException:
        for problem in _save(wanted, texts, output):  # the run is kept even when showing fails
            print_error(problem, output.no_color)
        raise
    problems = _save(wanted, texts, output)
    if problems:
        raise SaveFailed("; ".join(problems))


def _save(
    wanted: dict[str, Path], texts: dict[str, Callable[[], str]], output: Output
) -> list[str]:
    """Write every wanted file atomically; the problems, one phrase each, instead of raising."""
    problems = []
    for option, path in wanted.items():
        try:
            write_text_atomic(path, texts[option]())
        except OSError as error:
            problems.append(f"{option} {path}: not saved: {error.strerror or error}")
        except Exception as error:  # a value that cannot be written: say so, keep the rest
            problems.append(f"{option} {path}: not saved: {type(error).__name__}: {error}")
        else:
            if not output.quiet:
                print_note(f"saved {path}", output.no_color)
    return problems
