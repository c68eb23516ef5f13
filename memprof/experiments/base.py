"""The contract every command keeps, and the one way any of them runs.

An Experiment declares its name, Params (memprof.model.params), Extra (the plain data its
summary needs), measures (every (group, operation) it may record: the core refuses others, a
loaded file must hold the required ones), which GPUs it uses, and run(ctx) -> Extra; its
module's summarize(result) -> Summary needs no GPU. Experiment modules import numpy, PyCUDA
and CUPTI inside run() only, so `memprof --help` and `memprof report` start fast.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from memprof.core.repetitions import (
    DEFAULT_MAX_NOISE_PCT,
    FEWEST,
    MAX_COUNT,
    MIN_COUNT,
    TIME_CAP_S,
    Repetitions,
)
from memprof.errors import EnvironmentProblem
from memprof.model.device import DeviceFacts
from memprof.model.figures import check_bounds
from memprof.model.formatting import format_bytes, plural
from memprof.model.gpustate import GpuState
from memprof.model.measures import COPY_NAMES as COPY_NAMES  # the commands read it here
from memprof.model.measures import Basis, Measure, check_declared
from memprof.model.params import NamedSets, Range, Sizes, check_single_sizes, param
from memprof.model.results import Check, Measurement, Result, ResultShape, TimingInfo
from memprof.model.schema import DISTINCT, INCREASING, NON_EMPTY, SchemaError
from memprof.model.statistics import repetitions_words
from memprof.model.summary import Summary

__all__ = ["Basis", "Measure"]  # declared here for every experiment

if TYPE_CHECKING:
    from memprof.core.measure import Profiler
    from memprof.core.nvml import Watch
    from memprof.core.session import Devices, GpuSession

FLOAT32_BYTES = 4
MIN_POWER, MAX_POWER = 0, 30  # 1 element .. 2^30 float32 (4 GiB per array; n fits an int)

# The Params fields most experiments share, with the rules every command applies.
Power = Annotated[int, Range(MIN_POWER, MAX_POWER)]
Powers = Annotated[tuple[Power, ...], NON_EMPTY, INCREASING]
# None: until the noise target (memprof.core.repetitions.Repetitions); in older files always a count
Repeat = Annotated[int, Range(1, 10_000)] | None
Warmup = Annotated[int, Range(0, 1000)]

POWER_HELP = f"Size: 2^N float32 elements per array, N from {MIN_POWER} to {MAX_POWER}"


def power_param(default: int, help: str = POWER_HELP) -> Any:
    """--power/-p, its help naming what the default is in bytes."""
    size = format_bytes(FLOAT32_BYTES << default)
    return param(default, f"{help} ({default} = {size}).", flags=("--power", "-p"))


def powers_param(default: tuple[int, ...], step: int, single: str | None = None) -> Any:
    """A sweep of sizes: --from/--to/--step (and --power for one size where `single`)."""
    form = Sizes(step, single, f"{POWER_HELP}: one size, full profile.")
    return param(default, "Sizes: N of 2^N floats.", form=form)


def repeat_param(most: int) -> Any:
    """--repeat N: exactly N repetitions; without it, the noise target, at most `most` times."""
    least = min(MIN_COUNT, most)
    counts = f"{least} to {most} times" if least < most else f"{most} times"
    slow = f", {FEWEST} where those take over {TIME_CAP_S:g} s" if most > FEWEST else ""
    help = (
        "Timed repetitions of each measurement: exactly N (1 to 10000). Without it, until "
        f"the noise of its median is below --max-noise: {counts}{slow}."
    )
    field = param(None, help, flags=("--repeat", "-r"))
    return dataclasses.field(default=None, metadata={**field.metadata, "most": most})


def repetitions_of(params: Any, max_noise_pct: float) -> Repetitions:
    """Its Params' repeat, the noise target where that is None, once where it has none."""
    field = next((f for f in dataclasses.fields(params) if f.name == "repeat"), None)
    if field is None:
        return Repetitions(1)
    most = field.metadata.get("most", MAX_COUNT)
    return Repetitions(params.repeat, max_noise_pct, most=most)


WARMUP_HELP = "Untimed runs before timing: compilation and first-touch costs stay out (0 to 1000)."


def warmup_param(default: int, help: str = WARMUP_HELP) -> Any:
    return param(default, help)


