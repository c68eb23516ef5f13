"""`memprof check`: a health run of this machine's memory paths in seconds, line by line.

Each line reads PASS, WARN or FAIL with the measured figure and what was expected:
- the PCIe link trained to its capability (NVML's link during the run, else sysfs');
- pinned host → device and device → host copies at >= 85% of the link's theoretical rate;
- both directions at once (each on its own stream) holding >= 80% of each alone;
- a device-to-device copy at >= 80% of HBM's theoretical rate;
- no clock held down during the run, and no other process on the GPU (NVML).

Expectations come from the device's own theoretical figures (memprof.model.ceilings) and,
where a reference Result of `check` recorded on the same GPU model ships inside memprof
(memprof/references/*.json), from its figures too. The verdicts are made from the Result
when it is shown (a saved file is judged again by `memprof report`), and a FAIL makes the
command exit 1. `--device all` checks every GPU in turn, then every pair of GPUs against
their link (memprof check-pairs). docs/check.md says why each expectation is what it is.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from memprof.errors import EnvironmentProblem
from memprof.experiments import base
from memprof.model import figures
from memprof.model.ceilings import Ceiling, hbm_ceiling, link_of, pcie_ceiling, peer_ceiling
from memprof.model.device import DeviceRecord
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.gpustate import GpuState, link_words, reason_words
from memprof.model.measures import ABOVE_BOUND
from memprof.model.params import Range, param
from memprof.model.results import Check, Result
from memprof.model.schema import SchemaError
from memprof.model.summary import Summary, Table

Verdict = Literal["PASS", "WARN", "FAIL"]
PCIE_FLOOR = 0.85  # pinned copies reach at least this share of the link's theoretical rate
HBM_FLOOR = 0.80  # a device copy reaches at least this share of HBM's theoretical rate
AT_ONCE_FLOOR = 0.80  # each direction at once keeps at least this share of its rate alone
PEER_FLOOR = 0.70  # peer copies reach at least this share of their link (NVLink's raw rate)
MARGIN = 0.90  # below MARGIN x the floor: FAIL; below the floor or MARGIN x a reference: WARN
BATCH_TARGET_MS = 20.0  # a batch of back-to-back copies lasts about this long
Repeat = Annotated[int, Range(1, 100)]


@dataclass(frozen=True)
class CheckParams:
    power: base.Power = base.power_param(24, "Size of each host copy: 2^N float32, N from 0 to 30")
    device_power: Annotated[int, Range(10, 30)] = param(
        28, "Size of the device-to-device copy: 2^N float32, N from 10 to 30 (28 = 1 GiB)."
    )
    repeat: Repeat = param(
        5, "Batches of back-to-back copies per figure (1 to 100).", flags=("--repeat", "-r")
    )


def _copies(operation: str, what: str, **declared: Any) -> base.Measure:
    """Copies of one array, back to back, their GB/s against what bounds them."""
    return base.Measure(
        "gpu", operation, what, "back to back", arrays=1, shows="throughput", **declared
    )


# Pinned copies against the link; a device copy (read + write) against HBM, sized apart.
H2D = _copies("h2d", "pinned copies host → device", kinds=("pinned",), bound="link")
D2H = _copies("d2h", "pinned copies device → host", kinds=("pinned",), bound="link")
H2D_AT_ONCE = _copies("h2d_at_once", "host → device, both at once", kinds=("pinned",))
D2H_AT_ONCE = _copies("d2h_at_once", "device → host, both at once", kinds=("pinned",))
D2D = _copies(
    "d2d", "device-to-device copies", kinds=("device",), size="device_power", traffic=2,
    bound="hbm",
)  # fmt: skip
NAMES = {**base.COPY_NAMES, "d2d": "[CUDA memcpy DtoD]", "peer": "[CUDA memcpy PtoP]"}


class CheckGpu(base.Experiment):
    name = "check"
    help = "Health check of this GPU's memory paths: PASS/WARN/FAIL per line, exit 1 on FAIL."
    description = (
        "Link trained to its capability; pinned HtoD and DtoH at 85% of the link's theoretical "
        "rate and both at once; a device copy at 80% of HBM's; no throttling and no other "
        "process during the run (NVML). Expectations from the GPU's theoretical figures and, "
        "for GPU models memprof ships a reference for, from that reference. With --device "
        "all: every GPU in turn, then every pair of GPUs against its link. See docs/check.md."
    )
    Params = CheckParams
    gpus = "one_or_every"
    every_gpu_then = "check-pairs"
    every_gpu_words = "every pair of GPUs against its link (memprof check-pairs)"
    timing_option = False  # every figure is a batch between gated events
    measures = (H2D, D2H, H2D_AT_ONCE, D2H_AT_ONCE, D2D)

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        from memprof.core import memory

        elements, device_elements = 1 << ctx.params.power, 1 << ctx.params.device_power
        nbytes, device_bytes = elements * base.FLOAT32_BYTES, device_elements * base.FLOAT32_BYTES
        memory.require_memory(
            ctx.session, device_bytes=2 * nbytes + 2 * device_bytes, host_bytes=3 * nbytes
        )
        step = ctx.steps(4)
        _host_copies(ctx, elements, step)
        step("device to device")
        _device_copy(ctx, device_elements)
        return base.NoExtra()

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def derived(self, result: Result) -> dict:
        params = result.parameters
        return {
            "bytes_per_copy": base.array_bytes(params),
            "device_copy_bytes": base.FLOAT32_BYTES << params.device_power,
        }


def _batches(ctx: base.RunContext, *lanes: Any) -> None:
    """Back-to-back batches of every lane at once (memprof.core.measure.concurrent)."""
    from memprof.core.measure import concurrent

    concurrent(list(lanes), False, BATCH_TARGET_MS, ctx.params.repeat, warmup=1)


def _lane(ctx: base.RunContext, action, operation: str, kind: str, size: int, stream: Any = None):
    from memprof.core.measure import Lane

    name = NAMES[operation.removesuffix("_at_once")]
    return Lane(ctx.measure, action, name, operation, kind, size, stream=stream)


def _host_copies(ctx: base.RunContext, elements: int, step: Any) -> None:
    """Pinned HtoD alone, DtoH alone, then both at once on two streams; each verified."""
    import numpy as np

    from memprof.core import memory
    from memprof.core.verify import compare_arrays
    from memprof.experiments.common import POISON_BYTE

    session, cuda = ctx.session, ctx.session.cuda
    nbytes = elements * base.FLOAT32_BYTES
    values = np.random.default_rng(16).random(elements, dtype=np.float32)
    host_in, host_out = (memory.allocate(session, "pinned", elements) for _ in range(2))
    device_in, device_out = (memory.allocate(session, "device", elements) for _ in range(2))
    host_in.array[:] = values
    cuda.memcpy_htod(device_out.device_pointer, values)  # what the DtoH copies bring back
    h2d = memory.host_copy(cuda, "h2d", host_in, device_in.device_pointer)[1]
    d2h = memory.host_copy(cuda, "d2h", host_out, device_out.device_pointer)[1]
    second = cuda.Stream()  # DtoH beside HtoD: each direction on its own stream

    def verify(directions: tuple[str, ...], prefix: str = "") -> None:
        session.synchronize()
        label = f"pinned, {format_bytes(nbytes)}"
        if "h2d" in directions:
            received = np.empty_like(values)
            cuda.memcpy_dtoh(received, device_in.device_pointer)
            ctx.check(compare_arrays(f"{prefix}host → device, {label}", received, values))
        if "d2h" in directions:
            ctx.check(compare_arrays(f"{prefix}device → host, {label}", host_out.array, values))

    def poison() -> None:
        cuda.memset_d8(device_in.device_pointer, POISON_BYTE, nbytes)
        host_out.array.fill(np.nan)

    step("pinned host → device")
    poison()
    _batches(ctx, _lane(ctx, h2d, "h2d", "pinned", nbytes))
    verify(("h2d",))
    step("pinned device → host")
    _batches(ctx, _lane(ctx, d2h, "d2h", "pinned", nbytes))
    verify(("d2h",))
    step("both directions at once")
    poison()
    _batches(
        ctx,
        _lane(ctx, h2d, "h2d_at_once", "pinned", nbytes),
        _lane(ctx, d2h, "d2h_at_once", "pinned", nbytes, second),
    )
    verify(("h2d", "d2h"), "both at once, ")
    for buffer in (host_in, host_out, device_in, device_out):
        buffer.free()


def _device_copy(ctx: base.RunContext, elements: int) -> None:
    """Back-to-back cuMemcpyDtoD of `elements` floats, verified at both ends."""
    import numpy as np

    from memprof.core import memory
    from memprof.experiments.common import POISON_BYTE

    session, cuda = ctx.session, ctx.session.cuda
    nbytes = elements * base.FLOAT32_BYTES
    source, target = (memory.allocate(session, "device", elements) for _ in range(2))
    cuda.memset_d32(source.device_pointer, int(np.float32(1.5).view(np.uint32)), elements)
    cuda.memset_d8(target.device_pointer, POISON_BYTE, nbytes)

    def d2d(stream: Any) -> None:
        cuda.memcpy_dtod_async(target.device_pointer, source.device_pointer, nbytes, stream)

    _batches(ctx, _lane(ctx, d2d, "d2d", "device", nbytes))
    ctx.check(_check_ends(session, target, elements))
    for buffer in (source, target):
        buffer.free()


END_ELEMENTS = 1 << 20  # a device copy is verified at its first and last 4 MiB


def _check_ends(session: Any, target: Any, elements: int) -> Check:
    """The device copy's first and last elements all 1.5 (the whole of a small copy)."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    session.synchronize()
    count = min(END_ELEMENTS, elements)
    ends = np.empty(2 * count, np.float32)
    session.cuda.memcpy_dtoh(ends[:count], target.device_pointer)
    session.cuda.memcpy_dtoh(ends[count:], target.device_pointer + (elements - count) * 4)
    expected = np.full(2 * count, 1.5, np.float32)
    return compare_arrays(
        f"device → device, {format_bytes(elements * 4)}, its first and last "
        f"{format_bytes(count * 4)}",
        ends,
        expected,
    )


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


