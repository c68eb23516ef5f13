"""`memprof zerocopy`: seed 000's experiment, mapped host memory read by a kernel.

Per size, sumArrays runs three ways, each verified: the device path (a and b copied in from
pinned memory, the kernel, the result copied back), zero-copy (the kernel reads a and b from
mapped pinned memory over PCIe, the result copied back) and the device path from pageable numpy
arrays, as seed 000's program copies them: the best explicit copies can do, and what most code does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memprof.experiments import base
from memprof.experiments.common import POISON_BYTE, SumArrays, found_or_none, size_label
from memprof.model.ceilings import detail_of, pcie_ceiling
from memprof.model.figures import Derived, figure
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.params import param
from memprof.model.results import Result
from memprof.model.summary import Column, Summary, table

SEED_SWEEP_POWERS = (10, 12, 14, 16, 18, 20, 22, 24)


@dataclass(frozen=True)
class ZeroCopyParams:
    powers: base.Powers = base.powers_param(SEED_SWEEP_POWERS, step=2, single="single_size")
    repeat: base.Repeat = base.repeat_param(10)
    warmup: base.Warmup = base.warmup_param(2)
    # --power: one size, with the full profile
    single_size: bool = param(False, "One size, shown in full.", hidden_from_cli=True)


DEVICE_PATH = ("device path", "end_to_end", "device")  # (name, operation, kind) of the span
PAGEABLE_PATH = ("pageable path", "end_to_end", "pageable")
# sumArrays' (uva, register and writecombined time it too): its GB/s counts the two input
# arrays it reads (2 of the 3 its bytes count), over the link from mapped memory.
# A path moves a and b in and res out: 3 arrays.
END_TO_END = base.Measure(
    "span",
    "end_to_end",
    "each path from its copies in to its copy out",
    "end to end",
    arrays=3,
    kinds=("device", "mapped", "pageable"),
)
H2D, D2H = (
    dataclasses.replace(base.ONE_COPY[direction], what=f"a copy {words} (a path's)")
    for direction, words in base.DIRECTIONS.items()
)


class ZeroCopy(base.Experiment):
    name = "zerocopy"
    description = (
        "Without a size: the classic CUDA memory tutorial's sweep, 2^N for N in "
        f"{', '.join(map(str, SEED_SWEEP_POWERS))}."
    )
    Params = ZeroCopyParams
    measures = (base.SUM_ARRAYS, END_TO_END, H2D, D2H, *base.CORE_RECORDS)

    def run(self, ctx: base.RunContext) -> base.NoExtra:
        from memprof.core import memory

        session, powers = ctx.session, ctx.params.powers
        largest = base.FLOAT32_BYTES << max(powers)
        memory.require_memory(session, device_bytes=3 * largest, host_bytes=6 * largest)
        memory.MEMORY_KINDS["mapped"].check_supported(session)
        for done, power in enumerate(powers):
            ctx.progress(f"zero-copy and device memory, {size_label(power)}", done, len(powers))
            _measure_size(ctx, power)
        ctx.progress("done", len(powers), len(powers))
        return base.NoExtra()


def _measure_size(ctx: base.RunContext, power: int) -> None:
    """The three paths at one size (module docstring), each verified."""
    import numpy as np

    from memprof.core import memory
    from memprof.core.verify import compare_arrays

    session, params = ctx.session, ctx.params
    elements, nbytes = 1 << power, base.FLOAT32_BYTES << power
    sums = SumArrays(session, elements)
    a, b = (memory.allocate(session, "mapped", elements) for _ in range(2))
    out = memory.allocate(session, "pinned", elements)
    pageable = tuple(memory.allocate(session, "pageable", elements) for _ in range(3))
    devices = tuple(memory.allocate(session, "device", elements) for _ in range(3))
    a.array[:] = pageable[0].array[:] = sums.a
    b.array[:] = pageable[1].array[:] = sums.b

    def zero_copy_path() -> None:
        d_res = devices[2]
        pointers = (a.device_pointer, b.device_pointer, d_res.device_pointer)
        memory.memset(session, d_res, POISON_BYTE)
        with session.profiler.events("span", "zero-copy path", "end_to_end", "mapped", 3 * nbytes):
            sums.kernel.launch(
                session, elements, *pointers, elements, kind="mapped", nbytes=3 * nbytes
            )
            memory.copy(session, out, d_res)

    paths = (
        ("device memory", out, lambda: sums.flow((a, b), out, devices, DEVICE_PATH, "device")),
        ("zero-copy", out, zero_copy_path),
        (
            "device memory from pageable",
            pageable[2],
            lambda: sums.flow(pageable[:2], pageable[2], devices, PAGEABLE_PATH, "device"),
        ),
    )
    for name, result, path in paths:
        result.array.fill(np.nan)
        session.profiler.repeat(path, params.warmup, params.repeat)
        label = f"sumArrays {size_label(power)}, {name}"
        ctx.check(compare_arrays(label, result.array, sums.expected))
    for buffer in (a, b, out, *pageable, *devices):
        buffer.free()


KERNELS = (
    Column("Size", "size"),
    Column("Kernel: device", "device", "median_ms"),
    Column("Kernel: zero-copy", "mapped", "median_ms"),
    Column("Zero-copy read GB/s", "mapped", "gb_per_s"),
    Column("Of ceiling", "mapped", "share"),
)
PATHS = (
    Column("Size", "size"),
    Column("Device", "device", "median_ms"),
    Column("Zero-copy", "mapped", "median_ms"),
    Column("Pageable", "pageable", "median_ms"),
    Column("Zero-copy / device", "against", "ratio"),
)


def summarize(result: Result) -> Summary:
    kernels, paths, rows = [], [], []
    against_pageable = []  # (power, zero-copy end to end / pageable end to end)
    for power in result.parameters.powers:
        nbytes = base.FLOAT32_BYTES << power
        size = format_bytes(nbytes)
        kernel, e2e = (
            {kind: figure(result, base.find(result, measure, kind, 3 * nbytes), measure)
             for kind in ("device", "mapped")}
            for measure in (base.SUM_ARRAYS, END_TO_END)
        )  # fmt: skip
        against = Derived(f"{size}: zero-copy / device", (e2e["mapped"], e2e["device"]), "ratio")
        # the pageable path's end to end (results recorded before it existed lack it)
        pageable = found_or_none(result, *END_TO_END.key, "pageable", 3 * nbytes)
        kernels.append({"size": size, **kernel})
        paths.append({"size": size, **e2e, "pageable": pageable, "against": against})
        h2d = base.find(result, H2D, "mapped", nbytes).stats.median_ms
        e2e_device, e2e_zero = e2e["device"].median_ms, e2e["mapped"].median_ms
        medians = (kernel["device"].median_ms, kernel["mapped"].median_ms, e2e_device, e2e_zero)
        rows.append((power, nbytes, *medians, h2d))
        if pageable is not None:
            against_pageable.append((power, e2e_zero / pageable.stats.median_ms))
    cupti = result.timing is not None and result.timing.source == "cupti"
    timed = "CUPTI's record of each launch" if cupti else "gated CUDA events around each launch"
    kernel_notes = [
        f"Kernel: {timed}, median of {base.repetitions(result)}.",
        "Zero-copy read: the 2 input arrays' bytes over the zero-copy kernel's time "
        "(GB/s = 10^9 bytes/s); every read crosses the link host → device, so its "
        f"ceiling is {detail_of(pcie_ceiling(result), 'the link, unknown here')}.",
    ]
    path_notes = [
        "Gated CUDA events around the whole path (device: 2 HtoD + kernel + DtoH from "
        "pinned memory; pageable: the same copies from numpy arrays; zero-copy: kernel + "
        "DtoH), medians. Zero-copy / device: against the pinned device path.",
    ]
    kernels_title = "sumArrays on device memory against zero-copy reads of mapped host memory"
    paths_title = "End to end: each path from its copies in to its copy out"
    return Summary(
        tables=[
            table(kernels_title, KERNELS, kernels, kernel_notes),
            table(paths_title, PATHS, paths, path_notes),
        ],
        conclusions=_conclusions(rows) + _pageable_conclusion(against_pageable),
        show_profile=result.parameters.single_size,
    )


def _conclusions(rows: list[tuple]) -> list[str]:
    wins = [r for r in rows if r[5] < r[4]]
    if not wins:
        headline = "Zero-copy never beat explicit copies end to end at these sizes."
    elif len(wins) == len(rows):
        headline = "Zero-copy beat explicit copies end to end at every size measured."
    else:
        headline = (
            f"Zero-copy beat explicit copies end to end at {len(wins)} of {len(rows)} sizes "
            f"({', '.join(f'2^{r[0]}' for r in wins)})."
        )
    ratios = [r[3] / r[2] for r in rows]
    lines_kernel = (
        f"Per kernel, reading zero-copy memory was slower than device memory at every size, "
        f"{min(ratios):.1f}x to {max(ratios):.1f}x as long"
        if min(ratios) > 1
        else f"Per kernel, zero-copy took {min(ratios):.1f}x to {max(ratios):.1f}x as long as "
        "device memory"
    ) + (
        f" (2^{rows[0][0]}: {ratios[0]:.1f}x): where zero-copy wins end to end, it wins by "
        "skipping the copies, not by reading faster."
    )
    power, _, kernel_device, kernel_zero, e2e_device, e2e_zero, h2d = rows[-1]
    kernel_ratio = kernel_zero / kernel_device
    lines = [
        headline + f" At 2^{power} the zero-copy path took {format_ms(e2e_zero)} against "
        f"{format_ms(e2e_device)}; its kernel took {kernel_ratio:.1f}x as long as on device "
        "memory" + (", because every read crosses PCIe." if kernel_ratio > 1.5 else "."),
        lines_kernel,
    ]
    extra_per_pass = kernel_zero - kernel_device
    copy_in = 2 * h2d
    if extra_per_pass <= 0:
        return lines
    passes = copy_in / extra_per_pass  # zero-copy wins while passes x extra < copy_in
    if passes < 1:
        lines.append(
            f"At 2^{power}, even data read once is better copied first: copying a and b in "
            f"costs {format_ms(copy_in)}, one zero-copy pass {format_ms(extra_per_pass)} more "
            "than a pass over device memory."
        )
    else:
        lines.append(
            f"At 2^{power}, zero-copy pays for data the GPU reads once: copying a and b in "
            f"costs {format_ms(copy_in)}, each zero-copy pass {format_ms(extra_per_pass)} more "
            f"than a pass over device memory, so from {int(passes) + 1} passes on, copy the data."
        )
    return lines


def _pageable_conclusion(against_pageable: list[tuple[int, float]]) -> list[str]:
    """The tutorial's program (seed 000) copies from pageable memory: zero-copy against that."""
    if not against_pageable:
        return []
    wins = [power for power, ratio in against_pageable if ratio < 1]
    ratios = [ratio for _, ratio in against_pageable]
    where = (
        "at every size"
        if len(wins) == len(against_pageable)
        else f"at {len(wins)} of {len(against_pageable)} sizes"
    )
    low, high = f"{min(ratios):.2f}x", f"{max(ratios):.2f}x"
    span = low if low == high else f"{low} to {high}"
    return [
        "Against copies from pageable memory (what the classic CUDA memory tutorial's "
        f"sumArrays program does), zero-copy was faster end to end {where}, taking "
        f"{span} the time."
        if wins
        else "Against copies from pageable memory, zero-copy never won end to end."
    ]
