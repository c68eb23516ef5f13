"""The `memprof` command line: parse and validate, run one experiment in a GPU session, render.

Every way a command can end is decided in one place (`MemprofGroup.main`): one line on
stderr at most and a documented exit code (ExitCode). Option defaults come from the
experiments' Params dataclasses, so the command line and the experiments cannot drift.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup

from memprof import __version__
from memprof.__main__ import caused_by_ctrl_c
from memprof.core.multigpu import ALL_DEVICES
from memprof.errors import ExitCode, InvalidArgument, MemprofError
from memprof.experiments import EXPERIMENTS, run_experiment
from memprof.experiments.alloc import AllocParams
from memprof.experiments.common import FLOAT32_BYTES, MAX_POWER, MIN_POWER
from memprof.experiments.compare import CompareParams
from memprof.experiments.device import DeviceParams
from memprof.experiments.hostlink import HostlinkParams
from memprof.experiments.info import InfoParams
from memprof.experiments.managed import ADVICE_CHOICES, ManagedParams
from memprof.experiments.peer import PeerParams
from memprof.experiments.pinned import PinnedParams
from memprof.experiments.portable import PortableParams
from memprof.experiments.register import RegisterParams
from memprof.experiments.streams import StreamsParams
from memprof.experiments.sweep import SWEEP_KINDS, SweepParams
from memprof.experiments.uva import UvaParams
from memprof.experiments.writecombined import WriteCombinedParams
from memprof.experiments.zerocopy import ZeroCopyParams
from memprof.model.formatting import format_bytes
from memprof.model.results import Result
from memprof.output.console import prepare_streams, print_error, print_note, silence_closed_stdout
from memprof.output.emit import Output, emit, emit_diff

try:  # typer 0.2x and later carry their own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # older typer: click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

ClickException = click_exceptions.ClickException
NoArgsIsHelp = getattr(click_exceptions, "NoArgsIsHelpError", ())
ExitRequests = (typer.Exit, getattr(click_exceptions, "Exit", typer.Exit))
Aborts = (typer.Abort, getattr(click_exceptions, "Abort", typer.Abort))

INTERRUPTED = "interrupted: everything memprof allocated was freed"
MAX_KERNEL_MS = 10_000.0


class MemprofGroup(TyperGroup):
    """Typer's group, ending every command in one place: an exit code and at most one line."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        code = run_command(self, sys.argv[1:] if args is None else list(args), prog_name, extra)
        if standalone_mode:
            sys.exit(code)
        return code


def run_command(group: TyperGroup, args: list[str], prog_name: str | None, extra: dict) -> int:
    """Run the command line; every outcome becomes an exit code and at most one stderr line."""
    prepare_streams()
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
        context = getattr(error, "ctx", None)
        command = context.command_path if context is not None else _command_named(group, args)
        try:
            message = error.format_message()
        except Exception:  # some typer and click pairings fail to describe their own error
            message = str(error) or type(error).__name__
        print_error(f"{message} (see '{command} --help')")
        return error.exit_code
    except MemprofError as error:
        print_error(str(error))
        return error.exit_code
    except BrokenPipeError:  # the reader closed stdout (`memprof --help | head -1`)
        silence_closed_stdout()
        return ExitCode.OK
    except (KeyboardInterrupt, *Aborts):
        print_error(INTERRUPTED)
        return ExitCode.INTERRUPTED
    except Exception as error:
        if caused_by_ctrl_c(error):
            print_error(INTERRUPTED)
            return ExitCode.INTERRUPTED
        cuda = sys.modules.get("pycuda.driver")
        if cuda is not None and isinstance(error, cuda.Error):
            print_error(f"CUDA driver error: {str(error).strip()}")
            return ExitCode.CHECK_FAILED
        if os.environ.get("MEMPROF_DEBUG"):
            raise
        print_error(
            f"internal error, a bug in memprof: {type(error).__name__}: {error} "
            "(MEMPROF_DEBUG=1 shows where)"
        )
        return ExitCode.INTERNAL


