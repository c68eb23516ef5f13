"""`memprof check`: a health run of this machine's memory paths in seconds, line by line,
each PASS, WARN or FAIL with the figure and what was expected (CheckGpu.description; the
floors below). Verdicts are made from the Result when it is shown, so `memprof report` judges
a saved run as it was judged; a FAIL exits 1. docs/check.md says why.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from memprof.errors import EnvironmentProblem, InvalidArgument, MemprofError
from memprof.experiments import base
from memprof.experiments.check_thresholds import (
    CheckThresholds,
    Models,
    Percent,
    read_thresholds,
    thresholds_for,
)
from memprof.experiments.check_thresholds import matches as thresholds_matches
from memprof.experiments.check_thresholds import note as thresholds_note
from memprof.experiments.common import POISON_BYTE, CheckedCopies, pair_figures, peer_copy
from memprof.model import figures
from memprof.model.ceilings import hbm_ceiling, link_of
from memprof.model.device import PCIE_RATE_GT_PER_S, DeviceRecord, pcie_bandwidth_gb_per_s
from memprof.model.formatting import format_bytes, format_gb_per_s, plural
from memprof.model.gpustate import GpuState, link_words, reason_words
from memprof.model.measures import ABOVE_BOUND
from memprof.model.params import Range, param
from memprof.model.results import Check, Measurement, Result
from memprof.model.schema import ByteCount, Samples, SchemaError
from memprof.model.summary import Column, Summary, table

Verdict = Literal["PASS", "WARN", "FAIL"]
PCIE_FLOOR = 0.85  # pinned copies reach at least this share of the link's theoretical rate
HBM_FLOOR = 0.80  # a device copy reaches at least this share of HBM's theoretical rate
AT_ONCE_FLOOR = 0.80  # each direction at once keeps at least this share of its rate alone
PEER_FLOOR = 0.70  # peer copies reach at least this share of their link (NVLink's raw rate)
MARGIN = 0.90  # below MARGIN x the floor: FAIL; below the floor or MARGIN x a reference: WARN
BATCH_TARGET_MS = 20.0  # a batch of back-to-back copies lasts about this long
END_ELEMENTS = 1 << 20  # a device copy is verified at its first and last 4 MiB
MAX_RETRIES = 10  # --retries at most
Repeat = Annotated[int, Range(1, 100)]


def floor_param(default: float, flag: str, line: str, ceiling: str) -> Any:
    """A throughput line's floor, in percent of its ceiling (--h2d-floor 80)."""
    return param(
        round(default * 100),
        f"{line}: PASS at or above this percentage of {ceiling}, WARN below it, FAIL under "
        f"{MARGIN:.0%} of it (1 to 100).",
        flags=(flag,),
    )


@dataclass(frozen=True)
class CheckParams:
    power: base.Power = base.power_param(24, "Size of each host copy: 2^N float32, N from 0 to 30")
    device_power: Annotated[int, Range(10, 30)] = param(
        28, "Size of the device-to-device copy: 2^N float32, N from 10 to 30 (28 = 1 GiB)."
    )
    repeat: Repeat = param(
        5, "Batches of back-to-back copies per figure (1 to 100).", flags=("--repeat", "-r")
    )
    h2d_floor_pct: Percent = floor_param(
        PCIE_FLOOR, "--h2d-floor", "Pinned host → device", "the link's theoretical rate"
    )
    d2h_floor_pct: Percent = floor_param(
        PCIE_FLOOR, "--d2h-floor", "Pinned device → host", "the link's theoretical rate"
    )
    at_once_floor_pct: Percent = floor_param(
        AT_ONCE_FLOOR, "--at-once-floor", "Both directions at once", "each one's rate alone"
    )
    d2d_floor_pct: Percent = floor_param(
        HBM_FLOOR, "--d2d-floor", "The device copy", "HBM's theoretical rate"
    )
    retries: Annotated[int, Range(0, MAX_RETRIES)] = param(
        0,
        "Measure a throughput line that WARNs or FAILs again, up to N times, until it PASSes; "
        f"the last attempt stands and every one is kept (0 to {MAX_RETRIES}).",
        flags=("--retries",),
    )
    reference: str | None = param(
        None,
        "A check of this GPU model saved on a known-good machine (memprof check --json FILE) "
        "to expect its figures instead of the reference memprof ships; WARN under "
        f"{MARGIN:.0%} of them.",
        flags=("--reference",),
        reads_file=True,
    )
    thresholds: str | None = param(
        None,
        "A JSON file of floors per GPU model (docs/check.md), kept in your repository: the "
        "entry naming this GPU sets the floors it lists, over --h2d-floor...; a GPU it does "
        "not name keeps them.",
        flags=("--thresholds",),
        reads_file=True,
    )


Operation = Literal["h2d", "d2h", "h2d_at_once", "d2h_at_once", "d2d"]
RetriedLine = Literal["h2d", "d2h", "at_once", "d2d"]  # the throughput lines, in their order
# What an attempt of each line measures: both at once is judged against each direction alone,
# so its attempt measures those too.
LINE_OPERATIONS: dict[str, tuple[Operation, ...]] = {
    "h2d": ("h2d",),
    "d2h": ("d2h",),
    "at_once": ("h2d", "d2h", "h2d_at_once", "d2h_at_once"),
    "d2d": ("d2d",),
}
BatchCopies = Annotated[int, Range(1, 1 << 20)]
GbPerS = Annotated[float, Range(0, 1e6, low_open=True)]


@dataclass(frozen=True)
class RetriedCopies:
    """One figure of a retry: the time per copy of each back-to-back batch (as a
    measurement's throughput_ms), `batch` copies a batch."""

    operation: Operation
    batch: BatchCopies
    per_copy_ms: Samples


@dataclass(frozen=True)
class CheckRetry:
    """A line measured again (attempt 1 is its first retry) after it WARNed or FAILed."""

    line: RetriedLine
    attempt: Annotated[int, Range(1, MAX_RETRIES)]
    copies: list[RetriedCopies]


@dataclass(frozen=True)
class CheckReference:
    """The figures of the check given with --reference (a file on the user's machine), kept
    so that `memprof report` judges the run as it was judged, wherever the file is read."""

    file: str  # as given on the command line
    gpu: str
    host: str
    created_at: str
    bytes_per_copy: ByteCount
    device_copy_bytes: ByteCount
    h2d_gb_per_s: GbPerS
    d2h_gb_per_s: GbPerS
    d2d_gb_per_s: GbPerS