def judge(measured: float, floor: float, reference: float | None = None) -> Verdict:
    """FAIL well below the floor (under MARGIN of it); WARN below it, or below MARGIN of a
    known-good machine's figure; PASS otherwise."""
    if measured < MARGIN * floor:
        return "FAIL"
    if measured < floor or (reference is not None and measured < MARGIN * reference):
        return "WARN"
    return "PASS"


def figure(result: Result, operation: str) -> float | None:
    """GB/s of a check's copies (median of its batches; a device copy counts read and write)."""
    declared = {measure.operation: measure for measure in CheckGpu.measures}
    for m in result.measurements:
        if m.group == "gpu" and m.operation == operation and not m.gpus:
            return figures.figure(result, m, declared[operation]).gb_per_s
    return None


def _rate(value: float | None) -> str:
    return f"{format_gb_per_s(value)} GB/s" if value is not None else "not measured"


def _throughput_line(
    what: str,
    measured: float | None,
    ceiling: Ceiling | None,
    floor: float,
    reference: float | None,
) -> Line:
    if measured is None:
        return Line("FAIL", what, "not measured", "a figure")
    if ceiling is None:
        return Line("WARN", what, _rate(measured), "unknown: the ceiling was not recorded")
    least = floor * ceiling.gb_per_s
    expected = (
        f">= {format_gb_per_s(least)} GB/s ({floor:.0%} of {ceiling.limiter}'s "
        f"{format_gb_per_s(ceiling.gb_per_s)})"
    )
    if reference is not None:
        expected += f"; reference {format_gb_per_s(reference)}"
    shown = f"{_rate(measured)} ({ceiling.fraction(measured):.0%})"
    judged = ((what, measured, least),)
    if ceiling.fraction(measured) > ABOVE_BOUND:  # faster than what bounds it: not a figure
        return Line("FAIL", what, shown, expected + ", never above the ceiling", judged)
    return Line(judge(measured, least, reference), what, shown, expected, judged)