Directions = Annotated[tuple[Literal["h2d", "d2h"], ...], NON_EMPTY, DISTINCT]


def directions_param() -> Any:
    """--direction: h2d, d2h or both (the default)."""
    return param(
        ("h2d", "d2h"),
        "Copy direction(s).",
        flags=("--direction",),
        form=NamedSets({"h2d": ("h2d",), "d2h": ("d2h",), "both": ("h2d", "d2h")}),
    )


@dataclass(frozen=True)
class OneSize:
    """--power, --repeat and --warmup: the Params of an experiment on arrays of one size."""

    power: Power = power_param(22)  # 2^22 float32 = 16 MiB, as the seeds' memTransfer example
    repeat: Repeat = repeat_param(10)
    warmup: Warmup = warmup_param(2)


@dataclass(frozen=True)
class LargeCopies(OneSize):
    """The Params of the experiments across GPUs: 256 MiB copies, 5 timed, 1 warm-up."""

    power: Power = power_param(26)
    repeat: Repeat = repeat_param(5)  # timed operations and batches per figure
    warmup: Warmup = warmup_param(1)


@dataclass(frozen=True)
class NoExtra:
    """For experiments whose measurements say everything."""


# -- what an experiment records ---------------------------------------------------------------

# The two directions of host copies in words (COPY_NAMES: as nvprof names the copies).
DIRECTIONS = {"h2d": "host → device", "d2h": "device → host"}


# CUPTI's record of every driver call inside timed steps: set-up calls made once (a pool's
# creation) are among them, so their count follows no repetition.
DRIVER_CALLS = Measure(
    "api",
    "driver_call",
    "every driver call a timed operation made",
    "driver call",
    False,
    0,
    per_repeat=False,
)
# What the core records beside what an experiment times (memprof.core.memory, .kernels): the
# host clock around each driver call, and the poison written before a kernel's output.
LAUNCH_CALL = Measure("api", "launch", "cuLaunchKernel, host clock", "host clock", False, 0)
MEMSET_CALL = Measure("api", "memset", "cuMemsetD8Async, host clock", "host clock", False, 1)
POISON = Measure(
    "gpu", "memset", "an output poisoned before each run", "one operation", False, 1, bound="hbm"
)
COPY_CALLS = (
    Measure("api", "h2d", "the host in the HtoD copy call", "host clock", False, 1),
    Measure("api", "d2h", "the host in the DtoH copy call", "host clock", False, 1),
)
# all of them, for experiments that launch kernels on poisoned outputs and copy
CORE_RECORDS = (POISON, LAUNCH_CALL, MEMSET_CALL, *COPY_CALLS)
# The host side of pageable copies (memprof.model.ceilings): one thread copying the buffer
# through a small one chunk by chunk, as the driver stages them (absent from older files).
HOST_STAGING = {
    direction: Measure(
        "host",
        f"staging_{direction}",
        f"one host thread copying {words}, chunk by chunk",
        "back to back",
        False,
        1,
        kinds=("pageable",),
        shows="throughput",
        per_repeat=False,
    )
    for direction, words in (
        ("h2d", "pageable memory into a small buffer"),
        ("d2h", "a small buffer into pageable memory"),
    )
}
# Files of memprof before the staging model hold one memcpy between two pageable buffers of
# the copies' size instead (a ceiling the copies beat: docs/ceilings.md).
HOST_MEMCPY = Measure(
    "host",
    "memcpy",
    "host memcpy, pageable to pageable, one thread",
    "back to back",
    False,
    1,
    shows="throughput",
    per_repeat=False,
)
HOST_SIDE = (*HOST_STAGING.values(), HOST_MEMCPY)  # what an experiment declares


