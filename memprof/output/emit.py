"""Where a command's results go: the terminal, --json and --csv, in an order that loses nothing.

Destinations are checked before any work (Output.check). Afterwards results are shown
first, so a run is seen even if saving fails, and saved even if showing fails or the
reader closed the pipe; a failed save is one line and exit code 5, after the output, and so
is output that could not be shown (stdout closed, or on a full disk), the files saved.
"""

from __future__ import annotations

import errno
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from memprof.errors import SaveFailed, VerificationFailed
from memprof.model.formatting import plural
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.console import print_error, print_note, results_console, silence_closed_stdout
from memprof.output.files import (
    Destination,
    check_distinct,
    check_output,
    destination,
    write_output,
)

DIFF_FORMAT = "memprof diff"


@dataclass(frozen=True)
class Output:
    """What a command does with its results besides rendering them."""

    json: Destination | None = None
    csv: Destination | None = None
    quiet: bool = False
    no_color: bool = False
    on_stderr: bool = False  # results on stderr: `trace`, whose stdout is the program's
    verbose: bool = False  # every verification on its own line (memprof.output.render)

    @classmethod
    def named(cls, json: str | None, csv: str | None, quiet: bool, no_color: bool) -> Output:
        """From the command line's words: a name ending in "/" is refused, not made a file."""
        names = {"--json": json, "--csv": csv}
        paths = [None if text is None else destination(text, o) for o, text in names.items()]
        return cls(*paths, quiet, no_color)

    def destinations(self) -> dict[str, Destination | None]:
        return {"--json": self.json, "--csv": self.csv}

    @property
    def shown_on_stderr(self) -> bool:
        """Results shown on stderr: `trace`'s, or where stdout is a destination (`--json -`),
        so that what a pipe reads is the file alone."""
        return self.on_stderr or any(t is not None and t.is_stdout for t in (self.json, self.csv))

    def check(self, inputs: Sequence[Path] = ()) -> None:
        """Before any work: each destination writable, none an input, no two the same file
        or stream."""
        for option, target in self.destinations().items():
            if target is not None:
                check_output(target, option)
        check_distinct(self.destinations(), inputs)


def emit(results: list[Result], summarize: Callable[[Result], Summary], output: Output) -> None:
    """Show, save, then fail if a save failed (exit 5), a result did not verify or its
    summary judged something failed (memprof check's FAIL lines): exit 1.

    summarize: each Result's tables and conclusions (its experiment's).
    """
    from memprof.output.export import csv_text
    from memprof.output.render import render_result

    summaries = [summarize(result) for result in results]

    def render(console: Console) -> None:
        for index, (result, summary) in enumerate(zip(results, summaries, strict=True)):
            if index:
                console.print()
            render_result(result, summary, console, verbose=output.verbose)

    texts: dict[str, Callable[[], str]] = {
        "--json": lambda: results[0].to_json() + "\n",
        "--csv": lambda: csv_text(
            results, [summary.figures for summary in summaries], [s.derived for s in summaries]
        ),
    }
    _show_then_save(render, texts, output)
    checks = [check for result in results for check in result.checks]
    failed = [check for check in checks if not check.passed]
    if failed:
        raise VerificationFailed(f"{len(failed)} of {plural(len(checks), 'result')} did not verify")
    judged = [line for summary in summaries for line in summary.failed]  # memprof check
    if judged:
        more = f" (and {len(judged) - 1} more)" if len(judged) > 1 else ""
        raise VerificationFailed(f"check failed: {judged[0]}{more}")


def emit_diff(summary: Summary, first: Path, second: Path, output: Output) -> None:
    """Show a diff and save it (--json) as the tables shown: strings, not a Result."""
    from memprof.output.render import render_summary

    def diff_json() -> str:
        document = {
            "format": DIFF_FORMAT,
            "a": str(first),
            "b": str(second),
            "not_comparable": summary.header,
            "tables": [asdict(table) for table in summary.tables],
            "conclusions": summary.conclusions,
        }
        return json.dumps(document, indent=1) + "\n"

    _show_then_save(lambda console: render_summary(summary, console), {"--json": diff_json}, output)


def _show_then_save(
    render: Callable[[Console], None], texts: dict[str, Callable[[], str]], output: Output
) -> None:
    wanted = {option: path for option, path in output.destinations().items() if path is not None}
    problems = []
    try:
        if not output.quiet:
            problems += _show(render, output.no_color, output.shown_on_stderr)
    except BaseException:
        for problem in _save(wanted, texts, output):  # the run is kept even when showing fails
            print_error(problem, output.no_color)
        raise
    problems += _save(wanted, texts, output)
    if problems:
        raise SaveFailed("; ".join(problems))


# Write errors only a full or failing disk gives: outside _save, only stdout meets them.
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def stdout_failed(error: BaseException) -> str | None:
    """The one line of exit code 5 where an error came from writing stdout (`memprof --help
    > /dev/full`); None for any other error."""
    if not isinstance(error, OSError) or isinstance(error, BrokenPipeError):
        return None
    if error.errno not in DISK_ERRORS:
        try:
            sys.stdout.flush()  # what could not be written would still be waiting
            return None
        except (OSError, AttributeError, ValueError):
            pass
    silence_closed_stdout()  # nothing more can be written there, at exit neither
    return f"stdout: not written: {error.strerror or error}"


def _show(render: Callable[[Console], None], no_color: bool, on_stderr: bool) -> list[str]:
    """Render the results (on stdout, or stderr for `trace`); what kept them from being
    shown, one phrase, instead of raising."""
    name, stream = ("stderr", sys.stderr) if on_stderr else ("stdout", sys.stdout)
    if stream is None:  # `memprof report run.json >&-`
        return [f"{name}: not shown: it is closed"]
    try:
        render(results_console(no_color, on_stderr))
        stream.flush()  # a full disk (`> /dev/full`) says so here, not at exit
    except BrokenPipeError:  # `memprof ... | head`: the reader has what it wanted
        silence_closed_stdout(on_stderr)
    except OSError as error:
        silence_closed_stdout(on_stderr)  # nothing more can be written there, at exit neither
        return [f"{name}: not shown: {error.strerror or error}"]
    return []


def _save(
    wanted: dict[str, Destination], texts: dict[str, Callable[[], str]], output: Output
) -> list[str]:
    """Write every wanted file atomically (a stream through its descriptor); the problems,
    one phrase each, instead of raising."""
    problems = []
    for option, target in wanted.items():
        try:
            write_output(target, texts[option]())
        except BrokenPipeError:  # `--json - | head -c 100`: the reader has what it wanted
            _silence(target)
            continue
        except OSError as error:
            _silence(target)  # nothing more can be written there, at exit neither
            problems.append(f"{option} {target}: not saved: {error.strerror or error}")
        except Exception as error:  # a value that cannot be written: say so, keep the rest
            problems.append(f"{option} {target}: not saved: {type(error).__name__}: {error}")
        else:
            if not output.quiet:
                where = "to stdout" if target.name == "-" else str(target)
                print_note(f"saved {where}", output.no_color)
    return problems


def _silence(target: Destination) -> None:
    """After a failed write to stdout or stderr, what Python still holds for it goes nowhere."""
    if target.descriptor in (1, 2):
        silence_closed_stdout(stderr=target.descriptor == 2)