def _command_named(group: TyperGroup, args: list[str]) -> str:
    """`memprof pinned` when the arguments name a command, else `memprof`."""
    name = next((arg for arg in args if not arg.startswith("-")), None)
    return f"memprof {name}" if name in group.commands else "memprof"


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
        "4 out of memory, 5 the run was shown but --json/--csv could not be saved, "
        "70 a bug in memprof, 130 interrupted."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def in_range(low: int, high: int) -> Callable[[int | None], int | None]:
    """An option callback refusing values outside [low, high], naming the allowed range."""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is outside the allowed range {low} to {high}")
        return value

    return check


power_range = in_range(MIN_POWER, MAX_POWER)
POWER_HELP = f"Size: 2^N float32 elements per array, N from {MIN_POWER} to {MAX_POWER}"


def power_help(default: int) -> str:
    """--power's help, naming what the default size is in bytes."""
    return f"{POWER_HELP} ({default} = {format_bytes(FLOAT32_BYTES << default)})."


def powers_text(powers: Sequence[int]) -> str:
    return f"2^{min(powers)} to 2^{max(powers)} floats"


DeviceOption = Annotated[
    int,
    typer.Option(
        "--device",
        "-d",
        callback=in_range(0, 63),
        help="CUDA device index, as nvidia-smi numbers them.",
    ),
]


def device_choice(text: str) -> int | None:
    """--device: an index (0 to 63) or `all` (None)."""
    if text.strip().lower() == ALL_DEVICES:
        return None
    try:
        index = int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a device index (0, 1, ...) or 'all'") from None
    return in_range(0, 63)(index)