# What several experiments time the same way.
ONE_COPY = {  # a copy of a whole buffer, alone, per direction
    direction: Measure(
        "gpu",
        direction,
        f"one copy {words}",
        "one operation",
        arrays=1,
        bound="link",
        call=direction,
    )
    for direction, words in DIRECTIONS.items()
}
# cuMemPrefetchAsync of managed memory to the GPU (managed's a, b and res; compare's buffer):
# its GPU time, and the host's in the calls (common.prefetch_to_gpu records both)
PREFETCH = Measure(
    "gpu", "prefetch", "cuMemPrefetchAsync of managed memory to the GPU", "one operation", False,
    name="[Unified Memory prefetch HtoD]",
)  # fmt: skip
PREFETCH_CALLS = Measure(
    "api", "prefetch", "cuMemPrefetchAsync calls", "host clock", False, 0,
    name="cuMemPrefetchAsync",
)  # fmt: skip
# sumArrays (a + b into res) as zerocopy times it; register, uva and writecombined replace
# its words, kinds and bound
SUM_ARRAYS = Measure(
    "gpu",
    "kernel",
    "sumArrays reading device or mapped memory",
    "one operation",
    arrays=3,
    traffic=2 / 3,
    kinds=("device", "mapped"),
    shows="latency",
    bound={"mapped": "link"},
)
HOST_WRITE = Measure("host", "host_write", "numpy copyto into the buffer", "host clock", arrays=1)
HOST_READ = Measure("host", "host_read", "numpy copyto out of the buffer", "host clock", arrays=1)
ALLOCATIONS = tuple(  # allocating and freeing a buffer of each kind
    Measure(group, operation, what, "host clock", True, 1)
    for group, operation, what in (
        ("api", "alloc", "a driver allocation (cuMemAlloc, cuMemHostAlloc...)"),
        ("api", "free", "its free"),
        ("host", "alloc", "numpy.empty and every page written (+ registration)"),
        ("host", "free", "its free (and unregistration)"),
    )
)


def element_bytes(params: Any) -> int:
    """The bytes of one element: float32, unless the Params say (device's --dtype)."""
    return getattr(params, "element_bytes", FLOAT32_BYTES)


def sizes(params: Any, measure: Measure) -> list[int]:
    """The bytes of one array at each size a run makes, by the Params field the measure names
    (powers; a name ending in _bytes gives the bytes themselves: streams' chunks)."""
    if measure.size.endswith("_bytes"):
        return list(getattr(params, measure.size))
    powers = getattr(params, measure.size, None)
    if powers is None and measure.size == "power":
        powers = params.powers
    powers = powers if isinstance(powers, tuple) else (powers,)
    return [element_bytes(params) << power for power in powers]


def array_bytes(params: Any) -> int:
    """The bytes of one array of a run on arrays of one size (Params.power)."""
    return element_bytes(params) << params.power


# What the core records beside the figures: they do not say what a figure is the median of.
SIDE_RECORDS = frozenset(m.key for m in (DRIVER_CALLS, LAUNCH_CALL, MEMSET_CALL, POISON))


def repetitions(result: Result, unit: str = "", units: str = "", batches: bool = False) -> str:
    """What each figure is the median of, for a footnote: "10", "5 batches", or under the noise
    target "5 to 40 batches, noise at most 0.8%". batches: the figures are throughput's."""
    repeat = getattr(result.parameters, "repeat", None)
    units = units or (f"{unit}s" if unit else "")
    if repeat is not None:
        return plural(repeat, unit, units) if unit else str(repeat)
    figures = [m for m in result.measurements if (m.group, m.operation) not in SIDE_RECORDS]
    if batches:
        return repetitions_words([m.throughput_ms for m in figures if m.throughput_ms], units)
    return repetitions_words([m.samples_ms for m in figures], units)


def find(
    result: Result, measure: Measure, kind: str | None = None, byte_count: int | None = None
) -> Measurement:
    """The one measurement of a declared measure (and kind, size) in a Result."""
    return result.find(measure.operation, kind, measure.group, byte_count)


def find_all(result: Result, measure: Measure) -> list[Measurement]:
    """Every measurement of a declared measure, in the order recorded."""
    return [m for m in result.measurements if (m.group, m.operation) == measure.key]


# -- the experiment ---------------------------------------------------------------------------

Gpus = Literal["one", "one_or_every", "every"]
Progress = Callable[[str, int, int], None]  # (description, done, total)


def no_progress(description: str, done: int, total: int) -> None:
    """The default progress callback: experiments never print."""