@dataclass(frozen=True)
class CheckExtra:
    retries: list[CheckRetry] = field(default_factory=list)  # in the order measured
    reference: CheckReference | None = None  # --reference; None: the shipped one, if any
    thresholds: CheckThresholds | None = None  # --thresholds, for this GPU


def _copies(operation: str, what: str, **declared: Any) -> base.Measure:
    """Copies of one array, back to back, their GB/s against what bounds them."""
    return base.Measure(
        "gpu", operation, what, "back to back", arrays=1, shows="throughput", **declared
    )


# Pinned copies against the link; a device copy (read + write) against HBM, sized apart.
H2D = _copies("h2d", "pinned copies host → device", kinds=("pinned",), bound="link")
D2H = _copies("d2h", "pinned copies device → host", kinds=("pinned",), bound="link")
# at once, each direction still has only its own lanes of the link (PCIe is full duplex)
H2D_AT_ONCE = _copies("h2d_at_once", "host → device, both at once", kinds=("pinned",), bound="link")
D2H_AT_ONCE = _copies("d2h_at_once", "device → host, both at once", kinds=("pinned",), bound="link")
D2D = _copies(
    "d2d", "device-to-device copies", kinds=("device",), size="device_power", traffic=2,
    bound="hbm",
)  # fmt: skip
NAMES = {**base.COPY_NAMES, "d2d": "[CUDA memcpy DtoD]", "peer": "[CUDA memcpy PtoP]"}


@dataclass(frozen=True)
class CheckInputs:
    """What check reads from files before the GPU is opened: --reference and --thresholds."""

    reference: Result | None = None
    thresholds: Models | None = None


class CheckGpu(base.Experiment):
    name = "check"
    description = (
        "Link trained to its capability; pinned HtoD and DtoH at 85% of the link's theoretical "
        "rate and both at once; a device copy at 80% of HBM's; no throttling and no other "
        "process during the run (NVML). Expectations from the GPU's theoretical figures and, "
        "for GPU models memprof ships a reference for, from that reference. With --device "
        "all: every GPU in turn, then every pair of GPUs against its link. See docs/check.md."
    )
    Params = CheckParams
    Extra = CheckExtra
    gpus = "one_or_every"
    every_gpu_then = "check-pairs"
    timing_option = False  # every figure is a batch between gated events
    measures = (H2D, D2H, H2D_AT_ONCE, D2H_AT_ONCE, D2D)

    def read_inputs(self, params: CheckParams) -> CheckInputs:
        return CheckInputs(read_reference(params.reference), read_thresholds(params.thresholds))

    def run(self, ctx: base.RunContext) -> CheckExtra:
        facts = ctx.facts[ctx.session.device_index]
        inputs = ctx.inputs or CheckInputs()
        reference = reference_figures(ctx.params.reference, inputs.reference, facts)
        thresholds = thresholds_for(ctx.params.thresholds, inputs.thresholds, facts.name)
        copies = _CheckCopies(ctx)
        try:
            step = ctx.steps(len(LINE_OPERATIONS))
            for line in LINE_OPERATIONS:
                step(copies.words(line))
                copies.measure(line, ctx.measure)
            extra = CheckExtra(reference=reference, thresholds=thresholds)
            if ctx.params.retries:
                extra = _retry(ctx, copies, extra)
            else:
                ctx.progress("done", len(LINE_OPERATIONS), len(LINE_OPERATIONS))
        finally:
            copies.free()
        return extra

    def derived(self, result: Result) -> dict:
        return {"bytes_per_copy": host_bytes(result), "device_copy_bytes": device_bytes(result)}

    def check_consistency(self, result: Result) -> None:
        check_kept_reference(result)
        check_kept_thresholds(result)
        check_retries(result)


def host_bytes(result: Result) -> int:
    """The bytes of each host copy of a check (its power)."""
    return base.array_bytes(result.parameters)


def device_bytes(result: Result) -> int:
    """The bytes of its device-to-device copy (its device_power)."""
    return base.FLOAT32_BYTES << result.parameters.device_power


def check_retries(result: Result) -> None:
    """The retries kept must agree with the run: attempts 1, 2... of a line that did not PASS,
    at most --retries, each its line's copies, --repeat batches, in time that passed."""
    made: dict[str, int] = {}
    for index, retry in enumerate(result.extra.retries):
        where = f"extra.retries[{index}]"
        made[retry.line] = made.get(retry.line, 0) + 1
        if retry.attempt != made[retry.line]:
            raise SchemaError(
                f"{where}.attempt",
                f"is {retry.attempt}, but it is retry {made[retry.line]} of {retry.line!r}",
            )
        if retry.attempt > result.parameters.retries:
            raise SchemaError(
                f"{where}.attempt",
                f"is {retry.attempt}, but parameters.retries is {result.parameters.retries}",
            )
        operations = [copies.operation for copies in retry.copies]
        if operations != list(LINE_OPERATIONS[retry.line]):
            raise SchemaError(
                f"{where}.copies",
                f"measure {operations}, but a retry of {retry.line!r} measures "
                f"{list(LINE_OPERATIONS[retry.line])}",
            )
        for number, copies in enumerate(retry.copies):
            at, batches = f"{where}.copies[{number}].per_copy_ms", len(copies.per_copy_ms)
            if batches != result.parameters.repeat:
                raise SchemaError(
                    at,
                    f"holds {batches} batches, but parameters.repeat is {result.parameters.repeat}",
                )
            if min(copies.per_copy_ms) <= 0:
                raise SchemaError(at, "holds a copy that took no time")
            _within_bound(result, copies, at)
    for index, retry in enumerate(result.extra.retries):  # each figure now known to be one
        before = attempts(result, result.extra.reference, retry.line)[retry.attempt - 1]
        if before.verdict == "PASS" and _passed_whatever_reference(result, retry.line, before):
            raise SchemaError(
                f"extra.retries[{index}]",
                f"measures {retry.line!r} again, but its attempt before PASSed ({before.measured}):"
                " only a line that WARNed or FAILed is measured again",
            )


