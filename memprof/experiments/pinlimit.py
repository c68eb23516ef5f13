"""`memprof pinlimit`: how much can be pinned here, what pinning costs as it grows, and what it
takes from the host (seed 004: "pinned memory is a scarce resource").

The limits are read first, without a GPU (memprof.core.hostlimits); the climb pins --step GiB
at a time up to the cap, half with cuMemHostAlloc and half with cuMemHostRegister, each call
timed on the host clock, stopping before the host's margin or at a failed call (kept in the
Result). Host copies are timed before, at the top and after. docs/pinlimit.md says more.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from memprof.core.hostlimits import GIB, HostLimits, Plan, check_cap, margin_bytes, room_for_step
from memprof.errors import EnvironmentProblem, MemprofError, OutOfMemory
from memprof.experiments import base
from memprof.model.device import DeviceFact
from memprof.model.figures import Derived, Figure, figure, figure_finder
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.params import Range, param
from memprof.model.results import Result
from memprof.model.schema import ByteCount, SchemaError
from memprof.model.statistics import NOISE_SIGMAS, median_noise
from memprof.model.summary import Column, Summary, Table, table

# A copy held to be slower beyond this: within it, the medians of host work and pageable
# copies move between runs of the same code (memprof diff's notes).
SLOWER_FROM = 0.05
REGISTER_FLAGS_WORDS = "DEVICEMAP | PORTABLE"


@dataclass(frozen=True)
class PinlimitParams:
    cap: Annotated[int, Range(1, 1 << 20)] | None = param(
        None,
        "GiB to pin at most (default: a quarter of MemAvailable, at most 32 GiB, never "
        "within the host's margin; a larger cap is refused before anything is allocated).",
        flags=("--cap",),
    )
    step: Annotated[int, Range(1, 1024)] = param(
        1, "GiB pinned per step, half allocated and half registered.", flags=("--step",)
    )
    copy_power: base.Power = base.power_param(
        27, "The host copies' buffer: 2^N float32 elements, larger than the caches"
    )
    repeat: Annotated[int, Range(1, 1000)] = param(
        5, "Timed repetitions of each host copy (1 to 1000).", flags=("--repeat", "-r")
    )


@dataclass(frozen=True)
class Failure:
    """The call that failed, the size it asked for, and CUDA's words."""

    call: Literal["cuMemHostAlloc", "cuMemHostRegister"]
    bytes: ByteCount
    error: str


@dataclass(frozen=True)
class PinlimitExtra:
    limits: HostLimits  # read before anything was allocated
    cap_bytes: ByteCount  # the plan's (its step: parameters.step; its margin: margin_bytes)
    held_bytes: list[ByteCount]  # pinned after each whole step
    available_bytes: list[ByteCount]  # MemAvailable after each whole step
    available_idle_bytes: ByteCount  # MemAvailable when the copies ran with nothing pinned
    stopped: Literal["cap", "margin", "failed"]  # margin: one more step would go below it
    failure: Failure | None = None


def _climb_measure(group, operation: str, what: str, kinds: tuple[str, ...]) -> base.Measure:
    """A call of the climb, once per step: none where the first step failed."""
    return base.Measure(
        group, operation, what, "host clock", required=False, kinds=kinds, per_repeat=False
    )


