"""The Python API: run an experiment, load a saved Result, render, compare, frame or draw it.
The command line is built on the same functions (memprof.cli)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.core.repetitions import DEFAULT_MAX_NOISE_PCT
from memprof.errors import InvalidArgument, SaveFailed
from memprof.experiments import PROGRAM_COMMAND, experiment_named, summarize
from memprof.experiments import load as load_result
from memprof.experiments.base import (
    UNREAD,
    Experiment,
    Progress,
    RunOptions,
    declared_measures,
    no_progress,
)
from memprof.experiments.base import run as run_experiment
from memprof.model import params as params_model
from memprof.model.results import Result
from memprof.model.schema import MAX_GPU_INDEX
from memprof.output.files import Destination, check_destination, check_distinct

if TYPE_CHECKING:
    from memprof.output.diff import Comparison
    from memprof.output.plot import Picture


def run(
    command: str,
    *,
    device: int | None = None,
    timing: str = "auto",
    affinity: bool = True,
    progress: Progress = no_progress,
    max_noise: float | None = None,
    **params: Any,
) -> Result:
    """Measure one command's experiment on GPU `device` (0 where not given; none for an
    experiment over every GPU at once) and return its Result (printing nothing). Keyword
    parameters are the command's options (power=20, repeat=5...), checked as the command
    line checks them (numpy integers and bools taken as the Python values they hold); a
    failed verification is in result.checks. Without repeat=N, each measurement repeats
    until its median's noise is below max_noise percent (1 where not given; with repeat=N,
    which repeats exactly, it is refused)."""
    if not isinstance(command, str):
        raise TypeError(
            f"memprof.run: command must be a str such as 'pinned', not {_kind(command)}"
        )
    experiment = experiment_named(command)
    if experiment.name == PROGRAM_COMMAND:
        raise InvalidArgument(f"memprof.run: {command} runs a program: use `memprof {command}`")
    if max_noise is not None and params.get("repeat") is not None:
        raise InvalidArgument(
            "memprof.run: max_noise decides when repetitions stop, but repeat=N repeats "
            "exactly: give one of them"
        )
    noise = DEFAULT_MAX_NOISE_PCT if max_noise is None else _noise(max_noise)
    index, timing_source = _device(device, experiment), _timing(timing)
    options = RunOptions(index, timing_source, _flag(affinity, "memprof.run: affinity"), noise)
    if not callable(progress):
        raise TypeError(
            f"memprof.run: progress must be a function (description, done, total), "
            f"not {_kind(progress)}"
        )
    chosen = params_model.make(experiment.Params, **params)
    result, _ = run_experiment(experiment, chosen, options, progress)
    return result


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _device(device: Any, experiment: Experiment) -> int | None:
    """A GPU index 0 to 63 (0 where not given); None for experiments over every GPU at once,
    which refuse one (they would measure every GPU whatever it said)."""
    device = params_model.plain(device)
    if experiment.gpus == "every":
        if device is not None:
            raise InvalidArgument(
                f"memprof.run: device={device!r}: {experiment.name} measures every GPU at "
                "once and takes no device"
            )
        return None
    if device is None:
        return 0
    if device == "all":
        raise InvalidArgument(
            f"memprof.run: device={device!r}: give one GPU's index (0, 1, ...); "
            "memprof.api.run_each_gpu runs every GPU in turn"
        )
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"memprof.run: device must be a GPU index (int), not {_kind(device)}")
    if not 0 <= device <= MAX_GPU_INDEX:
        raise InvalidArgument(f"memprof.run: device={device}: a GPU index is 0 to {MAX_GPU_INDEX}")
    return device


def _timing(timing: Any) -> str:
    if not isinstance(timing, str):
        raise TypeError(f"memprof.run: timing must be a str, not {_kind(timing)}")
    if timing not in TIMINGS:
        raise InvalidArgument(f"memprof.run: timing={timing!r}: choose from {', '.join(TIMINGS)}")
    return timing


TIMINGS = ("auto", "cupti", "events")


def _flag(value: Any, what: str) -> bool:
    """True or False (a numpy bool too); else the TypeError naming the argument `what`."""
    value = params_model.plain(value)
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, not {_kind(value)}")
    return value


def _noise(max_noise: Any) -> float:
    """--max-noise's percent, as the command line allows it (a numpy number too)."""
    from memprof.model import schema
    from memprof.model.results import Percent

    max_noise = params_model.plain(max_noise)
    if isinstance(max_noise, bool) or not isinstance(max_noise, int | float):
        raise TypeError(f"memprof.run: max_noise must be a number, not {_kind(max_noise)}")
    rule = params_model.range_of(Percent)
    if not schema.allows(rule, max_noise):
        raise InvalidArgument(f"memprof.run: max_noise: {schema.refusal(rule, max_noise)}")
    return float(max_noise)