def _within_bound(result: Result, copies: RetriedCopies, where: str) -> None:
    """A retry's copies held to their bound, as figures.check_bounds holds a measurement."""
    again = _retried(result, copies)
    found = figures.figure(result, again, DECLARED[copies.operation]).gb_per_s
    limit = figures.hard_ceiling(result, again, DECLARED[copies.operation])
    if found is not None and limit is not None and limit.fraction(found) > ABOVE_BOUND:
        raise SchemaError(
            where,
            f"makes {found:,.1f} GB/s, {limit.fraction(found):.0%} of its {limit.limiter} "
            f"ceiling of {limit.gb_per_s:,.1f} GB/s: nothing moves faster than its "
            f"{limit.limiter}",
        )


def _passed_whatever_reference(result: Result, line: str, attempt: Line) -> bool:
    """Whether an attempt PASSed however the run judged it: both at once from the file's own
    figures; the others also by the link the run started on and a reference not kept, so only
    a figure at or above MARGIN of any reference's (ABOVE_BOUND of _reference_ceiling) and
    within ABOVE_BOUND of that link is certain."""
    if line == "at_once":
        return True
    most = at_start = _reference_ceiling(result, line)  # HBM's, for the device copy
    if line != "d2d":
        device = result.device
        at_start = pcie_bandwidth_gb_per_s(device.pcie_generation, device.pcie_width)
    measured = attempt.judged[0][1] if attempt.judged else None
    if most is None or at_start is None or measured is None:
        return False
    return MARGIN * ABOVE_BOUND * most <= measured <= ABOVE_BOUND * at_start


def _reference_ceiling(result: Result, line: str) -> float | None:
    """The most GB/s a check of this GPU model could hold for a line: HBM's rate for the device
    copy; for the host's, PCIe x16 at the GPU's own highest generation (a known-good machine of
    the same model may have a better slot than this one), or the highest memprof knows."""
    if line == "d2d":
        ceiling = hbm_ceiling(result.device)
        return ceiling.gb_per_s if ceiling is not None else None
    state = result.gpu_state()
    generation = state.pcie_gpu_max_generation if state else None
    return pcie_bandwidth_gb_per_s(generation or max(PCIE_RATE_GT_PER_S), 16)


def check_kept_reference(result: Result) -> None:
    """The --reference kept is a check of the run's GPU model, its figures within reach."""
    kept = result.extra.reference
    if kept is None:
        return
    name = result.device.name if result.device is not None else None
    if kept.gpu != name:
        raise SchemaError(
            "extra.reference.gpu",
            f"is {kept.gpu!r}, but the run measured {name!r}: a reference is a check of the "
            "same GPU model",
        )
    for line in ("h2d", "d2h", "d2d"):
        value, most = getattr(kept, f"{line}_gb_per_s"), _reference_ceiling(result, line)
        if most is not None and value > ABOVE_BOUND * most:
            raise SchemaError(
                f"extra.reference.{line}_gb_per_s",
                f"is {value:,.1f} GB/s, but a {name} can reach at most {most:,.1f} GB/s there",
            )


def check_kept_thresholds(result: Result) -> None:
    """What a check kept of --thresholds is of the file its parameters name; an entry names
    the run's GPU and sets a floor, no entry sets none (each floor's range: the schema's)."""
    kept, given = result.extra.thresholds, result.parameters.thresholds
    if (kept.file if kept else None) != given:
        raise SchemaError(
            "extra.thresholds",
            f"is {'the floors of ' + repr(kept.file) if kept else 'absent'}, but "
            f"parameters.thresholds is {given!r}: a run keeps what its --thresholds decided",
        )
    if kept is None:
        return
    if not kept.file:
        raise SchemaError(
            "extra.thresholds.file", "is empty: the file the floors came from is named"
        )
    name = result.device.name if result.device is not None else ""
    if kept.model is not None and not thresholds_matches(kept.model, name):
        raise SchemaError(
            "extra.thresholds.model",
            f"is {kept.model!r}, but the run measured {name!r}: the entry kept is the GPU's own",
        )
    if kept.model is not None and not kept.floors_pct():
        raise SchemaError("extra.thresholds", f"keeps the entry {kept.model!r} but no floor it set")
    if kept.model is None and kept.floors_pct():
        raise SchemaError("extra.thresholds", "keeps floors but no entry that set them")


def _batches(ctx: base.RunContext, *lanes: Any) -> None:
    """Back-to-back batches of every lane at once (memprof.core.measure.concurrent)."""
    from memprof.core.measure import concurrent

    concurrent(list(lanes), False, BATCH_TARGET_MS, ctx.params.repeat, warmup=1)


