"""`memprof device`: device-memory bandwidth, the way STREAM and BabelStream measure it.

cuMemcpyDtoD and cuMemset, then the five STREAM kernels over three arrays a, b, c:
copy c = a, mul b = s*c, add c = a + b, triad a = b + s*c, dot sum(a*b). Bytes count
every array read or written once (2, 2, 3, 3, 2 arrays; a DtoD copy counts its read and
its write, a memset its write). Each kernel is first verified on random data against
numpy, then timed; the best time gives the bandwidth, as STREAM reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from memprof.experiments import base, consistency
from memprof.experiments.common import gpu_timing
from memprof.model.ceilings import hbm_ceiling
from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
)
from memprof.model.params import param
from memprof.model.results import Check, Measurement, Result
from memprof.model.schema import MAX_COUNT, ByteCount, Range
from memprof.model.summary import Summary, Table

SCALAR = 0.4  # BabelStream's scalar: keeps repeated runs from growing or vanishing
DTYPES = {"float32": "f32", "float64": "f64"}
# name: (what it computes, arrays it reads or writes)
STREAM_KERNELS = {
    "copy": ("c = a", 2),
    "mul": ("b = s*c", 2),
    "add": ("c = a + b", 3),
    "triad": ("a = b + s*c", 3),
    "dot": ("sum(a*b)", 2),
}
BLOCK_SIZE = 256
DOT_BLOCKS_PER_SM = 8


@dataclass(frozen=True)
class DeviceParams:
    power: base.Power = param(
        25,
        f"Size: 2^N elements of --dtype per array, N from {base.MIN_POWER} to {base.MAX_POWER}.",
        flags=("--power", "-p"),
    )
    dtype: Literal["float32", "float64"] = param("float64", "Element type of the arrays.")
    repeat: base.Repeat = base.repeat_param(20)
    warmup: base.Warmup = base.warmup_param(3)


@dataclass(frozen=True)
class Launch:
    """How the STREAM kernels were launched."""

    block_size: Annotated[int, Range(1, 1024)]  # threads per block: CUDA allows 1 to 1024
    elementwise_blocks: Annotated[int, Range(1, MAX_COUNT)]
    dot_blocks: Annotated[int, Range(1, MAX_COUNT)]
    bytes_per_thread_access: Annotated[int, Range(1, 128)]


@dataclass(frozen=True)
class DeviceExtra:
    bytes_per_array: ByteCount
    launch: Launch


D2D = base.Measure("gpu", "d2d", "cuMemcpyDtoD of one array", "one operation")
MEMSET = base.Measure("gpu", "memset", "cuMemset of one array", "one operation")
KERNEL = base.Measure("gpu", "kernel", "each STREAM kernel", "one operation")


class DeviceBandwidth(base.Experiment):
    name = "device"
    Params = DeviceParams
    Extra = DeviceExtra
    measures = (
        D2D,
        MEMSET,
        KERNEL,
        base.Measure("api", "d2d", "cuMemcpyDtoDAsync, host clock", "host clock", False),
        base.MEMSET_CALL,
        base.LAUNCH_CALL,
    )

    def run(self, ctx: base.RunContext) -> DeviceExtra:
        import numpy as np

        from memprof.core import memory

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        nbytes = np.dtype(params.dtype).itemsize << params.power
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=7 * nbytes)
        multiprocessors = ctx.facts[session.device_index].multiprocessors
        stream = _Stream(session, params, multiprocessors * DOT_BLOCKS_PER_SM)
        step = ctx.steps(3)

        step("verifying the kernels")
        for check in _verify(session, stream.launch, *stream.arrays):
            ctx.check(check)
        step("cuMemcpyDtoD and cuMemset")
        a, c = stream.a, stream.c
        profiler.repeat(lambda: memory.copy(session, c, a), params.warmup, params.repeat)
        profiler.repeat(lambda: memory.memset(session, c, 0), params.warmup, params.repeat)
        step("STREAM kernels")
        profiler.repeat(stream.round, params.warmup, params.repeat)
        ctx.check(stream.finite())
        stream.free()
        step("done")
        launch = Launch(BLOCK_SIZE, stream.elementwise_blocks, stream.dot_blocks, 16)
        return DeviceExtra(bytes_per_array=nbytes, launch=launch)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        params, launch, facts = result.parameters, result.extra.launch, result.device
        element_bytes = 4 if params.dtype == "float32" else 8
        nbytes = consistency.array_bytes(result, element_bytes=element_bytes)
        pack = max(1, launch.bytes_per_thread_access // element_bytes)
        blocks = max(1, -(-(1 << params.power) // pack) // launch.block_size)
        consistency.equal(
            "extra.launch.elementwise_blocks",
            launch.elementwise_blocks,
            blocks,
            "2^power elements in accesses of bytes_per_thread_access by block_size threads make",
        )
        consistency.equal(
            "extra.launch.dot_blocks",
            launch.dot_blocks,
            facts.multiprocessors * DOT_BLOCKS_PER_SM,
            f"{DOT_BLOCKS_PER_SM} blocks per multiprocessor of device.multiprocessors make",
        )
        for field in ("memory_clock_khz", "memory_bus_width_bits"):
            if not getattr(facts, field):
                consistency.refuse(
                    f"device.{field}", "is 0: the summary compares with the theoretical bandwidth"
                )
        consistency.measured_bytes(result, ARRAYS_MOVED, [nbytes])
        consistency.takes_time(result, [("gpu", "d2d"), ("gpu", "memset"), ("gpu", "kernel")])
        for name, (_, arrays) in STREAM_KERNELS.items():
            found = [
                (index, m)
                for index, m in enumerate(result.measurements)
                if m.group == "gpu" and m.name.startswith(f"stream_{name}_")
            ]
            if len(found) != 1:
                consistency.refuse(
                    "measurements",
                    f"has {len(found)} gpu kernels named stream_{name}_*: every device run "
                    "records each STREAM kernel once",
                )
            index, kernel = found[0]
            consistency.equal(
                f"measurements[{index}].bytes",
                kernel.bytes,
                arrays * nbytes,
                f"{name} reads and writes {arrays} arrays of extra.bytes_per_array",
            )


# A copy counts its read and its write (the summary doubles it); kernels: by their name.
ARRAYS_MOVED = {
    ("gpu", "d2d"): 1,
    ("api", "d2d"): 1,
    **consistency.MEMSET_MOVES,
    **consistency.NOTHING_MOVED,
}


class _Stream:
    """BabelStream's arrays a, b, c (and dot's partial sums) and its five kernels."""

    def __init__(self, session: Any, params: DeviceParams, dot_blocks: int) -> None:
        import numpy as np

        from memprof.core import memory
        from memprof.core.kernels import load_kernel

        self.session, self.dtype = session, np.dtype(params.dtype)
        self.elements, self.dot_blocks = 1 << params.power, dot_blocks
        self.nbytes = self.elements * self.dtype.itemsize
        suffix = DTYPES[params.dtype]
        self.kernels = {
            name: load_kernel(session, "stream.cu", f"stream_{name}_{suffix}")
            for name in STREAM_KERNELS
        }
        self.a, self.b, self.c = (
            memory.allocate(session, "device", self.elements, self.dtype) for _ in range(3)
        )
        self.partial = memory.allocate(session, "device", dot_blocks, self.dtype)
        self.scalar = self.dtype.type(SCALAR)
        pack_width = 16 // self.dtype.itemsize
        self.elementwise_blocks = max(1, -(-self.elements // pack_width) // BLOCK_SIZE)

    @property
    def arrays(self) -> tuple:
        """What _verify needs: the arrays, the partial sums, their size, type and scalar."""
        arrays = (self.a, self.b, self.c)
        return arrays, self.partial, self.elements, self.dtype, self.scalar

    def launch(self, name: str) -> None:
        a, b, c = (buffer.device_pointer for buffer in (self.a, self.b, self.c))
        arguments = {
            "copy": (a, c),
            "mul": (b, c, self.scalar),
            "add": (a, b, c),
            "triad": (a, b, c, self.scalar),
            "dot": (a, b, self.partial.device_pointer),
        }[name]
        self.kernels[name].launch(
            self.session,
            self.elements,
            *arguments,
            self.elements,
            kind="device",
            nbytes=STREAM_KERNELS[name][1] * self.nbytes,
            block_size=BLOCK_SIZE,
            blocks=self.dot_blocks if name == "dot" else self.elementwise_blocks,
        )

    def round(self) -> None:
        """Every STREAM kernel once, in BabelStream's order."""
        for name in STREAM_KERNELS:
            self.launch(name)

    def finite(self) -> Check:
        """After the timed runs, a still holds finite numbers (the scalar keeps it bounded)."""
        import numpy as np

        host = np.empty(self.elements, self.dtype)
        self.session.cuda.memcpy_dtoh(host, self.a.device_pointer)
        finite = bool(np.isfinite(host).all())
        detail = "all finite" if finite else "NaN or infinity in a"
        return Check("a after the timed runs", finite, self.elements, detail)

    def free(self) -> None:
        for buffer in (self.a, self.b, self.c, self.partial):
            buffer.free()


