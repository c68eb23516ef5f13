"""How the command line's options are made: the shared ones (--device, --timing, --json...),
defined once, and each experiment's own from its Params fields (memprof.model.params says
how each field is offered and checked). memprof.cli puts them on its commands.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from memprof.errors import InvalidArgument
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


def one_device(command: str | None) -> Callable[[str], int | None]:
    """--device: an index (0 to 63); `all` is None where `command` is None (commands that run
    every GPU in turn), else answered with the commands that take it."""

    def read(text: str) -> int | None:
        if text.strip().lower() == ALL_DEVICES:
            if command is None:
                return None
            raise typer.BadParameter(
                f"memprof {command} measures one GPU: give its index (0, 1, ...); "
                f"'all' is taken by {', '.join(every_gpu_commands())}"
            )
        try:
            return within(DEVICE_RANGE)(int(text))
        except ValueError:
            every = " or 'all'" if command is None else ""
            raise typer.BadParameter(f"{text!r} is not a device index (0, 1, ...){every}") from None

    return read


device_choice = one_device(None)  # --device of the commands that run every GPU in turn


def every_gpu_commands() -> list[str]:
    """The commands whose --device takes `all` (each experiment imported: only to say so)."""
    from memprof.experiments import COMMANDS, experiment_class

    return [line.name for line in COMMANDS if experiment_class(line.name).gpus == "one_or_every"]


DEVICE_RANGE = declared.Range(0, 63)
DEVICE_HELP = "CUDA device index, as nvidia-smi numbers them."
Timing = Enum("Timing", {mode: mode for mode in ("auto", "cupti", "events")}, type=str)


def option(
    name: str, kind: Any, default: Any, *flags: str, shown: str | None = None, **settings: Any
) -> inspect.Parameter:
    """One command parameter, as typer reads it from a signature, its default at the end of its
    help."""
    flags = flags or (f"--{name.replace('_', '-')}",)
    words = shown if shown is not None else default_words(default, flags)
    if words and settings.get("help"):
        settings["help"] += f"  [default:{NO_BREAK}{words}]"
    info = typer.Option(default, *flags, show_default=False, **settings)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


# Between "default:" and its value: click wraps help between words, and "[default:" at the end
# of one line with "8]" on the next reads as two things (an ASCII stream gets a space).
NO_BREAK = "\u00a0"


def noise_target(values: dict[str, Any]) -> float | None:
    """--max-noise taken out of a command's values (None: not given); refused beside --repeat."""
    max_noise = values.pop("max_noise", None)
    if max_noise is not None and values.get("repeat") is not None:
        raise InvalidArgument(
            "--max-noise decides when repetitions stop, but --repeat repeats exactly: "
            "give one of them"
        )
    return max_noise


def default_words(default: Any, flags: tuple[str, ...]) -> str:
    """A default as help shows it: the value (an Enum's own), or a pair of flags' chosen one
    ("prefetch"); nothing for an unset value or a plain flag off."""
    if default is None or (default is False and not any("/" in flag for flag in flags)):
        return ""
    if isinstance(default, bool):
        on, _, off = next(flag for flag in flags if "/" in flag).partition("/")
        return (on if default else off).strip().removeprefix("--")
    return str(getattr(default, "value", default))


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
VERBOSE_HELP = (
    "Every verification against numpy on its own line (by default one line says that all "
    "matched; a result that did not is always shown in full)."
)


def output_options(json: str = RUN_JSON, csv: str = RUN_CSV, quiet: str = RUN_QUIET) -> list:
    """--json, --csv, --quiet, --no-color and --verbose, as every command takes them."""
    return [
        option("json", str | None, None, metavar=PATH, help=json),
        option("csv", str | None, None, metavar=PATH, help=csv),
        option("quiet", bool, False, "--quiet", "-q", help=quiet),
        option("no_color", bool, False, help=NO_COLOR_HELP),
        option("verbose", bool, False, "--verbose", "-v", help=VERBOSE_HELP),
    ]


PATH = "<path>"  # a str, not a Path: Path("newdir/") would drop the slash (Output.named)
METAVARS = {"reference": PATH, "thresholds": PATH, "timeline": PATH}  # options naming a file


