"""The `memprof` command line: parse and validate, run one experiment in a GPU session, render.

Every failure memprof can explain ends as one line on stderr and a documented exit
code (see `memprof --help`); Ctrl-C frees everything and exits with 130.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memprof import __version__
from memprof.errors import ExitCode, InvalidArgument, MemprofError, VerificationFailed
from memprof.experiments import EXPERIMENTS, run_experiment
from memprof.experiments.alloc import AllocParams
from memprof.experiments.common import MAX_POWER, MIN_POWER
from memprof.experiments.compare import CompareParams
from memprof.experiments.device import DeviceParams
from memprof.experiments.info import InfoParams
from memprof.experiments.managed import ADVICE_CHOICES, ManagedParams
from memprof.experiments.pinned import PinnedParams
from memprof.experiments.register import RegisterParams
from memprof.experiments.streams import StreamsParams
from memprof.experiments.sweep import SWEEP_KINDS, SweepParams
from memprof.experiments.uva import UvaParams
from memprof.experiments.writecombined import WriteCombinedParams
from memprof.experiments.zerocopy import SEED_SWEEP_POWERS, ZeroCopyParams
from memprof.results import Result

app = typer.Typer(
    name="memprof",
    help=(
        "Measure what each kind of CUDA memory really costs on your GPU, with nvprof-style "
        "profiles.\n\nSizes are powers of two of float32 elements (--power 20 = 2^20 floats = "
        "4 MiB). Times are CUDA events (GPU work) or the host clock (API calls); bandwidth is "
        "in GB/s = 10^9 bytes/s.\n\nExit codes: 0 ok, 1 a result failed verification or CUDA "
        "failed, 2 invalid arguments, 3 no PyCUDA/driver/GPU/nvcc or a capability missing, "
        "4 out of memory, "
        "130 interrupted."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

# Piped or redirected output is not cut to 80 columns: profiles are wide, like nvprof's.
_PIPE_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
stderr = Console(stderr=True)


def in_range(low: int, high: int) -> Callable[[int | None], int | None]:
    """An option callback refusing values outside [low, high], naming the allowed range."""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is outside the allowed range {low} to {high}")
        return value

    return check


power_range = in_range(MIN_POWER, MAX_POWER)

DeviceOption = Annotated[
    int,
    typer.Option(
        "--device",
        "-d",
        callback=in_range(0, 63),
        help="CUDA device index, as nvidia-smi numbers them.",
    ),
]
RepeatOption = Annotated[
    int,
    typer.Option(
        "--repeat",
        "-r",
        callback=in_range(1, 10_000),
        help="Timed repetitions of each measurement (1 to 10000).",
    ),
]
WarmupOption = Annotated[
    int,
    typer.Option(
        callback=in_range(0, 1000),
        help="Untimed runs before timing: compilation and first-touch costs stay out (0 to 1000).",
    ),
]
JsonOption = Annotated[
    Path | None,
    typer.Option(
        "--json", help="Also save the Result (every sample) as JSON; `memprof report` renders it."
    ),
]
CsvOption = Annotated[
    Path | None,
    typer.Option("--csv", help="Also save every measurement as CSV: one row each, times in ms."),
]
QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="Print nothing but errors (for scripts: use --json/--csv)."),
]
NoColorOption = Annotated[
    bool,
    typer.Option(
        "--no-color", help="No colours (off anyway when not a terminal or NO_COLOR is set)."
    ),
]


@dataclass(frozen=True)
class Output:
    """Where a command's Result goes: the terminal, JSON, CSV."""

    json: Path | None = None
    csv: Path | None = None
    quiet: bool = False
    no_color: bool = False


