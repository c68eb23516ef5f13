"""`memprof device`: device-memory bandwidth, the way STREAM and BabelStream measure it.

cuMemcpyDtoD and cuMemset, then the five STREAM kernels over three arrays a, b, c:
copy c = a, mul b = s*c, add c = a + b, triad a = b + s*c, dot sum(a*b). Bytes count
every array read or written once (2, 2, 3, 3, 2 arrays; a DtoD copy counts its read and
its write, a memset its write). Each kernel is first verified on random data against
numpy, then timed; the best time gives the bandwidth, as STREAM reports it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from memprof.experiments import base
from memprof.experiments.common import gpu_timing
from memprof.model.ceilings import hbm_ceiling
from memprof.model.figures import figure_finder
from memprof.model.formatting import format_bytes
from memprof.model.params import param
from memprof.model.results import Check, Measurement, Result
from memprof.model.schema import SchemaError
from memprof.model.summary import Column, Summary, table

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

    @property
    def element_bytes(self) -> int:
        """The bytes of one element of --dtype (base.element_bytes reads it)."""
        return 4 if self.dtype == "float32" else 8


BYTES_PER_THREAD_ACCESS = 16  # the kernels' loads and stores


# Each figure is the best time's, as STREAM reports it, against HBM; a copy counts its read
# and its write, a memset its write, a kernel every array it reads or writes.
D2D = base.Measure(
    "gpu",
    "d2d",
    "cuMemcpyDtoD of one array",
    "one operation",
    arrays=1,
    traffic=2,
    kinds=("device",),
    shows="latency",
    bound="hbm",
    at="best",
)
MEMSET = dataclasses.replace(D2D, operation="memset", what="cuMemset of one array", traffic=1)
KERNEL = dataclasses.replace(
    MEMSET,
    operation="kernel",
    what="each STREAM kernel",
    arrays=tuple(sorted({arrays for _, arrays in STREAM_KERNELS.values()})),
)


class DeviceBandwidth(base.Experiment):
    name = "device"
    Params = DeviceParams
    measures = (
        D2D,
        MEMSET,
        KERNEL,
        base.Measure("api", "d2d", "cuMemcpyDtoDAsync, host clock", "host clock", False, 1),
        base.MEMSET_CALL,
        base.LAUNCH_CALL,
    )

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        import numpy as np

        from memprof.core import memory

        session, params, profiler = ctx.session, ctx.params, ctx.measure
        nbytes = np.dtype(params.dtype).itemsize << params.power
        memory.require_memory(session, device_bytes=3 * nbytes, host_bytes=7 * nbytes)
        multiprocessors = ctx.facts[session.device_index].multiprocessors
        stream = _Stream(session, params, multiprocessors * DOT_BLOCKS_PER_SM)
        step = ctx.steps(3)

        step(f"device memory, {format_bytes(nbytes)}: verifying the kernels")
        for check in _verify(stream):
            ctx.check(check)
        step(f"device memory, {format_bytes(nbytes)}: cuMemcpyDtoD and cuMemset")
        a, c = stream.a, stream.c
        profiler.repeat(lambda: memory.copy(session, c, a), params.warmup, params.repeat)
        profiler.repeat(lambda: memory.memset(session, c, 0), params.warmup, params.repeat)
        step(f"device memory, {format_bytes(nbytes)}: STREAM kernels")
        profiler.repeat(stream.round, params.warmup, params.repeat)
        ctx.check(stream.finite())
        stream.free()
        step("done")
        return base.NoExtra()

    def derived(self, result: Result) -> dict:
        params = result.parameters
        launch = result.device and {  # (a file without device facts is refused)
            "block_size": BLOCK_SIZE,
            "elementwise_blocks": elementwise_blocks(params),
            "dot_blocks": result.device.multiprocessors * DOT_BLOCKS_PER_SM,
            "bytes_per_thread_access": BYTES_PER_THREAD_ACCESS,
        }
        return {"bytes_per_array": base.array_bytes(params),
                "launch": launch}  # fmt: skip

    def check_consistency(self, result: Result) -> None:
        params, facts = result.parameters, result.device
        nbytes = base.array_bytes(params)
        for field in ("memory_clock_khz", "memory_bus_width_bits"):
            if not getattr(facts, field):
                raise SchemaError(
                    f"device.{field}", "is 0: the summary compares with the theoretical bandwidth"
                )
        for name, (_, arrays) in STREAM_KERNELS.items():
            found = _kernels_named(result, name)
            if len(found) != 1:
                raise SchemaError(
                    "measurements",
                    f"has {len(found)} gpu kernels named stream_{name}_*: every device run "
                    "records each STREAM kernel once",
                )
            index, kernel = found[0]
            if kernel.bytes != arrays * nbytes:
                raise SchemaError(
                    f"measurements[{index}].bytes",
                    f"is {kernel.bytes}, but {name} reads and writes {arrays} arrays of "
                    f"parameters.power ({arrays * nbytes})",
                )


def _kernels_named(result: Result, name: str) -> list[tuple[int, Measurement]]:
    """The measurements (and their indices) of STREAM kernel `name`, of either dtype."""
    return [
        (index, m)
        for index, m in enumerate(result.measurements)
        if m.group == "gpu" and m.name.startswith(f"stream_{name}_")
    ]


def elementwise_blocks(params: DeviceParams) -> int:
    """Blocks of the element-wise kernels: each thread loads BYTES_PER_THREAD_ACCESS at once."""
    pack_width = max(1, BYTES_PER_THREAD_ACCESS // params.element_bytes)
    return max(1, -(-(1 << params.power) // pack_width) // BLOCK_SIZE)


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
        self.elementwise_blocks = elementwise_blocks(params)

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


def _verify(stream: _Stream) -> list[Check]:
    """One BabelStream round on random data, every result checked against numpy."""
    import numpy as np

    from memprof.core.verify import compare_arrays

    session, launch, partial, scalar = stream.session, stream.launch, stream.partial, stream.scalar
    elements, dtype, cuda = stream.elements, stream.dtype, session.cuda
    a, b, c = stream.a, stream.b, stream.c
    rng = np.random.default_rng(7)
    host = {name: rng.random(elements).astype(dtype) + dtype.type(0.5) for name in "abc"}
    for name, buffer in zip("abc", (a, b, c), strict=True):
        cuda.memcpy_htod(buffer.device_pointer, host[name])

    def fetch(buffer) -> np.ndarray:
        out = np.full(elements, np.nan, dtype)
        cuda.memcpy_dtoh(out, buffer.device_pointer)
        return out

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
    detail = f"relative error {relative:.2e} (limit {limit:.0e}) against numpy in float64"
    checks.append(Check("dot sum(a*b)", bool(relative <= limit), elements, detail))
    session.profiler.discard_pending()
    return checks


def _close(name: str, actual, expected, tolerance: float) -> Check:
    import numpy as np

    if not np.isfinite(actual).all():
        return Check(name, False, actual.size, "NaN or infinity in the result")
    error = float(np.max(np.abs(actual - expected) / np.abs(expected)))
    detail = f"largest relative error {error:.1e} (limit {tolerance:.1e})"
    return Check(name, bool(error <= tolerance), actual.size, detail)


def _operations(result: Result) -> list[dict]:
    """Every timed operation: its label, how its bytes count, its figures."""
    figure_of = figure_finder(result, DeviceBandwidth.measures)
    rows = [
        ("cuMemcpyDtoD", "read + write", figure_of(base.find(result, D2D, "device"))),
        ("cuMemset", "write", figure_of(base.find(result, MEMSET, "device"))),
    ]
    for name, (formula, arrays) in STREAM_KERNELS.items():
        _, kernel = _kernels_named(result, name)[0]
        rows.append((f"{name}  {formula}", f"{arrays} arrays", figure_of(kernel)))
    return [{"operation": label, "counted": counted, "figure": one} for label, counted, one in rows]


OPERATIONS = (
    Column("Operation", "operation"),
    Column("Bytes counted", "counted"),
    Column("Bytes", "figure", "moved_bytes"),
    Column("Min", "figure", "min_ms"),
    Column("Avg", "figure", "mean_ms"),
    Column("Max", "figure", "max_ms"),
    Column("Best GB/s", "figure", "gb_per_s"),
    Column("% of peak", "figure", "percent"),
)


def summarize(result: Result) -> Summary:
    params = result.parameters
    nbytes = base.array_bytes(params)
    peak = hbm_ceiling(result.device).gb_per_s  # the one place ceilings are made
    rows = _operations(result)
    operations = table(
        f"Device memory, {format_bytes(nbytes)} per array ({params.dtype}), "
        f"{base.repetitions(result, 'timed run')}",
        OPERATIONS,
        rows,
        notes=[
            "Bytes count every array read or written once per call: a copy counts its read and "
            "its write, a memset its write. Best GB/s = bytes over the minimum time, as STREAM "
            "reports it (GB/s = 10^9 bytes/s). Times: " + gpu_timing(result) + ".",
            f"% of peak: of the theoretical {peak:,.0f} GB/s from `memprof info`.",
            f"Kernels: {BYTES_PER_THREAD_ACCESS}-byte loads and stores, {BLOCK_SIZE} threads "
            "per block, verified against numpy on random data before timing.",
        ],
    )
    best = {row["operation"].split()[0]: row["figure"] for row in rows}
    triad, copy, d2d = (best[name].gb_per_s for name in ("triad", "copy", "cuMemcpyDtoD"))
    conclusion = (
        f"Triad reached {triad:,.0f} GB/s, {best['triad'].share:.1%} of the theoretical "
        f"{peak:,.0f} GB/s; copy {copy:,.0f} GB/s ({copy / triad:.1%} of "
        f"triad) and cuMemcpyDtoD {d2d:,.0f} GB/s. That is the ceiling for any "
        "memory-bound kernel on this GPU: measure yours against it, not against the datasheet."
    )
    return Summary(tables=[operations], conclusions=[conclusion])