def link_line(result: Result, index: int | None = None) -> Line:
    what = "PCIe link trained to its capability"
    link, state = link_of(result, index), result.gpu_state(index)
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


def clocks_line(result: Result, index: int | None = None) -> Line:
    what = "No clock held down during the run"
    state = result.gpu_state(index)
    if state is None or state.unavailable or state.clock_reasons is None:
        return _unknown(state, what)
    limiting, severe = state.limiting_reasons or [], state.severe_reasons or []
    if not limiting:
        return Line("PASS", what, "none", "none")
    words = ", ".join(reason_words(name) for name in limiting)
    return Line("FAIL" if severe else "WARN", what, words, "none")


def processes_line(result: Result, index: int | None = None) -> Line:
    what = "No other process on the GPU"
    state = result.gpu_state(index)
    if state is None or state.unavailable or state.other_processes is None:
        return _unknown(state, what)
    if not state.other_processes:
        return Line("PASS", what, "none", "none")
    pids = ", ".join(f"pid {p.pid} ({p.kind})" for p in state.other_processes)
    return Line("WARN", what, pids, "none")


def lines(result: Result, reference: Result | None) -> list[Line]:
    """Every line of one GPU's check, judged from its Result (and a reference, if any)."""

    def known_good(operation: str) -> float | None:
        if reference is None:
            return None
        size = "device_power" if operation == "d2d" else "power"
        same_size = getattr(reference.parameters, size) == getattr(result.parameters, size)
        return figure(reference, operation) if same_size else None

    link, hbm = pcie_ceiling(result), hbm_ceiling(result.device)
    found = [link_line(result)]
    for operation, what in (("h2d", "Pinned host → device"), ("d2h", "Pinned device → host")):
        found.append(
            _throughput_line(
                what, figure(result, operation), link, PCIE_FLOOR, known_good(operation)
            )
        )
    found.append(_at_once_line(result))
    found.append(
        _throughput_line(
            "Device copy (read + write)", figure(result, "d2d"), hbm, HBM_FLOOR, known_good("d2d")
        )
    )
    found += [clocks_line(result), processes_line(result)]
    return found


