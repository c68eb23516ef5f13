"""`memprof trace`: run the user's Python program in this process under CUPTI (started
before its first context, whatever library it uses) and record the Result; its output, exit
code, exception and Ctrl-C pass through. memprof.experiments.trace says what it means.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from msgspec import Meta

from memprof.cache import cache_directory, read_json, store, warn_once
from memprof.core.activity import MEMORY_KIND_NAMES, ApiRecord, GpuRecord
from memprof.core.measure import call_rows
from memprof.errors import EnvironmentProblem, ExitCode, InvalidArgument, MemprofError
from memprof.model.lines import SourceLine
from memprof.model.results import Measurement, Result, TimingInfo
from memprof.model.schema import (
    MAX_COUNT,
    ByteCount,
    Count,
    GpuIndex,
    Milliseconds,
    Range,
    SchemaError,
    Seconds,
    check,
)
from memprof.model.timeline import Timeline
from memprof.trace.stacks import (
    DEFAULT_STACK_DEPTH,
    MAX_STACK_DEPTH,
    CallRecorder,
    CodeFilter,
)
from memprof.trace.timeline import timeline_of
from memprof.trace.where import (
    Stacks,
    activity_of,
    copy_direction,
    gpu_row_name,
    outermost_calls,
    source_lines,
)

if TYPE_CHECKING:
    from memprof.output.emit import Output

SMALL_COPY_BYTES = 64 << 10  # below this a copy's time is mostly latency, not bandwidth
BANDWIDTH_MODES = ("cache", "measure", "none")
CUPTI_INSTALL_HINT = "pip install cupti-python (NVIDIA's CUPTI for Python, CUDA 12 or newer)"


# -- what to run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """The user's program: a script path or a module name, and its own arguments."""

    script: str | None
    module: str | None
    arguments: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"-m {self.module}" if self.module else str(self.script)


def parse_target(target: list[str], module: str | None) -> Program:
    """`SCRIPT ARGS...` or `-m MODULE ARGS...` as a Program, refusing neither or both."""
    if module is not None:
        return Program(None, module, tuple(target))
    if not target:
        raise InvalidArgument("name the program to trace: memprof trace SCRIPT.py [ARGS...]")
    return Program(target[0], None, tuple(target[1:]))


def check_program(program: Program) -> None:
    """Fail before CUPTI starts if the script or module cannot be found, as Python would. A
    module is looked for by its top-level name: finding `pkg.tool` would run pkg's __init__."""
    if program.script is not None:
        if not program.script:  # Path("") would be ".", the working folder
            raise InvalidArgument("memprof trace: the program's file name is empty")
        path = Path(program.script)
        if not path.exists():
            raise InvalidArgument(f"cannot open {program.script}: no such file")
        if path.is_dir() and not (path / "__main__.py").exists():
            raise InvalidArgument(f"cannot run {program.script}: a folder without __main__.py")
        return
    top = program.module.partition(".")[0]
    if not top:
        raise InvalidArgument(f"-m {program.module!r}: not a module name (such as pkg.tool)")
    with as_python_runs(program):  # the working directory first on sys.path, as for -m
        try:
            found = importlib.util.find_spec(top)
        except (ImportError, ValueError) as error:
            raise InvalidArgument(f"cannot run -m {program.module}: {error}") from error
    if found is None:
        raise InvalidArgument(f"cannot run -m {program.module}: no module named {top}")