ALLOC = _climb_measure("api", "alloc", "cuMemHostAlloc of half a step", ("pinned",))
TOUCH = _climb_measure(
    "host", "touch", "a byte written in every page of half a step", ("pinned", "registered")
)
REGISTER = _climb_measure("api", "register", "cuMemHostRegister of half a step", ("registered",))
FREE = _climb_measure("api", "free", "cuMemFreeHost of half a step", ("pinned",))
UNREGISTER = _climb_measure("host", "free", "cuMemHostUnregister of half a step", ("registered",))
WHOLE = _climb_measure(
    "api", "register_whole", "cuMemHostRegister of every half step at once", ("registered",)
)
UNREGISTER_WHOLE = _climb_measure(
    "api", "unregister_whole", "cuMemHostUnregister of it", ("registered",)
)
# The host's copies before the climb, with everything held, and once it is freed again: a
# slowdown is pinning's only where the held copies are slower than both (on the H200, an 8 GiB
# run's copies were 32% slower held than before; a run's later copies can be slower anyway).
PHASES = {"idle": "nothing pinned", "held": "everything pinned", "after": "everything freed"}
COPIED = {"arrays": 1, "size": "copy_power", "kinds": ("pageable",), "shows": "latency"}
HOST_COPY = {
    phase: base.Measure(
        "host",
        f"copy_{phase}",
        f"numpy copyto between two pageable buffers, {words}",
        "host clock",
        **COPIED,
    )
    for phase, words in PHASES.items()
}
H2D = {  # timed as the call took: the driver's staging is in it
    phase: base.Measure(
        "gpu",
        f"h2d_{phase}",
        f"one pageable copy host → device, {words}",
        "one operation",
        call=f"h2d_{phase}",
        **COPIED,
    )
    for phase, words in PHASES.items()
}
H2D_CALLS = tuple(  # the host in each HtoD copy call: base.COPY_CALLS', sized as the copies
    dataclasses.replace(base.COPY_CALLS[0], operation=f"h2d_{phase}", size="copy_power")
    for phase in PHASES
)
CLIMB = (ALLOC, TOUCH, REGISTER, FREE, UNREGISTER)


class Pinlimit(base.Experiment):
    name = "pinlimit"
    description = (
        "The default cap is a quarter of MemAvailable, at most 32 GiB; --cap pins more, never "
        "within the host's margin (a tenth of MemTotal, at least 4 GiB): a cap beyond it is "
        "refused (exit 4) before anything is allocated."
    )
    Params = PinlimitParams
    Extra = PinlimitExtra

    def read_inputs(self, params: PinlimitParams) -> None:
        """No file: a --cap below one --step is refused here, before the GPU is asked for."""
        check_cap(params.cap, params.step)

    measures = (
        *CLIMB, WHOLE, UNREGISTER_WHOLE, *HOST_COPY.values(), *H2D.values(), *H2D_CALLS,
    )  # fmt: skip

    def run(self, ctx: base.RunContext) -> PinlimitExtra:
        from memprof.core import hostlimits, memory

        params = ctx.params
        limits = hostlimits.read_limits()
        plan = hostlimits.plan(limits, params.cap, params.step, workload_bytes(params))
        memory.MEMORY_KINDS["registered"].check_supported(ctx.session)  # DEVICEMAP's flag
        return climb(ctx, limits, plan, hostlimits.mem_available)

    def check_consistency(self, result: Result) -> None:
        check(result)


def climb(
    ctx: base.RunContext, limits: HostLimits, plan: Plan, available: Callable[[], int]
) -> PinlimitExtra:
    """Host copies, the climb, copies held, all freed (timed) and registered again in one
    call, copies again. available(): MemAvailable now. Ctrl-C frees every buffer (session's)."""
    import numpy as np

    from memprof.core import memory

    session, profiler = ctx.session, ctx.measure
    half = plan.step_bytes // 2
    total, done = plan.steps + 4, 0
    copies = _HostCopies(ctx, 1 << ctx.params.copy_power)
    available_idle = available()
    ctx.progress(copies.words("nothing pinned"), done, total)
    copies.measure("idle")
    # One numpy buffer for the registered halves, each half's pages untouched until its step
    raw = np.empty(plan.steps * half + memory.PAGE_BYTES, np.uint8)
    offset = -raw.ctypes.data % memory.PAGE_BYTES
    numpy_memory = raw[offset : offset + plan.steps * half]
    pinned, registered, held, availables = [], [], [], []
    stopped, failure = "cap", None
    with profiler.timed():
        for index in range(plan.steps):
            if not room_for_step(available(), plan.step_bytes, plan.margin_bytes):
                stopped = "margin"
                break
            done += 1
            ctx.progress(f"pinning {format_bytes((index + 1) * plan.step_bytes)}", done, total)
            try:
                buffer = memory.allocate(session, "pinned", half, "uint8")
            except (OutOfMemory, session.cuda.Error) as error:
                failure = Failure("cuMemHostAlloc", half, _cuda_words(error))
                break
            pinned.append(buffer)
            with profiler.host_clock("host", "first touch", "touch", "pinned", half):
                buffer.array[:: memory.PAGE_BYTES] = 1
            chunk = numpy_memory[index * half : (index + 1) * half]
            with profiler.host_clock("host", "first touch", "touch", "registered", half):
                chunk[:: memory.PAGE_BYTES] = 1
            release = _Registration(chunk.ctypes.data)
            handle = session.own(release)  # owned before the call: a Ctrl-C as it returns
            try:
                with profiler.api("cuMemHostRegister", "register", "registered", half):
                    release.register(half)
            except MemprofError as error:
                session.disown(handle)
                if isinstance(error, EnvironmentProblem):
                    raise  # cuda-bindings or the call missing: no limit found
                failure = Failure("cuMemHostRegister", half, str(error))
                break
            registered.append(memory.adopt(session, "registered", chunk, None, release))
            session.disown(handle)  # the Buffer's now
            held.append((index + 1) * plan.step_bytes)
            availables.append(available())
    stopped = "failed" if failure is not None else stopped
    pinned_words = format_bytes(held[-1]) if held else "nothing"
    ctx.progress(copies.words(f"{pinned_words} pinned"), plan.steps + 1, total)
    copies.measure("held")  # its warm-ups unrecorded: outside timed()
    ctx.progress(f"freeing {format_bytes(held[-1] if held else 0)}", plan.steps + 2, total)
    with profiler.timed():
        for buffer in (*pinned, *registered):
            buffer.free()
        if len(registered) >= 2:
            _register_at_once(session, numpy_memory[: len(registered) * half])
    ctx.progress(copies.words("everything freed"), plan.steps + 3, total)
    copies.measure("after")
    copies.free()
    del raw, numpy_memory
    ctx.progress("done", total, total)
    return PinlimitExtra(limits, plan.cap_bytes, held, availables, available_idle, stopped, failure)