def _at_once_line(result: Result) -> Line:
    what = "Both directions at once"
    rates = {operation: figure(result, operation) for operation in ("h2d", "d2h")}
    together = {operation: figure(result, f"{operation}_at_once") for operation in ("h2d", "d2h")}
    if None in rates.values() or None in together.values():
        return Line("FAIL", what, "not measured", "a figure")
    shares = {operation: together[operation] / rates[operation] for operation in rates}
    worst = min(shares.values())
    measured = (
        f"{format_gb_per_s(together['h2d'])} + {format_gb_per_s(together['d2h'])} GB/s "
        f"({shares['h2d']:.0%}, {shares['d2h']:.0%})"
    )
    expected = f"each >= {AT_ONCE_FLOOR:.0%} of its rate alone"
    words = base.DIRECTIONS  # h2d -> "host → device"
    judged = _at_once(
        what, {words[k]: v for k, v in together.items()}, {words[k]: v for k, v in rates.items()}
    )
    return Line(judge(worst, AT_ONCE_FLOOR), what, measured, expected, judged)


def _at_once(what: str, together: dict, alone: dict) -> tuple[tuple[str, float, float], ...]:
    """Each direction's GB/s at once, against AT_ONCE_FLOOR of its rate alone."""
    return tuple((f"{what}: {key}", together[key], AT_ONCE_FLOOR * alone[key]) for key in together)