class _CheckCopies:
    """The check's buffers, and each line's copies, measured then verified at every attempt."""

    def __init__(self, ctx: base.RunContext) -> None:
        import numpy as np

        from memprof.core import memory

        session, params = ctx.session, ctx.params
        self.ctx, self.cuda = ctx, session.cuda
        elements, device_elements = 1 << params.power, 1 << params.device_power
        self.nbytes, self.device_elements = elements * base.FLOAT32_BYTES, device_elements
        self.device_copy_bytes = device_elements * base.FLOAT32_BYTES
        memory.require_memory(
            session,
            device_bytes=2 * self.nbytes + 2 * self.device_copy_bytes,
            host_bytes=3 * self.nbytes,
        )
        self.values = np.random.default_rng(16).random(elements, dtype=np.float32)
        self.buffers: list[Any] = []
        host_in, host_out = (self._allocate("pinned", elements) for _ in range(2))
        device_in, device_out = (self._allocate("device", elements) for _ in range(2))
        self.source, self.target = (self._allocate("device", device_elements) for _ in range(2))
        one_and_a_half = int(np.float32(1.5).view(np.uint32))
        self.cuda.memset_d32(self.source.device_pointer, one_and_a_half, device_elements)
        self.copies = {  # each direction's buffers, prepared and verified at every attempt
            "h2d": CheckedCopies(session, host_in, device_in, self.values),
            "d2h": CheckedCopies(session, host_out, device_out, self.values),
        }
        self.second = self.cuda.Stream()  # DtoH beside HtoD: each direction on its own stream

    def _allocate(self, kind: str, elements: int) -> Any:
        from memprof.core import memory

        buffer = memory.allocate(self.ctx.session, kind, elements)
        self.buffers.append(buffer)
        return buffer

    def words(self, line: str) -> str:
        size, device_size = format_bytes(self.nbytes), format_bytes(self.device_copy_bytes)
        return {
            "h2d": f"pinned host → device, {size}",
            "d2h": f"pinned device → host, {size}",
            "at_once": f"pinned, both directions at once, {size}",
            "d2d": f"device to device, {device_size}",
        }[line]

    def measure(self, line: str, profiler: Any, label: str = "") -> None:
        """One attempt of `line`, verified (`label` names a retry's checks)."""
        if line in ("h2d", "d2h"):
            self.copies[line].prepare(line)
            _batches(self.ctx, self._lane(profiler, line))
            self._verify((line,), label)
        elif line == "at_once":
            if label:  # a retry: each direction alone again, then both at once
                self.measure("h2d", profiler, label)
                self.measure("d2h", profiler, label)
            for direction, copies in self.copies.items():
                copies.prepare(direction)
            _batches(
                self.ctx,
                self._lane(profiler, "h2d_at_once"),
                self._lane(profiler, "d2h_at_once", self.second),
            )
            self._verify(("h2d", "d2h"), f"{label}both at once, ")
        else:
            self._device_copy(profiler, label)

    def _lane(self, profiler: Any, operation: str, stream: Any = None) -> Any:
        from memprof.core.measure import Lane

        direction = operation[:3]
        action = self.copies[direction].action(direction)
        name = NAMES[operation.removesuffix("_at_once")]
        return Lane(profiler, action, name, operation, "pinned", self.nbytes, stream=stream)

    def _verify(self, directions: tuple[str, ...], label: str) -> None:
        what = f"pinned, {format_bytes(self.nbytes)}"
        for direction in directions:
            name = f"{label}{base.DIRECTIONS[direction]}, {what}"
            self.ctx.check(self.copies[direction].verify(direction, name))

    def _device_copy(self, profiler: Any, label: str) -> None:
        """Back-to-back cuMemcpyDtoD of the device buffers, verified at both ends: their first
        and last elements all 1.5 (the whole of a small copy)."""
        import numpy as np

        from memprof.core.measure import Lane
        from memprof.core.verify import compare_arrays

        cuda, source, target = self.cuda, self.source, self.target
        nbytes = self.device_copy_bytes
        cuda.memset_d8(target.device_pointer, POISON_BYTE, nbytes)

        def d2d(stream: Any) -> None:
            cuda.memcpy_dtod_async(target.device_pointer, source.device_pointer, nbytes, stream)

        _batches(self.ctx, Lane(profiler, d2d, NAMES["d2d"], "d2d", "device", nbytes))
        self.ctx.session.synchronize()
        elements = self.device_elements
        count = min(END_ELEMENTS, elements)
        ends = np.empty(2 * count, np.float32)
        cuda.memcpy_dtoh(ends[:count], target.device_pointer)
        cuda.memcpy_dtoh(ends[count:], target.device_pointer + (elements - count) * 4)
        ends_bytes, expected = format_bytes(count * 4), np.full(2 * count, 1.5, np.float32)
        name = f"{label}device → device, {format_bytes(nbytes)}, its first and last {ends_bytes}"
        self.ctx.check(compare_arrays(name, ends, expected))

    def free(self) -> None:
        for buffer in reversed(self.buffers):
            buffer.free()
        self.buffers = []


# -- retries ---------------------------------------------------------------------------------


def retry_until_pass(
    verdict: Callable[[str], Verdict],
    measure_again: Callable[[str, int], None],
    retries: int,
    lines: tuple[str, ...] = tuple(LINE_OPERATIONS),
) -> None:
    """Each line not PASSing measured again (measure_again(line, attempt)), up to `retries`
    times, until verdict(line) PASSes; after every line's first attempt, so that a passing
    slowdown has had time to pass."""
    for line in lines:
        attempt = 0
        while attempt < retries and verdict(line) != "PASS":
            attempt += 1
            measure_again(line, attempt)


def _retry(ctx: base.RunContext, copies: _CheckCopies, extra: CheckExtra) -> CheckExtra:
    """--retries N, each on a profiler of its own: the run's measurements stay its first."""
    from memprof.core.measure import Profiler

    first = Result(
        command="check",
        parameters=ctx.params,
        device=ctx.facts[ctx.session.device_index],
        measurements=ctx.measure.measurements(),  # the first attempts, resolved
        extra=extra,
    )
    reference = extra.reference or reference_for(first)[0]
    retries: list[CheckRetry] = []
    failing = [line for line in LINE_OPERATIONS if _latest(first, reference, line) != "PASS"]
    done = len(LINE_OPERATIONS)  # the first attempts' steps; then at most N retries a line
    total = done + len(failing) * ctx.params.retries

    def verdict(line: str) -> str:
        first.extra = dataclasses.replace(extra, retries=list(retries))
        return _latest(first, reference, line)

    def measure_again(line: str, attempt: int) -> None:
        nonlocal done
        ctx.progress(f"retry {attempt} of {copies.words(line)}", done, total)
        done += 1
        profiler = Profiler(
            ctx.session, gate=ctx.measure.gate(), declared=base.declared_keys(CheckGpu)
        )
        try:
            copies.measure(line, profiler, f"retry {attempt}, ")
            measured = {m.operation: m for m in profiler.measurements() if m.group == "gpu"}
        finally:
            profiler.release()
        found = [
            RetriedCopies(operation, measured[operation].batch, measured[operation].throughput_ms)
            for operation in LINE_OPERATIONS[line]
        ]
        retries.append(CheckRetry(line, attempt, found))

    retry_until_pass(verdict, measure_again, ctx.params.retries, tuple(failing))
    ctx.progress("done", total, total)
    return dataclasses.replace(extra, retries=retries)


# -- expectations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One line of a check: its verdict, what was checked, the figure and the expectation."""

    verdict: Verdict
    what: str
    measured: str
    expected: str
    # the GB/s it judged, for pictures: (what, measured, the least expected) per figure
    judged: tuple[tuple[str, float, float], ...] = ()
    # the measurements and derived figures its cells print (the CSV rows they are in; a
    # retry's copies: the declared attempt, a row of group "retry")
    sources: tuple[Any, ...] = ()


def judge(measured: float, floor: float, reference: float | None = None) -> Verdict:
    """FAIL under MARGIN of the floor; WARN under it or MARGIN of a reference; else PASS."""
    if measured < MARGIN * floor:
        return "FAIL"
    if measured < floor or (reference is not None and measured < MARGIN * reference):
        return "WARN"
    return "PASS"


