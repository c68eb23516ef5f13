"""`memprof register`: pin an existing numpy array in place with cuMemHostRegister (seed 004).

Measured: registering and unregistering, the array's copies before (pageable) and after
(registered) against cuMemHostAlloc memory, and a kernel reading registered arrays (mapped).
"""

from __future__ import annotations

import dataclasses
from functools import partial

from memprof.experiments import base
from memprof.experiments.common import SumArrays, gpu_timing, measure_host_staging, size_label
from memprof.model.ceilings import detail_of, pcie_ceiling
from memprof.model.figures import Derived, figure, host_side
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.model.summary import Column, Summary, table

TRANSFER_KINDS = {
    "pageable": "the numpy array, pageable",
    "registered": "the same array, registered",
    "pinned": "cuMemHostAlloc memory",
}
RegisterParams = base.OneSize  # register's: one size of arrays

REGISTER, UNREGISTER = (
    base.Measure("api", operation, what, "host clock", arrays=1, kinds=("registered",))
    for operation, what in (
        ("register", "cuMemHostRegister of the array"),
        ("unregister", "cuMemHostUnregister"),
    )
)
KERNEL = dataclasses.replace(
    base.SUM_ARRAYS,
    what="sumArrays reading the registered arrays",
    kinds=("registered",),
    bound="link",
)
COPIES = {
    direction: dataclasses.replace(copy, kinds=tuple(TRANSFER_KINDS), shows="latency")
    for direction, copy in base.ONE_COPY.items()
}


class Register(base.Experiment):
    name = "register"
    Params = RegisterParams
    measures = (
        REGISTER, UNREGISTER, *COPIES.values(), KERNEL, *base.HOST_SIDE, *base.CORE_RECORDS,
    )  # fmt: skip

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        from memprof.core import memory
        from memprof.core.memory import page_aligned_empty

        session, params = ctx.session, ctx.params
        memory.MEMORY_KINDS["registered"].check_supported(session)
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=9 * nbytes)
        sums = SumArrays(session, elements)
        a_values = sums.a
        a_array, b_array = (page_aligned_empty(elements, "float32") for _ in range(2))
        a_array[:], b_array[:] = sums.a, sums.b
        step = ctx.steps(3)

        step(f"registered memory, {format_bytes(nbytes)}: registration cost")
        ctx.measure.repeat(
            lambda: _register_and_unregister(ctx, a_array), params.warmup, params.repeat
        )
        step(f"registered memory, {format_bytes(nbytes)}: transfers")
        d_a, d_res = (memory.allocate(session, "device", elements) for _ in range(2))
        pinned = memory.allocate(session, "pinned", elements)
        pinned.array[:] = a_values
        # The same array, first as it is, then registered; then cuMemHostAlloc memory.
        unregistered = memory.adopt(session, "pageable", a_array)
        _copies_both_ways(ctx, "pageable", unregistered, d_a, a_values)
        # the pageable copies' host side, in a scratch array of their size
        measure_host_staging(ctx.measure, page_aligned_empty(elements, "float32"))
        a_reg, b_reg = (_registered(session, array) for array in (a_array, b_array))
        _copies_both_ways(ctx, "registered", a_reg, d_a, a_values)
        _copies_both_ways(ctx, "pinned", pinned, d_a, a_values)

        step(f"registered memory, {format_bytes(nbytes)}: kernel through its mapping")
        pointers = (a_reg.device_pointer, b_reg.device_pointer)
        ctx.measure.repeat(
            lambda: sums.launch(*pointers, d_res, "registered"), params.warmup, params.repeat
        )
        ctx.check(sums.verify(d_res, f"sumArrays {size_label(params.power)}, registered"))
        for buffer in (a_reg, b_reg, pinned, d_a, d_res):
            buffer.free()
        step("done")
        return base.NoExtra()

    def derived(self, result: Result) -> dict:
        return {"bytes_per_array": base.array_bytes(result.parameters)}


def _register_and_unregister(ctx: base.RunContext, array) -> None:
    """cuMemHostRegister and cuMemHostUnregister of the whole array, each timed."""
    from memprof.core import bindings

    address, nbytes, profiler = array.ctypes.data, array.nbytes, ctx.measure
    with profiler.api("cuMemHostRegister", "register", "registered", nbytes):
        bindings.host_register(address, nbytes, bindings.HOST_REGISTER_MAPPED_PORTABLE)
    with profiler.api("cuMemHostUnregister", "unregister", "registered", nbytes):
        bindings.host_unregister(address)


def _registered(session, array):
    """The array page-locked in place and mapped, as a Buffer the session unregisters."""
    from memprof.core import bindings, memory

    bindings.host_register(array.ctypes.data, array.nbytes, bindings.HOST_REGISTER_MAPPED_PORTABLE)
    device_pointer = bindings.host_device_pointer(array.ctypes.data)
    release = lambda: bindings.host_unregister(array.ctypes.data)  # noqa: E731
    return memory.adopt(session, "registered", array, device_pointer, release)