# -- references -------------------------------------------------------------------------------

# memprof/references/*.json: a `check` Result recorded on a known-good machine, per GPU model.
# Tests point this at a folder of their own.
REFERENCE_FOLDER: Path | None = None


@functools.cache
def _references(folder: Path | None) -> tuple[tuple[tuple[str, Result], ...], tuple[str, ...]]:
    """Every reference shipped (name, Result), and one line per file that could not be read."""
    from importlib import resources

    from memprof.errors import MemprofError
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
    notes.append(
        f"Reference: memprof/references/{file}, a check of {reference.device.name} recorded "
        f"{reference.created_at} on {reference.host}; a figure under {MARGIN:.0%} of its "
        "figure (at the same size) is a WARN."
    )
    return reference, notes


def verdict_table(title: str, found: list[Line], notes: list[str]) -> Table:
    table = Table(title, ["Verdict", "Check", "Measured", "Expected"], notes=notes)
    for line in found:
        table.add_row(line.verdict, line.what, line.measured, line.expected)
    return table


def failures(found: list[Line], where: str) -> list[str]:
    return [f"{where}: {line.what}: {line.measured}" for line in found if line.verdict == "FAIL"]


def tally(found: list[Line], where: str) -> str:
    counts = {
        verdict: sum(line.verdict == verdict for line in found) for verdict in get_args(Verdict)
    }
    words = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    return f"memprof check, {where}: {words}."


def summarize(result: Result) -> Summary:
    reference, reference_notes = reference_for(result)
    found = lines(result, reference)
    device = result.device
    where = f"GPU {device.index} ({device.name})" if device else "the GPU"
    notes = [
        f"Copies of {format_bytes(base.array_bytes(result.parameters))} from pinned memory and "
        f"of {format_bytes(base.FLOAT32_BYTES << result.parameters.device_power)} in device "
        "memory, back to back, "
        f"batches of about {BATCH_TARGET_MS:g} ms between one event pair behind a GPU-side "
        f"gate, median of {result.parameters.repeat}; GB/s = 10^9 bytes/s; (n%) = share of "
        "the ceiling (docs/ceilings.md).",
        f"PASS at or above the expectation; WARN below it (or under {MARGIN:.0%} of the "
        f"reference's figure); FAIL under {MARGIN:.0%} of it. Clocks and processes: NVML, "
        "during the run.",
        *reference_notes,
    ]
    table = verdict_table(f"Health of {where}", found, notes)
    return Summary(
        tables=[table],
        conclusions=[tally(found, where)],
        show_profile=False,
        failed=failures(found, where),
    )


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
    help = "Health check of every pair of GPUs: peer copies against their NVLink or PCIe link."
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
        from memprof.core.driver import can_access_peer

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
        step = ctx.steps(3 * len(both))
        for a, b in both:
            for source, destination in ((a, b), (b, a)):
                step(f"GPU {source} → GPU {destination}")
                buffers.poison(destination)
                _batches(ctx, buffers.lane(source, destination, "peer"))
                ctx.check(buffers.verify(source, destination, "one direction"))
            step(f"GPU {a} ↔ GPU {b}")
            buffers.poison(a, b)
            _batches(ctx, buffers.lane(a, b, "peer_at_once"), buffers.lane(b, a, "peer_at_once"))
            ctx.check(buffers.verify(a, b, "both at once"))
            ctx.check(buffers.verify(b, a, "both at once"))
        buffers.free()
        return CheckPairsExtra(
            devices=[DeviceRecord.of(ctx.facts[index]) for index in indices],
            peer_access=access,
        )

    def summarize(self, result: Result) -> Summary:
        return summarize_pairs(result)

    def derived(self, result: Result) -> dict:
        return {"bytes_per_copy": base.array_bytes(result.parameters)}

    def check_consistency(self, result: Result) -> None:
        devices = base.run_devices(result)
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
        from memprof.core.driver import memcpy_peer_async
        from memprof.core.measure import Lane

        session, source, _ = self.held[a]
        peer_session, _, target = self.held[b]
        arguments = (
            target.device_pointer,
            peer_session.context.handle,
            source.device_pointer,
            session.context.handle,
            self.nbytes,
        )
        action = lambda stream: memcpy_peer_async(*arguments, stream.handle)  # noqa: E731
        return Lane(session.profiler, action, NAMES["peer"], operation, "peer", self.nbytes, (a, b))

    def poison(self, *targets: int) -> None:
        from memprof.experiments.common import POISON_BYTE

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