DECLARED = {measure.operation: measure for measure in CheckGpu.measures}


def figure_of(result: Result, operation: str) -> figures.Figure | None:
    """A check's copies' figure (median of its batches; a device copy counts both ends)."""
    for m in result.measurements:
        if m.group == "gpu" and m.operation == operation and not m.gpus:
            return figures.figure(result, m, DECLARED[operation])
    return None


def figure(result: Result, operation: str) -> float | None:
    """GB/s of a check's copies (figure_of)."""
    found = figure_of(result, operation)
    return found.gb_per_s if found is not None else None


Retried = dict[int, figures.Derived]  # a retry's figure (by id) as its declared attempt


def _shown(found: figures.Figure, retried: Retried | None) -> Any:
    """What a figure's cells are sourced to: its measurement, or a retry's declared attempt."""
    return (retried or {}).get(id(found), found.measurement)


def _throughput_line(
    what: str,
    found: figures.Figure | None,
    floor: float,
    reference: float | None,
    source: str = "",
    retried: Retried | None = None,
) -> Line:
    """A figure against `floor` of its ceiling (a declared floor, the CSV's too); `source`
    names the file that set the floor."""
    measured = found.gb_per_s if found is not None else None
    if found is None or measured is None:
        return Line("FAIL", what, "not measured", "a figure")
    ceiling, share, rate = found.ceiling, found.share, f"{format_gb_per_s(measured)} GB/s"
    if ceiling is None or share is None:
        expected = "unknown: the ceiling was not recorded"
        return Line("WARN", what, rate, expected, sources=(_shown(found, retried),))
    least = figures.Derived(f"{what}: expected", (found,), "floor", share=floor)
    expected = (
        f">= {format_gb_per_s(least.gb_per_s)} GB/s ({source + ': ' if source else ''}"
        f"{floor:.0%} of {ceiling.limiter}'s {format_gb_per_s(ceiling.gb_per_s)})"
    )
    sources: tuple[Any, ...] = (_shown(found, retried), least)
    if reference is not None:
        expected += f"; reference {format_gb_per_s(reference)}"
        kept = figures.Derived("reference", (found,), "reference", reference_gb_per_s=reference)
        sources += (kept,)
    shown = f"{rate} ({share:.0%})"
    judged = ((what, measured, least.gb_per_s),)
    if share > ABOVE_BOUND:  # faster than what bounds it: not a figure
        expected += ", never above the ceiling"
        return Line("FAIL", what, shown, expected, judged, sources)
    return Line(judge(measured, least.gb_per_s, reference), what, shown, expected, judged, sources)


def link_line(result: Result) -> Line:
    what = "PCIe link trained to its capability"
    link, state = link_of(result), result.gpu_state()
    if link is None or link.now is None or link.most is None:
        return Line("WARN", what, "unknown", "its maximum (NVML or sysfs did not say)")
    measured = f"{link_words(link.now)} [{link.source}]"
    if link.now[0] < link.most[0] or link.now[1] < link.most[1]:
        return Line("FAIL", what, measured, f"{link_words(link.most)}, its maximum")
    gpu_most = state.pcie_gpu_max_generation if state else None
    if gpu_most and gpu_most > link.most[0]:
        expected = f"Gen{gpu_most}: the GPU can, its slot allows Gen{link.most[0]}"
        return Line("WARN", what, measured, expected)
    return Line("PASS", what, measured, f"{link_words(link.most)}, its maximum")


def _unknown(state: GpuState | None, what: str) -> Line:
    """WARN: NVML gave no state for the GPU, or not the part a line needs."""
    why = state.unavailable if state and state.unavailable else "not recorded"
    return Line("WARN", what, f"unknown ({why})", "none")


def clocks_line(result: Result) -> Line:
    what = "No clock held down during the run"
    state = result.gpu_state()
    if state is None or state.unavailable or state.clock_reasons is None:
        return _unknown(state, what)
    limiting, severe = state.limiting_reasons or [], state.severe_reasons or []
    if not limiting:
        return Line("PASS", what, "none", "none")
    words = ", ".join(reason_words(name) for name in limiting)
    return Line("FAIL" if severe else "WARN", what, words, "none")


def processes_line(result: Result) -> Line:
    what = "No other process on the GPU"
    state = result.gpu_state()
    if state is None or state.unavailable or state.other_processes is None:
        return _unknown(state, what)
    if not state.other_processes:
        return Line("PASS", what, "none", "none")
    pids = ", ".join(f"pid {p.pid} ({p.kind})" for p in state.other_processes)
    return Line("WARN", what, pids, "none")


Reference = Result | CheckReference | None  # a shipped reference, or the one of --reference
Figures = dict[str, float | None]  # GB/s by operation
Attempt = dict[str, figures.Figure | None]  # one attempt's figures by operation


def floors(result: Result) -> dict[str, float]:
    """Each throughput line's floor, a share of its ceiling: --thresholds' entry for the GPU
    where it sets one, else the run's own (--h2d-floor...; older files hold the defaults)."""
    found = {
        line: getattr(result.parameters, f"{line}_floor_pct") / 100 for line in LINE_OPERATIONS
    }
    kept = result.extra.thresholds
    return found | {line: pct / 100 for line, pct in (kept.floors_pct() if kept else {}).items()}


def known_good(result: Result, reference: Reference) -> Figures:
    """The reference's figures this run is held to: each at the run's own size only."""
    if reference is None:
        return {}
    kept = _kept(reference, "") if isinstance(reference, Result) else reference
    host = kept.bytes_per_copy == host_bytes(result)
    device = kept.device_copy_bytes == device_bytes(result)
    return {
        "h2d": kept.h2d_gb_per_s if host else None,
        "d2h": kept.d2h_gb_per_s if host else None,
        "d2d": kept.d2d_gb_per_s if device else None,
    }


def _retried(result: Result, copies: RetriedCopies) -> Measurement:
    """A retry's copies as the measurement of its operation they measure again."""
    measure = DECLARED[copies.operation]
    nbytes = device_bytes(result) if copies.operation == "d2d" else host_bytes(result)
    kind = measure.kinds[0]
    return Measurement("gpu", NAMES.get(copies.operation[:3], ""), copies.operation, kind, nbytes,
                       list(copies.per_copy_ms), throughput_ms=list(copies.per_copy_ms),
                       batch=copies.batch)  # fmt: skip


