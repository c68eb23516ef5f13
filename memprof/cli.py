"""The `memprof` command line, made from the experiment registry.

Each experiment becomes one command: its options are its Params fields (memprof.model.params
says how each is offered and checked; `trace` declares its own) plus the shared options it
takes, defined once in memprof.cli_options. `report` and `diff` read files and are
written out here.

Every way a command can end is decided in one place (`run_command`): one line on stderr at
most and a documented exit code (ExitCode).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from memprof.cli_options import PATH, argument, gpu_options, option, output_options, params_options
from memprof.errors import ExitCode, InvalidArgument, MemprofError
from memprof.experiments import REGISTRY, experiment_named, load, summarize
from memprof.experiments.base import Experiment
from memprof.interrupts import caused_by_ctrl_c, pressed
from memprof.model import params as declared
from memprof.output import console as terminal
from memprof.output.emit import Output, emit, emit_diff, stdout_failed
from memprof.version import __version__

try:  # typer 0.2x and later carry their own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # older typer: click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

ClickException = click_exceptions.ClickException
NoArgsIsHelp = getattr(click_exceptions, "NoArgsIsHelpError", ())
ExitRequests = (typer.Exit, getattr(click_exceptions, "Exit", typer.Exit))
Aborts = (typer.Abort, getattr(click_exceptions, "Abort", typer.Abort))

INTERRUPTED = "interrupted: everything memprof allocated was freed"


class MemprofGroup(TyperGroup):
    """Typer's group, ending every command in one place: an exit code and at most one line."""

    def main(self, args=None, prog_name=None, standalone_mode=True, **extra):  # type: ignore[override]
        extra.pop("complete_var", None), extra.pop("windows_expand_args", None)
        code = run_command(self, sys.argv[1:] if args is None else list(args), prog_name, extra)
        if standalone_mode:
            sys.exit(code)
        return code


def run_command(group: TyperGroup, args: list[str], prog_name: str | None, extra: dict) -> int:
    """Run the command line; every outcome becomes an exit code and at most one stderr line."""
    terminal.prepare_streams()
    try:
        with group.make_context(prog_name or "memprof", args, **extra) as context:
            group.invoke(context)
        return ExitCode.OK
    except ExitRequests as request:  # --help, --version, and typer.Exit
        return request.exit_code
    except NoArgsIsHelp as error:  # `memprof` alone: the help, as asked for
        typer.echo(error.format_message())
        return ExitCode.OK
    except ClickException as error:  # unknown option, missing argument, bad value...
        name = next((arg for arg in args if not arg.startswith("-")), "")
        context = getattr(error, "ctx", None)
        command = (
            context.command_path
            if context
            else " ".join(["memprof", name][: 1 + (name in group.commands)])
        )
        try:
            message = error.format_message()
        except Exception:  # some typer and click pairings fail to describe their own error
            message = str(error) or type(error).__name__
        terminal.print_error(f"{message} (see '{command} --help')")
        return error.exit_code
    except MemprofError as error:
        interrupted = pressed()  # a Ctrl-C that came back as another error
        terminal.print_error(INTERRUPTED if interrupted else str(error))
        return ExitCode.INTERRUPTED if interrupted else error.exit_code
    except BrokenPipeError:  # the reader closed stdout (`memprof --help | head -1`)
        terminal.silence_closed_stdout()
        return ExitCode.OK
    except (KeyboardInterrupt, *Aborts):
        terminal.print_error(INTERRUPTED)
        return ExitCode.INTERRUPTED
    except Exception as error:
        if caused_by_ctrl_c(error):
            terminal.print_error(INTERRUPTED)
            return ExitCode.INTERRUPTED
        lost = stdout_failed(error)  # `> /dev/full`: output lost, as an unsaved file is
        if lost:
            terminal.print_error(lost)
            return ExitCode.SAVE_FAILED
        cuda = sys.modules.get("pycuda.driver")
        if cuda is not None and isinstance(error, cuda.Error):
            terminal.print_error(f"CUDA driver error: {str(error).strip()}")
            return ExitCode.CHECK_FAILED
        if os.environ.get("MEMPROF_DEBUG"):
            raise
        terminal.print_error(
            f"internal error, a bug in memprof: {type(error).__name__}: {error} "
            "(MEMPROF_DEBUG=1 shows where)"
        )
        return ExitCode.INTERNAL


