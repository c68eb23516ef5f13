"""The Python API: run an experiment, load a saved Result, render one. The command line is
built on the same functions (memprof.cli)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprof.core.measure import DEFAULT_MAX_NOISE_PCT
from memprof.errors import InvalidArgument
from memprof.experiments import experiment_named, summarize
from memprof.experiments import load as load_result
from memprof.experiments.base import Progress, RunOptions, no_progress
from memprof.experiments.base import run as run_experiment
from memprof.model import params as params_model
from memprof.model.results import Result


def run(
    command: str,
    *,
    device: int = 0,
    timing: str = "auto",
    affinity: bool = True,
    progress: Progress = no_progress,
    max_noise: float = DEFAULT_MAX_NOISE_PCT,
    **params: Any,
) -> Result:
    """Measure one command's experiment on GPU `device` and return its Result (printing
    nothing). Keyword parameters are the command's options (power=20, repeat=5...), checked
    as the command line checks them (numpy integers and bools taken as the Python values
    they hold); a failed verification is in result.checks. Without repeat=N, each
    measurement repeats until its median's noise is below max_noise percent."""
    if not isinstance(command, str):
        raise TypeError(
            f"memprof.run: command must be a str such as 'pinned', not {_kind(command)}"
        )
    experiment = experiment_named(command)
    if experiment.runs_a_program:
        raise InvalidArgument(f"memprof.run: {command} runs a program: use `memprof {command}`")
    options = RunOptions(
        _device(device, experiment.gpus), _timing(timing), _flag(affinity), _noise(max_noise)
    )
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


def _device(device: Any, gpus: str) -> int | None:
    """A GPU index 0 to 63 (a numpy integer too); any for experiments over every GPU."""
    if gpus == "every":
        return None
    device = params_model.plain(device)
    if device is None:
        raise InvalidArgument(
            "memprof.run: device=None: give one GPU's index (0, 1, ...); "
            "memprof.api.run_each_gpu runs every GPU in turn"
        )
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"memprof.run: device must be a GPU index (int), not {_kind(device)}")
    if not 0 <= device <= MAX_DEVICE:
        raise InvalidArgument(f"memprof.run: device={device}: a GPU index is 0 to {MAX_DEVICE}")
    return device


MAX_DEVICE = 63  # as --device allows


def _timing(timing: Any) -> str:
    if not isinstance(timing, str):
        raise TypeError(f"memprof.run: timing must be a str, not {_kind(timing)}")
    if timing not in TIMINGS:
        raise InvalidArgument(f"memprof.run: timing={timing!r}: choose from {', '.join(TIMINGS)}")
    return timing


TIMINGS = ("auto", "cupti", "events")


def _flag(affinity: Any) -> bool:
    affinity = params_model.plain(affinity)
    if not isinstance(affinity, bool):
        raise TypeError(f"memprof.run: affinity must be True or False, not {_kind(affinity)}")
    return affinity


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
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"memprof.load: path must be a str or a path, not {_kind(path)}")
    return load_result(Path(path))


def render(result: Result, console: Any = None) -> None:
    """Print a Result as its command does: the profile, tables, checks and conclusions."""
    from rich.console import Console

    from memprof.output.console import results_console
    from memprof.output.render import render_result

    if not isinstance(result, Result):
        raise TypeError(
            "memprof.render: result must be a Result (from memprof.run or memprof.load), "
            f"not {_kind(result)}"
        )
    if console is not None and not isinstance(console, Console):
        raise TypeError(f"memprof.render: console must be a rich Console, not {_kind(console)}")
    render_result(result, summarize(result), console or results_console())


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
) -> EveryDevice:
    """`--device all`: `command` on every GPU in turn (count: how many; the driver's when None),
    then, with two or more, what the experiment runs over every GPU at once (its
    `every_gpu_then`: every GPU's pinned copies at once, memprof hostlink, for most)."""
    from memprof.core.session import device_count

    count = device_count() if count is None else count
    done = EveryDevice()
    for index in range(count):
        options = RunOptions(index, timing, affinity, max_noise_pct)
        result, failures = run_experiment(experiment_named(command), chosen, options, progress)
        done.results.append(result)
        done.cleanup_failures += failures
    if count < 2:
        done.notes.append(ONE_GPU)
    else:
        after = experiment_named(experiment_named(command).every_gpu_then)
        options = RunOptions(None, timing, affinity, max_noise_pct)
        result, failures = run_experiment(after, after.Params(), options, progress)
        done.results.append(result)
        done.cleanup_failures += failures
    return done