def peer_figures(result: Result, operation: str) -> dict[tuple[int, int], float]:
    measure = PEER if operation == PEER.operation else PEER_AT_ONCE
    return {
        m.gpus: figures.figure(result, m, measure).gb_per_s
        for m in result.measurements
        if m.group == "gpu" and m.operation == operation and len(m.gpus) == 2
    }


def pair_lines(result: Result) -> list[Line]:
    indices = [device.index for device in result.extra.devices]
    alone, together = peer_figures(result, "peer"), peer_figures(result, "peer_at_once")
    found = []
    for a, b in itertools.combinations(indices, 2):
        reachable = all(
            result.extra.peer_access[indices.index(x)][indices.index(y)]
            for x, y in ((a, b), (b, a))
        )
        if not reachable:
            found.append(
                Line("WARN", f"GPU {a} ↔ GPU {b} peer access", "no (cuDeviceCanAccessPeer)", "yes")
            )
            continue
        for x, y in ((a, b), (b, a)):
            found.append(
                _throughput_line(
                    f"GPU {x} → GPU {y}",
                    alone.get((x, y)),
                    peer_ceiling(result, x, y),
                    PEER_FLOOR,
                    None,
                )
            )
        if all(key in alone and key in together for key in ((a, b), (b, a))):
            keys = ((a, b), (b, a))
            shares = [together[key] / alone[key] for key in keys]
            measured = (
                f"{format_gb_per_s(together[a, b])} + {format_gb_per_s(together[b, a])} GB/s "
                f"({shares[0]:.0%}, {shares[1]:.0%})"
            )
            found.append(
                Line(
                    judge(min(shares), AT_ONCE_FLOOR),
                    f"GPU {a} ↔ GPU {b} both at once",
                    measured,
                    f"each >= {AT_ONCE_FLOOR:.0%} of its rate alone",
                    _at_once(
                        f"GPU {a} ↔ GPU {b} both at once",
                        {f"GPU {x} → GPU {y}": together[x, y] for x, y in keys},
                        {f"GPU {x} → GPU {y}": alone[x, y] for x, y in keys},
                    ),
                )
            )
        else:
            found.append(
                Line("FAIL", f"GPU {a} ↔ GPU {b} both at once", "not measured", "a figure")
            )
    return found


def summarize_pairs(result: Result) -> Summary:
    found = pair_lines(result)
    notes = [
        f"Copies of {format_bytes(base.array_bytes(result.parameters))} with "
        "cuMemcpyPeerAsync, peer access on, back to back, median of "
        f"{result.parameters.repeat} batches; (n%) = share of the link's ceiling: the "
        "NVLinks from one GPU that reach the other (NVML's raw "
        "rate per direction), or the slower PCIe link where NVML says there is no NVLink.",
        f"PASS at or above the expectation; WARN below it; FAIL under {MARGIN:.0%} of it.",
    ]
    table = verdict_table("Health of every pair of GPUs", found, notes)
    return Summary(
        tables=[table],
        conclusions=[tally(found, "every pair of GPUs")],
        show_profile=False,
        failed=failures(found, "pairs"),
    )
