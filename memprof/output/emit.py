"""Where a command's results go: the terminal, --json and --csv, in an order that loses nothing.

Destinations are checked before any work (Output.check). Results are shown first, so a run
is seen even if saving fails, then saved even if showing failed; either failure is one line
and exit code 5, after the output. Only what loads is saved: a result the loader would refuse
is kept beside the output for a bug report, and exit code 70 names the check.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memprof.errors import ExitCode, InvalidArgument, MemprofError, SaveFailed, VerificationFailed
from memprof.model.formatting import plural
from memprof.model.results import Result, results_to_json
from memprof.model.summary import Summary
from memprof.output.console import print_error, print_note, results_console, silence_closed_stdout
from memprof.output.files import (
    Destination,
    check_distinct,
    check_output,
    destination,
    write_new_beside,
    write_output,
)

if TYPE_CHECKING:  # imported where results are shown: `--quiet` needs no rich
    from rich.console import Console

DIFF_FORMAT = "memprof diff"
DESTINATIONS = ("json", "csv", "junit", "timeline")  # Output's files, as their options name them


@dataclass(frozen=True)
class Output:
    """What a command does with its results besides rendering them."""

    json: Destination | None = None
    csv: Destination | None = None
    junit: Destination | None = None  # written after the rest (memprof.cli_gates.junit_after)
    quiet: bool = False
    no_color: bool = False
    on_stderr: bool = False  # results on stderr: `trace`, whose stdout is the program's
    verbose: bool = False  # every verification on its own line (memprof.output.render)
    timeline: Destination | None = None  # a trace's timeline (memprof.output.timeline)

    @classmethod
    def named(
        cls,
        json: str | None,
        csv: str | None,
        quiet: bool,
        no_color: bool,
        junit: str | None = None,
        verbose: bool = False,
        timeline: str | None = None,
    ) -> Output:
        """From the command line's words: a name ending in "/" is refused, not made a file;
        --quiet beside --verbose is refused, not left quiet."""
        if quiet and verbose:
            raise InvalidArgument(
                "--quiet prints nothing but errors and --verbose prints every verification: "
                "give one of them"
            )
        names = {"json": json, "csv": csv, "junit": junit, "timeline": timeline}
        targets = {k: None if t is None else destination(t, f"--{k}") for k, t in names.items()}
        return cls(**targets, quiet=quiet, no_color=no_color, verbose=verbose)

    def destinations(self) -> dict[str, Destination | None]:
        """Every file or stream the command writes besides what it shows."""
        return {f"--{name}": getattr(self, name) for name in DESTINATIONS}

    @property
    def shown_on_stderr(self) -> bool:
        """Results shown on stderr: `trace`'s, or where any destination is stdout (`--json -`,
        `--junit -`), so that what a pipe reads is that file alone."""
        return self.on_stderr or any(
            target is not None and target.is_stdout for target in self.destinations().values()
        )

    def check(self, inputs: Sequence[Path] = ()) -> None:
        """Before any work: each destination writable, none an input, no two the same file
        or stream, none stdout where stdout is not memprof's (`trace`)."""
        for option, target in self.destinations().items():
            if target is None:
                continue
            check_output(target, option)
            if target.is_stdout and self.on_stderr:
                raise InvalidArgument(  # `trace --json -`: the program's output is there
                    f"{option} {target}: stdout is the traced program's, where the two could "
                    "not be told apart: send it to a file"
                )
            if target.descriptor == 2 and not self.quiet and self.shown_on_stderr:
                raise InvalidArgument(
                    f"{option} {target}: the tables are shown on stderr, where the two could "
                    "not be told apart: send it to a file, or add --quiet"
                )
        check_distinct(self.destinations(), inputs)


def emit(
    results: list[Result],
    summarize: Callable[[Result], Summary],
    output: Output,
    together: Summary | None = None,
    loaded: bool = False,
) -> None:
    """Show, save, then fail: exit 5 if a save failed, 1 if a result did not verify or its
    summary judged something failed (memprof check's FAIL lines). together: one Summary shown
    instead of each one's (report --fleet); loaded: just read by the loader, which held."""
    summaries = [summarize(result) for result in results]

    def render(console: Console) -> None:
        from memprof.output.render import render_result, render_summary

        if together is not None:
            render_summary(together, console)
            return
        shown: dict[str, Result] = {}  # each table note shown, and the run it was shown for
        for index, (result, summary) in enumerate(zip(results, summaries, strict=True)):
            if index:
                console.print()
            shown_summary = notes_once(summary, result, shown)
            render_result(result, shown_summary, console, verbose=output.verbose)

    texts: dict[str, Callable[[], str]] = {
        "--json": lambda: (
            (results[0].to_json() if len(results) == 1 else results_to_json(results)) + "\n"
        ),
        "--csv": lambda: _csv_text(results, summaries),
        "--timeline": lambda: _chrome_trace(results[0]),
    }
    refused = [] if loaded else _refused(results, output)
    _show_then_save(render, {} if refused else texts, output)
    if refused:
        raise _unsaved(refused, output)
    checks = [check for result in results for check in result.checks]
    failed = [check for check in checks if not check.passed]
    if failed:
        raise VerificationFailed(f"{len(failed)} of {plural(len(checks), 'result')} did not verify")
    judged = [line for summary in summaries for line in summary.failed]  # memprof check
    if judged:
        more = f" (and {len(judged) - 1} more)" if len(judged) > 1 else ""
        raise VerificationFailed(f"check failed: {judged[0]}{more}")