class _HostCopies:
    """A numpy copy between two pageable buffers and a pageable copy to the GPU, each
    checked against its source."""

    def __init__(self, ctx: base.RunContext, elements: int) -> None:
        import numpy as np

        from memprof.core import memory

        self.ctx, session = ctx, ctx.session
        self.source = memory.allocate(session, "pageable", elements)
        self.source.array[:] = np.arange(elements, dtype=np.float32)
        self.destination = memory.allocate(session, "pageable", elements)
        self.device = memory.allocate(session, "device", elements)

    def words(self, held: str) -> str:
        return f"{format_bytes(self.source.nbytes)} host copies, {held}"

    def measure(self, phase: str) -> None:
        import numpy as np

        from memprof.core import memory
        from memprof.core.verify import compare_arrays

        ctx, source, destination = self.ctx, self.source, self.destination
        profiler, repeat, words = ctx.measure, ctx.params.repeat, PHASES[phase]
        nbytes = source.nbytes

        def numpy_copy() -> None:
            with profiler.host_clock("host", "numpy copyto", f"copy_{phase}", "pageable", nbytes):
                np.copyto(destination.array, source.array)

        def to_gpu() -> None:
            memory.copy(ctx.session, self.device, source, operation=f"h2d_{phase}")

        destination.array[:] = 0
        profiler.repeat(numpy_copy, 1, repeat)
        ctx.check(compare_arrays(f"numpy copy, {words}", destination.array, source.array))
        profiler.repeat(to_gpu, 1, repeat)
        destination.array[:] = 0
        with profiler.paused():
            memory.copy(ctx.session, destination, self.device)
        ctx.check(compare_arrays(f"copied to the GPU, {words}", destination.array, source.array))

    def free(self) -> None:
        for buffer in (self.source, self.destination, self.device):
            buffer.free()


class _Registration:
    """cuMemHostRegister of one address, undone once however often release is called (the
    session may hold it twice for an instant)."""

    def __init__(self, address: int) -> None:
        self.address, self.registered = address, False

    def register(self, nbytes: int) -> None:
        from memprof.core import bindings

        self.registered = True  # before the call: a Ctrl-C as it returns still unregisters
        try:
            bindings.host_register(self.address, nbytes, bindings.HOST_REGISTER_MAPPED_PORTABLE)
        except MemprofError:
            self.registered = False
            raise

    def __call__(self) -> None:
        from memprof.core import bindings

        if self.registered:
            self.registered = False
            bindings.host_unregister(self.address)


