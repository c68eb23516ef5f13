"""How the command line's options are made: the shared ones (--device, --timing, --json...),
defined once, and each experiment's own from its Params fields (memprof.model.params says
how each field is offered and checked). memprof.cli puts them on its commands.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer

from memprof.model import params as declared
from memprof.model import schema

if TYPE_CHECKING:
    from memprof.experiments.base import Experiment

ALL_DEVICES = "all"


def within(rule: Any) -> Callable[[Any], Any]:
    """An option callback refusing values outside the rule (a Range), in its own words."""

    def check(value: Any) -> Any:
        if value is not None and not schema.allows(rule, value):
            raise typer.BadParameter(schema.refusal(rule, value))
        return value

    return check


def device_choice(text: str) -> int | None:
    """--device: an index (0 to 63), or `all` (None) on commands that run every GPU in turn."""
    if text.strip().lower() == ALL_DEVICES:
        return None
    try:
        return within(DEVICE_RANGE)(int(text))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a device index (0, 1, ...) or 'all'") from None


DEVICE_RANGE = declared.Range(0, 63)
DEVICE_HELP = "CUDA device index, as nvidia-smi numbers them."
Timing = Enum("Timing", {mode: mode for mode in ("auto", "cupti", "events")}, type=str)


def option(name: str, kind: Any, default: Any, *flags: str, **settings: Any) -> inspect.Parameter:
    """One command parameter, as typer reads it from a signature."""
    info = typer.Option(default, *(flags or (f"--{name.replace('_', '-')}",)), **settings)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


def argument(name: str, kind: Any, default: Any, help: str) -> inspect.Parameter:
    info = typer.Argument(default, help=help)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


RUN_JSON = (
    "Also save the Result (every sample) as JSON; `memprof report` renders it. "
    "- is stdout (the tables then go to stderr)."
)
RUN_CSV = "Also save every measurement as CSV: one row each, times in ms. - is stdout."
RUN_QUIET = "Print nothing but errors (for scripts: use --json/--csv)."
NO_COLOR_HELP = "No colours (off anyway when not a terminal or NO_COLOR is set)."


def output_options(json: str = RUN_JSON, csv: str = RUN_CSV, quiet: str = RUN_QUIET) -> list:
    """--json, --csv, --quiet and --no-color, as every command takes them."""
    return [
        option("json", str | None, None, metavar=PATH, help=json),
        option("csv", str | None, None, metavar=PATH, help=csv),
        option("quiet", bool, False, "--quiet", "-q", help=quiet),
        option("no_color", bool, False, help=NO_COLOR_HELP),
    ]


PATH = "<path>"  # a str, not a Path: Path("newdir/") would drop the slash (Output.named)


def gpu_options(experiment: type[Experiment]) -> list[inspect.Parameter]:
    """--device, --timing and --no-affinity, as the experiment's kind takes them."""
    options = []
    if experiment.gpus == "one_or_every":
        help = (
            "CUDA device index, as nvidia-smi numbers them, or 'all': every GPU in turn, then "
            f"{experiment.every_gpu_words}."
        )
        options.append(
            option("device", str, "0", "-d", "--device", callback=device_choice, help=help)
        )
    elif experiment.gpus == "one":
        check = within(DEVICE_RANGE)
        options.append(option("device", int, 0, "-d", "--device", callback=check, help=DEVICE_HELP))
    if experiment.timing_option:
        options.append(option("timing", Timing, Timing.auto, help=TIMING_HELP))
    if until_noise_target(experiment):
        from memprof.core.measure import DEFAULT_MAX_NOISE_PCT
        from memprof.model.results import Percent

        check = within(declared.range_of(Percent))
        options.append(
            option("max_noise", float, DEFAULT_MAX_NOISE_PCT, callback=check, help=MAX_NOISE_HELP)
        )
    if experiment.affinity_option:
        options.append(option("no_affinity", bool, False, help=AFFINITY_HELP))
    return options


def until_noise_target(experiment: type[Experiment]) -> bool:
    """Whether the experiment's measurements repeat until the noise target where --repeat is
    not given (its Params' repeat defaults to None), so it takes --max-noise."""
    fields = dataclasses.fields(experiment.Params)
    return any(field.name == "repeat" and field.default is None for field in fields)


MAX_NOISE_HELP = (
    "Repeat each measurement until the relative noise of its median (a robust standard "
    "error) is below this many percent; --repeat N sets the count instead."
)
TIMING_HELP = (
    "Source of GPU-activity times: cupti = the GPU's own record of each operation (as nvprof "
    "printed; needs cupti-python), events = CUDA events around each operation held behind a "
    "GPU-side gate, auto = cupti where it works, else events."
)
AFFINITY_HELP = (
    "Leave the host thread where the OS puts it (default: on the GPU's local CPUs, so host "
    "memory lands on its NUMA node)."
)


def params_options(experiment: type[Experiment]) -> list[inspect.Parameter]:
    """The experiment's own options (its Params fields: memprof.model.params says how)."""
    options = []
    for face in experiment.options():
        if face.argument:
            options.append(argument(face.name, face.kind, face.default, face.help))
            continue
        kind, default, check = face.kind, face.default, within(face.rule) if face.rule else None
        if face.choices:  # measure() takes each member's value
            members = {name.replace("-", "_"): name for name in face.choices}
            kind = Enum(face.name, members, type=str)
            default, check = kind(default), None
        options.append(
            option(face.name, kind, default, *face.flags, callback=check, help=face.help)
        )
    return options
