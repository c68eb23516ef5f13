"""The Python API: run an experiment, load a saved Result, render, compare, frame or draw it.
The command line is built on the same functions (memprof.cli)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.errors import InvalidArgument, SaveFailed
from memprof.experiments import experiment_named, summarize
from memprof.experiments import load as load_result
from memprof.experiments.base import Progress, RunOptions, no_progress
from memprof.experiments.base import run as run_experiment
from memprof.model import params as params_model
from memprof.model.results import Result
from memprof.output.files import check_destination

if TYPE_CHECKING:
    from memprof.output.plot import Picture


def run(
    command: str,
    *,
    device: int = 0,
    timing: str = "auto",
    affinity: bool = True,
    progress: Progress = no_progress,
    **params: Any,
) -> Result:
    """Measure one command's experiment on GPU `device` and return its Result (printing
    nothing). Keyword parameters are the command's options (power=20, repeat=5...), checked
    as the command line checks them; a failed verification is in result.checks."""
    experiment = experiment_named(command)
    chosen = params_model.make(experiment.Params, **params)
    result, _ = run_experiment(experiment, chosen, RunOptions(device, timing, affinity), progress)
    return result


def load(path: str | Path) -> Result:
    """A Result saved with --json, every value checked (InvalidArgument if it is not one)."""
    return load_result(Path(path))


def render(result: Result, console: Any = None) -> None:
    """Print a Result as its command does: the profile, tables, checks and conclusions."""
    from memprof.output.console import results_console
    from memprof.output.render import render_result

    render_result(result, summarize(result), console or results_console())


def diff(first: Result, second: Result, console: Any = None) -> None:
    """Print two Results compared row by row, beyond run-to-run noise, as `memprof diff` does."""
    from memprof.output.console import results_console
    from memprof.output.diff import diff as compare
    from memprof.output.render import render_summary

    render_summary(compare(first, second), console or results_console())


def frame(results: Result | Iterable[Result]) -> Any:
    """One pandas DataFrame of one Result or several: the CSV's columns (--csv), a row per
    measurement, numbers as numbers (Result.to_frame() for one). pandas is an optional extra:
    without it, MissingPackage (an ImportError) says how to install it."""
    from memprof.output.frames import frame as frame_of

    chosen = [results] if isinstance(results, Result) else list(results)
    return frame_of(chosen, [summarize(result).figures for result in chosen])


def plot(result: Result, path: str | Path | None = None) -> Picture:
    """The picture `memprof plot` draws of a Result: a notebook shows it as it is; saved to
    `path` (.svg, .png or .html) where given, atomically. matplotlib is an optional extra:
    without it, MissingPackage (an ImportError) says how to install it."""
    from memprof.output.plot import format_of, matplotlib_for

    matplotlib_for("memprof.plot()")
    target = Path(path) if path is not None else None
    if target is not None:
        format_of(target)
        check_destination(target, "path")
    drawn = picture_of(result)
    if target is not None:
        save_picture(drawn, target)
    return drawn


def plot_file(source: Path, output: str | None) -> Path:
    """`memprof plot`: the picture of a saved Result, in `output` or beside the file (its
    name ending .svg instead of .json); never over the input. The picture's path."""
    from memprof.output.files import check_distinct, destination
    from memprof.output.plot import format_of, matplotlib_for

    matplotlib_for()
    if output is not None:
        target, option = destination(output, "--output"), "--output"
    elif source.is_file() and not str(source.absolute()).startswith(("/dev/", "/proc/")):
        target, option = source.with_suffix(".svg"), "picture"
    else:  # a pipe, /dev/stdin: no name to put a picture beside
        raise InvalidArgument(
            f"{source} is not a file in a folder of yours, so the picture has no name beside "
            "it: give -o FILE.svg"
        )
    format_of(target)
    check_destination(target, option)
    check_distinct({option: target}, inputs=[source])
    drawn = picture_of(load(source))
    save_picture(drawn, target)
    return target


def picture_of(result: Result) -> Picture:
    """What a Result's picture shows (memprof.experiments.pictures), not drawn yet."""
    from memprof.experiments.pictures import picture

    return picture(result, summarize(result))


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
) -> EveryDevice:
    """`--device all`: `command` on every GPU in turn (count: how many; the driver's when None),
    then, with two or more, what the experiment runs over every GPU at once (its
    `every_gpu_then`: every GPU's pinned copies at once, memprof hostlink, for most)."""
    from memprof.core.session import device_count

    count = device_count() if count is None else count
    done = EveryDevice()
    for index in range(count):
        options = RunOptions(index, timing, affinity)
        result, failures = run_experiment(experiment_named(command), chosen, options, progress)
        done.results.append(result)
        done.cleanup_failures += failures
    if count < 2:
        done.notes.append(ONE_GPU)
    else:
        after = experiment_named(experiment_named(command).every_gpu_then)
        options = RunOptions(None, timing, affinity)
        result, failures = run_experiment(after, after.Params(), options, progress)
        done.results.append(result)
        done.cleanup_failures += failures
    return done