DeviceChoiceOption = Annotated[
    str,
    typer.Option(
        "--device",
        "-d",
        callback=device_choice,
        help="CUDA device index, as nvidia-smi numbers them, or 'all': every GPU in turn, "
        "then every GPU's pinned copies at the same time.",
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
HostBuffer = Enum("HostBuffer", {name: name for name in ("numpy", "malloc", "hugepages")}, type=str)

DEFAULT_HOST_BUFFER = HostBuffer(PinnedParams.host_buffer)


class Timing(str, Enum):
    auto = "auto"
    cupti = "cupti"
    events = "events"


TimingOption = Annotated[
    Timing,
    typer.Option(
        help=(
            "Source of GPU-activity times: cupti = the GPU's own record of each operation (as "
            "nvprof printed; needs cupti-python), events = CUDA events around each operation "
            "held behind a GPU-side gate, auto = cupti where it works, else events."
        )
    ),
]
FromOption = Annotated[
    int | None,
    typer.Option("--from", callback=power_range, help="Sweep: first size, N of 2^N floats."),
]
ToOption = Annotated[
    int | None,
    typer.Option("--to", callback=power_range, help="Sweep: last size, N of 2^N floats."),
]
AffinityOption = Annotated[
    bool,
    typer.Option(
        "--no-affinity",
        help="Leave the host thread where the OS puts it (default: on the GPU's local CPUs, "
        "so host memory lands on its NUMA node).",
    ),
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
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(PinnedParams.power)),
    ] = PinnedParams.power,
    repeat: RepeatOption = PinnedParams.repeat,
    warmup: WarmupOption = PinnedParams.warmup,
    host_buffer: Annotated[
        HostBuffer,
        typer.Option(
            help="Where pageable memory comes from: numpy (numpy.empty), malloc (libc, as C "
            "programs get it) or hugepages (mmap with MADV_HUGEPAGE)."
        ),
    ] = DEFAULT_HOST_BUFFER,
    device: DeviceChoiceOption = "0",
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Pageable vs pinned host memory: allocation cost, HtoD/DtoH bandwidth, sumArrays flow."""
    params = PinnedParams(power=power, repeat=repeat, warmup=warmup, host_buffer=host_buffer.value)
    _run("pinned", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


@app.command(
    help="Mapped (zero-copy) host memory read by a kernel vs device memory after explicit "
    f"copies.\n\nWithout a size: the seed's sweep, 2^N for N in "
    f"{', '.join(map(str, ZeroCopyParams.powers))}."
)
def zerocopy(
    power: Annotated[
        int | None,
        typer.Option(
            "--power", "-p", callback=power_range, help=f"{POWER_HELP}: one size, full profile."
        ),
    ] = None,
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: StepOption = 2,
    repeat: RepeatOption = ZeroCopyParams.repeat,
    warmup: WarmupOption = ZeroCopyParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    if power is not None:
        if from_power is not None or to_power is not None:
            raise InvalidArgument("use either --power or --from/--to, not both")
        powers: tuple[int, ...] = (power,)
    else:
        powers = sweep_powers(from_power, to_power, step, ZeroCopyParams.powers)
    params = ZeroCopyParams(
        powers=powers, repeat=repeat, warmup=warmup, single_size=power is not None
    )
    _run("zerocopy", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


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
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(UvaParams.power)),
    ] = UvaParams.power,
    repeat: RepeatOption = UvaParams.repeat,
    warmup: WarmupOption = UvaParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Unified virtual addressing: the mapped host pointer passed to a kernel as it is."""
    params = UvaParams(power=power, repeat=repeat, warmup=warmup)
    _run("uva", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


# The choices of --advise, from the experiment's own list.
Advice = Enum("Advice", {name.replace("-", "_"): name for name in ADVICE_CHOICES}, type=str)


@app.command()
def managed(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(ManagedParams.power)),
    ] = ManagedParams.power,
    prefetch: Annotated[
        bool, typer.Option(help="Also time cuMemPrefetchAsync to the GPU before the kernel.")
    ] = ManagedParams.prefetch,
    advise: Annotated[
        Advice | None,  # type: ignore[valid-type]
        typer.Option(help="Time the first launch under this cuMemAdvise hint (default: each)."),
    ] = None,
    repeat: RepeatOption = ManagedParams.repeat,
    warmup: Annotated[
        int, typer.Option(callback=in_range(0, 1000), help="Untimed cycles before timing.")
    ] = ManagedParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Unified (managed) memory: on-demand page migration, prefetch and advice, vs copies."""
    advice = (advise.value,) if advise else ManagedParams.advice
    params = ManagedParams(
        power=power, repeat=repeat, warmup=warmup, prefetch=prefetch, advice=advice
    )
    _run("managed", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


@app.command("writecombined")
def writecombined(
    power: Annotated[
        int,
        typer.Option(
            "--power", "-p", callback=power_range, help=power_help(WriteCombinedParams.power)
        ),
    ] = WriteCombinedParams.power,
    repeat: RepeatOption = WriteCombinedParams.repeat,
    warmup: WarmupOption = WriteCombinedParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Cached vs write-combined pinned memory: transfers, host writes and (slow) host reads."""
    params = WriteCombinedParams(power=power, repeat=repeat, warmup=warmup)
    _run(
        "writecombined", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity
    )


app.command("wc", help="Alias of writecombined.")(writecombined)


@app.command()
def register(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(RegisterParams.power)),
    ] = RegisterParams.power,
    repeat: RepeatOption = RegisterParams.repeat,
    warmup: WarmupOption = RegisterParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Pin an existing numpy array in place (cuMemHostRegister): its cost and its bandwidth."""
    params = RegisterParams(power=power, repeat=repeat, warmup=warmup)
    _run("register", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


@app.command(
    help="Allocation and free time of every memory kind across sizes "
    f"(default {powers_text(AllocParams.powers)})."
)
def alloc(
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: StepOption = 2,
    repeat: RepeatOption = AllocParams.repeat,
    warmup: WarmupOption = AllocParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    powers = sweep_powers(from_power, to_power, step, AllocParams.powers)
    params = AllocParams(powers=powers, repeat=repeat, warmup=warmup)
    _run("alloc", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


def kernel_ms_in_range(value: float | None) -> float | None:
    """--kernel-ms in (0, 10000] ms; NaN and infinity are refused too."""
    if value is not None and not 0 < value <= MAX_KERNEL_MS:
        raise typer.BadParameter(
            f"{value} is outside the allowed range (0, {MAX_KERNEL_MS:g}] milliseconds"
        )
    return value


@app.command()
def streams(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(StreamsParams.power)),
    ] = StreamsParams.power,
    stream_count: Annotated[
        int,
        typer.Option(
            "--streams", "-k", callback=in_range(2, 32), help="Chunks and streams (2 to 32)."
        ),
    ] = StreamsParams.streams,
    kernel_ms: Annotated[
        float | None,
        typer.Option(
            callback=kernel_ms_in_range,
            help="Kernel time over all the data in ms, up to 10000 "
            "(default: the data's measured HtoD time).",
        ),
    ] = StreamsParams.kernel_ms,
    repeat: RepeatOption = StreamsParams.repeat,
    warmup: WarmupOption = StreamsParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Overlap copies with kernels on streams: serial, overlapped, pageable, and a timeline."""
    params = StreamsParams(
        power=power, streams=stream_count, kernel_ms=kernel_ms, repeat=repeat, warmup=warmup
    )
    _run("streams", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


class Dtype(str, Enum):
    float32 = "float32"
    float64 = "float64"


DEFAULT_DTYPE = Dtype(DeviceParams.dtype)


@app.command("device")
def device_bandwidth(
    power: Annotated[
        int,
        typer.Option(
            "--power",
            "-p",
            callback=power_range,
            help=f"Size: 2^N elements of --dtype per array, N from {MIN_POWER} to {MAX_POWER}.",
        ),
    ] = DeviceParams.power,
    dtype: Annotated[Dtype, typer.Option(help="Element type of the arrays.")] = DEFAULT_DTYPE,
    repeat: RepeatOption = DeviceParams.repeat,
    warmup: WarmupOption = DeviceParams.warmup,
    device: DeviceOption = 0,
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Device-memory bandwidth: cuMemcpyDtoD, cuMemset and STREAM copy/mul/add/triad/dot."""
    params = DeviceParams(power=power, dtype=dtype.value, repeat=repeat, warmup=warmup)
    _run("device", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


@app.command()
def compare(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(CompareParams.power)),
    ] = CompareParams.power,
    repeat: RepeatOption = CompareParams.repeat,
    warmup: WarmupOption = CompareParams.warmup,
    device: DeviceChoiceOption = "0",
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Every memory kind side by side, and which to use for what, from the measured figures."""
    params = CompareParams(power=power, repeat=repeat, warmup=warmup)
    _run("compare", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


class Direction(str, Enum):
    h2d = "h2d"
    d2h = "d2h"
    both = "both"


DIRECTIONS = {Direction.h2d: ("h2d",), Direction.d2h: ("d2h",), Direction.both: ("h2d", "d2h")}
DEFAULT_DIRECTION = next(d for d, chosen in DIRECTIONS.items() if chosen == SweepParams.directions)


@app.command(
    help="Bandwidth against size per kind "
    f"(default {powers_text(SweepParams.powers)}): chart, table, crossovers."
)
def sweep(
    from_power: FromOption = None,
    to_power: ToOption = None,
    step: Annotated[
        int, typer.Option(callback=in_range(1, MAX_POWER), help="Sweep: step between powers.")
    ] = 1,
    kinds: Annotated[
        str,
        typer.Option(help=f"Comma-separated kinds to sweep, from: {', '.join(SWEEP_KINDS)}."),
    ] = ",".join(SweepParams.kinds),
    direction: Annotated[Direction, typer.Option(help="Copy direction(s).")] = DEFAULT_DIRECTION,
    repeat: RepeatOption = SweepParams.repeat,
    warmup: WarmupOption = SweepParams.warmup,
    device: DeviceChoiceOption = "0",
    timing: TimingOption = Timing.auto,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    powers = sweep_powers(from_power, to_power, step, SweepParams.powers)
    params = SweepParams(
        powers=powers,
        kinds=sweep_kinds(kinds),
        directions=DIRECTIONS[direction],
        repeat=repeat,
        warmup=warmup,
    )
    _run("sweep", params, device, Output(json, csv, quiet, no_color), timing, not no_affinity)


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
        typer.Option("--power", "-p", callback=power_range, help=power_help(PeerParams.power)),
    ] = PeerParams.power,
    repeat: RepeatOption = PeerParams.repeat,
    warmup: WarmupOption = PeerParams.warmup,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Copies between every pair of GPUs: copy engine and kernels, peer access on/off, latency."""
    from memprof.experiments import peer as peer_experiment

    params = PeerParams(power=power, repeat=repeat, warmup=warmup)
    _run_across_gpus(peer_experiment.measure, params, Output(json, csv, quiet, no_color))


@app.command()
def hostlink(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(HostlinkParams.power)),
    ] = HostlinkParams.power,
    repeat: RepeatOption = HostlinkParams.repeat,
    warmup: WarmupOption = HostlinkParams.warmup,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Every GPU's pinned HtoD and DtoH alone, then all at once: is the host link shared?"""
    from memprof.experiments import hostlink as hostlink_experiment

    params = HostlinkParams(power=power, repeat=repeat, warmup=warmup)
    output = Output(json, csv, quiet, no_color)
    _run_across_gpus(hostlink_experiment.measure, params, output, not no_affinity)


@app.command()
def portable(
    power: Annotated[
        int,
        typer.Option("--power", "-p", callback=power_range, help=power_help(PortableParams.power)),
    ] = PortableParams.power,
    repeat: RepeatOption = PortableParams.repeat,
    warmup: WarmupOption = PortableParams.warmup,
    no_affinity: AffinityOption = False,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """One pinned buffer used from every GPU's context: PORTABLE against pinned in one only."""
    from memprof.experiments import portable as portable_experiment

    params = PortableParams(power=power, repeat=repeat, warmup=warmup)
    output = Output(json, csv, quiet, no_color)
    _run_across_gpus(portable_experiment.measure, params, output, not no_affinity)


@app.command()
def report(
    paths: Annotated[list[Path], typer.Argument(help="Result files written with --json.")],
    json: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Save the one input again, validated, in this memprof's format."
        ),
    ] = None,
    csv: Annotated[
        Path | None,
        typer.Option("--csv", help="Save every measurement of every input as CSV, one row each."),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print nothing but errors: only check the files."),
    ] = False,
    no_color: NoColorOption = False,
) -> None:
    """Render saved Results again, on any machine (no GPU needed)."""
    if json is not None and len(paths) > 1:
        raise InvalidArgument(
            f"--json saves one result, and {len(paths)} files were given: "
            "report them one at a time (--csv takes several)"
        )
    output = Output(json, csv, quiet, no_color)
    output.check(inputs=paths)
    emit([_load(path) for path in paths], output)


@app.command()
def diff(
    first: Annotated[Path, typer.Argument(help="Result A (--json of one run).")],
    second: Annotated[Path, typer.Argument(help="Result B, compared with A.")],
    json: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also save the comparison as shown (tables of strings, not a Result: "
            "`report` cannot read it).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    no_color: NoColorOption = False,
) -> None:
    """Compare two saved runs row by row: ratio of medians, changes beyond run-to-run noise."""
    from memprof.output.diff import diff as diff_results

    output = Output(json=json, quiet=quiet, no_color=no_color)
    output.check(inputs=(first, second))
    summary = diff_results(_load(first), _load(second))
    emit_diff(summary, first, second, output)


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    no_args_is_help=True,
)
def trace(
    target: Annotated[
        list[str] | None,
        typer.Argument(help="SCRIPT.py and its arguments (with -m: the module's arguments)."),
    ] = None,
    module: Annotated[
        str | None, typer.Option("-m", "--module", help="Run a module, as python -m does.")
    ] = None,
    bandwidth: Annotated[
        str,
        typer.Option(
            help="This GPU's pinned bandwidth for the advice: cache (measured once, then "
            "cached per GPU and driver), measure (now), none."
        ),
    ] = "cache",
    device: DeviceOption = 0,
    json: JsonOption = None,
    csv: CsvOption = None,
    quiet: QuietOption = False,
    no_color: NoColorOption = False,
) -> None:
    """Run your Python program under CUPTI: nvprof's profile of it, with advice for this GPU.

    memprof's options go before SCRIPT; the program's output and exit code pass through.
    """
    from memprof.trace import collect as tracing

    Output(json, csv, quiet, no_color).check()
    program = tracing.parse_target(target or [], module)
    options = tracing.TraceOptions(device, bandwidth, json, csv, quiet, no_color)
    raise typer.Exit(tracing.trace(program, options))


def _load(path: Path) -> Result:
    result = Result.load(path)
    if result.command not in EXPERIMENTS:
        raise InvalidArgument(f"{path}: this memprof cannot render {result.command!r} results")
    return result


def _run(
    command: str,
    params: Any,
    device: int | None,
    output: Output,
    timing: Timing = Timing.auto,
    affinity: bool = True,
) -> None:
    """Check the destinations, measure in a GPU session, then show and save.

    device None (`--device all`): every GPU in turn, then hostlink (memprof.alldevices).
    """
    output.check()
    if device is None:
        _run_every_device(command, params, output, timing, affinity)
        return
    from memprof.core.session import GpuSession

    with (
        GpuSession(device, timing.value) as session,
        _progress_bar(not output.quiet) as progress,
    ):
        result = run_experiment(command, session, params, progress, affinity)
    for failure in session.cleanup_failures:
        print_note(f"memprof: warning: freeing failed: {failure}", output.no_color, "yellow")
    emit([result], output)


def _run_every_device(
    command: str, params: Any, output: Output, timing: Timing, affinity: bool
) -> None:
    from memprof.experiments.alldevices import run_on_every_device

    if output.json is not None:
        raise InvalidArgument(
            "--json saves one result and --device all makes one per GPU: save each with "
            "--device N --json, and the simultaneous copies with memprof hostlink --json"
        )
    with _progress_bar(not output.quiet) as progress:
        done = run_on_every_device(command, params, timing.value, affinity, progress)
    for failure in done.cleanup_failures:
        print_note(f"memprof: warning: freeing failed: {failure}", output.no_color, "yellow")
    for note in done.notes:
        print_note(f"memprof: {note}", output.no_color)
    emit(done.results, output)


def _run_across_gpus(
    measure: Callable[..., Result], params: Any, output: Output, *options: Any
) -> None:
    """peer, hostlink, portable: they open a context on every GPU themselves (no GpuSession)."""
    output.check()
    with _progress_bar(not output.quiet) as progress:
        result = measure(params, progress, *options)
    emit([result], output)


@contextmanager
def _progress_bar(enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr (only on a terminal), fed by the experiment's callback."""
    from memprof.output.console import stderr_console

    console = stderr_console()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )
    task = progress.add_task("starting", total=None)

    def update(description: str, done: int, total: int) -> None:
        progress.update(task, description=description, completed=done, total=total)

    with progress:
        yield update


def main() -> None:
    """Run the command line (the console script is memprof.__main__:main, which calls this)."""
    app()