@contextlib.contextmanager
def as_python_runs(program: Program) -> Iterator[None]:
    """sys.argv and sys.path[0] inside as `python SCRIPT` or `python -m MODULE` sets them."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    script = program.script
    sys.argv = [script if script is not None else program.module, *program.arguments]
    sys.path.insert(0, str(Path(script).resolve().parent) if script is not None else os.getcwd())
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


@dataclass(frozen=True)
class TraceParams:
    """What was traced, as a Result's parameters. stack_depth 0: no lines (as before memprof
    recorded them); all_calls false: only the work calls (is_work_call), true in files
    written before memprof chose."""

    program: str = ""
    arguments: tuple[str, ...] = ()
    device: GpuIndex = 0
    stack_depth: Annotated[int, Range(0, MAX_STACK_DEPTH)] = 0
    stacks: bool = False
    all_calls: bool = True


@dataclass
class Outcome:
    """How the program ended: the exit code `python` would have returned, and why."""

    exit_code: int
    error: BaseException | None = None  # an uncaught exception (Ctrl-C included)
    wall_s: float = 0.0
    libraries: tuple[str, ...] = ()  # the GPU libraries it imported (PROGRAM_LIBRARIES)
    cudnn_benchmark: bool | None = None  # torch.backends.cudnn.benchmark at its end


# The GPU libraries whose use the advice names in their own words (memprof imports none).
PROGRAM_LIBRARIES = ("torch", "cupy", "numba", "pycuda", "cuda", "jax")
ProgramLibrary = Literal[PROGRAM_LIBRARIES]  # type: ignore[valid-type]


def exit_code_of(system_exit: SystemExit) -> int:
    """SystemExit's code as Python turns it into a process status (a message means 1)."""
    code = system_exit.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # what the shell sees: sys.exit(-1) is 255
    print(code, file=sys.stderr)
    return 1


def run_program(program: Program) -> Outcome:
    """Run the program as `python` would, in this process; never raises what it raises.
    The script runs by its absolute path, as `python SCRIPT` has since Python 3.9."""
    start = time.perf_counter()
    outcome = Outcome(0)
    imported = set(sys.modules)
    try:
        with as_python_runs(program):
            if program.script is not None:
                runpy.run_path(os.path.abspath(program.script), run_name="__main__")
            else:
                runpy.run_module(program.module, run_name="__main__", alter_sys=True)
    except SystemExit as system_exit:
        outcome = Outcome(exit_code_of(system_exit))
    except KeyboardInterrupt as interrupt:
        outcome = Outcome(int(ExitCode.INTERRUPTED), interrupt)
    except BaseException as error:
        outcome = Outcome(1, error)
    finally:
        outcome.wall_s = time.perf_counter() - start
        new = set(sys.modules) - imported
        outcome.libraries = tuple(name for name in PROGRAM_LIBRARIES if name in new)
        outcome.cudnn_benchmark = cudnn_benchmark() if "torch" in new else None
        with contextlib.suppress(Exception):
            sys.stdout.flush()
    return outcome


def cudnn_benchmark() -> bool | None:
    """torch.backends.cudnn.benchmark as the program left it (None: unreadable)."""
    with contextlib.suppress(Exception):
        value = sys.modules["torch"].backends.cudnn.benchmark
        return value if isinstance(value, bool) else None
    return None


_RUNNER_MODULES = {"runpy", __name__}  # runpy's file is "<frozen runpy>" in 3.11+