def gpu_options(experiment: type[Experiment]) -> list[inspect.Parameter]:
    """--device, --timing and --no-affinity, as the experiment's kind takes them."""
    options = []
    if experiment.gpus == "one_or_every":
        help = (
            "CUDA device index, as nvidia-smi numbers them, or 'all': every GPU in turn, then "
            f"memprof {experiment.every_gpu_then} on them all at once."
        )
        options.append(
            option("device", str, "0", "-d", "--device", callback=device_choice, help=help)
        )
    elif experiment.gpus == "one":
        options.append(device_option(experiment.name))
    if experiment.timing_option:
        options.append(option("timing", Timing, Timing.auto, help=TIMING_HELP))
    fields = dataclasses.fields(experiment.Params)
    if any(field.name == "repeat" and field.default is None for field in fields):
        # it repeats until the noise target where --repeat is not given
        from memprof.core.repetitions import DEFAULT_MAX_NOISE_PCT
        from memprof.model.results import Percent

        check = within(declared.range_of(Percent))
        options.append(  # None where not given: --repeat N refuses it, else the default
            option(
                "max_noise", float | None, None, callback=check,
                shown=f"{DEFAULT_MAX_NOISE_PCT:g}", help=MAX_NOISE_HELP,
            )
        )  # fmt: skip
    if experiment.affinity_option:
        options.append(option("no_affinity", bool, False, help=AFFINITY_HELP))
    return options


def device_option(command: str) -> inspect.Parameter:
    """--device of a command that measures one GPU."""
    read = one_device(command)
    return option(
        "device", str, "0", "-d", "--device", callback=read, help=DEVICE_HELP, metavar="<int>"
    )


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


def declared_options(
    faces: list[declared.CliOption], params: type | None = None
) -> list[inspect.Parameter]:
    """Options as memprof.model.params declares them (CliOption), for typer; `params`: the
    Params whose defaults they show."""
    options = []
    for face in faces:
        if face.argument:
            options.append(argument(face.name, face.kind, face.default, face.help))
            continue
        kind, default, check = face.kind, face.default, within(face.rule) if face.rule else None
        if face.choices:  # measure() takes each member's value
            members = {name.replace("-", "_"): name for name in face.choices}
            kind = Enum(face.name, members, type=str)
            default, check = kind(default), None
        shown = shown_default(params, face.name, default) if params else None
        named = {"metavar": METAVARS[face.name]} if face.name in METAVARS else {}
        options.append(
            option(
                face.name,
                kind,
                default,
                *face.flags,
                callback=check,
                help=face.help,
                shown=shown,
                **named,
            )
        )
    return options


def shown_default(params: type, name: str, default: Any) -> str | None:
    """What `[default: ...]` says where the value would not read whole: a list of every choice
    is "all" (click breaks a long word anywhere), and a sweep's --from/--to its sizes."""
    if isinstance(default, str) and "," in default:
        chosen = default.split(",")
        field = next(f for f in dataclasses.fields(params) if f.name == name)
        every = declared.choices_of(declared.hints(params)[field.name]) or ()
        return "all" if set(chosen) == set(every) else ", ".join(chosen)
    if name in ("from_power", "to_power") and default is None:
        fields = dataclasses.fields(params)
        forms = ((f.default, declared.option_of(f).form) for f in fields)
        sweep = next((default for default, form in forms if isinstance(form, declared.Sizes)), None)
        if sweep:
            return str(min(sweep) if name == "from_power" else max(sweep))
    return None


def plot_options() -> list[inspect.Parameter]:
    """`memprof plot`'s: the saved Results, where their picture goes, and their labels."""
    return [
        argument(
            "paths",
            list[Path],
            ...,
            "Result files written with --json: one, or several runs of one command drawn on "
            "one picture (the first the reference).",
        ),
        option(
            "output",
            str | None,
            None,
            "--output",
            "-o",
            metavar=PATH,
            help=(
                "The picture: a name ending .svg, .png (150 dpi), .pdf or .html (a page holding "
                "the SVG). Default: the result's own name ending .svg, beside it (one result "
                "only), where no file has that name. Never an input."
            ),
        ),
        option(
            "label",
            list[str] | None,
            None,
            "--label",
            metavar="NAME",
            help="A run's name in the picture, once per file, in order. Default: its GPU and date.",
        ),
    ]


def report_output(paths: list[Path], **outputs: Any) -> Any:
    """`report`'s Output, of Output.named's options, checked: --json and --timeline take one
    input; each input once."""
    from memprof.output.emit import Output
    from memprof.output.files import check_each_once

    check_each_once(paths)
    for option in ("json", "timeline"):
        if outputs[option] is not None and len(paths) > 1:
            raise InvalidArgument(
                f"--{option} saves one result, and {len(paths)} files were given: "
                "report them one at a time (--csv takes several)"
            )
    output = Output.named(**outputs)
    output.check(inputs=paths)
    return output