class Experiment:
    """One command: what it takes, what it records, how it measures and how it reads back."""

    name: ClassVar[str]  # its one-line help and aliases are its registry line's
    description: ClassVar[str] = ""  # more for `memprof CMD --help`
    Params: ClassVar[type]
    Extra: ClassVar[type] = NoExtra
    measures: ClassVar[tuple[Measure, ...]] = ()
    gpus: ClassVar[Gpus] = "one"
    # gpus "every": what a machine with one GPU lacks for this experiment, said in one line
    needs_two_gpus: ClassVar[str] = ""
    timing_option: ClassVar[bool] = True  # takes --timing
    affinity_option: ClassVar[bool] = True  # takes --no-affinity
    # gpus "one_or_every": what `--device all` runs after each GPU in turn, with its default
    # Params (every GPU's copies at once; `check` checks each pair of GPUs)
    every_gpu_then: ClassVar[str] = "hostlink"

    def read_inputs(self, params: Any) -> Any:
        """What run() reads from files (ctx.inputs), and checks of one parameter against
        another (pinlimit's --cap and --step), made before any GPU work."""
        return None

    def run(self, ctx: RunContext) -> Any:
        """Measure on the GPU through ctx; return the Extra."""
        raise NotImplementedError

    def summarize(self, result: Result) -> Summary:
        """Tables and conclusions from a Result, without a GPU: its module's summarize()."""
        return sys.modules[type(self).__module__].summarize(result)

    def check_consistency(self, result: Result) -> None:
        """What its Params, Extra and measurements must say together beyond its declarations:
        a SchemaError naming the field that contradicts. summarize() may rely on it."""

    def derived(self, result: Result) -> dict[str, Any]:
        """What an older file's extra held that is now derived (memprof.model.upgrade)."""
        return {}

    @classmethod
    def result_shape(cls) -> ResultShape:
        """What a saved Result of this command must hold, from the declarations above."""
        experiment = cls()
        check = functools.partial(check_result, experiment)
        return ResultShape(cls.Params, cls.Extra, check, experiment.derived)


def declared_measures(experiment: type[Experiment] | Experiment) -> tuple[Measure, ...]:
    """Everything a run may record: its own measures and the driver calls behind them."""
    return (*experiment.measures, DRIVER_CALLS)


def declared_keys(experiment: type[Experiment] | Experiment) -> frozenset[tuple[str, str]]:
    return frozenset(measure.key for measure in declared_measures(experiment))


def check_result(experiment: Experiment, result: Result) -> None:
    """Every agreement a loaded Result keeps: its declarations', then its experiment's."""
    if result.device is None:
        raise SchemaError("device", f"is null, but every {experiment.name} run records its GPU")
    check_recorded(experiment, result)


def _check_each_once(experiment: Experiment, result: Result) -> None:
    """Each measurement once, of one GPU where the command measures one: a set's count first
    (a trace's 10^5 at C speed), then, where it finds one, the loop that names the first."""
    measurements, one_gpu = result.measurements, experiment.gpus != "every"
    keyed = measurements if one_gpu else [m for m in measurements if m.group == "gpu"]
    # a name and size once each settles it at half the cost (a trace's copies: one a size)
    once = len({(m.name, m.bytes) for m in keyed}) == len(keyed) or len(
        {(m.group, m.name, m.operation, m.kind, m.bytes, m.gpus) for m in keyed}
    ) == len(keyed)
    if once and not (one_gpu and any(m.gpus for m in measurements)):
        return
    seen: dict[tuple, int] = {}
    for index, m in enumerate(measurements):
        if m.gpus and experiment.gpus != "every":
            raise SchemaError(
                f"measurements[{index}].gpus",
                f"names GPUs {list(m.gpus)}, but a {experiment.name} run measures one GPU",
            )
        if experiment.gpus == "every" and m.group != "gpu":
            continue  # each GPU's profiler records its own driver calls alike
        # a profiler keeps one measurement per name, operation, kind, size and GPUs
        key = (m.group, m.name, m.operation, m.kind, m.bytes, m.gpus)
        if key in seen:
            raise SchemaError(
                f"measurements[{index}]",
                f"is measurements[{seen[key]}] again ({m.group} {m.name!r}, "
                f"{m.kind}, {m.bytes} bytes)",
            )
        seen[key] = index


