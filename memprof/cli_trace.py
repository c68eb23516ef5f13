"""`memprof trace`: a command of its own, beside report, diff and plot, that runs the
user's program (everything after SCRIPT is the program's): memprof.trace.collect records it,
memprof.experiments.trace reads the Result. The advice's figures for this GPU are measured,
where no cache holds them, by memprof's own sweep and smallcopies, after the program: so
this module sits above the experiments (tests/test_layers.py), memprof.trace below them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.errors import InvalidArgument
from memprof.model.params import CliOption
from memprof.model.schema import Range
from memprof.trace.collect import TraceOptions, parse_target, trace
from memprof.trace.stacks import DEFAULT_STACK_DEPTH, MAX_STACK_DEPTH

if TYPE_CHECKING:
    from memprof.model.results import Result

DESCRIPTION = "memprof's options go before SCRIPT; the program's output and exit code pass through."
BANDWIDTH_PROBE_POWER = 24  # 2^24 float32 = 64 MiB per copy: the bandwidth plateau
# everything after SCRIPT is the program's, --help and --json included
CONTEXT_SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True}
PYTHON_M = "Run a module, as python -m does."
TIMELINE_HELP = (
    "Also save the run's timeline as Chrome trace JSON, for Perfetto (ui.perfetto.dev) or "
    "chrome://tracing: kernels, copies and memsets on their GPU streams, the calls on their "
    "host threads, each with its line."
)


def own_options() -> list[CliOption]:
    """trace's own options (its Params record what ran, not how it was asked)."""
    program = "SCRIPT.py and its arguments (or the module's)."
    bandwidth = (
        "This GPU's pinned bandwidth and small-copy costs for the advice: cache (measured "
        "once, then cached per GPU and driver), measure (now), none."
    )
    depth = (
        "Frames of your program kept for each copy, memset, allocation, free, registration, "
        "prefetch and wait: the line that made the call and its callers (the Where tables). "
        "0: no lines (each call's host time is still recorded)."
    )
    stacks = "Show each line's callers under it in the Where tables."
    all_calls = (
        "Record every driver and runtime call (cudaLaunchKernel, cudaGetDevice, ...), as "
        "nvprof did, at a few microseconds each. Without it, only calls that copy, set, "
        "allocate, free, register, prefetch or wait: launches are counted by their kernels."
    )
    return [
        CliOption("target", list[str] | None, None, (), program, argument=True),
        CliOption("module", str | None, None, ("-m", "--module"), PYTHON_M),
        CliOption("bandwidth", str, "cache", ("--bandwidth",), bandwidth),
        CliOption(
            "stack_depth",
            int,
            DEFAULT_STACK_DEPTH,
            ("--stack-depth",),
            depth,
            Range(0, MAX_STACK_DEPTH),
        ),
        CliOption("stacks", bool, False, ("--stacks",), stacks),
        CliOption("all_calls", bool, False, ("--all-calls",), all_calls),
        CliOption("timeline", str | None, None, ("--timeline",), TIMELINE_HELP),
    ]


def click_command() -> Any:
    """The command as memprof.cli lists it; the program's exit code is its own."""
    import typer

    from memprof.cli_commands import HELP, build
    from memprof.cli_options import declared_options, device_option, output_options

    def trace(**values: Any) -> None:
        raise typer.Exit(command(**values))

    options = [*declared_options(own_options()), device_option("trace"), *output_options()]
    help = f"{HELP['trace']}\n\n{DESCRIPTION}"
    return build("trace", trace, help, options, {"context_settings": CONTEXT_SETTINGS})


def command(
    target: list[str] | None,
    module: str | None,
    bandwidth: str,
    stack_depth: int,
    stacks: bool,
    all_calls: bool,
    timeline: str | None,
    device: int,
    json: str | None,
    csv: str | None,
    quiet: bool,
    no_color: bool,
    verbose: bool,
) -> int:
    """Trace the program, then show and save its Result; the program's own exit code."""
    from memprof.experiments.trace import summarize
    from memprof.output.emit import Output

    output = Output.named(json, csv, quiet, no_color, verbose=verbose, timeline=timeline)
    output.check(inputs=program_files(target or [], module))
    if stacks and stack_depth == 0:  # before the program runs, not after
        raise InvalidArgument(
            "--stacks shows each line's callers, but --stack-depth 0 records no lines: "
            "give a depth of 1 or more"
        )
    program = parse_target(target or [], module)
    measures = (measure_pinned_bandwidth, measure_small_copies)
    options = TraceOptions(*measures, device, bandwidth, stack_depth, stacks, output, all_calls)
    return trace(program, options, summarize)


