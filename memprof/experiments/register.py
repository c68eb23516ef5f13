"""`memprof register`: pin an existing numpy array in place with cuMemHostRegister (seed 004).

cudaHostRegister turns memory you already have into pinned memory, without copying it.
Measured: what registering and unregistering cost, the array's HtoD and DtoH bandwidth
before (pageable) and after (registered) against cuMemHostAlloc memory, and a kernel
reading registered arrays through their mapped device pointers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from memprof.core import driver, memory
from memprof.core.devicefacts import collect
from memprof.core.kernels import load_kernel
from memprof.core.memory import page_aligned_empty
from memprof.core.session import GpuSession
from memprof.core.verify import compare_arrays
from memprof.experiments.common import (
    FLOAT32_BYTES,
    Progress,
    gpu_timing,
    input_arrays,
    launch_sum,
    no_progress,
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
from memprof.model.results import ByteCount, Result
from memprof.model.summary import Summary, Table

REGISTER_FLAGS = driver.HOST_REGISTER_DEVICEMAP | driver.HOST_REGISTER_PORTABLE
TRANSFER_KINDS = {
    "pageable": "the numpy array, pageable",
    "registered": "the same array, registered",
    "pinned": "cuMemHostAlloc memory",
}


@dataclass(frozen=True)
class RegisterParams:
    power: int = 22
    repeat: int = 10
    warmup: int = 2


# What a saved Result holds: `parameters` (every field) and `extra`, checked at load.
PARAMS = RegisterParams
EXTRA_FIELDS = {"bytes_per_array": ByteCount}


def run(session: GpuSession, params: RegisterParams, progress: Progress = no_progress) -> Result:
    memory.MEMORY_KINDS["registered"].check_supported(session)
    facts = collect(session)
    elements = 1 << params.power
    nbytes = elements * FLOAT32_BYTES
    memory.require_memory(session, device_bytes=2 * nbytes, host_bytes=8 * nbytes)
    profiler = session.profiler
    kernel = load_kernel(session, "sum_arrays.cu", "sumArraysGPU")
    a_values, b_values, expected = input_arrays(elements)
    a_array, b_array = (
        page_aligned_empty(elements, "float32"),
        page_aligned_empty(elements, "float32"),
    )
    a_array[:], b_array[:] = a_values, b_values
    address = a_array.ctypes.data

    progress("registration cost", 0, 3)

    def register_and_unregister() -> None:
        with profiler.api("cuMemHostRegister", "register", "registered", nbytes):
            driver.host_register(address, nbytes, REGISTER_FLAGS)
        with profiler.api("cuMemHostUnregister", "unregister", "registered", nbytes):
            driver.host_unregister(address)

    profiler.repeat(register_and_unregister, params.warmup, params.repeat)

    progress("transfers", 1, 3)
    d_a, d_res = (memory.allocate(session, "device", elements) for _ in range(2))
    pinned = memory.allocate(session, "pinned", elements)
    pinned.array[:] = a_values
    checks = []

    def measure_transfers(kind: str, buffer: memory.Buffer) -> None:
        profiler.repeat(lambda: memory.copy(session, d_a, buffer), params.warmup, params.repeat)
        profiler.repeat(lambda: memory.copy(session, buffer, d_a), params.warmup, params.repeat)
        checks.append(
            compare_arrays(f"copied back, {TRANSFER_KINDS[kind]}", buffer.array, a_values)
        )

    # The same array, first as it is, then registered; then cuMemHostAlloc memory.
    measure_transfers("pageable", memory.adopt(session, "pageable", a_array))
    registered = []
    for array in (a_array, b_array):
        driver.host_register(array.ctypes.data, nbytes, REGISTER_FLAGS)
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

    progress("kernel through the mapped registration", 2, 3)
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
    checks.append(
        verify_device_result(
            session, d_res, expected, f"sumArrays {size_label(params.power)}, registered"
        )
    )
    for buffer in (a_reg, b_reg, pinned, d_a, d_res):
        buffer.free()
    progress("done", 3, 3)
    return Result(
        command="register",
        parameters=asdict(params),
        device=facts,
        measurements=profiler.measurements(),
        checks=checks,
        extra={"bytes_per_array": nbytes},
    )


def summarize(result: Result) -> Summary:
    nbytes = result.extra["bytes_per_array"]
    register = result.find("register", "registered", "api").stats
    unregister = result.find("unregister", "registered", "api").stats
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
    h2d = {kind: result.find("h2d", kind, "gpu").stats.median_ms for kind in TRANSFER_KINDS}
    for kind, label in TRANSFER_KINDS.items():
        d2h = result.find("d2h", kind, "gpu").stats.median_ms
        transfers.add_row(
            label,
            format_ms(h2d[kind]),
            format_gb_per_s(bandwidth_gb_per_s(nbytes, h2d[kind])),
            format_ms(d2h),
            format_gb_per_s(bandwidth_gb_per_s(nbytes, d2h)),
            format_ratio(h2d["pageable"] / h2d[kind]),
        )
    kernel = result.find("kernel", "registered", "gpu").stats.median_ms
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