def load(path: str | Path) -> Result:
    """A Result saved with --json, every value checked (InvalidArgument if it is not one)."""
    return load_result(_path(path, "memprof.load"))


def load_all(path: str | Path) -> list[Result]:
    """Every Result of a file saved with --json: a run of `--device all` saves each GPU's
    (then the run over every GPU at once) in one file, a run on one GPU its one Result."""
    from memprof.experiments import load_all_summarized

    return [result for result, _ in load_all_summarized(_path(path, "memprof.load_all"))]


def _path(path: Any, function: str) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{function}: path must be a str or a path, not {_kind(path)}")
    if not os.fspath(path):  # Path("") would be ".", the working folder
        raise InvalidArgument(f"{function}: path is empty")
    return Path(path)


def render(result: Result, console: Any = None) -> None:
    """Print a Result as its command does: the profile, tables, checks and conclusions."""
    from memprof.output.render import render_result

    _a_result(result, "memprof.render: result")
    render_result(result, summarize(result), _console(console, "memprof.render"))


def _a_result(value: Any, what: str, must: str = "a Result") -> Result:
    """`value`, where it is a Result; else the TypeError naming the argument."""
    if not isinstance(value, Result):
        named = isinstance(value, str | bytes | os.PathLike)
        raise TypeError(
            f"{what} must be {must} (from memprof.run or memprof.load), not {_kind(value)}"
            + (" (memprof.load reads a file)" if named else "")
        )
    return value


def _results(results: Any, function: str) -> list[Result]:
    """One Result or several as a list, each a Result; else the TypeError naming it."""
    if isinstance(results, Result):
        return [results]
    if isinstance(results, Iterable) and not isinstance(results, str | bytes | dict):
        return [_a_result(one, f"{function}: results[{i}]") for i, one in enumerate(results)]
    return [_a_result(results, f"{function}: results", "a Result or a list of Results")]


def _console(console: Any, function: str) -> Any:
    """The rich Console given, or the one results are printed on; a TypeError for another."""
    from rich.console import Console

    from memprof.output.console import results_console

    if console is not None and not isinstance(console, Console):
        raise TypeError(f"{function}: console must be a rich Console, not {_kind(console)}")
    return console or results_console()


def diff(
    first: Result,
    second: Result,
    console: Any = None,
    *,
    fail_above: float | None = None,
    only: str | Iterable[str] = (),
    verbose: bool = False,
    allow_not_comparable: bool = False,
) -> Comparison:
    """Print two Results compared as `memprof diff` does, and return the Comparison: its
    rows, regressions, improvements and verdict ('regressed' or 'passed'). fail_above is a
    percentage as --fail-above's (5: B slower by over 5% and its noise regressed); only,
    verbose and allow_not_comparable are --only's, --verbose's and --allow-not-comparable's
    (runs with nothing in common, or of two commands, or measured apart under a gate, are
    refused as the command line refuses them)."""
    from memprof.output.diff import MAX_FAIL_ABOVE_PCT
    from memprof.output.render import render_summary

    _a_result(first, "memprof.diff: first")
    _a_result(second, "memprof.diff: second")
    shown_on = _console(console, "memprof.diff")
    if fail_above is not None and (
        isinstance(fail_above, bool)
        or not isinstance(fail_above, int | float)
        or not 0 <= fail_above <= MAX_FAIL_ABOVE_PCT
    ):
        raise InvalidArgument(
            f"memprof.diff: fail_above is a percentage from 0 to {MAX_FAIL_ABOVE_PCT:g}, "
            f"not {fail_above!r}"
        )
    several = isinstance(only, Iterable) and not isinstance(only, str)
    chosen = tuple(only) if several else (only,)
    if not all(isinstance(what, str) for what in chosen):
        raise TypeError(
            "memprof.diff: only must be a str or strings (gbps, gpu, api, host, or a pattern)"
        )
    share = None if fail_above is None else fail_above / 100
    allowed = _flag(allow_not_comparable, "memprof.diff: allow_not_comparable")
    shown = _flag(verbose, "memprof.diff: verbose")
    asked, allow = f"memprof.diff: only={only!r}", "allow_not_comparable=True"
    pair = [("", first, second)]
    ((_, comparison),) = compared_runs(pair, share, allowed, chosen, shown, asked, allow)
    render_summary(comparison.summary, shown_on)
    return comparison


