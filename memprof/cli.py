"""The `memprof` command line, made from the experiment registry: each experiment's options
are its Params fields plus the shared ones (memprof.cli_options); `report`, `diff` and `plot`
are written out here. Every way a command can end is decided in `run_command`: one line on
stderr at most and a documented exit code (ExitCode).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from memprof.cli_commands import HELP, OnDemandGroup, build, command, epilog, on_demand
from memprof.errors import ExitCode, MemprofError
from memprof.experiments import COMMANDS, PROGRAM_COMMAND, experiment_class, experiment_named
from memprof.interrupts import caused_by_ctrl_c, pressed
from memprof.output import console as terminal
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


class MemprofGroup(OnDemandGroup):
    """The group of every command, ending each in run_command."""

    def main(self, args=None, prog_name=None, standalone_mode=True, **extra):  # type: ignore[override]
        complete_var = extra.pop("complete_var", None)
        extra.pop("windows_expand_args", None)
        # A shell asking for completions (the script --install-completion installs sets this
        # variable): answered and exited here, as click's own main() does.
        if os.environ.get(complete_var or "_MEMPROF_COMPLETE"):
            self._main_shell_completion(extra, prog_name or "memprof", complete_var)
        code = run_command(self, sys.argv[1:] if args is None else list(args), prog_name, extra)
        if standalone_mode:
            sys.exit(code)
        return code


def run_command(group: TyperGroup, args: list[str], prog_name: str | None, extra: dict) -> int:
    """Run the command line; every outcome becomes an exit code and at most one stderr line."""
    terminal.prepare_streams()
    # the last line plain where --no-color was asked, however the command ended (a bad
    # value is refused before its options are read)
    plain = "--no-color" in args
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
        terminal.print_error(f"{message} (see '{command} --help')", plain)
        return error.exit_code
    except MemprofError as error:
        interrupted = pressed()  # a Ctrl-C that came back as another error
        terminal.print_error(INTERRUPTED if interrupted else str(error), plain)
        return ExitCode.INTERRUPTED if interrupted else error.exit_code
    except BrokenPipeError:  # the reader closed stdout (`memprof --help | head -1`)
        terminal.silence_closed_stdout()
        return ExitCode.OK
    except (KeyboardInterrupt, Exception) as error:
        if isinstance(error, Aborts) or caused_by_ctrl_c(error):
            terminal.print_error(INTERRUPTED, plain)
            return ExitCode.INTERRUPTED
        from memprof.output.emit import stdout_failed

        lost = stdout_failed(error)  # `> /dev/full`: output lost, as an unsaved file is
        if lost:
            terminal.print_error(lost, plain)
            return ExitCode.SAVE_FAILED
        cuda = sys.modules.get("pycuda.driver")
        if cuda is not None and isinstance(error, cuda.Error):
            terminal.print_error(f"CUDA driver error: {str(error).strip()}", plain)
            return ExitCode.CHECK_FAILED
        if os.environ.get("MEMPROF_DEBUG"):
            raise
        terminal.print_error(
            f"internal error, a bug in memprof: {type(error).__name__}: {error} "
            "(MEMPROF_DEBUG=1 shows where)",
            plain,
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
        "in GB/s = 10^9 bytes/s.\n\nExit codes: 0 ok, 1 a result failed verification, a check "
        "line FAILed, a figure regressed (diff --fail-above) or CUDA failed, 2 invalid "
        "arguments or runs diff cannot compare, 3 no PyCUDA/driver/GPU/nvcc or a capability "
        "missing, 4 out of memory, 5 output not written (--json/--csv, or stdout), "
        "70 a bug in memprof, 130 interrupted."
    ),
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish...)
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=epilog(""),
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


def experiment_command(name: str) -> Any:
    """The command of an experiment (or an alias), its module imported when first needed."""
    from memprof import cli_gates as gates
    from memprof.cli_options import declared_options, gpu_options, noise_target, output_options
    from memprof.model import params as declared
    from memprof.output.emit import Output

    experiment = experiment_class(name)

    def measure(**values: Any) -> None:
        values = {name: getattr(value, "value", value) for name, value in values.items()}
        words = ("json", "csv", "quiet", "no_color")
        output = Output.named(
            *(values.pop(name) for name in words), values.pop("junit", None), values.pop("verbose")
        )
        device, timing = values.pop("device", None), values.pop("timing", "auto")
        affinity = not values.pop("no_affinity", False)
        max_noise = noise_target(values)
        output.check(inputs=declared.input_files(experiment.Params, values))  # --reference
        params = declared.from_cli(experiment.Params, values)
        _run(experiment.name, params, device, output, timing, affinity, max_noise)

    help = HELP[name]
    if experiment.description and name == experiment.name:
        help += f"\n\n{experiment.description}"
    own = declared_options(declared.cli_options(experiment.Params), experiment.Params)
    parameters = own + gpu_options(experiment) + output_options()
    if experiment.name in gates.JUNIT_COMMANDS:
        parameters.append(gates.junit_option())
    return build(name, measure, help, parameters, {})


def trace_command() -> Any:
    """`memprof trace`, built when first needed: the user's program under CUPTI."""
    return importlib.import_module("memprof.cli_trace").click_command()