def print_program_traceback(error: BaseException) -> None:
    """The traceback Python would print, starting at the program's own frames."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in _RUNNER_MODULES:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb, file=sys.stderr)


# -- collecting ------------------------------------------------------------------------------


@dataclass
class Recording:
    """What CUPTI recorded while the program ran, and the GPU it ran on."""

    gpu: list[GpuRecord]
    api: list[ApiRecord]
    unified_memory: dict[str, dict[str, float]] | None = None  # ActivityLog's totals
    unified_memory_note: str | None = None
    gpu_name: str = ""
    driver_version: str = ""
    # each call's stack by correlation id (memprof.trace.stacks); None: none recorded
    stacks: Stacks | None = None
    own_calls: frozenset[int] = frozenset()  # memprof's own calls after the program
    stacks_note: str | None = None  # why there are no stacks, or what went wrong taking them


class CuptiCollector:
    """CUPTI activity tracing of this whole process's GPU work, every record kept, and the
    work calls' host times and stacks through a CallRecorder (CUPTI's callbacks)."""

    def __init__(self, device_index: int = 0, calls: CallRecorder | None = None) -> None:
        self.device_index = device_index
        self.log: Any = None
        self.calls = calls
        self.calls_note: str | None = None

    def start(self) -> None:
        from memprof.core.activity import ActivityLog, cupti_unavailable_reason

        why_not = cupti_unavailable_reason()
        if why_not is not None:
            raise EnvironmentProblem(f"{why_not}: {CUPTI_INSTALL_HINT}")
        count = _cuda_init()
        if not 0 <= self.device_index < count:
            raise InvalidArgument(
                f"--device {self.device_index} does not exist: this machine has {count} "
                f"CUDA device{'s' if count != 1 else ''}"
            )
        self.log, why_not = ActivityLog.start(self.device_index, keep_all=True)
        if self.log is None:
            raise EnvironmentProblem(why_not or "CUPTI refused activity tracing")
        if self.calls is not None:
            why_not = self.calls.start(self.log.cupti)
            if why_not is not None:
                self.calls_note = f"{why_not}: no call's host time or line was recorded"
                self.calls = None

    def finish(self) -> Recording:
        """Wait for the program's GPU work, then read every record CUPTI holds. The
        callbacks stop first: memprof's own synchronize is no call of the program's."""
        calls = self.calls
        if calls is not None:
            calls.stop()
        _synchronize_current_context()
        self.log.flush()
        stacks, own, api, note = None, frozenset(), [], self.calls_note
        if calls is not None:
            api, own = calls.api_records(), frozenset(calls.own)
            stacks = calls.recorded() if calls.depth > 0 else None
            if calls.failures:
                note = (
                    f"memprof's callback failed on {calls.failures} calls, whose lines and "
                    f"host times are missing (the first: {calls.first_failure})"
                )
        refusal = self.log.unified_memory_refusal
        name, driver = device_identity(self.device_index)
        return Recording(
            gpu=demangled(self.log.all_gpu_records()),
            api=api,
            unified_memory=None if refusal else self.log.unified_memory_totals(),
            unified_memory_note=refusal,
            gpu_name=name,
            driver_version=driver,
            stacks=stacks,
            own_calls=own,
            stacks_note=note,
        )


def _cuda_init() -> int:
    """cuInit (CUPTI needs the driver up before it is enabled) and the device count."""
    from memprof.core import bindings, driver

    try:
        driver.libcuda()  # what cuda-bindings loads: its absence said in memprof's words
    except OSError as error:
        raise EnvironmentProblem(
            "the CUDA driver (libcuda.so.1) was not found: memprof needs a machine with an "
            "NVIDIA GPU and its driver installed"
        ) from error
    try:
        bindings.call("cuInit", 0)
        count = int(bindings.call("cuDeviceGetCount"))
    except EnvironmentProblem:
        raise  # cuda-bindings missing: how to install it
    except MemprofError as error:
        raise EnvironmentProblem(f"no usable CUDA device: {error}") from error
    if count == 0:
        raise EnvironmentProblem("no CUDA device found: the driver sees no GPU")
    return count


def _synchronize_current_context() -> None:
    """Let the program's queued GPU work finish, so its records are complete."""
    from memprof.core import bindings

    with contextlib.suppress(Exception):
        if int(bindings.call("cuCtxGetCurrent")):
            bindings.call("cuCtxSynchronize")


def device_identity(device_index: int) -> tuple[str, str]:
    """(GPU name, driver version): the key under which this GPU's bandwidth is cached."""
    from memprof.core import bindings
    from memprof.core.devicefacts import _kernel_driver_version

    name = ""
    with contextlib.suppress(Exception):
        device = bindings.call("cuDeviceGet", device_index)
        text = bindings.call("cuDeviceGetName", 256, device)
        name = text.split(b"\0", 1)[0].decode(errors="replace")
    driver = _kernel_driver_version() or ""
    if not driver:
        with contextlib.suppress(Exception):
            driver = f"CUDA {bindings.version_text(bindings.driver_version())}"
    return name, driver