# -- this GPU's figures for the advice, measured in this process -----------------------------


def measure_pinned_bandwidth(device_index: int) -> dict[str, float]:
    """memprof's own sweep of pinned copies at 64 MiB, 5 timed after 1 warm-up (seconds)."""
    from memprof.api import run as measure

    power = BANDWIDTH_PROBE_POWER
    sweep = measure(
        "sweep", device=device_index, powers=(power,), kinds=("pinned",), repeat=5, warmup=1
    )
    return pinned_bandwidth_of(sweep)


def pinned_bandwidth_of(sweep: Result) -> dict[str, float]:
    """GB/s of pinned HtoD and DtoH at the largest size of a sweep, as its tables read them."""
    from memprof.experiments.sweep import Sweep
    from memprof.model.figures import figure_finder

    figure_of = figure_finder(sweep, Sweep.measures)
    figures: dict[str, float] = {}
    for direction in ("h2d", "d2h"):
        key = ("gpu", direction, "pinned")
        copies = [m for m in sweep.measurements if (m.group, m.operation, m.kind) == key]
        if not copies:
            raise KeyError(f"no pinned {direction} copies in the sweep")
        largest = max(copies, key=lambda m: m.bytes)
        figures[f"{direction}_gb_per_s"] = figure_of(largest).gb_per_s
        figures["bytes"] = largest.bytes
    return figures


def measure_small_copies(device_index: int) -> dict[str, Any]:
    """`memprof smallcopies` host to device (a few seconds): what each copy costs."""
    from memprof.api import run as measure

    return small_copy_costs(measure("smallcopies", device=device_index, directions=("h2d",)))


def small_copy_costs(result: Result) -> dict[str, Any]:
    """The wall clock per copy host to device of a `memprof smallcopies` Result, as cached."""
    from memprof.experiments.smallcopies import per_copy_walls

    ways = ("pinned", "pageable", "gathered", "batched")  # batched: where it was measured
    costs = [
        {"bytes": nbytes, **{f"{way}_ms": by_way.get(way) for way in ways}}
        for nbytes, by_way in sorted(per_copy_walls(result, "h2d").items())
        if all(way in by_way for way in ways[:3])
    ]
    if not costs:
        raise KeyError("no size with pinned, pageable and gathered copies in the result")
    return {"copies": result.parameters.copies, "costs": costs, "clock": "wall"}


# -- the files the program reads: no output of memprof's is written over one -----------------


def program_files(target: list[str], module: str | None) -> list[Path]:
    """The program's script (or module) and each argument naming a file (`--data=x.csv`
    too), which no output of memprof's may be written over."""
    if module is None:
        program, arguments = target[:1], target[1:]
        program += [os.path.join(word, "__main__.py") for word in program if os.path.isdir(word)]
    else:
        program, arguments = module_file(module), target
    named = [word.partition("=")[2] if word.startswith("-") else word for word in arguments]
    return [Path(word) for word in program + named if word and os.path.isfile(word)]


def module_file(module: str) -> list[str]:
    """The file `python -m module` runs, found as Python finds it but importing nothing."""
    from importlib.machinery import PathFinder

    from memprof.trace.collect import Program, as_python_runs

    places: list[str] | None = None
    spec = None
    try:
        with as_python_runs(Program(None, module, ())):
            for name in module.split("."):
                spec = PathFinder.find_spec(name, places)
                if spec is None:
                    return []  # trace says so, as Python would
                places = list(spec.submodule_search_locations or [])
        if spec is not None and spec.submodule_search_locations:  # a package: its __main__
            spec = PathFinder.find_spec("__main__", list(spec.submodule_search_locations))
    except (ImportError, ValueError):  # a name Python refuses: trace says so
        return []
    origin = getattr(spec, "origin", None)
    return [origin] if origin and os.path.isfile(origin) else []