def _register_at_once(session: Any, memory_to_pin: Any) -> None:
    """The halves registered one by one, registered again in one call, and unregistered."""
    profiler, nbytes = session.profiler, memory_to_pin.nbytes
    registration = _Registration(memory_to_pin.ctypes.data)
    handle = session.own(registration)  # until unregistered: a Ctrl-C meanwhile unregisters
    with profiler.api("cuMemHostRegister", "register_whole", "registered", nbytes):
        registration.register(nbytes)
    with profiler.api("cuMemHostUnregister", "unregister_whole", "registered", nbytes):
        registration()
    session.disown(handle)


def _cuda_words(error: BaseException) -> str:
    """CUDA's own words for a failed allocation (PyCUDA's, behind memprof's OutOfMemory)."""
    cause = error.__cause__ if isinstance(error, OutOfMemory) and error.__cause__ else error
    return str(cause) or type(cause).__name__


def workload_bytes(params: PinlimitParams) -> int:
    """The pageable buffers the host copies use (source and destination)."""
    return 2 * (base.FLOAT32_BYTES << params.copy_power)


# -- a saved file's agreements ------------------------------------------------------------------


def check(result: Result) -> None:
    """Steps, samples and sizes agree: a sample per whole step of each call (one more of those
    made before a failed registration), every step of parameters.step GiB, the cap whole
    steps; the limits as the kernel reports them."""
    extra, step = result.extra, result.parameters.step * GIB
    half = step // 2  # what each call of the climb pins
    steps = len(extra.held_bytes)
    limits = extra.limits
    soft, hard = limits.memlock_soft_bytes, limits.memlock_hard_bytes  # None: unlimited
    if hard is not None and (soft is None or soft > hard):
        raise SchemaError("extra.limits.memlock_soft_bytes", "is above the hard limit")
    if limits.mem_available_bytes > limits.mem_total_bytes:
        raise SchemaError("extra.limits.mem_available_bytes", "is above mem_total_bytes")
    if limits.cgroup_usage_bytes is not None and limits.cgroup_limit_bytes is None:
        raise SchemaError("extra.limits.cgroup_usage_bytes", "is given without a cgroup limit")
    if limits.cgroup_limit_bytes is not None and limits.cgroup_version is None:
        raise SchemaError("extra.limits.cgroup_version", "is null beside a cgroup limit")
    if extra.cap_bytes % step or extra.cap_bytes < step:
        raise SchemaError("extra.cap_bytes", "is not a whole number of parameters.step GiB")
    if [step * (i + 1) for i in range(steps)] != extra.held_bytes:
        raise SchemaError("extra.held_bytes", "does not grow by parameters.step GiB each step")
    total = extra.limits.mem_total_bytes
    if any(b > total for b in (*extra.available_bytes, extra.available_idle_bytes)):
        raise SchemaError("extra.available_bytes", "holds more than limits.mem_total_bytes")
    if len(extra.available_bytes) != steps:
        raise SchemaError("extra.available_bytes", f"holds not one value per step ({steps})")
    if steps and extra.held_bytes[-1] > extra.cap_bytes:
        raise SchemaError("extra.held_bytes", "goes beyond extra.cap_bytes")
    if (extra.stopped == "failed") != (extra.failure is not None):
        raise SchemaError("extra.failure", "is given where stopped is not 'failed', or missing")
    if extra.stopped == "cap" and steps != extra.cap_bytes // step:
        raise SchemaError("extra.stopped", "is 'cap', but the steps do not reach it")
    begun = steps + (extra.failure is not None and extra.failure.call == "cuMemHostRegister")
    counts = {
        (ALLOC, "pinned"): begun,
        (TOUCH, "pinned"): begun,
        (TOUCH, "registered"): begun,
        (FREE, "pinned"): begun,
        (REGISTER, "registered"): steps,
        (UNREGISTER, "registered"): steps,
    }
    for (measure, kind), count in counts.items():
        found = [m for m in base.find_all(result, measure) if m.kind == kind]
        held = sum(len(m.samples_ms) for m in found)
        if held != count or any(m.bytes != half for m in found):
            raise SchemaError(
                "measurements",
                f"hold {held} samples of {measure.operation} ({kind}), not {count} of half a "
                f"step ({half} bytes)",
            )
    for m in base.find_all(result, WHOLE) + base.find_all(result, UNREGISTER_WHOLE):
        if steps < 2 or m.bytes != steps * half or len(m.samples_ms) != 1:
            raise SchemaError("measurements", f"{m.operation} is not one call over every step")