def check_recorded(experiment: Experiment, result: Result) -> None:
    """What check_result holds every Result to beyond its GPU's facts (a trace has none)."""
    _check_each_once(experiment, result)
    one_gpu = experiment.gpus != "every"
    if one_gpu:  # the records the ceilings come from, before the figures they bound
        check_gpu_states(result, one_gpu=True)
        _check_kinds_the_gpu_has(result)  # several GPUs' runs record the first one's flags
    declared = declared_measures(experiment)
    params = result.parameters
    check_declared(
        result, declared, lambda m: sizes(params, m), several_gpus=experiment.gpus == "every"
    )
    check_bounds(result, declared)
    try:
        check_single_sizes(params)
    except SchemaError as error:
        raise error.within("parameters") from None
    if not one_gpu:
        run_devices(result)
    experiment.check_consistency(result)
    if not one_gpu:  # after the experiment's own check of which GPUs ran
        check_gpu_states(result, one_gpu=False)
    _check_noise_target(result)
    if result.timing is not None and result.timing.source == "events":
        for index, m in enumerate(result.measurements):
            if m.source == "cupti":
                raise SchemaError(
                    f"measurements[{index}].source",
                    "is 'cupti', but timing.source says this run timed with events",
                )


NOISE_TARGET_FIELDS = ("max_noise_pct", "time_cap_s", "max_count")


def _check_noise_target(result: Result) -> None:
    """A run under the noise target records it, its time cap and its most; --repeat N none."""
    params, timing = result.parameters, result.timing
    fields = {f.name for f in dataclasses.fields(params)}
    adaptive = "repeat" in fields and params.repeat is None
    recorded = {name: getattr(timing, name, None) for name in NOISE_TARGET_FIELDS}
    if adaptive:
        missing = next((name for name, value in recorded.items() if value is None), None)
        if missing is not None:
            raise SchemaError(
                f"timing.{missing}",
                "is missing, but parameters.repeat is null: the run repeated each figure "
                "until its noise target, and records the target, its time cap and its most",
            )
        return
    found = next((name for name, value in recorded.items() if value is not None), None)
    if found is not None:
        repeat = f"is {params.repeat}" if "repeat" in fields else "does not exist"
        raise SchemaError(
            f"timing.{found}",
            f"is {recorded[found]}, but parameters.repeat {repeat}: a run repeated "
            "exactly has no noise target",
        )


def run_devices(result: Result) -> list[int]:
    """A run's GPUs (extra.devices): at least two, each once, the first the device's."""
    devices = [device.index for device in result.extra.devices]
    if len(devices) < 2:
        raise SchemaError(
            "extra.devices",
            f"names {plural(len(devices), 'GPU')}, but a {result.command} run uses at least two",
        )
    for position, index in enumerate(devices):
        if index in devices[:position]:
            raise SchemaError(f"extra.devices[{position}].index", f"is GPU {index} again")
    if result.device.index != devices[0]:
        raise SchemaError(
            "device.index",
            f"is {result.device.index}, but extra.devices begins with GPU ({devices[0]})",
        )
    first = result.extra.devices[0]
    for name in ("name", "pci_bus_id"):  # the same GPU's facts, copied from device
        if getattr(first, name) != getattr(result.device, name):
            raise SchemaError(
                f"extra.devices[0].{name}",
                f"is {getattr(first, name)!r}, but device.{name} is "
                f"{getattr(result.device, name)!r}",
            )
    for position, state in enumerate(result.gpu_states or []):
        if state.index not in devices:
            raise SchemaError(
                f"gpu_states[{position}].index", f"is GPU {state.index}, not one of the run's"
            )
    for index, m in enumerate(result.measurements):
        for gpu in m.gpus:
            if gpu not in devices:
                raise SchemaError(
                    f"measurements[{index}].gpus",
                    f"names GPU {gpu}, which extra.devices does not list",
                )
    return devices


def access_matrix(result: Result, devices: list[int]) -> dict[tuple[int, int], bool]:
    """extra.peer_access as (GPU, GPU whose memory) -> can access, each reaching its own."""
    rows = result.extra.peer_access
    if len(rows) != len(devices) or any(len(row) != len(devices) for row in rows):
        raise SchemaError(
            "extra.peer_access",
            f"is not {len(devices)} x {len(devices)}: one row and column per GPU",
        )
    access = {(a, b): rows[i][j] for i, a in enumerate(devices) for j, b in enumerate(devices)}
    for a in devices:
        if not access[a, a]:
            raise SchemaError("extra.peer_access", f"says GPU {a} cannot access its own memory")
    return access


