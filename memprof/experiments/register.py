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
    COPY_CALLS,
    FLOAT32_BYTES,
    LAUNCH_CALL,
    MEMSET_CALL,
    POISON,
    Experiment,
    Measure,
    Power,
    Repeat,
    RunContext,
    Warmup,
    find,
    power_param,
    repeat_param,
    warmup_param,
)
from memprof.experiments.common import (
    gpu_timing,
    input_arrays,
    launch_sum,
    size_label,
    verify_device_result,
)
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
class RegisterParams:
    power: Power = power_param(22)
    repeat: Repeat = repeat_param(10)
    warmup: Warmup = warmup_param(2)


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
        REGISTER, UNREGISTER, H2D, D2H, KERNEL, POISON, LAUNCH_CALL, MEMSET_CALL, *COPY_CALLS
    )  # fmt: skip

    def run(self, ctx: RunContext) -> RegisterExtra:
        from memprof.core import driver, memory
        from memprof.core.kernels import load_kernel
        from memprof.core.memory import page_aligned_empty
        from memprof.core.verify import compare_arrays

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        flags = driver.HOST_REGISTER_DEVICEMAP | driver.HOST_REGISTER_PORTABLE
        memory.MEMORY_KINDS["registered"].check_supported(session)
        elements = 1 << params.power
        nbytes = elements * FLOAT32_BYTES
        memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=8 * nbytes)
        kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
        a_values, b_values, expected = input_arrays(elements)
        a_array, b_array = (
            page_aligned_empty(elements, "float32"),
            page_aligned_empty(elements, "float32"),
        )
        a_array[:], b_array[:] = a_values, b_values
        address = a_array.ctypes.data

        ctx.progress("registration cost", 0, 3)

        def register_and_unregister() -> None:
            with profiler.api("cuMemHostRegister", "register", "registered", nbytes):
                driver.host_register(address, nbytes, flags)
            with profiler.api("cuMemHostUnregister", "unregister", "registered", nbytes):
                driver.host_unregister(address)

        profiler.repeat(register_and_unregister, params.warmup, params.repeat)

        ctx.progress("transfers", 1, 3)
        d_a, d_res = (memory.allocate(session, "device", elements) for _ in range(2))
        pinned = memory.allocate(session, "pinned", elements)
        pinned.array[:] = a_values

        def measure_transfers(kind: str, buffer: memory.Buffer) -> None:
            profiler.repeat(lambda: memory.copy(session, d_a, buffer), params.warmup, params.repeat)
            profiler.repeat(lambda: memory.copy(session, buffer, d_a), params.warmup, params.repeat)
            ctx.check(
                compare_arrays(f"copied back, {TRANSFER_KINDS[kind]}", buffer.array, a_values)
            )

        # The same array, first as it is, then registered; then cuMemHostAlloc memory.
        measure_transfers("pageable", memory.adopt(session, "pageable", a_array))
        registered = []
        for array in (a_array, b_array):
            driver.host_register(array.ctypes.data, nbytes, flags)
            registered.append(
                memory.adopt(
                    session,
                    "registered",
                    array,
                    driver.host_device_pointer(array.ctypes.data),
                    lambda array=array: driver.host_unregister(array.ctypes.data),
                )
            )
        measure_transfers("registered", registered[0])
        measure_transfers("pinned", pinned)

        ctx.progress("kernel through the mapped registration", 2, 3)
        a_reg, b_reg = registered
        profiler.repeat(
            lambda: launch_sum(
                session,
                kernel,
                a_reg.device_pointer,
                b_reg.device_pointer,
                d_res,
                elements,
                "registered",
            ),
            params.warmup,
            params.repeat,
        )
        ctx.check(
            verify_device_result(
                session, d_res, expected, f"sumArrays {size_label(params.power)}, registered"
            )
        )
        for buffer in (a_reg, b_reg, pinned, d_a, d_res):
            buffer.free()
        ctx.progress("done", 3, 3)
        return RegisterExtra(bytes_per_array=nbytes)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        nbytes = consistency.array_bytes(result)
        moves = {**consistency.SUM_ARRAYS_MOVES, ("api", "register"): 1, ("api", "unregister"): 1}
        consistency.measured_bytes(result, moves, [nbytes])


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
    transfers.notes.append(
        f"A kernel reading two registered arrays through DEVICEMAP took {format_ms(kernel)} "
        f"({format_gb_per_s(bandwidth_gb_per_s(2 * nbytes, kernel))} GB/s over PCIe)."
    )
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
    return Summary(tables=[costs, transfers], conclusions=[conclusion])