# -- what a user reads ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Climb:
    """Per GiB costs of each whole step ("per_gib" figures: the table's cells, the CSV's rows)."""

    held_bytes: list[int]
    alloc: list[Derived]  # cuMemHostAlloc and the touch of its pages
    register: list[Derived]  # numpy's touch and cuMemHostRegister
    pinning_ms: float  # every whole step's calls and touches


CLIMB_WAYS = {  # each way of pinning half a step: its call and its touch, as the table heads it
    "HostAlloc+touch": ((ALLOC, "pinned"), (TOUCH, "pinned")),
    "touch+Register": ((TOUCH, "registered"), (REGISTER, "registered")),
}


def climb_of(result: Result) -> Climb | None:
    """The climb's costs per GiB of each whole step (None: not one step was made)."""
    held = result.extra.held_bytes
    if not held:
        return None
    of = figure_finder(result, Pinlimit.measures)
    ways = []
    for way, parts in CLIMB_WAYS.items():
        found = tuple(
            of(next(m for m in base.find_all(result, measure) if m.kind == kind))
            for measure, kind in parts
        )
        names = [f"{way}, step {step} ({format_bytes(n)} pinned)" for step, n in enumerate(held, 1)]
        ways.append([Derived(name, found, "per_gib", step=step) for step, name in enumerate(names)])
    pinning_ms = math.fsum(
        math.fsum(part.measurement.samples_ms[: len(held)])
        for part in ways[0][0].parts + ways[1][0].parts
    )
    return Climb(held, *ways, pinning_ms)


@dataclass(frozen=True)
class HostWork:
    """One host workload's figures before the climb, held and after, and what pinning did."""

    name: str
    idle: Figure
    held: Figure
    after: Figure

    @property
    def baseline(self) -> Figure:
        """The slower of before and after: a slowdown is pinning's only beyond both."""
        return max(self.idle, self.after, key=lambda f: f.per_operation_ms)

    @functools.cached_property
    def held_vs_both(self) -> Derived:
        """The held work's time over the baseline's (the table's "Held vs both", a CSV row)."""
        return Derived(f"{self.name}: held vs both", (self.held, self.baseline), "ratio")

    @property
    def slowdown(self) -> float:
        """How much longer the held work took than the baseline: 0.04 for 4% slower."""
        return self.held_vs_both.ratio - 1

    @property
    def noise(self) -> float:
        """The change the medians' noise explains, as memprof diff's (NOISE_SIGMAS errors)."""
        errors = (median_noise(f.measurement.samples_ms) for f in (self.baseline, self.held))
        return NOISE_SIGMAS * math.hypot(*errors)

    @property
    def slower(self) -> bool:
        return self.slowdown > max(SLOWER_FROM, self.noise)


def host_figures(result: Result) -> dict[str, HostWork]:
    """Each host workload before the climb, with everything held, and freed again."""
    measures = {"numpy copy": HOST_COPY, "pageable copy to the GPU": H2D}
    return {
        name: HostWork(
            name, *(figure(result, base.find(result, of[p], "pageable"), of[p]) for p in PHASES)
        )
        for name, of in measures.items()
    }


def verdict(result: Result) -> str:
    """The run in a sentence: what pinning cost, what it took from the host, where it ended."""
    extra = result.extra
    climb = climb_of(result)
    if climb is None:
        pinned = "nothing could be pinned"
    else:
        per_gib_ms = climb.pinning_ms / (climb.held_bytes[-1] / GIB)
        pinned = (
            f"pinning {format_bytes(climb.held_bytes[-1])} took "
            f"{climb.pinning_ms / 1000:.1f} s, {per_gib_ms / 1000:.2f} s per GiB"
        )
    works = host_figures(result)
    slower = [f"{name} {work.slowdown:.0%} slower" for name, work in works.items() if work.slower]
    if slower:
        host = "and left the host's " + " and ".join(slower)
    else:
        changes = ", ".join(f"{name} {work.slowdown:+.0%}" for name, work in works.items())
        host = (
            f"and left the host's pageable copies as fast (within {SLOWER_FROM:.0%} and their "
            f"noise: {changes})"
        )
    return f"{pinned[0].upper()}{pinned[1:]}, {host}. {ending(extra)}"