def compared_runs(
    pairs: list[tuple[str, Result, Result]],
    fail_above: float | None,
    allowed: bool,
    only: Iterable[str],
    verbose: bool,
    asked: str,
    allow: str = "--allow-not-comparable",
) -> list[tuple[str, Comparison]]:
    """Each pair of runs (named by whose they are under --device all, else "") compared, after
    InvalidArgument (exit 2) for runs a diff cannot compare: nothing in common; unless
    `allowed` (by the option `allow`), runs of two commands, or, where a gate judges them, runs
    measured apart (memprof.output.diff.differences); then for `only` (as `asked` names it)
    selecting no figure: a gate over none would pass whatever the runs hold."""
    from memprof.output.diff import ONLY_KINDS, compare, compared, differences

    comparisons = []
    for gpu, first, second in pairs:
        where = f"{gpu}: " if gpu else ""
        if not compared(first, second):
            raise InvalidArgument(
                f"{where}A ({first.command}) and B ({second.command}) have no measurement in "
                "common: nothing to compare (diff two runs of one command, at the same sizes)"
            )
        reasons = [f"commands: A {first.command}, B {second.command}."] * (
            first.command != second.command
        )
        if fail_above is not None and not allowed:
            reasons += differences(first, second)
        if reasons and not allowed:
            more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
            raise InvalidArgument(
                f"{where}A and B are not comparable: {reasons[0].rstrip('.')}{more}; "
                f"{allow} compares them anyway"
            )
        declares = (declared(first), declared(second))
        figures = compare(first, second, fail_above, tuple(only), verbose, *declares)
        comparisons.append((gpu, figures))
    if not any(comparison.rows for _, comparison in comparisons):
        raise InvalidArgument(
            f"{asked}: no figure in both runs is of that kind or matches that pattern "
            f"(kinds: {', '.join(ONLY_KINDS)})"
        )
    return comparisons


def declared(result: Result) -> tuple:
    """The measures a Result's command declares: what its figures' GB/s and ceilings are."""
    from memprof.experiments import experiment_class

    try:
        return declared_measures(experiment_class(result.command))
    except InvalidArgument:  # no such command: its figures have no GB/s
        return ()


def frame(results: Result | Iterable[Result]) -> Any:
    """One pandas DataFrame of one Result or several (Result.to_frame() for one): the rows
    and columns of --csv (a row per measurement, then the figures the tables make of
    several), numbers as numbers. pandas is an optional extra: without it, MissingPackage
    (an ImportError) says how to install it."""
    from memprof.output.frames import frame as frame_of

    chosen = _results(results, "memprof.frame")
    return frame_of(chosen, [summarize(result) for result in chosen])


def plot(
    results: Result | Iterable[Result],
    path: str | Path | None = None,
    *,
    labels: Iterable[str] | None = None,
) -> Picture:
    """The picture `memprof plot` draws of a Result, or of several runs of one command on
    one picture (labels: one per run; default: each run's GPU and date): a notebook shows it
    as it is; saved to `path` (.svg, .png, .pdf or .html) where given, atomically, never over
    a file a Result was loaded from. matplotlib is an optional extra: without it,
    MissingPackage (an ImportError) says how to install it."""
    from memprof.output.plot import matplotlib_for

    chosen = _results(results, "memprof.plot")
    if not chosen:
        raise InvalidArgument("memprof.plot: results is empty: give a Result or a list of them")
    if path is not None:
        _path(path, "memprof.plot")
        target = picture_file(os.fspath(path), "memprof.plot: path")
    names = _labels(labels, len(chosen))
    _one_command(chosen, [f"results[{i}]" for i in range(len(chosen))])
    matplotlib_for("memprof.plot()")
    if path is not None:
        sources = [r.loaded_from for r in chosen if r.loaded_from is not None]
        _check_picture(target, "memprof.plot: path", sources)
    drawn = picture_of(chosen, names)
    if path is not None:
        save_picture(drawn, target.path)
    return drawn


def _labels(labels: Iterable[str] | None, runs: int, option: str = "labels") -> list[str] | None:
    """One label per run, each a str, or None (each run's GPU and date)."""
    if labels is None:
        return None
    if isinstance(labels, str) or not isinstance(labels, Iterable):
        raise TypeError(f"memprof.plot: labels must be a list of str, not {_kind(labels)}")
    found = list(labels)
    if not all(isinstance(label, str) for label in found):
        raise TypeError("memprof.plot: labels must be a list of str")
    if len(found) != runs:
        raise InvalidArgument(
            f"{option}: {len(found)} given for {runs} run{'s' * (runs != 1)}: give one per run"
        )
    return found


def _one_command(results: list[Result], names: list[str]) -> None:
    """Refuse, in one line, runs of different commands on one picture."""
    for result, name in zip(results[1:], names[1:], strict=True):
        if result.command != results[0].command:
            raise InvalidArgument(
                f"{names[0]} is a {results[0].command} run and {name} a {result.command} run: "
                "a picture compares runs of one command"
            )