PowerHelp = f"Size: 2^N float32 elements per array, N from {MIN_POWER} to {MAX_POWER}"
PowerOption = Annotated[
    int, typer.Option("--power", "-p", callback=power_range, help=f"{PowerHelp} (22 = 16 MiB).")
]
FromOption = Annotated[
    int | None,
    typer.Option("--from", callback=power_range, help="Sweep: first size, N of 2^N floats."),
]
ToOption = Annotated[
    int | None,
    typer.Option("--to", callback=power_range, help="Sweep: last size, N of 2^N floats."),
]
StepOption = Annotated[
    int, typer.Option(callback=in_range(1, MAX_POWER), help="Sweep: step between powers.")
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memprof {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


@app.command()
def info(
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """The GPU, its theoretical memory and PCIe bandwidth, and which memory kinds it supports."""
    _run("info", InfoParams(), device, Output(json, csv, quiet, no_color))


@app.command()
def pinned(
    power: PowerOption = 22,
    repeat: RepeatOption = 10,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Pageable vs pinned host memory: allocation cost, HtoD/DtoH bandwidth, sumArrays flow."""
    _run(
        "pinned",
        PinnedParams(power=power, repeat=repeat, warmup=warmup),
        device,
        Output(json, csv, quiet, no_color),
    )


@app.command()
def zerocopy(
    power: Annotated[
        int | None,
        typer.Option(
            "--power", "-p", callback=power_range, help=f"{PowerHelp}: one size, full profile."
        ),
    ] = None,
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: StepOption = 2,
    repeat: RepeatOption = 10,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Mapped (zero-copy) host memory read by a kernel vs device memory after explicit copies.

    Without a size: the seed's sweep, 2^10 to 2^20 step 2, then 2^22 and 2^24.
    """
    with _errors_as_exit_codes():
        if power is not None:
            if from_power is not None or to_power is not None:
                raise InvalidArgument("use either --power or --from/--to, not both")
            powers: tuple[int, ...] = (power,)
        else:
            powers = sweep_powers(from_power, to_power, step, SEED_SWEEP_POWERS)
    params = ZeroCopyParams(
        powers=powers, repeat=repeat, warmup=warmup, single_size=power is not None
    )
    _run("zerocopy", params, device, Output(json, csv, quiet, no_color))


def sweep_powers(
    from_power: int | None, to_power: int | None, step: int, default: tuple[int, ...]
) -> tuple[int, ...]:
    """The sizes of a sweep: --from/--to/--step, or the command's default sweep."""
    if from_power is None and to_power is None:
        return default
    if from_power is None or to_power is None:
        raise InvalidArgument("a sweep needs both --from and --to")
    if from_power > to_power:
        raise InvalidArgument(f"--from {from_power} is larger than --to {to_power}")
    return tuple(range(from_power, to_power + 1, step))


@app.command()
def uva(
    power: PowerOption = 22,
    repeat: RepeatOption = 10,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Unified virtual addressing: the mapped host pointer passed to a kernel as it is."""
    _run(
        "uva",
        UvaParams(power=power, repeat=repeat, warmup=warmup),
        device,
        Output(json, csv, quiet, no_color),
    )


class Advice(str, Enum):
    preferred_location = "preferred-location"
    read_mostly = "read-mostly"
    accessed_by = "accessed-by"


@app.command()
def managed(
    power: PowerOption = 22,
    prefetch: Annotated[
        bool, typer.Option(help="Also time cuMemPrefetchAsync to the GPU before the kernel.")
    ] = True,
    advise: Annotated[
        Advice | None,
        typer.Option(help="Time the first launch under this cuMemAdvise hint (default: each)."),
    ] = None,
    repeat: RepeatOption = 10,
    warmup: Annotated[
        int, typer.Option(callback=in_range(0, 1000), help="Untimed cycles before timing.")
    ] = 1,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Unified (managed) memory: on-demand page migration, prefetch and advice, vs copies."""
    advice = (advise.value,) if advise else ADVICE_CHOICES
    params = ManagedParams(
        power=power, repeat=repeat, warmup=warmup, prefetch=prefetch, advice=advice
    )
    _run("managed", params, device, Output(json, csv, quiet, no_color))


@app.command("writecombined")
def writecombined(
    power: PowerOption = 22,
    repeat: RepeatOption = 10,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Cached vs write-combined pinned memory: transfers, host writes and (slow) host reads."""
    params = WriteCombinedParams(power=power, repeat=repeat, warmup=warmup)
    _run("writecombined", params, device, Output(json, csv, quiet, no_color))


app.command("wc", help="Alias of writecombined.")(writecombined)


@app.command()
def register(
    power: PowerOption = 22,
    repeat: RepeatOption = 10,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Pin an existing numpy array in place (cuMemHostRegister): its cost and its bandwidth."""
    _run(
        "register",
        RegisterParams(power=power, repeat=repeat, warmup=warmup),
        device,
        Output(json, csv, quiet, no_color),
    )


@app.command()
def alloc(
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: StepOption = 2,
    repeat: RepeatOption = 3,
    warmup: WarmupOption = 1,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Allocation and free time of every memory kind across sizes (default 2^16 to 2^28 floats)."""
    with _errors_as_exit_codes():
        powers = sweep_powers(from_power, to_power, step, AllocParams.powers)
    _run(
        "alloc",
        AllocParams(powers=powers, repeat=repeat, warmup=warmup),
        device,
        Output(json, csv, quiet, no_color),
    )


@app.command()
def streams(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=f"{PowerHelp} (26 = 256 MiB)."),
    ] = 26,
    stream_count: Annotated[
        int,
        typer.Option(
            "--streams", "-k", callback=in_range(2, 32), help="Chunks and streams (2 to 32)."
        ),
    ] = 4,
    kernel_ms: Annotated[
        float | None,
        typer.Option(
            help="Kernel time over all the data in ms (default: the data's measured HtoD time)."
        ),
    ] = None,
    repeat: RepeatOption = 5,
    warmup: WarmupOption = 1,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Overlap copies with kernels on streams: serial, overlapped, pageable, and a timeline."""
    with _errors_as_exit_codes():
        if kernel_ms is not None and not 0 < kernel_ms <= 10_000:
            raise InvalidArgument(
                f"--kernel-ms {kernel_ms} is outside the allowed range (0, 10000]"
            )
    params = StreamsParams(
        power=power, streams=stream_count, kernel_ms=kernel_ms, repeat=repeat, warmup=warmup
    )
    _run("streams", params, device, Output(json, csv, quiet, no_color))


class Dtype(str, Enum):
    float32 = "float32"
    float64 = "float64"


@app.command("device")
def device_bandwidth(
    power: Annotated[
        int,
        typer.Option(
            "--power",
            "-p",
            callback=power_range,
            help="Size: 2^N elements of --dtype per array, N from 0 to 30 (default 25).",
        ),
    ] = 25,
    dtype: Annotated[Dtype, typer.Option(help="Element type of the arrays.")] = Dtype.float64,
    repeat: RepeatOption = 20,
    warmup: WarmupOption = 3,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Device-memory bandwidth: cuMemcpyDtoD, cuMemset and STREAM copy/mul/add/triad/dot."""
    params = DeviceParams(power=power, dtype=dtype.value, repeat=repeat, warmup=warmup)
    _run("device", params, device, Output(json, csv, quiet, no_color))


@app.command()
def compare(
    power: Annotated[
        int, typer.Option("--power", "-p", callback=power_range, help=f"{PowerHelp} (24 = 64 MiB).")
    ] = 24,
    repeat: RepeatOption = 5,
    warmup: WarmupOption = 1,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Every memory kind side by side, and which to use for what, from the measured figures."""
    params = CompareParams(power=power, repeat=repeat, warmup=warmup)
    _run("compare", params, device, Output(json, csv, quiet, no_color))


class Direction(str, Enum):
    h2d = "h2d"
    d2h = "d2h"
    both = "both"


@app.command()
def sweep(
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: Annotated[
        int, typer.Option(callback=in_range(1, MAX_POWER), help="Sweep: step between powers.")
    ] = 1,
    kinds: Annotated[
        str,
        typer.Option(help=f"Comma-separated kinds to sweep, from: {', '.join(SWEEP_KINDS)}."),
    ] = ",".join(SWEEP_KINDS),
    direction: Annotated[Direction, typer.Option(help="Copy direction(s).")] = Direction.both,
    repeat: RepeatOption = 20,
    warmup: WarmupOption = 2,
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Bandwidth against size per kind (default 2^8 to 2^26 floats): chart, table, crossovers."""
    with _errors_as_exit_codes():
        powers = sweep_powers(from_power, to_power, step, SweepParams.powers)
        chosen = sweep_kinds(kinds)
    directions = ("h2d", "d2h") if direction is Direction.both else (direction.value,)
    params = SweepParams(
        powers=powers, kinds=chosen, directions=directions, repeat=repeat, warmup=warmup
    )
    _run("sweep", params, device, Output(json, csv, quiet, no_color))


def sweep_kinds(text: str) -> tuple[str, ...]:
    """--kinds as a tuple, each name checked, in the order given."""
    chosen = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in chosen if name not in SWEEP_KINDS]
    if unknown or not chosen:
        raise InvalidArgument(
            f"--kinds {text!r}: choose from {', '.join(SWEEP_KINDS)} (comma-separated)"
        )
    return chosen


@app.command()
def peer(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=f"{PowerHelp} (26 = 256 MiB)."),
    ] = 26,
    repeat: RepeatOption = 5,
    warmup: WarmupOption = 1,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Copies between every pair of GPUs: copy engine and kernels, peer access on/off, latency."""
    from memprof.experiments import peer as peer_experiment

    output = Output(json, csv, quiet, no_color)
    params = peer_experiment.PeerParams(power=power, repeat=repeat, warmup=warmup)
    with _errors_as_exit_codes():
        with _progress_bar(not quiet) as progress:
            result = peer_experiment.measure(params, progress)
        _emit([result], output)


@app.command()
def report(
    paths: Annotated[list[Path], typer.Argument(help="Result files written with --json.")],
    csv: CsvOption = None,
    no_color: NoColorOption = False,
) -> None:
    """Render saved Results again, on any machine (no GPU needed)."""
    with _errors_as_exit_codes():
        results = [_load(path) for path in paths]
        _emit(results, Output(csv=csv, no_color=no_color))


@app.command()
def diff(
    first: Annotated[Path, typer.Argument(help="Result A (--json of one run).")],
    second: Annotated[Path, typer.Argument(help="Result B, compared with A.")],
    no_color: NoColorOption = False,
) -> None:
    """Compare two saved runs row by row: ratio of medians, changes beyond run-to-run noise."""
    from memprof.diff import diff as diff_results
    from memprof.render import render_summary

    with _errors_as_exit_codes():
        summary = diff_results(_load(first), _load(second))
        render_summary(summary, _console(Output(no_color=no_color)))


def _load(path: Path) -> Result:
    result = Result.load(path)
    if result.command not in EXPERIMENTS:
        raise InvalidArgument(f"{path}: this memprof cannot render {result.command!r} results")
    return result


def _run(command: str, params: Any, device: int, output: Output) -> None:
    with _errors_as_exit_codes():
        for option, path in (("--json", output.json), ("--csv", output.csv)):
            if path is not None and not path.parent.is_dir():
                raise InvalidArgument(f"{option} {path}: directory {path.parent} does not exist")
        from memprof.session import GpuSession

        with GpuSession(device) as session, _progress_bar(not output.quiet) as progress:
            result = run_experiment(command, session, params, progress)
        for failure in session.cleanup_failures:
            stderr.print(f"memprof: warning: freeing failed: {failure}", markup=False)
        _emit([result], output)


def _console(output: Output) -> Console:
    return Console(width=_PIPE_WIDTH, no_color=output.no_color)


def _emit(results: list[Result], output: Output) -> None:
    """Save, render (unless quiet), then fail if any result did not verify."""
    from memprof.export import write_csv
    from memprof.render import render_result

    if output.json is not None:
        results[0].save(output.json)
    if output.csv is not None:
        write_csv(results, output.csv)
    if not output.quiet:
        console = _console(output)
        for index, result in enumerate(results):
            if index:
                console.print()
            render_result(result, console)
        for path in (output.json, output.csv):
            if path is not None:
                stderr.print(f"saved {path}", style="dim", markup=False, highlight=False)
    checks = [check for result in results for check in result.checks]
    failed = [check for check in checks if not check.passed]
    if failed:
        raise VerificationFailed(f"{len(failed)} of {len(checks)} results did not verify")


@contextmanager
def _progress_bar(enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr (only on a terminal), fed by the experiment's callback."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=not (enabled and stderr.is_terminal),
    )
    task = progress.add_task("starting", total=None)

    def update(description: str, done: int, total: int) -> None:
        progress.update(task, description=description, completed=done, total=total)

    with progress:
        yield update


@contextmanager
def _errors_as_exit_codes() -> Iterator[None]:
    """Turn memprof's and the CUDA driver's errors into one stderr line and an exit code."""
    try:
        yield
    except MemprofError as error:
        _fail(str(error), error.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted: everything memprof allocated was freed", ExitCode.INTERRUPTED)
    except Exception as error:
        cuda = sys.modules.get("pycuda.driver")
        if cuda is not None and isinstance(error, cuda.Error):
            _fail(f"CUDA driver error: {str(error).strip()}", ExitCode.CHECK_FAILED)
        raise


def _fail(message: str, code: ExitCode) -> None:
    stderr.print(
        f"memprof: error: {message}",
        style="bold red",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(int(code))


def main() -> None:
    app()