def _copies_both_ways(ctx: base.RunContext, kind: str, buffer, device_buffer, values) -> None:
    """HtoD then DtoH copies of the whole buffer, what came back checked."""
    from memprof.core import memory
    from memprof.core.verify import compare_arrays

    for into, source in ((device_buffer, buffer), (buffer, device_buffer)):
        copy = partial(memory.copy, ctx.session, into, source)
        ctx.measure.repeat(copy, ctx.params.warmup, ctx.params.repeat)
    ctx.check(compare_arrays(f"copied back, {TRANSFER_KINDS[kind]}", buffer.array, values))


def summarize(result: Result) -> Summary:
    nbytes = base.array_bytes(result.parameters)
    register = base.find(result, REGISTER, "registered")
    unregister = base.find(result, UNREGISTER, "registered")
    copies = {
        (kind, direction): figure(result, base.find(result, measure, kind), measure)
        for kind in TRANSFER_KINDS
        for direction, measure in COPIES.items()
    }
    h2d = {kind: copies[kind, "h2d"] for kind in TRANSFER_KINDS}
    saved = h2d["pageable"].latency_ms - h2d["registered"].latency_ms
    cost = register.stats.median_ms + unregister.stats.median_ms
    if saved > 0:
        pays = f"registration pays for itself after {cost / saved:.1f} host → device copies"
    else:
        pays = "registration did not speed up copies here"
    conclusion = (
        f"Registering the array cost {format_ms(register.stats.median_ms)} (and "
        f"{format_ms(unregister.stats.median_ms)} to undo); it then copied at "
        f"{format_gb_per_s(h2d['registered'].gb_per_s)} GB/s, against "
        f"{format_gb_per_s(h2d['pageable'].gb_per_s)} pageable and "
        f"{format_gb_per_s(h2d['pinned'].gb_per_s)} for cuMemHostAlloc memory: "
        f"{pays}. Register buffers you did not allocate yourself and transfer repeatedly."
    )
    calls = [
        {"call": "cuMemHostRegister", "figure": register},
        {"call": "cuMemHostUnregister", "figure": unregister},
    ]
    costs_notes = ["Host clock around each driver call (flags DEVICEMAP | PORTABLE)."]
    pinning = f"Pinning an existing array of {format_bytes(nbytes)} in place"
    rows = [
        {"memory": label, "h2d": copies[kind, "h2d"], "d2h": copies[kind, "d2h"],
         "against": Derived(f"{kind} h2d vs pageable", (h2d["pageable"], h2d[kind]), "ratio")}
        for kind, label in TRANSFER_KINDS.items()
    ]  # fmt: skip
    sides = [host_side(result, nbytes, direction) for direction in base.DIRECTIONS]
    tables = [
        table(pinning, COSTS, calls, costs_notes),
        table("Transfers", TRANSFERS, rows, _transfer_notes(result)),
        table("Transfers against their ceiling", AGAINST_CEILINGS, rows,
              _ceiling_notes(pcie_ceiling(result), sides)),
    ]  # fmt: skip
    return Summary(tables=tables, conclusions=[conclusion])


COSTS = (
    Column("Call", "call"),
    Column("Median", "figure", "median_ms"),
    Column("Min", "figure", "min_ms"),
    Column("Max", "figure", "max_ms"),
    Column("Calls", "figure", "count"),
)
TRANSFERS = (
    Column("Memory", "memory"),
    Column("HtoD median", "h2d", "latency_ms"),
    Column("HtoD GB/s", "h2d", "gb_per_s"),
    Column("DtoH median", "d2h", "latency_ms"),
    Column("DtoH GB/s", "d2h", "gb_per_s"),
    Column("HtoD vs pageable", "against", "ratio"),
)
AGAINST_CEILINGS = (
    Column("Memory", "memory"),
    Column("HtoD", "h2d", "share"),
    Column("DtoH", "d2h", "share"),
)


def _transfer_notes(result: Result) -> list[str]:
    """How the copies were timed, and the kernel reading the registered arrays."""
    kernel = figure(result, base.find(result, KERNEL, "registered"), KERNEL)
    return [
        f"{gpu_timing(result)}, medians (pageable: the host clock around its call, the "
        "driver's staging included). GB/s = 10^9 bytes/s.",
        f"A kernel reading two registered arrays through DEVICEMAP took "
        f"{format_ms(kernel.median_ms)} ({format_gb_per_s(kernel.gb_per_s)} GB/s over PCIe"
        + (f", {kernel.share:.0%} of the link)." if kernel.share is not None else ")."),
    ]


def _ceiling_notes(link, sides: list) -> list[str]:
    """What each row is set against; sides: the host side of pageable copies per direction."""
    notes = [f"Registered and cuMemHostAlloc memory against the link: {detail_of(link)}."]
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