def _csv_text(results: list[Result], summaries: list[Summary]) -> str:
    """Imported where --csv asks for it: report without it loads none of export's modules."""
    from memprof.output.export import csv_text

    return csv_text(
        results, [summary.figures for summary in summaries], [s.derived for s in summaries]
    )


def _chrome_trace(result: Result) -> str:
    """Imported where --timeline asks for it, as _csv_text."""
    from memprof.output.timeline import chrome_trace

    return chrome_trace(result)


def notes_once(summary: Summary, result: Result, shown: dict[str, Result]) -> Summary:
    """The summary without the table notes an earlier run showed, saying whose they were
    (every GPU's check of --device all has the same footnotes)."""
    tables, earlier, before = [], [], dict(shown)  # a run's own tables may repeat a note
    for table in summary.tables:
        notes = [note for note in table.notes if note not in before]
        earlier += [before[note] for note in table.notes if note in before]
        for note in notes:
            shown.setdefault(note, result)
        if len(notes) < len(table.notes):
            first = earlier[0]
            whose = "the run" if first.gpu_index is None else f"GPU {first.gpu_index}"
            notes.append(f"{'Other notes' if notes else 'Notes'} as for {whose} above.")
        tables.append(dataclasses.replace(table, notes=notes))
    return dataclasses.replace(summary, tables=tables) if earlier else summary


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


def _refused(results: list[Result], output: Output) -> list[tuple[Result, str]]:
    """The results to be saved that the loader would refuse, each with its check's words
    (then none is written, lest a run be kept that no later step reads)."""
    if Result.views is None or not any(output.destinations().values()):
        return []
    found = ((result, Result.views.refusal(result)) for result in results)
    refused = [(result, why) for result, why in found if why is not None]
    if not refused and output.json is not None:  # several in one file: one run of them
        why = Result.views.not_one_run(results)
        refused = [] if why is None else [(result, f"the --json file: {why}") for result in results]
    return refused


def _unsaved(refused: list[tuple[Result, str]], output: Output) -> MemprofError:
    """Exit 70 naming the failed check; each refused result kept beside the output."""
    target = output.json or output.csv
    assert target is not None
    kept = []
    for result, _ in refused:
        try:
            text = result.to_json() + "\n"
        except (TypeError, ValueError, OverflowError):
            text = repr(result) + "\n"
        try:
            kept.append(str(write_new_beside(target, ".unloadable.json", text)))
        except OSError as error:
            kept.append(f"nowhere ({error.strerror or error})")
    options = " and ".join(f"{o} {t}" for o, t in output.destinations().items() if t)
    more = f" (and {len(refused) - 1} more results)" if len(refused) > 1 else ""
    return MemprofError(
        f"{refused[0][1]}{more}: the loader would refuse it, so {options} was not written "
        f"(a bug in memprof); its records are kept in {', '.join(kept)} for a bug report",
        ExitCode.INTERNAL,
    )


def _show_then_save(
    render: Callable[[Console], None], texts: dict[str, Callable[[], str]], output: Output
) -> None:
    wanted = {
        option: path
        for option, path in output.destinations().items()
        if path is not None and option in texts  # --junit: saved after (cli_gates.junit_after)
    }
    problems = []
    try:
        if not output.quiet:
            problems += _show(render, output.no_color, output.shown_on_stderr)
    except BaseException:
        for problem in save_each(wanted, texts, output):  # the run is kept even when showing fails
            print_error(problem, output.no_color)
        raise
    problems += save_each(wanted, texts, output)
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


def save_each(
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
        else:  # the "saved" line on stderr, for every destination alike
            if not output.quiet:
                where = "to stdout" if target.name == "-" else str(target)
                print_note(f"saved {where}", output.no_color)
    return problems


def _silence(target: Destination) -> None:
    """After a failed write to stdout or stderr, what Python still holds for it goes nowhere."""
    if target.descriptor in (1, 2):
        silence_closed_stdout(stderr=target.descriptor == 2)
