"""What makes memprof a CI gate: `diff --fail-above`, and `--junit FILE` on check, check-pairs,
report and diff (docs/ci.md shows a job that uses both). A gate refuses runs that are not
comparable (diff's header lists why) unless --allow-not-comparable: a gate over two machines
gates on the machines. The JUnit file is written after the output, also when the command fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.cli_options import PATH, option
from memprof.errors import ExitCode, InvalidArgument, MemprofError, SaveFailed
from memprof.model.results import Result
from memprof.output.console import print_error
from memprof.output.emit import Output

if TYPE_CHECKING:  # imported where used: `memprof report` without --junit needs neither
    from memprof.model.summary import Summary
    from memprof.output.diff import Compared

JUNIT_COMMANDS = ("check", "check-pairs")  # GPU commands that take --junit (report, diff too)
JUNIT_HELP = (
    "Also save a JUnit XML report for CI systems: one test case per check line (a FAIL fails "
    "it) and per verification against numpy."
)
DIFF_JUNIT_HELP = (
    "Also save a JUnit XML report for CI systems: one test case per figure in both runs, "
    "failed where --fail-above fails it."
)
FAIL_ABOVE_HELP = (
    "Exit 1 when a figure in both runs got slower (a longer median time, so a lower GB/s) "
    "by more than this percentage and more than the two runs' own noise; each such figure is "
    "named on stderr. A gate refuses runs that are not comparable (exit 2)."
)
ALLOW_HELP = (
    "Compare and gate runs that are not comparable (another command, GPU model, driver, "
    "clocks, link, timing source...: the lines above the table) instead of refusing them."
)
ONLY_HELP = (
    "Compare and gate only these figures (repeatable; any of them selects): gbps (figures "
    "with a GB/s), gpu (the GPU's own times), api (driver calls), host (host work), or a "
    "shell pattern matched against the Measurement and Bytes, as '*HtoD*(pinned)*'."
)
DIFF_VERBOSE_HELP = "List every figure in both runs, also those within noise."


class Regressed(MemprofError):
    """A figure got slower beyond `diff --fail-above` and its noise (exit 1)."""

    exit_code = ExitCode.CHECK_FAILED


def junit_option(help: str = JUNIT_HELP) -> inspect.Parameter:
    return option("junit", str | None, None, metavar=PATH, help=help)


def percent_option(name: str, help: str, most: float, zero: bool = True) -> inspect.Parameter:
    """A percentage option, refused outside 0 (where `zero`, else above it) to `most`."""

    def check(value: float | None) -> float | None:
        if value is not None and not (0 <= value <= most and (zero or value > 0)):
            import typer

            raise typer.BadParameter(
                f"{value:g} is outside the allowed range 0 to {most:g} (percent)"
            )
        return value

    return option(name, float | None, None, metavar="<percent>", callback=check, help=help)


def gate_options() -> list[inspect.Parameter]:
    """diff's --fail-above, --allow-not-comparable and --junit."""
    from memprof.output.diff import MAX_FAIL_ABOVE_PCT

    return [
        percent_option("fail_above", FAIL_ABOVE_HELP, MAX_FAIL_ABOVE_PCT),
        option("allow_not_comparable", bool, False, help=ALLOW_HELP),
        option("only", list[str] | None, None, metavar="<what>", help=ONLY_HELP),
        option("verbose", bool, False, "--verbose", "-v", help=DIFF_VERBOSE_HELP),
        junit_option(DIFF_JUNIT_HELP),
    ]


FLEET_HELP = (
    "Many runs of one command (one per GPU or node, as a scheduler gathers them) in one "
    "table instead of each run's report: each run's figures against the fleet's median, the "
    "outliers named (10% from it, and beyond the run's own noise)."
)
FAIL_OUTLIERS_HELP = (
    "Exit 1 when a run's figure is slower than the fleet's median by more than this "
    "percentage and its own noise, each named on stderr; marks outliers at it (implies "
    "--fleet)."
)


def fleet_options() -> list[inspect.Parameter]:
    """report's --fleet and --fail-outliers."""
    return [
        option("fleet", bool, False, help=FLEET_HELP),
        percent_option("fail_outliers", FAIL_OUTLIERS_HELP, 100, zero=False),
    ]


