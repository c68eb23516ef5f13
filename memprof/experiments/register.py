"""`memprof register`: pin an existing numpy array in place with cuMemHostRegister (seed 004).

cudaHostRegister turns memory you already have into pinned memory, without copying it.
Measured: what registering and unregistering cost, the array's HtoD and DtoH bandwidth
before (pageable) and after (registered) against cuMemHostAlloc memory, and a kernel
reading registered arrays through their mapped device pointers.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.experiments import consistency
from memprof.experiments.base import (
    CORE_RECORDS,
    FLOAT32_BYTES,
    HOST_SIDE,
    Experiment,
    Measure,
    OneSize,
    RunContext,
    find,
)
from memprof.experiments.common import (
    SumArrays,
    gpu_timing,
    host_side,
    measure_host_staging,
    pageable_ceiling,
    size_label,
)
from memprof.model.ceilings import cell, pcie_ceiling
from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_ratio,
)
from memprof.model.results import Result
from memprof.model.schema import ByteCount
from memprof.model.summary import Summary, Table

TRANSFER_KINDS = {
    "pageable": "the numpy array, pageable",
    "registered": "the same array, registered",
    "pinned": "cuMemHostAlloc memory",
}


@dataclass(frozen=True)
class RegisterParams(OneSize):
    """register's: one size of arrays."""


@dataclass(frozen=True)
class RegisterExtra:
    bytes_per_array: ByteCount


REGISTER = Measure("api", "register", "cuMemHostRegister of the array", "host clock")
UNREGISTER = Measure("api", "unregister", "cuMemHostUnregister", "host clock")
H2D = Measure("gpu", "h2d", "one copy host → device", "one operation")
D2H = Measure("gpu", "d2h", "one copy device → host", "one operation")
KERNEL = Measure("gpu", "kernel", "sumArrays reading the registered arrays", "one operation")


class Register(Experiment):
    name = "register"
    help = "Pin an existing numpy array in place (cuMemHostRegister): its cost and its bandwidth."
    Params = RegisterParams
    Extra = RegisterExtra
    measures = (
        REGISTER, UNREGISTER, H2D, D2H, KERNEL, *HOST_SIDE, *CORE_RECORDS,
    )  # fmt: skip

    def run(self, ctx: RunContext) -> RegisterExtra:
        from memprof.core import memory
        from memprof.core.memory import page_aligned_empty

        session, params = ctx.session, ctx.params
        memory.MEMORY_KINDS["registered"].check_supported(session)
        elements = 1 << params.power
        nbytes = elements * FLOAT32_BYTES
        memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=9 * nbytes)
        sums = SumArrays(session, elements)
        a_values = sums.a
        a_array, b_array = (page_aligned_empty(elements, "float32") for _ in range(2))
        a_array[:], b_array[:] = sums.a, sums.b
        step = ctx.steps(3)

        step("registration cost")
        ctx.measure.repeat(
            lambda: _register_and_unregister(ctx, a_array), params.warmup, params.repeat
        )
        step("transfers")
        d_a, d_res = (memory.allocate(session, "device", elements) for _ in range(2))
        pinned = memory.allocate(session, "pinned", elements)
        pinned.array[:] = a_values
        # The same array, first as it is, then registered; then cuMemHostAlloc memory.
        _transfers(ctx, "pageable", memory.adopt(session, "pageable", a_array), d_a, a_values)
        scratch = page_aligned_empty(elements, "float32")  # the pageable copies' host side
        measure_host_staging(ctx.measure, scratch)
        del scratch
        a_reg, b_reg = (_registered(session, array) for array in (a_array, b_array))
        _transfers(ctx, "registered", a_reg, d_a, a_values)
        _transfers(ctx, "pinned", pinned, d_a, a_values)

        step("kernel through the mapped registration")
        pointers = (a_reg.device_pointer, b_reg.device_pointer)
        ctx.measure.repeat(
            lambda: sums.launch(*pointers, d_res, "registered"), params.warmup, params.repeat
        )
        ctx.check(sums.verify(d_res, f"sumArrays {size_label(params.power)}, registered"))
        for buffer in (a_reg, b_reg, pinned, d_a, d_res):
            buffer.free()
        step("done")
        return RegisterExtra(bytes_per_array=nbytes)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        nbytes = consistency.array_bytes(result)
        moves = {**consistency.SUM_ARRAYS_MOVES, ("api", "register"): 1, ("api", "unregister"): 1}
        consistency.measured_bytes(result, moves, [nbytes])
        consistency.takes_time(result, [("gpu", "h2d"), ("gpu", "d2h"), ("gpu", "kernel")])


def _register_and_unregister(ctx: RunContext, array) -> None:
    """cuMemHostRegister and cuMemHostUnregister of the whole array, each timed."""
    from memprof.core import driver

    address, nbytes, profiler = array.ctypes.data, array.nbytes, ctx.measure
    with profiler.api("cuMemHostRegister", "register", "registered", nbytes):
        driver.host_register(address, nbytes, driver.HOST_REGISTER_MAPPED_PORTABLE)
    with profiler.api("cuMemHostUnregister", "unregister", "registered", nbytes):
        driver.host_unregister(address)


def _registered(session, array):
    """The array page-locked in place and mapped, as a Buffer the session unregisters."""
    from memprof.core import driver, memory

    driver.host_register(array.ctypes.data, array.nbytes, driver.HOST_REGISTER_MAPPED_PORTABLE)
    device_pointer = driver.host_device_pointer(array.ctypes.data)
    release = lambda: driver.host_unregister(array.ctypes.data)  # noqa: E731
    return memory.adopt(session, "registered", array, device_pointer, release)