def ending(extra: PinlimitExtra) -> str:
    """Why the climb stopped where it did."""
    held = format_bytes(extra.held_bytes[-1]) if extra.held_bytes else "nothing"
    if extra.stopped == "cap":
        return f"It stopped at its cap of {format_bytes(extra.cap_bytes)}."
    if extra.stopped == "margin":
        return (
            f"It stopped at {held}, short of its cap of {format_bytes(extra.cap_bytes)}: "
            f"one more step would have left less than the host's margin of "
            f"{format_bytes(margin_bytes(extra.limits.mem_total_bytes))} available."
        )
    failure = extra.failure
    assert failure is not None
    return (
        f"With {held} pinned, {failure.call} of {format_bytes(failure.bytes)} failed: "
        f"{failure.error}."
    )


def _limit(name: str, value: int | None) -> DeviceFact | str:
    """A limit's size as a fact (its table cell and CSV row), or "unlimited"."""
    return "unlimited" if value is None else DeviceFact(name, bytes=value)


def _size(fact: DeviceFact) -> str:
    return format_bytes(fact.bytes)


LABELS = (
    Column("Limit", "limit"),
    Column("Value", "value", _size),  # words print as they are
    Column("What it bounds", "bounds"),
)


def limits_table(extra: PinlimitExtra) -> Table:
    limits = extra.limits
    binds = "binds mlock()" if limits.memlock_binds else "does not bind (root or CAP_IPC_LOCK)"
    who = "root" if limits.root else "not root"
    soft, hard = "RLIMIT_MEMLOCK soft", "RLIMIT_MEMLOCK hard"
    rows = [
        (soft, _limit(soft, limits.memlock_soft_bytes), binds),
        (hard, _limit(hard, limits.memlock_hard_bytes), "the soft limit"),
        ("Process", f"{who}, {'' if limits.cap_ipc_lock else 'no '}CAP_IPC_LOCK", "RLIMIT_MEMLOCK"),
    ]
    if limits.cgroup_version is None:
        rows.append(("cgroup memory", "none found", ""))
    else:
        used = "?" if limits.cgroup_usage_bytes is None else format_bytes(limits.cgroup_usage_bytes)
        limit = limits.cgroup_limit_bytes
        value = "no limit" if limit is None else f"{format_bytes(limit)}, {used} used"
        rows.append((f"cgroup v{limits.cgroup_version} memory", value, "both calls"))
    sizes = (
        ("MemTotal", limits.mem_total_bytes, "both calls"),
        ("MemAvailable", limits.mem_available_bytes, "both calls"),
        ("Host's margin", margin_bytes(limits.mem_total_bytes), "the cap"),
        ("Cap", extra.cap_bytes, "the climb"),
    )
    rows += [(name, DeviceFact(name, bytes=value), bounds) for name, value, bounds in sizes]
    notes = [
        "Both calls: cuMemHostAlloc and cuMemHostRegister. Pinned pages are this process's "
        "memory: the cgroup's limit and MemAvailable bound both."
    ]
    held = extra.held_bytes[-1] if extra.held_bytes else 0
    soft = limits.memlock_soft_bytes
    if soft is not None and held > soft:
        notes.append(
            f"This run pinned {format_bytes(held)}, above RLIMIT_MEMLOCK's "
            f"{format_bytes(soft)}: the driver did not charge its pinning to it."
        )
    named = [dict(zip(("limit", "value", "bounds"), row, strict=True)) for row in rows]
    return table("Limits on pinned memory", LABELS, named, notes)


CLIMB_COLUMNS = (
    Column("Pinned", "held"),
    Column("MemAvailable", "available", _size),
    *(Column(way, way, "median_ms") for way in CLIMB_WAYS),
)


def available_facts(extra: PinlimitExtra) -> list[DeviceFact]:
    """MemAvailable after each whole step: the climb table's cells and the CSV's rows."""
    return [
        DeviceFact(f"MemAvailable after step {step} ({format_bytes(held)} pinned)", bytes=free)
        for step, (held, free) in enumerate(
            zip(extra.held_bytes, extra.available_bytes, strict=True), start=1
        )
    ]