def throughput_line(
    result: Result,
    line: str,
    found: Attempt,
    known: Figures,
    floor: float,
    retried: Retried | None = None,
) -> Line:
    """One throughput line judged from one attempt's figures (`retried`: a retry's)."""
    kept = result.extra.thresholds  # the file that set the floor, named as the table marks it
    source = Path(kept.file).name if kept and line in kept.floors_pct() else ""
    if line == "at_once":
        pairs = {base.DIRECTIONS[k]: (found[k], found[f"{k}_at_once"]) for k in ("h2d", "d2h")}
        expected = f"each >= {floor:.0%} of its rate alone" + (f" ({source})" if source else "")
        return _both_at_once("Both directions at once", pairs, floor, expected, retried)
    what = {"h2d": "Pinned host → device", "d2h": "Pinned device → host"}.get(
        line, "Device copy (read + write)"
    )
    return _throughput_line(what, found[line], floor, known.get(line), source, retried)


def attempts(result: Result, reference: Reference, line: str) -> list[Line]:
    """Every attempt of a throughput line, judged: the first, then each retry in order."""
    known, floor = known_good(result, reference), floors(result)[line]
    first = {operation: figure_of(result, operation) for operation in get_args(Operation)}
    found = [throughput_line(result, line, first, known, floor)]
    for retry in result.extra.retries:
        if retry.line == line:
            copies = {
                c.operation: figures.figure(result, _retried(result, c), DECLARED[c.operation])
                for c in retry.copies
            }
            marked = {
                id(one): figures.Derived(f"retry {retry.attempt}", (one,), "attempt")
                for one in copies.values()
            }
            found.append(throughput_line(result, line, {**first, **copies}, known, floor, marked))
    return found


def _latest(result: Result, reference: Reference, line: str) -> Verdict:
    return attempts(result, reference, line)[-1].verdict


def _attempts_sentence(found: list[Line]) -> str:
    """'FAIL, then PASS on retry 1 (46.1 GB/s (73%); 55.2 GB/s (88%)).'"""
    verdicts = [
        found[0].verdict,
        *(f"{a.verdict} on retry {n}" for n, a in enumerate(found[1:], 1)),
    ]
    figures = "; ".join(attempt.measured for attempt in found)
    return f"{', then '.join(verdicts)} ({figures})."


def lines(result: Result, reference: Reference) -> list[Line]:
    """Every line of one GPU's check judged, each throughput line by its last attempt."""
    found = [link_line(result)]
    found += [attempts(result, reference, line)[-1] for line in LINE_OPERATIONS]
    found += [clocks_line(result), processes_line(result)]
    return found


def _both_at_once(
    what: str,
    pairs: dict[str, tuple[figures.Figure | None, figures.Figure | None]],
    floor: float,
    expected: str,
    retried: Retried | None = None,
) -> Line:
    """Two directions' copies at once, each judged by its share of its rate alone: a declared
    ratio (the CSV's too) of its copy alone over at once, per-copy times of as many bytes."""
    rates = {key: [part.gb_per_s if part else None for part in pair] for key, pair in pairs.items()}
    if any(None in rate for rate in rates.values()):
        return Line("FAIL", what, "not measured", "a figure")
    shares = {key: figures.Derived(f"{what}: {key}", pair, "ratio") for key, pair in pairs.items()}
    measured = (
        f"{' + '.join(format_gb_per_s(rate[1]) for rate in rates.values())} GB/s "
        f"({', '.join(f'{share.ratio:.0%}' for share in shares.values())})"
    )
    judged = tuple((f"{what}: {key}", rate[1], floor * rate[0]) for key, rate in rates.items())
    # at once; and a retry's copies alone, whose rows come before the ratios that divide them
    again = retried or {}
    shown = [_shown(pair[1], retried) for pair in pairs.values()]
    shown += [again[id(pair[0])] for pair in pairs.values() if id(pair[0]) in again]
    worst = min(share.ratio for share in shares.values())
    return Line(judge(worst, floor), what, measured, expected, judged, (*shown, *shares.values()))


# -- references -------------------------------------------------------------------------------

# memprof/references/*.json: a `check` Result recorded on a known-good machine, per GPU model.
# Tests point this at a folder of their own.
REFERENCE_FOLDER: Path | None = None


@functools.cache
def _references(folder: Path | None) -> tuple[tuple[tuple[str, Result], ...], tuple[str, ...]]:
    """Every reference shipped (name, Result), and one line per file that could not be read."""
    from importlib import resources

    from memprof.experiments import shape_of

    place: Any = folder if folder is not None else resources.files("memprof.references")
    found, problems = [], []
    for entry in sorted(place.iterdir(), key=lambda entry: entry.name):
        if not entry.name.endswith(".json"):
            continue
        try:
            reference = Result.from_json(entry.read_text(encoding="utf-8"), shape_of, entry.name)
        except (MemprofError, OSError, UnicodeDecodeError) as error:
            problems.append(f"reference {entry.name} not used: {error}")
            continue
        if reference.command != "check" or reference.device is None:
            problems.append(f"reference {entry.name} not used: not a check of one GPU")
            continue
        found.append((entry.name, reference))
    return tuple(found), tuple(problems)


def reference_for(result: Result) -> tuple[Result | None, list[str]]:
    """The shipped reference of this GPU model (by the name the driver gives it), and notes."""
    references, problems = _references(REFERENCE_FOLDER)
    notes = list(problems)
    name = result.device.name if result.device else None
    matches = [(file, ref) for file, ref in references if ref.device.name == name]
    if not matches:
        notes.append(
            f"No reference result for {name} ships with this memprof: expectations come from "
            "the device's theoretical figures only."
        )
        return None, notes
    file, reference = matches[0]
    notes.append(_reference_note(f"memprof/references/{file}", _kept(reference, file)))
    return reference, notes


def _reference_note(named: str, kept: CheckReference) -> str:
    return (
        f"Reference: {named}, a check of {kept.gpu} recorded {kept.created_at} on {kept.host}; "
        f"a figure under {MARGIN:.0%} of its figure (at the same size) is a WARN."
    )