def demangled(records: list[GpuRecord]) -> list[GpuRecord]:
    """Kernel names as nvprof printed them (c++filt where it exists; mangled otherwise)."""
    mangled = sorted({r.name for r in records if r.category == "kernel" and r.name[:2] == "_Z"})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return records
    try:
        output = subprocess.run(
            [tool], input="\n".join(mangled), capture_output=True, text=True, timeout=30
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return records
    if len(output) != len(mangled):
        return records
    names = dict(zip(mangled, output, strict=True))
    return [
        GpuRecord(**{**asdict(r), "name": names[r.name]}) if r.name in names else r for r in records
    ]


# -- records -> rows -----------------------------------------------------------------------


def measurements_from_records(gpu: list[GpuRecord], api: list[ApiRecord]) -> list[Measurement]:
    """nvprof's rows as Measurements: one per name and size (profile_rows folds sizes)."""
    rows: dict[tuple[str, str, int], Measurement] = {}
    for record in gpu:
        key = (gpu_row_name(record), "kernel", 0)
        if record.category != "kernel":  # a copy's direction ("htod"), or "memset"
            key = (key[0], activity_of(record).partition(" ")[0].lower(), record.bytes)
        if key not in rows:
            rows[key] = Measurement("gpu", key[0], key[1], None, key[2], source="cupti")
        rows[key].samples_ms.append(record.duration_ms)
    gpu_rows = sorted(rows.values(), key=lambda m: (m.name, m.bytes))
    return gpu_rows + call_rows(api, "api_call")


# CUPTI's copy kinds (CUpti_ActivityMemcpyKind) as nvprof wrote them (copy_direction)
CopyDirection = Literal[
    "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP", "Unknown"
]
MemoryKindName = Literal[tuple(MEMORY_KIND_NAMES.values())]  # type: ignore[valid-type]


@dataclass
class CopyGroup:
    """Every copy of one direction between two memory kinds: what the advice reads."""

    direction: CopyDirection
    source: MemoryKindName  # memory kind: "pageable", "pinned", "device", "managed", ...
    destination: MemoryKindName
    calls: Count = 0
    bytes: ByteCount = 0
    gpu_ms: Milliseconds = 0.0  # CUPTI's copy durations, summed
    call_ms: Milliseconds = 0.0  # the API calls that issued them, entry to exit, summed
    blocking_calls: Count = 0  # made with a synchronous call (cuMemcpyHtoD, cudaMemcpy)
    small_calls: Count = 0  # under SMALL_COPY_BYTES
    small_bytes: ByteCount = 0
    small_gpu_ms: Milliseconds = 0.0
    # The blocking copies' calls, entry to exit, summed: how long the host waited, staging
    # included, where gpu_ms is the DMA alone (0 in files written before memprof kept it).
    blocked_ms: Milliseconds = 0.0

    @property
    def blocking_copies(self) -> int:
        """Copies the host waited for (is_blocking): synchronous calls, and every copy from or
        to pageable memory (host to host included: XLA's), Async or not."""
        return self.calls if stages(self.source, self.destination) else self.blocking_calls

    @property
    def staged_calls(self) -> int:
        """Async calls that blocked all the same: from or to pageable memory."""
        return self.blocking_copies - self.blocking_calls

    @property
    def host_kind(self) -> str | None:
        """The host side's memory kind, for copies between host and device."""
        return {"HtoD": self.source, "DtoH": self.destination}.get(self.direction)


def stages(source: str, destination: str) -> bool:
    """Whether a copy between these memory kinds blocks the host even when made Async: from
    or to pageable memory, which the driver stages (or copies on the host) before returning."""
    return "pageable" in (source, destination)


def is_blocking(record: GpuRecord) -> bool:
    """A copy the host waited for: a synchronous call, or one that stages."""
    return not record.asynchronous or stages(record.src_kind, record.dst_kind)


@dataclass
class BlockedCopies:
    """Blocking copies of one profile row and size: the GPU's DMA time and the time their
    calls held the host. A program that times such a copy itself sees the second figure."""

    name: str  # the profile row: "[CUDA memcpy HtoD] pageable -> device"
    bytes: ByteCount
    calls: Count = 0
    gpu_ms: Milliseconds = 0.0  # CUPTI's memcpy records, summed (the DMA alone)
    blocked_ms: Milliseconds = 0.0  # the API calls with the same correlation ids, summed
    paired: Count = 0  # copies whose call CUPTI recorded (blocked_ms covers only these)


def blocked_copies(gpu: list[GpuRecord], api: list[ApiRecord]) -> list[BlockedCopies]:
    """Every blocking copy paired with its call, by row name and size."""
    call_ms = {key: call.duration_ms for key, call in outermost_calls(api).items()}
    rows: dict[tuple[str, int], BlockedCopies] = {}
    for record in gpu:
        if record.category != "memcpy" or not is_blocking(record):
            continue
        key = (gpu_row_name(record), record.bytes)
        row = rows.setdefault(key, BlockedCopies(*key))
        row.calls += 1
        row.gpu_ms += record.duration_ms
        if record.correlation_id in call_ms:
            row.paired += 1
            row.blocked_ms += call_ms[record.correlation_id]
    return sorted(rows.values(), key=lambda r: (r.name, r.bytes))


def copy_groups(gpu: list[GpuRecord], api: list[ApiRecord]) -> list[CopyGroup]:
    """The copies folded by direction and memory kinds, largest GPU time first."""
    call_ms = {key: call.duration_ms for key, call in outermost_calls(api).items()}
    groups: dict[tuple[str, str, str], CopyGroup] = {}
    for record in gpu:
        if record.category != "memcpy":
            continue
        key = (copy_direction(record.name), record.src_kind, record.dst_kind)
        group = groups.setdefault(key, CopyGroup(*key))
        group.calls += 1
        group.bytes += record.bytes
        group.gpu_ms += record.duration_ms
        group.call_ms += call_ms.get(record.correlation_id, 0.0)
        group.blocking_calls += not record.asynchronous
        if is_blocking(record):
            group.blocked_ms += call_ms.get(record.correlation_id, 0.0)
        if record.bytes < SMALL_COPY_BYTES:
            group.small_calls += 1
            group.small_bytes += record.bytes
            group.small_gpu_ms += record.duration_ms
    return sorted(groups.values(), key=lambda g: (-g.gpu_ms, g.direction, g.source))


# What a host link's pinned copies reach and what one small copy costs, outside of which a
# figure is no measurement (PCIe Gen1 x1 moves 0.25 GB/s, NVLink-C2C 450 GB/s each way; no
# copy takes under 10 ns or over a second): a cache entry and a saved trace are held to them.
HOST_LINK_GB_PER_S = (0.1, 1000.0)
SMALL_COPY_MS = (1e-5, 1000.0)
GbPerS = Annotated[float, Range(*HOST_LINK_GB_PER_S, low_open=True)]
CopyMs = Annotated[float, Range(*SMALL_COPY_MS, low_open=True)]
Bytes = Annotated[int, Range(1, MAX_COUNT)]  # a copy moves something


class PinnedBandwidth(TypedDict, total=False):
    """This GPU's pinned bandwidth as a trace recorded it (pinned_bandwidth): the figures,
    the GPU and driver they belong to, and how they were had ("how" alone where none)."""

    h2d_gb_per_s: GbPerS
    d2h_gb_per_s: GbPerS
    bytes: Bytes
    gpu_name: str
    driver_version: str
    measured_at: str
    how: str


@dataclass
class SmallCopyCost:
    """What one copy of `bytes` host to device cost on this GPU, per way (memprof smallcopies)."""

    bytes: Bytes
    pinned_ms: CopyMs  # one call per copy from pinned memory
    pageable_ms: CopyMs  # one call per copy from pageable memory
    gathered_ms: CopyMs  # gathered into one pinned buffer, one copy
    batched_ms: CopyMs | None = None  # one cuMemcpyBatchAsync (None: not measured)


@dataclass
class SmallCopyFigures:
    """This GPU's measured cost of small copies, for the advice, and where it came from."""

    how: str  # measured now, cached (where, when), or why not measured
    copies: Count = 0  # copies moved at once in the measurement
    costs: list[SmallCopyCost] = field(default_factory=list)  # by size; empty: not measured
    # what the costs are: "wall", what a program waits per copy (first call to the stream
    # synchronized), as smallcopies ranks the ways; "gpu", GPU time (traces before that)
    clock: Literal["wall", "gpu"] = "gpu"


@dataclass
class TraceExtra:
    """What a trace keeps beside its measurements: the GPU, how the program ended, its copies
    by memory kind, and this GPU's pinned bandwidth for the advice."""

    gpu_name: str
    driver_version: str
    exit_code: Annotated[int, Range(0, 255)]  # as the shell sees it
    error: str  # the uncaught exception, "" if none
    wall_s: Seconds
    copies: list[CopyGroup]
    pinned_bandwidth: PinnedBandwidth  # GB/s by direction, bytes, and how measured
    # blocking copies by row and size, with their calls' time (None: traced before that)
    blocked: list[BlockedCopies] | None = None
    # this GPU's measured small-copy costs (None: no small copies, or traced before that)
    small_copies: SmallCopyFigures | None = None
    # the lines of the program behind every copy, memset, allocation, free, registration,
    # prefetch and wait (None: traced before memprof recorded them, or without: lines_note)
    lines: list[SourceLine] | None = None
    lines_note: str | None = None  # why there are no lines, or why some are missing
    # the GPU libraries the program imported, for the advice's words
    libraries: list[ProgramLibrary] = field(default_factory=list)
    # torch.backends.cudnn.benchmark at its end (None: no torch, or traced before that)
    cudnn_benchmark: bool | None = None
    # every kernel, copy, memset and recorded call in time (None: traced before that)
    timeline: Timeline | None = None


def trace_result(
    program: Program,
    outcome: Outcome,
    recording: Recording,
    device_index: int,
    bandwidth: dict[str, Any],
    small_copies: SmallCopyFigures | None = None,
    stack_depth: int = 0,
    stacks: bool = False,
    all_calls: bool = True,
) -> Result:
    """The trace as a Result, which `report` and `diff` render like any other command's."""
    error = outcome.error
    source = None
    if recording.stacks is not None:
        source = source_lines(recording.gpu, recording.api, recording.stacks, recording.own_calls)
    note = recording.stacks_note  # the callbacks' failure first: host times went with it
    if note is None and stack_depth == 0:
        note = "not recorded (--stack-depth 0)"
    return Result(
        command="trace",
        parameters=TraceParams(
            program.label, program.arguments, device_index, stack_depth, stacks, all_calls
        ),
        device=None,
        measurements=measurements_from_records(recording.gpu, recording.api),
        extra=TraceExtra(
            gpu_name=recording.gpu_name,
            driver_version=recording.driver_version,
            exit_code=outcome.exit_code,
            error="" if error is None else f"{type(error).__name__}: {error}",
            wall_s=outcome.wall_s,
            copies=copy_groups(recording.gpu, recording.api),
            blocked=blocked_copies(recording.gpu, recording.api),
            pinned_bandwidth=bandwidth,
            small_copies=small_copies,
            lines=source,
            lines_note=note,
            libraries=sorted(set(outcome.libraries)),
            cudnn_benchmark=outcome.cudnn_benchmark,
            timeline=timeline_of(
                recording.gpu, recording.api, recording.stacks, source, recording.own_calls
            ),
        ),
        timing=TimingInfo(
            source="cupti",
            note="CUPTI activity records of the whole program",
            event_overhead_ms=None,
            unified_memory=recording.unified_memory,
            unified_memory_note=recording.unified_memory_note,
        ),
    )


# -- this GPU's pinned bandwidth -------------------------------------------------------------


def cache_path(name: str) -> Path | None:
    """Where this GPU's figures of one kind are cached (None: no cache on this machine)."""
    folder = cache_directory()
    return None if folder is None else folder / name


def pinned_bandwidth(
    device_index: int,
    gpu_name: str,
    driver_version: str,
    mode: str,
    measure: Callable[[int], dict[str, Any]],
    cache: Path | None = None,
) -> dict[str, Any]:
    """This GPU's pinned HtoD/DtoH GB/s, cached per GPU name and driver, and where it came
    from; `measure(device_index)` runs `memprof sweep` (cli_trace.pinned_bandwidth_of)."""
    path, identity = cache or cache_path("pinned_bandwidth.json"), (gpu_name, driver_version)
    measured = functools.partial(measure, device_index)
    figures = cached_figures(path, identity, mode, measured, "memprof sweep", pinned_problem)
    return {
        name: value for name, value in figures.items() if name in PinnedBandwidth.__annotations__
    }


# Checks of a cached entry: a cache is input (memprof.cache), and what passes is copied into
# the trace's Result, which `memprof report` must then load.
MAX_CACHED_COPIES = 1 << 20
MAX_CACHED_SIZES = 64
MAX_CACHED_BYTES = 1 << 40


class CachedPinned(TypedDict):
    """A cached pinned bandwidth: both directions, at a size where bandwidth sets the time."""

    h2d_gb_per_s: GbPerS
    d2h_gb_per_s: GbPerS
    bytes: Annotated[int, Range(SMALL_COPY_BYTES, MAX_CACHED_BYTES)]


@dataclass
class CachedSmallCopies:
    """Cached small-copy costs: one figure per way and size (their clock checked apart)."""

    copies: Annotated[int, Range(1, MAX_CACHED_COPIES)]
    costs: Annotated[list[SmallCopyCost], Meta(min_length=1, max_length=MAX_CACHED_SIZES)]


def identity_problem(entry: dict[str, Any], identity: tuple[str, str]) -> str | None:
    """Why a cached entry is not this GPU's and driver's, or has no date it was measured."""
    gpu_name, driver_version = entry.get("gpu_name"), entry.get("driver_version")
    if (gpu_name, driver_version) != identity:
        return f"was measured on another GPU or driver ({gpu_name!r}, driver {driver_version!r})"
    measured_at = entry.get("measured_at")
    try:
        if not isinstance(measured_at, str) or len(measured_at) > 40:
            raise ValueError(measured_at)
        datetime.fromisoformat(measured_at)
    except ValueError:
        return f"measured_at is {json.dumps(measured_at)[:40]}, not a date and time"
    return None


def pinned_problem(entry: dict[str, Any]) -> str | None:
    """Why cached pinned-bandwidth figures cannot be used, or None."""
    try:
        check(entry, CachedPinned)
    except SchemaError as error:
        return str(error)
    return None


def small_copies_problem(entry: dict[str, Any]) -> str | None:
    """Why cached small-copy costs cannot be used, or None."""
    if entry.get("clock") != "wall":
        return "its costs are GPU time, measured before memprof took the wall clock per copy"
    try:
        costs = check({k: entry.get(k) for k in ("copies", "costs")}, CachedSmallCopies).costs
    except SchemaError as error:
        return str(error)
    sizes = [cost.bytes for cost in costs]
    if max(sizes) > MAX_CACHED_BYTES:
        return f"costs has a size of {max(sizes)} bytes, more than {MAX_CACHED_BYTES}"
    return "costs has one size twice" if len(set(sizes)) != len(sizes) else None


def cached_figures(
    cache: Path | None,
    identity: tuple[str, str],
    mode: str,
    measure: Callable[[], dict[str, Any]],
    command: str,
    problem: Callable[[dict[str, Any]], str | None],
) -> dict[str, Any]:
    """Figures of this GPU (name, driver) from `cache` ("cache"), or measured by `command` and
    cached ("measure", or none cached), or "none"; "how" says which. A cached entry that
    `problem` finds fault with, or of another GPU or driver, is one warning and measured again."""
    if mode == "none":
        return {"how": "not measured (--bandwidth none)"}
    gpu_name, driver_version = identity
    key = f"{gpu_name} | driver {driver_version}"
    read = None if cache is None else read_json(cache)
    if read is not None and not isinstance(read, dict):
        warn_once(str(cache), f"ignored the cache {cache}: not a JSON object")
    entries: dict[str, Any] = read if isinstance(read, dict) else {}
    if mode == "cache" and key in entries:
        entry = entries[key]
        why = "is not an object"
        if isinstance(entry, dict):
            why = identity_problem(entry, identity) or problem(entry)
        if why is None:
            whose = f"{entry['gpu_name']} (driver {entry['driver_version']})"
            measured = f"measured on {whose} {entry['measured_at']}"
            return {**entry, "how": f"cached in {cache}, {measured}"}
        warn_once(str(cache), f"ignored {key!r} in the cache {cache}: {why} (measured again)")
    try:
        figures = measure()
    except Exception as error:
        return {"how": f"not measured: {command} failed ({error})"}
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entry = {**figures, "gpu_name": gpu_name, "driver_version": driver_version, "measured_at": now}
    why = problem(entry)
    if why is not None:
        return {"how": f"not usable: {command} measured figures that make no sense ({why})"}
    if cache is not None:
        store(cache, (json.dumps({**entries, key: entry}, indent=1) + "\n").encode())
    return {**entry, "how": f"measured now with {command} (then cached)"}


# -- this GPU's small copies -----------------------------------------------------------------


def small_copy_figures(
    device_index: int,
    gpu_name: str,
    driver_version: str,
    mode: str,
    measure: Callable[[int], dict[str, Any]],
    cache: Path | None = None,
) -> SmallCopyFigures:
    """This GPU's small-copy costs, cached as the pinned bandwidth is; `measure(device_index)`
    runs `memprof smallcopies`."""
    path, identity = cache or cache_path("small_copies.json"), (gpu_name, driver_version)
    measured = functools.partial(measure, device_index)
    entry = cached_figures(
        path, identity, mode, measured, "memprof smallcopies", small_copies_problem
    )
    fields = {k: entry[k] for k in ("how", "copies", "costs", "clock") if k in entry}
    try:
        return check(fields, SmallCopyFigures, "small copies")
    except SchemaError as error:  # what the checks above let through and a Result may not hold
        return SmallCopyFigures(how=f"not usable: {error}")


# -- the command -----------------------------------------------------------------------------


@dataclass
class TraceOptions:
    # where no cache holds this GPU's figures: memprof.cli_trace runs sweep and smallcopies
    measure_pinned_bandwidth: Callable[[int], dict[str, Any]]
    measure_small_copies: Callable[[int], dict[str, Any]]
    device: int = 0
    bandwidth: str = "cache"
    stack_depth: int = DEFAULT_STACK_DEPTH  # frames kept per call (0: no lines)
    stacks: bool = False  # the summary shows each line's callers
    output: Output | None = None  # where results go besides stderr; None: nowhere
    # every driver and runtime call recorded (--all-calls); False: CALL_KINDS' alone
    all_calls: bool = False


def trace(
    program: Program,
    options: TraceOptions,
    summarize: Callable[[Result], Any],
) -> int:
    """Trace the program, show its profile and advice on stderr, save it; its exit code.
    memprof's own failures raise before the program starts; after, all passes through."""
    from memprof.output.emit import Output, emit

    if options.bandwidth not in BANDWIDTH_MODES:
        raise InvalidArgument(
            f"--bandwidth {options.bandwidth!r}: choose from {', '.join(BANDWIDTH_MODES)}"
        )
    output = replace(options.output or Output(), on_stderr=True)
    output.check(inputs=[Path(program.script)] if program.script else [])
    check_program(program)
    code = None
    if options.stack_depth > 0:
        with as_python_runs(program):  # a -m module's folder is found as Python finds it
            code = CodeFilter.for_program(program.script, program.module)
    calls = CallRecorder(code, options.stack_depth, run_program.__code__, options.all_calls)
    collector = CuptiCollector(options.device, calls)
    collector.start()
    outcome = run_program(program)
    if outcome.error is not None:
        print_program_traceback(outcome.error)
    recording = collector.finish()
    this_gpu = (options.device, recording.gpu_name, recording.driver_version, options.bandwidth)
    bandwidth = pinned_bandwidth(*this_gpu, options.measure_pinned_bandwidth)
    small = None  # measured only for a program that made small copies: the advice needs it
    if any(group.small_calls for group in copy_groups(recording.gpu, recording.api)):
        small = small_copy_figures(*this_gpu, options.measure_small_copies)
    recorded = (options.stack_depth, options.stacks, options.all_calls)  # as TraceParams
    result = trace_result(program, outcome, recording, options.device, bandwidth, small, *recorded)
    emit([result], summarize, output)
    return outcome.exit_code