def _transfers(ctx: RunContext, kind: str, buffer, device_buffer, values) -> None:
    """HtoD then DtoH copies of the whole buffer, what came back checked."""
    from memprof.core import memory
    from memprof.core.verify import compare_arrays

    session, params = ctx.session, ctx.params
    ctx.measure.repeat(
        lambda: memory.copy(session, device_buffer, buffer), params.warmup, params.repeat
    )
    ctx.measure.repeat(
        lambda: memory.copy(session, buffer, device_buffer), params.warmup, params.repeat
    )
    ctx.check(compare_arrays(f"copied back, {TRANSFER_KINDS[kind]}", buffer.array, values))


def summarize(result: Result) -> Summary:
    nbytes = result.extra.bytes_per_array
    register = find(result, REGISTER, "registered").stats
    unregister = find(result, UNREGISTER, "registered").stats
    costs = Table(
        f"Pinning an existing array of {format_bytes(nbytes)} in place",
        ["Call", "Median", "Min", "Max", "Calls"],
        notes=["Host clock around each driver call (flags DEVICEMAP | PORTABLE)."],
    )
    for name, stats in (("cuMemHostRegister", register), ("cuMemHostUnregister", unregister)):
        costs.add_row(
            name,
            format_ms(stats.median_ms),
            format_ms(stats.min_ms),
            format_ms(stats.max_ms),
            str(stats.count),
        )

    transfers = Table(
        "Transfers",
        ["Memory", "HtoD median", "HtoD GB/s", "DtoH median", "DtoH GB/s", "HtoD vs pageable"],
        notes=[f"{gpu_timing(result)}, medians. GB/s = 10^9 bytes/s."],
    )
    h2d = {kind: find(result, H2D, kind).stats.median_ms for kind in TRANSFER_KINDS}
    for kind, label in TRANSFER_KINDS.items():
        d2h = find(result, D2H, kind).stats.median_ms
        transfers.add_row(
            label,
            format_ms(h2d[kind]),
            format_gb_per_s(bandwidth_gb_per_s(nbytes, h2d[kind])),
            format_ms(d2h),
            format_gb_per_s(bandwidth_gb_per_s(nbytes, d2h)),
            format_ratio(h2d["pageable"] / h2d[kind]),
        )
    kernel = find(result, KERNEL, "registered").stats.median_ms
    kernel_gb_per_s = bandwidth_gb_per_s(2 * nbytes, kernel)
    link = pcie_ceiling(result)
    transfers.notes.append(
        f"A kernel reading two registered arrays through DEVICEMAP took {format_ms(kernel)} "
        f"({format_gb_per_s(kernel_gb_per_s)} GB/s over PCIe"
        + (f", {link.fraction(kernel_gb_per_s):.0%} of the link)." if link is not None else ").")
    )
    against = _against_ceilings(result)
    saved = h2d["pageable"] - h2d["registered"]
    cost = register.median_ms + unregister.median_ms
    if saved > 0:
        pays = f"registration pays for itself after {cost / saved:.1f} host → device copies"
    else:
        pays = "registration did not speed up copies here"
    conclusion = (
        f"Registering the array cost {format_ms(register.median_ms)} (and "
        f"{format_ms(unregister.median_ms)} to undo); it then copied at "
        f"{format_gb_per_s(bandwidth_gb_per_s(nbytes, h2d['registered']))} GB/s, against "
        f"{format_gb_per_s(bandwidth_gb_per_s(nbytes, h2d['pageable']))} pageable and "
        f"{format_gb_per_s(bandwidth_gb_per_s(nbytes, h2d['pinned']))} for cuMemHostAlloc memory: "
        f"{pays}. Register buffers you did not allocate yourself and transfer repeatedly."
    )
    return Summary(tables=[costs, transfers, against], conclusions=[conclusion])


def _against_ceilings(result: Result) -> Table:
    """Each kind's copies as a share of what bounds them (memprof.model.ceilings)."""
    nbytes = result.extra.bytes_per_array
    link = pcie_ceiling(result)
    against = Table(
        "Transfers against their ceiling",
        ["Memory", "HtoD", "DtoH"],
        notes=_ceiling_notes(link, [host_side(result, nbytes, d) for d in ("h2d", "d2h")]),
    )
    for kind, label in TRANSFER_KINDS.items():
        cells = []
        for direction, copy in (("h2d", H2D), ("d2h", D2H)):
            rate = bandwidth_gb_per_s(nbytes, find(result, copy, kind).stats.median_ms)
            pageable = kind == "pageable"
            cells.append(
                cell(pageable_ceiling(result, nbytes, direction) if pageable else link, rate)
            )
        against.add_row(label, *cells)
    return against


def _ceiling_notes(link, sides: list) -> list[str]:
    """What each row is set against; sides: the host side of pageable copies per direction."""
    notes = [
        "Registered and cuMemHostAlloc memory against the link: "
        + (link.detail if link is not None else "unknown (no link figures recorded)")
        + "."
    ]
    h2d, d2h = sides
    if h2d is None or d2h is None:
        notes.append(
            "The pageable array against the link only: the host side of pageable copies "
            "was not recorded (a file from an older memprof)."
        )
    elif not h2d.staged:
        notes.append(
            "The pageable array against the lower of the link and one host thread's memcpy "
            f"between two pageable buffers of its size, this run: "
            f"{format_gb_per_s(h2d.gb_per_s)} GB/s (a file from an older memprof: pageable "
            "copies can beat it, docs/ceilings.md)."
        )
    else:
        notes.append(
            "The pageable array against the lower of the link and its host side: one host "
            "thread staging it through a 256 KiB buffer, chunk by chunk, as the driver does, "
            f"this run: {format_gb_per_s(h2d.gb_per_s)} GB/s in, "
            f"{format_gb_per_s(d2h.gb_per_s)} GB/s out."
        )
    return notes