def climb_table(result: Result, climb: Climb, availables: list[DeviceFact]) -> Table:
    notes = [
        f"Each step pins {format_bytes(result.parameters.step * GIB)}: half with cuMemHostAlloc, "
        "then a byte written in every page; half by writing a byte in every page of a numpy "
        f"buffer and registering it (cuMemHostRegister, {REGISTER_FLAGS_WORDS}).",
        "Host clock (time.perf_counter_ns) around each call and each touch, per GiB; "
        "MemAvailable read after the step.",
    ]
    rows = [
        {"held": format_bytes(held), "available": available,
         **dict(zip(CLIMB_WAYS, ways, strict=True))}
        for held, available, *ways in zip(
            climb.held_bytes, availables, climb.alloc, climb.register, strict=True
        )
    ]  # fmt: skip
    return table("Pinning as it grows, per GiB", CLIMB_COLUMNS, rows, notes)


RELEASE = (
    Column("Call", "call"),
    Column("Calls", "figure", "count"),
    Column("Median", "figure", "median_ms"),
    Column("Per GiB", "per_gib", "median_ms"),
)


def release_table(result: Result) -> Table:
    """Each call's median and per GiB, and the halves registered again in one call."""
    calls = [  # each measure of one kind, which the loader holds its measurements to
        ("cuMemHostAlloc", ALLOC, ""),
        ("cuMemHostRegister", REGISTER, ""),
        ("cuMemFreeHost", FREE, ""),
        ("cuMemHostUnregister", UNREGISTER, ""),
        ("cuMemHostRegister", WHOLE, " at once"),
        ("cuMemHostUnregister", UNREGISTER_WHOLE, " at once"),
    ]
    of = figure_finder(result, Pinlimit.measures)
    rows = [
        {"call": f"{label}, {format_bytes(m.bytes)}{how}", "figure": of(m),
         "per_gib": Derived(f"{label}{how}, per GiB", (of(m),), "per_gib")}
        for label, measure, how in calls
        for m in base.find_all(result, measure)
    ]  # fmt: skip
    notes = ["Host clock around each call; medians."]
    if not base.find_all(result, WHOLE):
        notes.append("One call over every half step needs two steps or more: not made.")
    return table("Each call, and registering in one call", RELEASE, rows, notes)


def _gb_per_s(one: Figure | DeviceFact) -> str:
    """A copy's GB/s, or MemAvailable's size in the row beneath them."""
    return _size(one) if isinstance(one, DeviceFact) else f"{format_gb_per_s(one.gb_per_s)} GB/s"


def host_table(result: Result, availables: list[DeviceFact]) -> Table:
    extra = result.extra
    held = format_bytes(extra.held_bytes[-1]) if extra.held_bytes else "nothing"
    nbytes = base.FLOAT32_BYTES << result.parameters.copy_power
    columns = (
        Column("Work", "work"),
        Column("Nothing pinned", "idle", _gb_per_s),
        Column(f"{held} pinned", "held", _gb_per_s),
        Column("Freed again", "after", _gb_per_s),
        Column("Held vs both", "against", lambda against: f"{against.ratio - 1:+.1%}"),
    )
    rows: list[dict[str, Any]] = [
        {"work": name, "idle": work.idle, "held": work.held, "after": work.after,
         "against": work.held_vs_both}
        for name, work in host_figures(result).items()
    ]  # fmt: skip
    idle = DeviceFact("MemAvailable with nothing pinned", bytes=extra.available_idle_bytes)
    rows.append(  # MemAvailable before the climb and at its top: the climb table's last
        {"work": "MemAvailable", "idle": idle, "held": availables[-1] if availables else "-",
         "against": ""}
    )  # fmt: skip
    notes = [
        "GB/s = 10^9 bytes/s of each copy's median time "
        f"({base.repetitions(result)} of each): numpy copyto on the host clock; the "
        "pageable copy as its call took, entry to exit (the driver's staging included: "
        "CUPTI's record of its DMA alone leaves it out). Held vs both: the held copy's "
        "time against the slower of before and after; it is pinning's only where it is "
        f"slower than both, beyond {SLOWER_FROM:.0%} and the medians' noise.",
    ]
    title = f"What pinning takes from the host ({format_bytes(nbytes)} buffers)"
    return table(title, columns, rows, notes)


def summarize(result: Result) -> Summary:
    climb = climb_of(result)
    availables = available_facts(result.extra)
    tables = [limits_table(result.extra)]
    if climb is not None:
        tables.append(climb_table(result, climb, availables))
    tables += [release_table(result), host_table(result, availables)]
    return Summary(tables=tables, conclusions=[verdict(result)])