def check_gpu_states(result: Result, one_gpu: bool) -> None:
    """One state per GPU of the run (on one GPU, the run's own, with its bus id)."""
    seen: dict[int, int] = {}
    device = result.device
    for index, state in enumerate(result.gpu_states or []):
        where = f"gpu_states[{index}]"
        if state.index in seen:
            raise SchemaError(f"{where}.index", f"is GPU {state.index} again ({seen[state.index]})")
        seen[state.index] = index
        if device is None:
            continue
        if one_gpu and state.index != device.index:
            raise SchemaError(
                f"{where}.index", f"is {state.index}, but the run was on GPU {device.index}"
            )
        if state.index != device.index:
            continue
        if state.pci_bus_id != device.pci_bus_id:
            raise SchemaError(
                f"{where}.pci_bus_id",
                f"is {state.pci_bus_id!r}, but device.pci_bus_id is {device.pci_bus_id!r}",
            )
        _check_link_against_facts(state, device, where)


def _check_link_against_facts(state: GpuState, device: DeviceFacts, where: str) -> None:
    """Neither NVML nor the device facts saw the link run faster than the other allows (the
    current link may differ: an idle link slows down)."""
    for part in ("generation", "width"):
        for now, most, now_of, most_of in (
            (state, device, where, "device"),
            (device, state, "device", where),
        ):
            running = getattr(now, f"pcie_{part}")
            limit = getattr(most, f"pcie_max_{part}")
            if running is not None and limit is not None and running > limit:
                raise SchemaError(
                    f"{now_of}.pcie_{part}",
                    f"is {running}, but {most_of}.pcie_max_{part} says the link can do at "
                    f"most {limit}",
                )


def _check_kinds_the_gpu_has(result: Result) -> None:
    """No measurement of a kind the GPU's flags rule out (mapped: canMapHostMemory 0)."""
    lacking = result.device.kinds_it_lacks() if result.device is not None else {}
    for index, m in enumerate(result.measurements if lacking else ()):  # most GPUs lack none
        if m.kind in lacking:
            raise SchemaError(
                f"measurements[{index}].kind",
                f"is {m.kind!r}, but device.attributes.{lacking[m.kind]} is 0: this GPU has "
                f"no {m.kind} memory",
            )


@dataclass(frozen=True)
class RunOptions:
    """How a run is made, besides its Params: where, timed how, the host thread placed how."""

    device: int | None = 0  # None: every GPU (experiments of gpus "one_or_every" or "every")
    timing: str = "auto"  # auto, cupti, events
    affinity: bool = True  # the host thread on the GPU's local CPUs
    max_noise_pct: float = DEFAULT_MAX_NOISE_PCT  # --max-noise, where --repeat is not given
    # The process ends with the run (the command line's): the objects older than the run may
    # then stay frozen after it, where gc.unfreeze() would let go of others' too (GpuSession)
    ends_process: bool = False


@dataclass
class RunContext:
    """What run() measures with: Params, GPUs, the measuring core, the checks it collects."""

    params: Any
    progress: Progress = no_progress
    session: GpuSession | None = None  # experiments on one GPU
    devices: Devices | None = None  # experiments on every GPU at once
    facts: dict[int, DeviceFacts] = field(default_factory=dict)  # each GPU's, by index
    affinity: bool = True  # place the host thread on a GPU's local CPUs (near_gpu)
    checks: list[Check] = field(default_factory=list)
    placement: str | None = None  # where the host thread ran, the header's affinity line
    inputs: Any = None  # the experiment's read_inputs(params), read before the GPU session

    @property
    def measure(self) -> Profiler:
        """The measuring core of the GPU this experiment runs on."""
        assert self.session is not None, "an experiment on several GPUs measures per device"
        return self.session.profiler

    def steps(self, total: int) -> Callable[[str], None]:
        """Progress in `total` steps: each call of step(description) starts the next."""
        done = 0

        def step(description: str) -> None:
            nonlocal done
            self.progress(description, min(done, total), total)
            done += 1

        return step

    def check(self, check: Check) -> Check:
        """Keep a verification in the Result (a failed one makes the command exit 1)."""
        self.checks.append(check)
        return check

    @contextmanager
    def near_gpu(self, index: int) -> Iterator[str]:
        """The host thread on GPU `index`'s NUMA node (unless --no-affinity); yields the line."""
        from memprof.core.affinity import near_gpu

        with near_gpu(self.facts[index].pci_bus_id, self.affinity) as placed:
            yield placed


GATED_ONLY = "{} times every figure between gated CUDA events: CUPTI is not started"
UNREAD: Any = object()  # run()'s inputs where the caller has not read them