def plot_file(sources: list[Path], output: str | None, labels: list[str] | None = None) -> Path:
    """`memprof plot`: the picture of saved Results, in `output` or, for one, beside it (.svg
    for .json) where no file has that name; never over an input. The picture's path."""
    from memprof.output.files import check_each_once, descriptor_named
    from memprof.output.plot import matplotlib_for

    matplotlib_for()
    check_each_once(sources)
    source = sources[0]
    if output is not None:
        found, option = picture_file(output, "--output"), "--output"
    elif len(sources) > 1:
        raise InvalidArgument(
            f"{len(sources)} runs make one picture, which has no name of its own: give -o FILE.svg"
        )
    elif source.is_file() and descriptor_named(str(source), "plot") is None:
        found, option = Destination(str(source.with_suffix(".svg"))), "picture"
    else:  # a pipe, a device, /dev/stdin (a stream, whatever it reads): no name to put it beside
        raise InvalidArgument(
            f"{source} is not a file in a folder of yours, so the picture has no name beside "
            "it: give -o FILE.svg"
        )
    _check_picture(found, option, sources)
    if output is None and os.path.lexists(found.path):  # a name not given: over no file
        raise InvalidArgument(
            f"{found} already exists: give -o {found} to replace it, or -o another name"
        )
    loaded, names_of = [], []
    for one in sources:  # a run of --device all: each GPU's run (not the one over all at once)
        runs = load_all(one)
        runs = [run for run in runs if run.command == runs[0].command]
        loaded += runs
        names_of += [str(one) if len(runs) == 1 else f"{one}: GPU {r.gpu_index}" for r in runs]
    _one_command(loaded, names_of)
    names = _labels(labels or None, len(loaded), "--label")
    save_picture(picture_of(loaded, names), found.path)
    return found.path


def picture_file(name: str, option: str) -> Destination:
    """Where a picture goes: a file named as given, never a stream (the name says the format)."""
    from memprof.output.files import destination

    found = destination(name, option)
    if found.descriptor is not None:
        raise InvalidArgument(
            f"{option} {name}: a picture is written to a file, whose name says its "
            "format: give FILE.svg, .png, .pdf or .html"
        )
    return found


def _check_picture(target: Destination, option: str, inputs: list[Path]) -> None:
    """Before drawing: the picture's file has a known format, can be written, is no input."""
    from memprof.output.plot import format_of

    format_of(target.path, option)
    check_destination(target.path, option)
    check_distinct({option: target}, inputs=inputs)


def picture_of(results: list[Result], labels: list[str] | None = None) -> Picture:
    """What a Result's picture shows (memprof.experiments.pictures), not drawn yet; of
    several, all of them on one picture, each labelled (default: its GPU and date)."""
    from memprof.experiments.pictures import overlay, picture, run_labels

    if len(results) == 1 and labels is None:
        return picture(results[0], summarize(results[0]))
    summaries = [summarize(result) for result in results]
    return overlay(results, summaries, labels or run_labels(results))


def save_picture(drawn: Picture, path: Path) -> None:
    """Write the picture; a failure is SaveFailed (exit 5) naming the file."""
    try:
        drawn.save(path)
    except OSError as error:
        raise SaveFailed(f"{path}: not saved: {error.strerror or error}") from None


ONE_GPU = "--device all: this machine has one GPU, so memprof ran on device 0 only"


@dataclass
class EveryDevice:
    """What `--device all` measured: a Result per GPU, then hostlink's (two GPUs or more)."""

    results: list[Result] = field(default_factory=list)
    cleanup_failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_each_gpu(
    command: str,
    chosen: Any,
    timing: str = "auto",
    affinity: bool = True,
    progress: Progress = no_progress,
    count: int | None = None,
    max_noise_pct: float = DEFAULT_MAX_NOISE_PCT,
    ends_process: bool = False,
) -> EveryDevice:
    """`--device all`: `command` on every GPU in turn (count: how many; the driver's when None),
    then, with two or more, its `every_gpu_then` over every GPU at once (memprof hostlink for
    most). ends_process: as RunOptions'."""
    from memprof.core.session import device_count

    experiment = experiment_named(command)
    inputs = experiment.read_inputs(chosen)  # a bad file refused before the driver is asked
    count = device_count() if count is None else count
    runs = [(experiment, chosen, index, inputs) for index in range(count)]
    if count >= 2:  # then the experiment over every GPU at once, its inputs its own
        after = experiment_named(experiment.every_gpu_then)
        runs.append((after, after.Params(), None, UNREAD))
    done = EveryDevice(notes=[] if count >= 2 else [ONE_GPU])
    for each, params, index, read in runs:
        options = RunOptions(index, timing, affinity, max_noise_pct, ends_process)
        result, failures = run_experiment(each, params, options, progress, inputs=read)
        done.results.append(result)
        done.cleanup_failures += failures
    return done