def fleet_report(
    results: list[Result],
    summaries: dict[int, Summary],
    fail_outliers: float | None,
    output: Output,
) -> None:
    """`report --fleet`: the runs side by side (memprof.output.fleet), then the gate."""
    from memprof.api import declared
    from memprof.experiments import experiment_class
    from memprof.model.formatting import plural
    from memprof.output.console import print_note
    from memprof.output.emit import emit
    from memprof.output.fleet import MIN_RUNS, fleet

    after = experiment_class(results[0].command).every_gpu_then  # a file of --device all's
    results = [result for result in results if result.command != after]  # each GPU's runs
    commands = sorted({result.command for result in results})
    if fail_outliers is not None and len(commands) > 1:  # they share no figure to judge
        raise InvalidArgument(
            f"--fail-outliers gates runs of one command; these are of {', '.join(commands)}"
        )
    if fail_outliers is not None and len(results) < MIN_RUNS:
        raise InvalidArgument(
            f"--fail-outliers judges each run against the median of {MIN_RUNS} or more, and "
            f"{plural(len(results), 'run')} {'was' if len(results) == 1 else 'were'} given: "
            "a gate that could judge none (--fleet shows them)"
        )
    _each_run_once(results)
    threshold = None if fail_outliers is None else fail_outliers / 100
    found = fleet(results, declared, threshold)
    emit(results, lambda result: summaries[id(result)], output, found.summary, loaded=True)
    if fail_outliers is None or not found.slower:
        return
    for d in found.slower:
        print_note(
            f"memprof: outlier: {found.runs[d.run]}: {d.label}: {d.shown}, "
            f"{d.ratio - 1:+.1%} against the fleet's median (limit {d.limit:.1%})",
            output.no_color,
            "bold red",
        )
    slow = sorted({found.runs[d.run] for d in found.slower})
    raise Regressed(
        f"{plural(len(slow), 'run')} slower than the fleet beyond --fail-outliers "
        f"{fail_outliers:g}%: {', '.join(slow)}"
    )


def _each_run_once(results: list[Result]) -> None:
    """Refuse one run in two files (a copy): the fleet's median would count it twice, and a
    run held thrice beside one other is that median."""
    seen: dict[tuple, Result] = {}
    for result in results:
        first = seen.setdefault(
            (result.host, result.pid, result.created_at, result.gpu_index), result
        )
        if first is not result:
            raise InvalidArgument(
                f"{first.loaded_from} and {result.loaded_from} hold one run ({result.host}, "
                f"GPU {result.gpu_index}, {result.created_at}): give each run once"
            )


def save_junit(made: str | None, output: Output) -> None:
    """Write output.junit, as --json's, where there is a report (None: the run itself failed,
    nothing to report); a failure is exit 5."""
    from memprof.output.emit import save_each

    if output.junit is not None and made is not None:
        problems = save_each({"--junit": output.junit}, {"--junit": lambda: made}, output)
        if problems:
            raise SaveFailed("; ".join(problems))


@contextlib.contextmanager
def junit_after(text: Callable[[], str | None], output: Output) -> Iterator[None]:
    """Save output.junit, which text() makes, when the command's work inside is done, also when
    it failed (a FAIL, a failed verification, a gate): a save that fails then is one line."""
    report = text if output.junit is not None else lambda: None
    try:
        yield
    except BaseException:
        made = report()
        try:
            save_junit(made, output)
        except MemprofError as problem:
            print_error(str(problem), output.no_color)
        raise
    save_junit(report(), output)


def results_junit(results: list[Result]) -> str:
    """The JUnit report of a command's Results: check lines and verifications."""
    from memprof.output.junit import Case, Suite, junit_xml

    suites = []
    for result in results:
        cases = []
        if result.command in JUNIT_COMMANDS:
            from memprof.experiments import check  # only for a check's Result

            where, lines, again = check.judged(result)
            for line in lines:
                said = f"{line.verdict}: {line.measured}; expected {line.expected}"
                if line.what in again:
                    said += f"; measured again: {again[line.what]}"
                cases.append(Case(line.what, said if line.verdict == "FAIL" else None, said))
        else:
            device = result.device
            where = f"GPU {device.index} ({device.name})" if device else result.host
        for verified in result.checks:
            failure = None if verified.passed else verified.detail
            cases.append(Case(f"verified: {verified.name}", failure, verified.detail))
        suites.append(Suite(f"memprof {result.command}, {where}", cases))
    return junit_xml(suites, f"memprof {results[0].command}" if results else "memprof")