def run(
    experiment: Experiment,
    params: Any,
    options: RunOptions = RunOptions(),
    progress: Progress = no_progress,
    inputs: Any = UNREAD,
) -> tuple[Result, list[str]]:
    """Run one experiment and make its Result; also what failed to be freed, for a warning.
    inputs: its read_inputs(params) where the caller read them; else read here, first."""
    from memprof.core import driver

    if inputs is UNREAD:
        inputs = experiment.read_inputs(params)
    driver.start_in_background()  # overlaps the imports below and PyCUDA's
    first_look = _first_look(experiment, options)  # so does NVML's first look at one GPU
    from memprof.core.devicefacts import collect
    from memprof.core.nvml import Watch
    from memprof.core.session import import_driver, pci_bus_ids

    if first_look is not None:  # here, not after the look: entering it waits for it
        with suppress(EnvironmentProblem):  # the session says so, as before
            import_driver()
    if not experiment.timing_option:  # it times with gated events only: CUPTI not started
        options = dataclasses.replace(options, timing="events")
    indices, gpus = _sessions_for(experiment, options)
    repetitions = repetitions_of(params, options.max_noise_pct)
    # NVML's first look, before any context of ours exists (memprof.core.nvml)
    with first_look or Watch(pci_bus_ids(indices)) as watch, gpus:
        sessions = [gpus.session(i) for i in indices] if experiment.gpus == "every" else [gpus]
        for session in sessions:
            session.profiler.repetitions = repetitions
        ctx = RunContext(params, progress, affinity=options.affinity, inputs=inputs)
        for index, session in zip(indices, sessions, strict=True):
            with session.active():
                ctx.facts[index] = collect(session)
        if experiment.gpus == "every":
            ctx.devices = gpus
            extra = experiment.run(ctx)
        else:
            ctx.session = gpus
            with ctx.near_gpu(options.device) as ctx.placement:
                extra = experiment.run(ctx)
        measurements, timing = _recorded(sessions)
        gpu_states = watch.finish()  # our contexts still open: NVML lists this process
    timing.host_affinity = ctx.placement
    if not experiment.timing_option:
        timing.note = timing.unified_memory_note = GATED_ONLY.format(experiment.name)
    result = Result(
        command=experiment.name,
        parameters=params,
        device=ctx.facts[indices[0]],
        measurements=measurements,
        checks=ctx.checks,
        extra=extra,
        timing=timing,
        gpu_states=gpu_states,
    )
    return result, gpus.cleanup_failures


def _first_look(experiment: Experiment, options: RunOptions) -> Watch | None:
    """NVML's first look at the one GPU of a run, begun now on a thread of its own, the bus id
    from libcuda (memprof.core.nvml.Watch.start_in_background); None for a run over every GPU,
    whose GPUs PyCUDA counts first."""
    from memprof.core import driver
    from memprof.core.nvml import Watch

    if experiment.gpus == "every" or options.device is None:
        return None
    device = options.device
    return Watch({}).start_in_background(lambda: driver.pci_bus_ids([device]))


def _sessions_for(experiment: Experiment, options: RunOptions) -> tuple[list[int], Any]:
    """The GPUs a run uses and their sessions, not yet opened."""
    from memprof.core.session import Devices, GpuSession, device_count

    declared = declared_keys(experiment)
    if experiment.gpus == "every":
        indices = list(range(device_count()))
        if len(indices) < 2 and experiment.needs_two_gpus:
            raise EnvironmentProblem(
                f"memprof {experiment.name} needs two GPUs: this machine has one, "
                f"{experiment.needs_two_gpus}"
            )
        return indices, Devices(indices, options.timing, declared, options.ends_process)
    assert options.device is not None, "--device all runs each GPU in turn (memprof.run)"
    return [options.device], GpuSession(
        options.device, options.timing, declared, ends_process=options.ends_process
    )


def _recorded(sessions: list[GpuSession]) -> tuple[list[Measurement], TimingInfo]:
    """Every session's measurements, and how the first session's were timed."""
    measurements: list[Measurement] = []
    for session in sessions:
        with session.active():
            measurements += session.profiler.measurements()
    with sessions[0].active():
        timing = sessions[0].profiler.timing_info()
    return measurements, timing


# Result.views, which the model layer cannot fill: every experiment module imports this one.
Result.views = importlib.import_module("memprof.experiments")