def read_reference(path: str | None) -> Result | None:
    """The check saved at `path` (--reference), read before any GPU work: refused in one
    line (exit 2) unless it is a check of one GPU."""
    if path is None:
        return None
    from memprof.experiments import load

    if not path:  # Path("") would be ".", the working folder
        raise InvalidArgument("--reference: the file name is empty")
    try:
        reference = load(Path(path))  # checked as `memprof report` checks it
    except InvalidArgument as error:
        raise InvalidArgument(f"--reference: {error}") from error
    if reference.command != "check" or reference.device is None:
        raise InvalidArgument(
            f"--reference {path}: a result of memprof {reference.command}, not of memprof "
            "check on one GPU"
        )
    return reference


def reference_figures(
    path: str | None, reference: Result | None, facts: Any
) -> CheckReference | None:
    """The figures of the check read from `path` (read_reference), kept in the run's Extra;
    refused in one line (exit 2) unless it is a check of this GPU's model."""
    if path is None or reference is None:
        return None
    if reference.device.name != facts.name:
        raise InvalidArgument(
            f"--reference {path}: a check of {reference.device.name}, but this GPU is "
            f"{facts.name}: pass a check recorded on this GPU model"
        )
    return _kept(reference, path)


def _kept(reference: Result, file: str) -> CheckReference:
    """A check's figures as a run keeps its reference's."""
    rates = (figure(reference, line) for line in ("h2d", "d2h", "d2d"))
    return CheckReference(file, reference.device.name, reference.host, reference.created_at,
                          host_bytes(reference), device_bytes(reference), *rates)  # fmt: skip


def reference_in_use(result: Result) -> tuple[Reference, list[str]]:
    """The reference a check is held to: the run's own --reference, else the one memprof
    ships for its GPU model (if any); and the notes saying which."""
    given = result.extra.reference
    if given is None:
        return reference_for(result)
    return given, [_reference_note(f"{given.file} (--reference)", given)]


def judged(result: Result) -> tuple[str, list[Line], dict[str, str]]:
    """A check's or check-pairs' Result judged: where it ran, every line (its last attempt),
    and the sentence of each line measured again, by the line's `what` (for --junit)."""
    if result.command == "check-pairs":
        return "every pair of GPUs", pair_lines(result), {}
    reference, _ = reference_in_use(result)
    tried = [attempts(result, reference, line) for line in LINE_OPERATIONS]
    again = {found[0].what: _attempts_sentence(found) for found in tried if len(found) > 1}
    device = result.device
    where = f"GPU {device.index} ({device.name})" if device else "the GPU"
    return where, lines(result, reference), again


# A check's table: a row per Line, its cells the Line's words; the CSV holds its sources
VERDICTS = [
    Column("Verdict", "line", lambda line: line.verdict),
    Column("Check", "line", lambda line: line.what),
    Column("Measured", "line", lambda line: line.measured),
    Column("Expected", "line", lambda line: line.expected),
]


def health(
    where: str, found: list[Line], notes: list[str], failed_as: str, retried: Sequence[str] = ()
) -> Summary:
    """A check's summary: its table of verdicts, each line measured again, the tally of each
    verdict, and the FAIL lines (the command exits 1), named `failed_as`."""
    rows = [{"line": line} for line in found]
    counts = {
        verdict: sum(line.verdict == verdict for line in found) for verdict in get_args(Verdict)
    }
    words = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    again = f" ({plural(len(retried), 'line')} measured again: above)" if retried else ""
    return Summary(
        tables=[table(f"Health of {where}", VERDICTS, rows, notes)],
        conclusions=[*retried, f"memprof check, {where}: {words}{again}."],
        show_profile=False,
        failed=[
            f"{failed_as}: {line.what}: {line.measured}" for line in found if line.verdict == "FAIL"
        ],
    )


def summarize(result: Result) -> Summary:
    _, reference_notes = reference_in_use(result)
    where, found, again = judged(result)
    retried = [f"{what}: {sentence}" for what, sentence in again.items()]
    device = result.device
    notes = [
        f"Copies of {format_bytes(host_bytes(result))} from pinned memory and of "
        f"{format_bytes(device_bytes(result))} in device memory, back to back, "
        f"batches of about {BATCH_TARGET_MS:g} ms between one event pair behind a GPU-side "
        f"gate, median of {result.parameters.repeat}; GB/s = 10^9 bytes/s; (n%) = share of "
        "the ceiling (docs/ceilings.md).",
        f"PASS at or above the expectation; WARN below it (or under {MARGIN:.0%} of the "
        f"reference's figure); FAIL under {MARGIN:.0%} of it. Clocks and processes: NVML, "
        "during the run.",
        *reference_notes,
    ]
    kept = result.extra.thresholds
    said = thresholds_note(kept, device.name if device else "?") if kept else None
    if kept is not None and kept.model is not None:
        notes.append(said)
    if result.parameters.retries:
        notes.append(
            f"--retries {result.parameters.retries}: a throughput line that WARNed or FAILed "
            "was measured again until it PASSed; the table shows its last attempt."
        )
    summary = health(where, found, notes, where, retried)
    summary.header = [said] if kept is not None and kept.model is None else []  # a warning
    return summary


# -- every pair of GPUs -------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckPairsParams:
    power: base.Power = base.power_param(26, "Size of each peer copy: 2^N float32, N from 0 to 30")
    repeat: Repeat = param(
        5, "Batches of back-to-back copies per figure (1 to 100).", flags=("--repeat", "-r")
    )


@dataclass(frozen=True)
class CheckPairsExtra:
    devices: list[DeviceRecord]
    peer_access: list[list[bool]]  # [source][destination]


PEER = _copies(
    "peer", "peer copies over the link, one direction", kinds=("peer",), gpus=2, bound="nvlink"
)
PEER_AT_ONCE = _copies(
    "peer_at_once", "peer copies, both directions at once", kinds=("peer",), gpus=2
)


