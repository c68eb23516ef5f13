"""The Python API: run an experiment, load a saved Result, render one. The command line is
built on the same functions (memprof.cli)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprof.core.measure import DEFAULT_MAX_NOISE_PCT
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
    as the command line checks them; a failed verification is in result.checks. Without
    repeat=N, each measurement repeats until its median's noise is below max_noise percent."""
    experiment = experiment_named(command)
    chosen = params_model.make(experiment.Params, **params)
    options = RunOptions(device, timing, affinity, max_noise)
    result, _ = run_experiment(experiment, chosen, options, progress)
    return result


def load(path: str | Path) -> Result:
    """A Result saved with --json, every value checked (InvalidArgument if it is not one)."""
    return load_result(Path(path))


def render(result: Result, console: Any = None) -> None:
    """Print a Result as its command does: the profile, tables, checks and conclusions."""
    from memprof.output.console import results_console
    from memprof.output.render import render_result

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