def diff(
    first: Path,
    second: Path,
    fail_above: float | None,
    allow_not_comparable: bool,
    only: list[str] | None,
    verbose: bool,
    junit: str | None,
    json: str | None,
    quiet: bool,
    no_color: bool,
) -> None:
    """`memprof diff`: the two runs compared, then the gate (--fail-above) and its JUnit."""
    from memprof.api import compared_runs
    from memprof.output.emit import emit_diff

    output = Output.named(json, None, quiet, no_color, junit)
    output.check(inputs=(first, second))
    share = None if fail_above is None else fail_above / 100
    chosen = only or ()
    pairs = matched_runs(first, second)
    asked = f"--only {' '.join(chosen)}"
    comparisons = compared_runs(pairs, share, allow_not_comparable, chosen, verbose, asked)
    summary, figures = each_gpu_compared(comparisons)
    with junit_after(lambda: diff_junit(figures, share, first, second), output):
        emit_diff(summary, first, second, output)
        gate(figures, share, output)


def matched_runs(first: Path, second: Path) -> list[tuple[str, Result, Result]]:
    """The runs a diff compares: A with B; for files of --device all, each GPU's run in A with
    the same GPU's in B (and the runs over every GPU at once with each other), named ("GPU
    1"); files that do not hold the same GPUs' runs are refused in one line."""
    from memprof.api import load_all

    a_runs, b_runs = load_all(first), load_all(second)
    if len(a_runs) == len(b_runs) == 1:
        return [("", a_runs[0], b_runs[0])]
    a_held, b_held = (dict(zip(_runs_held(runs), runs, strict=True)) for runs in (a_runs, b_runs))
    if sorted(a_held) != sorted(b_held):
        raise InvalidArgument(
            f"A holds {', '.join(a_held)} and B {', '.join(b_held)}: a diff of runs of "
            "--device all compares each GPU with the same GPU in the other, so both files must "
            "hold the same GPUs' runs"
        )
    return [(name, a, b_held[name]) for name, a in a_held.items()]


def _runs_held(results: list[Result]) -> list[str]:
    """Each run of a file, named as a diff names it: "GPU 1", or "every GPU" for a run over
    every GPU at once (a file's last, of another command than its first)."""
    first = results[0].command
    return [
        f"GPU {result.gpu_index}" if result.command == first else f"every GPU ({result.command})"
        for result in results
    ]


def each_gpu_compared(comparisons: list[tuple[str, Any]]) -> tuple[Summary, list[Compared]]:
    """One diff's summary and figures of several GPUs' comparisons: each table, conclusion and
    figure named by its GPU (one comparison's are as they are)."""
    if len(comparisons) == 1:
        return comparisons[0][1].summary, comparisons[0][1].rows
    first = comparisons[0][1].summary
    summary = dataclasses.replace(first, header=[], tables=[], conclusions=[])
    figures: list[Compared] = []
    for gpu, comparison in comparisons:
        part = comparison.summary
        summary.header += [f"{gpu}: {line}" for line in part.header]
        for table in part.tables:
            summary.tables.append(dataclasses.replace(table, title=f"{gpu}: {table.title}"))
        summary.conclusions += [f"{gpu}: {line}" for line in part.conclusions]
        figures += [
            dataclasses.replace(row, label=f"{gpu}: {row.label}") for row in comparison.rows
        ]
    return summary, figures


def diff_junit(figures: list[Compared], fail_above: float | None, a: Path, b: Path) -> str:
    from memprof.output.diff import regressed_line
    from memprof.output.junit import Case, Suite, junit_xml

    cases = []
    for figure in figures:
        said = figure.change()
        if figure.ratio is not None:
            said = f"B / A {figure.ratio:.3f}x, noise {figure.noise:.1%}: {said}"
        failed = fail_above is not None and figure.worse_beyond(fail_above)
        cases.append(
            Case(figure.label, regressed_line(figure, fail_above) if failed else None, said)
        )
    return junit_xml([Suite(f"memprof diff {a} {b}", cases)], "memprof diff")


def gate(figures: list[Compared], fail_above: float | None, output: Output) -> None:
    """`--fail-above`: one line per figure that got worse beyond it on stderr, then exit 1."""
    from memprof.output.console import print_note
    from memprof.output.diff import regressed_line

    if fail_above is None:
        return
    worse = [figure for figure in figures if figure.worse_beyond(fail_above)]
    for figure in worse:
        print_note(f"memprof: {regressed_line(figure, fail_above)}", output.no_color, "bold red")
    if worse:
        raise Regressed(
            f"{len(worse)} of {len(figures)} figures got slower by more than "
            f"--fail-above {fail_above:.1%} and their noise"
        )