def _verify(session, launch, arrays, partial, elements, dtype, scalar) -> list[Check]:
    """One BabelStream round on random data, every result checked against numpy."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    cuda = session.cuda
    rng = np.random.default_rng(7)
    host = {name: rng.random(elements).astype(dtype) + dtype.type(0.5) for name in "abc"}
    for name, buffer in zip("abc", arrays, strict=True):
        cuda.memcpy_htod(buffer.device_pointer, host[name])

    def fetch(buffer) -> np.ndarray:
        out = np.full(elements, np.nan, dtype)
        cuda.memcpy_dtoh(out, buffer.device_pointer)
        return out

    a, b, c = arrays
    host_a, host_b, host_c = host["a"], host["b"], host["c"]
    # float32 a+b and s*c round identically on both sides; triad may fuse into one FMA.
    tolerance = 4 * np.finfo(dtype).eps
    checks = []
    launch("copy")
    host_c = host_a.copy()
    checks.append(compare_arrays("copy c = a", fetch(c), host_c))
    launch("mul")
    host_b = scalar * host_c
    checks.append(compare_arrays("mul b = s*c", fetch(b), host_b))
    launch("add")
    host_c = host_a + host_b
    checks.append(compare_arrays("add c = a + b", fetch(c), host_c))
    launch("triad")
    host_a = host_b + scalar * host_c
    checks.append(_close("triad a = b + s*c", fetch(a), host_a, tolerance))
    launch("dot")
    partial_sums = np.empty(partial.nbytes // dtype.itemsize, dtype)
    cuda.memcpy_dtoh(partial_sums, partial.device_pointer)
    gpu_dot = float(partial_sums.sum(dtype=np.float64))
    reference = float(np.dot(host_a.astype(np.float64), host_b.astype(np.float64)))
    relative = abs(gpu_dot - reference) / abs(reference)
    limit = 1e-4 if dtype == np.float32 else 1e-11
    checks.append(
        Check(
            "dot sum(a*b)",
            bool(relative <= limit),
            elements,
            f"relative error {relative:.2e} (limit {limit:.0e}) against numpy in float64",
        )
    )
    session.profiler.discard_pending()
    return checks


def _close(name: str, actual, expected, tolerance: float) -> Check:
    import numpy as np

    if not np.isfinite(actual).all():
        return Check(name, False, actual.size, "NaN or infinity in the result")
    error = float(np.max(np.abs(actual - expected) / np.abs(expected)))
    passed = bool(error <= tolerance)
    return Check(
        name, passed, actual.size, f"largest relative error {error:.1e} (limit {tolerance:.1e})"
    )


def _operations(result: Result) -> list[tuple[str, str, int, Measurement]]:
    """(label, how bytes count, bytes per call, measurement) for every timed operation."""
    d2d = base.find(result, D2D, "device")
    memset = base.find(result, MEMSET, "device")
    rows = [
        ("cuMemcpyDtoD", "read + write", 2 * d2d.bytes, d2d),
        ("cuMemset", "write", memset.bytes, memset),
    ]
    for name, (formula, arrays) in STREAM_KERNELS.items():
        kernel = next(
            m
            for m in result.measurements
            if m.group == "gpu" and m.name.startswith(f"stream_{name}_")
        )
        rows.append((f"{name}  {formula}", f"{arrays} arrays", kernel.bytes, kernel))
    return rows


def summarize(result: Result) -> Summary:
    nbytes = result.extra.bytes_per_array
    peak = hbm_ceiling(result.device).gb_per_s  # the one place ceilings are made
    table = Table(
        f"Device memory, {format_bytes(nbytes)} per array ({result.parameters.dtype}), "
        f"{base.repetitions(result, 'timed run')}",
        ["Operation", "Bytes counted", "Bytes", "Min", "Avg", "Max", "Best GB/s", "% of peak"],
        notes=[
            "Bytes count every array read or written once per call: a copy counts its read and "
            "its write, a memset its write. Best GB/s = bytes over the minimum time, as STREAM "
            "reports it (GB/s = 10^9 bytes/s). Times: " + gpu_timing(result) + ".",
            f"% of peak: of the theoretical {peak:,.0f} GB/s from `memprof info`.",
            f"Kernels: 16-byte loads and stores, {result.extra.launch.block_size} threads "
            "per block, verified against numpy on random data before timing.",
        ],
    )
    best = {}
    for label, counting, moved, measurement in _operations(result):
        stats = measurement.stats
        best[label.split()[0]] = bandwidth_gb_per_s(moved, stats.min_ms)
        table.add_row(
            label,
            counting,
            format_bytes(moved),
            format_ms(stats.min_ms),
            format_ms(stats.mean_ms),
            format_ms(stats.max_ms),
            format_gb_per_s(best[label.split()[0]]),
            f"{best[label.split()[0]] / peak:.1%}",
        )
    conclusion = (
        f"Triad reached {best['triad']:,.0f} GB/s, {best['triad'] / peak:.1%} of the theoretical "
        f"{peak:,.0f} GB/s; copy {best['copy']:,.0f} GB/s ({best['copy'] / best['triad']:.1%} of "
        f"triad) and cuMemcpyDtoD {best['cuMemcpyDtoD']:,.0f} GB/s. That is the ceiling for any "
        "memory-bound kernel on this GPU: measure yours against it, not against the datasheet."
    )
    return Summary(tables=[table], conclusions=[conclusion])