app = typer.Typer(
    name="memprof",
    cls=MemprofGroup,
    help=(
        "Measure what each kind of CUDA memory really costs on your GPU, with nvprof-style "
        "profiles.\n\nSizes are powers of two of float32 elements (--power 20 = 2^20 floats = "
        "4 MiB). GPU times are CUPTI's records of each operation (or, with --timing events, "
        "gated CUDA events); host work is timed with the host clock; bandwidth is "
        "in GB/s = 10^9 bytes/s.\n\nExit codes: 0 ok, 1 a result failed verification or CUDA "
        "failed, 2 invalid arguments, 3 no PyCUDA/driver/GPU/nvcc or a capability missing, "
        "4 out of memory, 5 output not written (--json/--csv, or stdout), "
        "70 a bug in memprof, 130 interrupted."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: no boxes, no colours, and rich's help machinery (markdown) is not loaded.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memprof {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    pass


def command(name: str, parameters: list[inspect.Parameter], help: str, **settings: Any):
    """Register `body(**values)` as a command whose options are `parameters`."""

    def register(body: Callable[..., None]) -> Callable[..., None]:
        body.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        app.command(name, help=help, **settings)(body)
        return body

    return register


def add_experiment(experiment: type[Experiment]) -> None:
    """The experiment as a command (and its aliases), its options from its Params."""

    def measure(**values: Any) -> None:
        values = {name: getattr(value, "value", value) for name, value in values.items()}
        output = Output.named(*(values.pop(name) for name in ("json", "csv", "quiet", "no_color")))
        device, timing = values.pop("device", None), values.pop("timing", "auto")
        affinity = not values.pop("no_affinity", False)
        if experiment.runs_a_program:  # memprof trace: the user's program under CUPTI
            raise typer.Exit(experiment().run_program(device=device, output=output, **values))
        output.check()
        params = declared.from_cli(experiment.Params, values)
        _run(experiment.name, params, device, output, timing, affinity)

    help = experiment.help + (f"\n\n{experiment.description}" if experiment.description else "")
    parameters = params_options(experiment) + gpu_options(experiment) + output_options()
    settings = {"context_settings": experiment.context_settings}
    for name in (experiment.name, *experiment.aliases):
        alias = f"Alias of {experiment.name}."
        command(name, parameters, help if name == experiment.name else alias, **settings)(measure)


for _experiment in REGISTRY:
    add_experiment(_experiment)


def _run(
    command: str, params: Any, device: int | None, output: Output, timing: str, affinity: bool
) -> None:
    """Measure, then show and save: on GPU `device`; where it is None, each GPU in turn
    (--device all) or, for an experiment over every GPU at once (peer), one run of them all."""
    from memprof import api
    from memprof.output.console import progress_bar

    every_gpu_in_turn = device is None and experiment_named(command).gpus != "every"
    if every_gpu_in_turn and output.json is not None:
        raise InvalidArgument(
            "--json saves one result and --device all makes one per GPU: save each with "
            "--device N --json, and the simultaneous copies with memprof hostlink --json"
        )
    with progress_bar(not output.quiet) as progress:
        if every_gpu_in_turn:
            done = api.run_each_gpu(command, params, timing, affinity, progress)
        else:
            options = api.RunOptions(device, timing, affinity)
            run = api.run_experiment(experiment_named(command), params, options, progress)
            done = api.EveryDevice([run[0]], run[1])
    for failure in done.cleanup_failures:
        terminal.print_note(
            f"memprof: warning: freeing failed: {failure}", output.no_color, "yellow"
        )
    for note in done.notes:
        terminal.print_note(f"memprof: {note}", output.no_color)
    emit(done.results, summarize, output)


REPORT_OPTIONS = [
    argument("paths", list[Path], ..., "Result files written with --json."),
    *output_options(
        "Save the one input again, validated, in this memprof's format.",
        "Save every measurement of every input as CSV, one row each.",
        "Print nothing but errors: only check the files.",
    ),
]


@command("report", REPORT_OPTIONS, "Render saved Results again, on any machine (no GPU needed).")
def report(paths: list[Path], json: str | None, csv: str | None, quiet: bool, no_color: bool):
    if json is not None and len(paths) > 1:
        raise InvalidArgument(
            f"--json saves one result, and {len(paths)} files were given: "
            "report them one at a time (--csv takes several)"
        )
    output = Output.named(json, csv, quiet, no_color)
    output.check(inputs=paths)
    emit([load(path) for path in paths], summarize, output)


DIFF_OPTIONS = [
    argument("first", Path, ..., "Result A (--json of one run)."),
    argument("second", Path, ..., "Result B, compared with A."),
    *[
        o
        for o in output_options(
            "Also save the comparison as shown (tables of strings, not a Result: `report` "
            "cannot read it).",
            quiet="Print nothing but errors.",
        )
        if o.name != "csv"
    ],
]


@command("diff", DIFF_OPTIONS, "Compare two saved runs row by row, beyond run-to-run noise.")
def diff(first: Path, second: Path, json: str | None, quiet: bool, no_color: bool) -> None:
    from memprof.output.diff import diff as diff_results

    output = Output.named(json, None, quiet, no_color)
    output.check(inputs=(first, second))
    emit_diff(diff_results(load(first), load(second)), first, second, output)


# -- memprof plot (memprof.experiments.pictures says what each command's picture shows) ----

PLOT_OPTIONS = [
    argument("path", Path, ..., "A Result file written with --json."),
    option(
        "output",
        str | None,
        None,
        "--output",
        "-o",
        metavar=PATH,
        help=(
            "The picture: a name ending .svg, .png (150 dpi) or .html (a page holding the "
            "SVG). Default: the result's own name ending .svg, beside it. Never an input."
        ),
    ),
]


@command(
    "plot",
    PLOT_OPTIONS,
    "Draw a saved Result as a picture, on any machine (no GPU; needs matplotlib): GB/s "
    "against size with the link's ceiling, heat maps of GPU pairs, stream time lines...",
)
def plot(path: Path, output: str | None) -> None:
    from memprof import api

    terminal.print_note(f"saved {api.plot_file(path, output)}")