class CheckPairs(base.Experiment):
    name = "check-pairs"
    description = (
        "Each ordered pair copies over the link with peer access (cuMemcpyPeerAsync), one "
        "direction and then both at once; each figure is judged against the NVLinks between "
        "the two (or PCIe), from NVML. `memprof check --device all` ends with it."
    )
    Params = CheckPairsParams
    Extra = CheckPairsExtra
    gpus = "every"
    timing_option = False  # every figure is a batch between gated events
    measures = (PEER, PEER_AT_ONCE)

    def run(self, ctx: base.RunContext) -> CheckPairsExtra:
        from memprof.core.bindings import can_access_peer

        devices, params = ctx.devices, ctx.params
        indices = devices.indices
        if len(indices) < 2:
            raise EnvironmentProblem(
                "memprof check-pairs needs two GPUs: this machine has one, so there is no pair"
            )
        buffers = _PeerBuffers(ctx, 1 << params.power)
        access = [[a == b or can_access_peer(a, b) for b in indices] for a in indices]
        can = {(a, b): access[indices.index(a)][indices.index(b)] for a in indices for b in indices}
        both = [(a, b) for a, b in itertools.combinations(indices, 2) if can[a, b] and can[b, a]]
        for a, b in both:
            devices.enable_peer_access(a, b)
            devices.enable_peer_access(b, a)
        step, size = ctx.steps(3 * len(both)), format_bytes(buffers.nbytes)
        for a, b in both:
            for source, destination in ((a, b), (b, a)):
                step(f"GPU {source} → GPU {destination}, {size}: peer copies")
                buffers.poison(destination)
                _batches(ctx, buffers.lane(source, destination, "peer"))
                ctx.check(buffers.verify(source, destination, "one direction"))
            step(f"GPU {a} ↔ GPU {b}, {size}: both directions at once")
            buffers.poison(a, b)
            _batches(ctx, buffers.lane(a, b, "peer_at_once"), buffers.lane(b, a, "peer_at_once"))
            ctx.check(buffers.verify(a, b, "both at once"))
            ctx.check(buffers.verify(b, a, "both at once"))
        buffers.free()
        step("done")
        devices = [DeviceRecord.of(ctx.facts[index]) for index in indices]
        return CheckPairsExtra(devices=devices, peer_access=access)

    def summarize(self, result: Result) -> Summary:
        notes = [
            f"Copies of {format_bytes(base.array_bytes(result.parameters))} with "
            f"cuMemcpyPeerAsync, peer access on, back to back, median of "
            f"{result.parameters.repeat} batches; (n%) = share of the link's ceiling: the NVLinks "
            "from one GPU that reach the other (NVML's raw rate per direction), or the slower "
            "PCIe link where NVML says there is no NVLink.",
            f"PASS at or above the expectation; WARN below it; FAIL under {MARGIN:.0%} of it.",
        ]
        return health("every pair of GPUs", pair_lines(result), notes, "pairs")

    def derived(self, result: Result) -> dict:
        return {"bytes_per_copy": base.array_bytes(result.parameters)}

    def check_consistency(self, result: Result) -> None:
        devices = [device.index for device in result.extra.devices]  # (base.run_devices)
        access = base.access_matrix(result, devices)
        for index, m in enumerate(result.measurements):
            a, b = m.gpus if m.group == "gpu" else (None, None)
            if a is not None and (a == b or not (access[a, b] and access[b, a])):
                raise SchemaError(
                    f"measurements[{index}].gpus",
                    f"is GPU {a} → GPU {b}, but peer copies need two GPUs that reach each other",
                )


class _PeerBuffers:
    """Each GPU's source (random values) and target buffers, and copies between them."""

    def __init__(self, ctx: base.RunContext, elements: int) -> None:
        import numpy as np

        from memprof.core import memory

        self.elements, self.nbytes = elements, elements * base.FLOAT32_BYTES
        self.held: dict[int, tuple[Any, Any, Any]] = {}  # GPU -> (session, source, target)
        self.values: dict[int, Any] = {}
        for index in ctx.devices.indices:
            with ctx.devices.session(index).active() as session:
                memory.require_memory(session, device_bytes=2 * self.nbytes)
                values = np.random.default_rng(160 + index).random(elements, np.float32)
                source = memory.allocate(session, "device", elements)
                target = memory.allocate(session, "device", elements)
                session.cuda.memcpy_htod(source.device_pointer, values)
                self.held[index], self.values[index] = (session, source, target), values

    def lane(self, a: int, b: int, operation: str) -> Any:
        """GPU a's source copied into GPU b's target on a's stream (cuMemcpyPeerAsync)."""
        from memprof.core.measure import Lane

        session, source, _ = self.held[a]
        peer_session, _, target = self.held[b]
        action = peer_copy(session, source, peer_session, target, self.nbytes)
        return Lane(session.profiler, action, NAMES["peer"], operation, "peer", self.nbytes, (a, b))

    def poison(self, *targets: int) -> None:
        for index in targets:
            session, _, target = self.held[index]
            with session.active():
                session.cuda.memset_d8(target.device_pointer, POISON_BYTE, self.nbytes)

    def verify(self, a: int, b: int, how: str) -> Check:
        import numpy as np

        from memprof.core.verify import compare_arrays

        session, _, target = self.held[b]
        with session.active():
            session.synchronize()
            received = np.empty(self.elements, np.float32)
            session.cuda.memcpy_dtoh(received, target.device_pointer)
        return compare_arrays(f"GPU {a} → GPU {b}, {how}", received, self.values[a])

    def free(self) -> None:
        for session, source, target in self.held.values():
            with session.active():
                source.free()
                target.free()


def pair_lines(result: Result) -> list[Line]:
    indices = [device.index for device in result.extra.devices]
    access = base.access_matrix(result, indices)
    alone, together = pair_figures(result, PEER), pair_figures(result, PEER_AT_ONCE)
    found = []
    for a, b in itertools.combinations(indices, 2):
        if not (access[a, b] and access[b, a]):
            found.append(
                Line("WARN", f"GPU {a} ↔ GPU {b} peer access", "no (cuDeviceCanAccessPeer)", "yes")
            )
            continue
        keys = ((a, b), (b, a))
        for x, y in keys:
            found.append(
                _throughput_line(f"GPU {x} → GPU {y}", alone.get((x, y)), PEER_FLOOR, None)
            )
        pairs = {f"GPU {x} → GPU {y}": (alone.get((x, y)), together.get((x, y))) for x, y in keys}
        expected = f"each >= {AT_ONCE_FLOOR:.0%} of its rate alone"
        found.append(
            _both_at_once(f"GPU {a} ↔ GPU {b} both at once", pairs, AT_ONCE_FLOOR, expected)
        )
    return found
