"""`memprof uva`: seed 000's unified virtual addressing, the host pointer passed to a kernel as is.

Under UVA mapped memory has one address for host and device, so a kernel can take the pointer
cuMemHostAlloc returned; timed against the driver's device pointer and device memory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from memprof.errors import EnvironmentProblem
from memprof.experiments import base
from memprof.experiments.common import SumArrays, gpu_timing, size_label
from memprof.model.ceilings import detail_of, hbm_ceiling, pcie_ceiling
from memprof.model.figures import Derived, Figure, figure
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Result
from memprof.model.schema import MAX_COUNT, Range
from memprof.model.summary import Column, Summary, Table, table

PATHS = {
    "uva": "mapped memory, host pointer (UVA)",
    "mapped": "mapped memory, device pointer (zero-copy)",
    "device": "device memory after explicit copies",
}
UvaParams = base.OneSize  # uva's: one size of arrays


Address = Annotated[int, Range(1, MAX_COUNT)]  # an allocated buffer's: never null


@dataclass(frozen=True)
class Addresses:
    """One buffer's two addresses, which UVA makes equal."""

    host: Address
    device: Address


@dataclass(frozen=True)
class Pointers:
    a: Addresses
    b: Addresses


@dataclass(frozen=True)
class UvaExtra:
    pointers: Pointers


KERNEL = dataclasses.replace(
    base.SUM_ARRAYS,
    what="sumArrays reading a and b through each path",
    kinds=tuple(PATHS),
    bound={"uva": "link", "mapped": "link", "device": "hbm"},
)


class Uva(base.Experiment):
    name = "uva"
    Params = UvaParams
    Extra = UvaExtra
    measures = (KERNEL, *base.CORE_RECORDS)

    def run(self, ctx: base.RunContext) -> UvaExtra:
        from memprof.core import memory

        session, params = ctx.session, ctx.params
        if not session.attribute("UNIFIED_ADDRESSING"):
            raise EnvironmentProblem(
                "this GPU and driver have no unified virtual addressing (unifiedAddressing = 0): "
                "a host pointer means nothing to a kernel here; `memprof zerocopy` asks the "
                "driver for the device pointer instead"
            )
        elements = 1 << params.power
        nbytes = elements * base.FLOAT32_BYTES
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=5 * nbytes)
        sums = SumArrays(session, elements)
        a, b = (memory.allocate(session, "mapped", elements) for _ in range(2))
        a.array[:], b.array[:] = sums.a, sums.b
        d_a, d_b, d_res = (memory.allocate(session, "device", elements) for _ in range(3))
        memory.copy(session, d_a, a)
        memory.copy(session, d_b, b)
        pointers = {
            "uva": (a.array.ctypes.data, b.array.ctypes.data),
            "mapped": (a.device_pointer, b.device_pointer),
            "device": (d_a.device_pointer, d_b.device_pointer),
        }
        for done, (path, (a_pointer, b_pointer)) in enumerate(pointers.items()):
            ctx.progress(f"{PATHS[path]}, {format_bytes(nbytes)}", done, len(pointers))
            launch = partial(sums.launch, a_pointer, b_pointer, d_res, path)
            ctx.measure.repeat(launch, params.warmup, params.repeat)
            ctx.check(sums.verify(d_res, f"sumArrays {size_label(params.power)}, {PATHS[path]}"))
        for buffer in (a, b, d_a, d_b, d_res):
            buffer.free()
        ctx.progress("done", len(pointers), len(pointers))
        a_addresses, b_addresses = map(Addresses, pointers["uva"], pointers["mapped"])
        return UvaExtra(Pointers(a_addresses, b_addresses))

    def derived(self, result: Result) -> dict:
        return {"bytes_per_array": base.array_bytes(result.parameters)}


def summarize(result: Result) -> Summary:
    kernels = {path: figure(result, base.find(result, KERNEL, path), KERNEL) for path in PATHS}
    medians = {path: kernel.median_ms for path, kernel in kernels.items()}
    pointers, all_equal = _addresses(result)
    same = abs(medians["uva"] / medians["mapped"] - 1)
    conclusion = (
        (
            "The driver reported the host addresses as the device addresses (UVA), so "
            if all_equal
            else "The device addresses differ from the host ones, yet under UVA "
        )
        + f"passing the host pointer ran the kernel in {format_ms(medians['uva'])} against "
        f"{format_ms(medians['mapped'])} with the device pointer ({same:.0%} apart): the same "
        f"zero-copy reads over PCIe, {medians['uva'] / medians['device']:.1f}x the time of device "
        "memory. UVA removes the pointer bookkeeping, not the bus."
    )
    return Summary(tables=[pointers, _kernels(result, kernels)], conclusions=[conclusion])


ADDRESSES = (
    Column("Buffer", "buffer"),
    Column("Host pointer (cuMemHostAlloc)", "host"),
    Column("Device pointer (cuMemHostGetDevicePointer)", "device"),
    Column("Equal", "equal"),
)


def _addresses(result: Result) -> tuple[Table, bool]:
    """Each mapped buffer's host and device pointers, and whether every pair is equal."""
    buffers = {"a": result.extra.pointers.a, "b": result.extra.pointers.b}
    equal = {name: addresses.host == addresses.device for name, addresses in buffers.items()}
    rows = [
        {"buffer": name, "host": f"0x{addresses.host:x}", "device": f"0x{addresses.device:x}",
         "equal": "yes" if equal[name] else "no"}
        for name, addresses in buffers.items()
    ]  # fmt: skip
    notes = ["Equal addresses are what UVA promises: the host pointer works in kernels as is."]
    return table("Addresses of the mapped buffers", ADDRESSES, rows, notes), all(equal.values())


KERNELS = (
    Column("Kernel reads a and b from", "path"),
    Column("Median", "kernel", "median_ms"),
    Column("Min", "kernel", "min_ms"),
    Column("Read (GB/s)", "kernel", "gb_per_s"),
    Column("vs device memory", "against", "ratio"),
    Column("Of ceiling", "kernel", "share"),
)


def _kernels(result: Result, found: dict[str, Figure]) -> Table:
    """sumArrays through each path: times, GB/s read, against device memory and its ceiling."""
    nbytes = base.array_bytes(result.parameters)
    link, hbm = pcie_ceiling(result), hbm_ceiling(result.device)
    rows = [
        {"path": label, "kernel": found[path],
         "against": Derived(f"{path} vs device memory", (found[path], found["device"]), "ratio")}
        for path, label in PATHS.items()
    ]  # fmt: skip
    notes = [
        f"{gpu_timing(result)}; read = the two input arrays' bytes over the time.",
        f"Of ceiling: mapped memory against the link, "
        f"{detail_of(link, 'not recorded in this file')}; device memory against "
        f"{detail_of(hbm, 'HBM')}.",
    ]
    return table(f"sumArrays over {format_bytes(nbytes)} per array", KERNELS, rows, notes)