# Each registry line's command and its aliases: listed now, built when first needed
for _line in COMMANDS:
    if _line.name == PROGRAM_COMMAND:  # trace: its Experiment only reads its Results
        on_demand(_line.name, _line.help, trace_command)
        continue
    for _name in (_line.name, *_line.aliases):
        _help = _line.help if _name == _line.name else f"Alias of {_line.name}."
        on_demand(_name, _help, functools.partial(experiment_command, _name))


def _run(
    command: str,
    params: Any,
    device: int | None,
    output: Any,
    timing: str,
    affinity: bool,
    max_noise: float | None = None,
) -> None:
    """Measure, then show and save: on GPU `device`; None: each GPU in turn (--device all),
    or one run of them all for an experiment over every GPU at once (peer)."""
    from memprof import api
    from memprof import cli_gates as gates
    from memprof.experiments import summarize
    from memprof.output.console import progress_bar
    from memprof.output.emit import emit

    every_gpu_in_turn = device is None and experiment_named(command).gpus != "every"
    where = "every GPU" if device is None else f"GPU {device}"
    settings = {"ends_process": True} | ({} if max_noise is None else {"max_noise_pct": max_noise})
    with progress_bar(not output.quiet, f"memprof {command}: starting on {where}") as progress:
        if every_gpu_in_turn:
            done = api.run_each_gpu(command, params, timing, affinity, progress, **settings)
        else:
            options = api.RunOptions(device, timing, affinity, **settings)
            run = api.run_experiment(experiment_named(command), params, options, progress)
            done = api.EveryDevice([run[0]], run[1])
    for failure in done.cleanup_failures:
        terminal.print_note(
            f"memprof: warning: freeing failed: {failure}", output.no_color, "yellow"
        )
    for note in done.notes:
        terminal.print_note(f"memprof: {note}", output.no_color)
    with gates.junit_after(lambda: gates.results_junit(done.results), output):
        emit(done.results, summarize, output)


REPORT_TIMELINE_HELP = (
    "Save a trace's timeline as Chrome trace JSON, for Perfetto (ui.perfetto.dev) or "
    "chrome://tracing (- is stdout)."
)


def report_options() -> list[inspect.Parameter]:
    from memprof import cli_gates as gates
    from memprof.cli_options import PATH, argument, option, output_options

    return [
        argument("paths", list[Path], ..., "Result files written with --json."),
        *output_options(
            "Save the one input again, validated, in this memprof's format (- is stdout).",
            "Save every measurement of every input as CSV, one row each (- is stdout).",
            "Print nothing but errors: only check the files.",
        ),
        option("timeline", str | None, None, metavar=PATH, help=REPORT_TIMELINE_HELP),
        gates.junit_option(),
        *gates.fleet_options(),
    ]


@command("report", "Render saved Results again, on any machine (no GPU needed).", report_options)
def report(paths: list[Path], fleet: bool, fail_outliers: float | None, **outputs: Any) -> None:
    from memprof import cli_gates as gates
    from memprof.cli_options import report_output
    from memprof.experiments import load_all_summarized
    from memprof.output.emit import emit

    output = report_output(paths, **outputs)
    loaded = [one for path in paths for one in load_all_summarized(path)]
    if output.timeline is not None:
        from memprof.output.timeline import require_timeline

        require_timeline(loaded[0][0], paths[0])
    results, summaries = [r for r, _ in loaded], {id(r): s for r, s in loaded}
    with gates.junit_after(lambda: gates.results_junit(results), output):
        if fleet or fail_outliers is not None:
            gates.fleet_report(results, summaries, fail_outliers, output)
        else:
            emit(results, lambda result: summaries[id(result)], output, loaded=True)


def diff_options() -> list[inspect.Parameter]:
    from memprof import cli_gates as gates
    from memprof.cli_options import argument, output_options

    return [
        argument("first", Path, ..., "Result A (--json of one run)."),
        argument("second", Path, ..., "Result B, compared with A."),
        *gates.gate_options(),
        *[
            o
            for o in output_options(
                "Also save the comparison as shown (tables of strings, not a Result: `report` "
                "cannot read it).",
                quiet="Print nothing but errors (and the figures a gate failed).",
            )
            if o.name not in ("csv", "verbose")  # a diff has no verifications to list
        ],
    ]


@command(
    "diff",
    "Compare two saved runs row by row, beyond each run's own noise; --fail-above makes it a gate.",
    diff_options,
)
def diff(**values: Any) -> None:
    from memprof import cli_gates  # its options are cli_gates.diff's parameters

    cli_gates.diff(**values)


# -- memprof plot (memprof.experiments.pictures says what each command's picture shows) ----


@command(
    "plot",
    "Draw a saved Result as a picture, on any machine (no GPU; needs matplotlib): GB/s "
    "against size with the link's ceiling, heat maps of GPU pairs, stream time lines...",
    lambda: importlib.import_module("memprof.cli_options").plot_options(),
)
def plot(paths: list[Path], output: str | None, label: list[str] | None) -> None:
    from memprof import api

    terminal.print_note(f"saved {api.plot_file(paths, output, label)}")
