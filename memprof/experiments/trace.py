"""`memprof trace`: what the user's own program did with memory, and what it would cost otherwise.

memprof.trace records the Result; this module only reads it (so `report` and `diff` show a
trace anywhere): its tables, its checks, and advice from this GPU's own figures.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter, mul
from typing import Any, get_args

from memprof.experiments import base
from memprof.model.figures import Derived
from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_percent,
    plural,
)
from memprof.model.lines import CALL_KINDS, SourceLine
from memprof.model.results import Result, ResultShape
from memprof.model.schema import SchemaError
from memprof.model.summary import Column, Summary, Table, table
from memprof.model.timeline import GPU_CATEGORIES, Breakdown, breakdown_of
from memprof.output.render import LOWER_BOUNDS
from memprof.output.where import copy_blocked_ms, copy_gb_per_s, copy_name, gap_place
from memprof.trace.collect import (
    SMALL_COPY_BYTES,
    BlockedCopies,
    CopyDirection,
    CopyGroup,
    SmallCopyFigures,
    TraceExtra,
    TraceParams,
)
from memprof.trace.stacks import base_name, is_work_call
from memprof.trace.where import copy_row_name

UnifiedMemory = dict[str, dict[str, float]]

DIRECTION_KEYS = {"HtoD": "h2d", "DtoH": "d2h"}
SMALL_LABEL = format_bytes(SMALL_COPY_BYTES)


def pinned_gb_per_s(bandwidth: dict[str, Any] | None, direction: str) -> float | None:
    """This GPU's measured pinned bandwidth for HtoD or DtoH, if it was measured."""
    key = DIRECTION_KEYS.get(direction)
    value = (bandwidth or {}).get(f"{key}_gb_per_s") if key else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def pageable_advice(copies: list[CopyGroup], bandwidth: dict[str, Any] | None) -> list[str]:
    """For each direction: what the pageable copies of 64 KiB or more took, and what pinned
    ones would take at this GPU's measured bandwidth (smaller ones are latency-bound)."""
    lines = []
    for group in _large_pageable(copies):
        calls = group.calls - group.small_calls  # small ones are latency: small_copy_advice
        nbytes, gpu_ms = group.bytes - group.small_bytes, group.gpu_ms - group.small_gpu_ms
        sizes = f" of {SMALL_LABEL} or more" if group.small_calls else ""
        what = (
            f"{calls} pageable {group.direction} {'copy' if calls == 1 else 'copies'}{sizes} "
            f"moved {format_bytes(nbytes)} in {format_ms(gpu_ms)} on the GPU"
        )
        if group.call_ms > 0 and not group.small_calls:
            what += f" (their calls held the host {format_ms(group.call_ms)})"
        if gpu_ms <= 0:  # no speed to set against pinned copies' (a file that lost it)
            lines.append(f"{what}: with no GPU time, how pinned copies compare is not known.")
            continue
        pinned = pinned_gb_per_s(bandwidth, group.direction)
        if pinned is None:
            how = (bandwidth or {}).get("how", "not measured")
            lines.append(
                f"{what}. This GPU's pinned bandwidth is unknown ({how}): pinned memory is "
                "often 2-3x faster; `memprof pinned` measures it."
            )
            continue
        pinned_ms = nbytes / (pinned * 1e9) * 1e3
        achieved = bandwidth_gb_per_s(nbytes, gpu_ms)
        if pinned_ms < gpu_ms:
            lines.append(
                f"{what}; from pinned memory they would take about {format_ms(pinned_ms)} at "
                f"this GPU's {format_gb_per_s(pinned)} GB/s. Allocate those host buffers pinned "
                "(cuMemHostAlloc, torch pin_memory=True) once, and reuse them."
            )
        else:
            lines.append(
                f"{what}, at {format_gb_per_s(achieved)} GB/s: no slower than pinned copies on "
                f"this GPU ({format_gb_per_s(pinned)} GB/s), so pinning would not speed them up."
            )
    return lines


def small_copy_advice(
    copies: list[CopyGroup],
    bandwidth: dict[str, Any] | None,
    measured: SmallCopyFigures | None = None,
) -> list[str]:
    """Copies under 64 KiB are latency-bound: fewer, larger copies win; `measured` says by
    how much on this GPU (None: a trace saved before memprof measured it)."""
    small = [g for g in copies if g.small_calls]
    calls = sum(g.small_calls for g in small)
    if not calls:
        return []
    nbytes = sum(g.small_bytes for g in small)
    gpu_ms = math.fsum(g.small_gpu_ms for g in small)
    kinds = ", ".join(
        f"{g.small_calls} {g.direction} {g.source} -> {g.destination}"
        for g in sorted(small, key=lambda g: -g.small_calls)
    )
    line = (
        f"{plural(calls, 'copy', 'copies')} under {SMALL_LABEL} ({kinds}) moved "
        f"{format_bytes(nbytes)} in {format_ms(gpu_ms)} on the GPU, "
        f"{format_ms(gpu_ms / calls)} each"
    )
    rates = [r for r in (pinned_gb_per_s(bandwidth, d) for d in DIRECTION_KEYS) if r]
    if gpu_ms > 0 and rates:
        line += (
            f": {format_gb_per_s(bandwidth_gb_per_s(nbytes, gpu_ms))} GB/s against "
            f"{format_gb_per_s(max(rates))} GB/s for large pinned copies here"
        )
    line += (
        ". Their time is latency, not bandwidth (and each call costs the host more than the "
        "GPU): gather them into one buffer and one copy, or keep the data on the GPU."
    )
    if measured is not None:
        pageable = sum(g.small_calls for g in small if g.host_kind == "pageable")
        line += " " + measured_gain(measured, nbytes / calls, pageable * 2 >= calls)
    return [line]


def measured_gain(measured: SmallCopyFigures, average_bytes: float, from_pageable: bool) -> str:
    """What batching saved per copy here at the measured size nearest the average small copy:
    pageable copies against one gathered pinned copy, pinned ones against cuMemcpyBatchAsync."""
    if not measured.costs:
        return f"`memprof smallcopies` measures what gathering gains on this GPU ({measured.how})."
    nearest = min(
        measured.costs, key=lambda c: abs(math.log2(max(c.bytes, 1) / max(average_bytes, 1)))
    )
    gathered = "gathered into one pinned buffer and copied once"
    if from_pageable:
        one_each, batched, way = nearest.pageable_ms, nearest.gathered_ms, gathered
    elif nearest.batched_ms is None:
        one_each, batched = nearest.pinned_ms, nearest.gathered_ms
        way = "gathered from pageable memory into one pinned buffer and copied once"
    else:
        one_each, batched, way = nearest.pinned_ms, nearest.batched_ms, "in one cuMemcpyBatchAsync"
    memory = "pageable" if from_pageable else "pinned"
    clock = "wall clock" if measured.clock == "wall" else "GPU time"
    what = (
        f"{measured.copies} copies of {format_bytes(nearest.bytes)} from {memory} memory cost "
        f"{format_ms(one_each)} per copy one call each and {format_ms(batched)} {way} "
        f"({clock} per copy)"
    )
    source = f"`memprof smallcopies`, {measured.how}"
    if 0 < batched < one_each:
        return f"On this GPU {what}: {one_each / batched:.1f}x faster ({source})."
    return f"On this GPU batching did not pay: {what} ({source})."


def blocking_advice(copies: list[CopyGroup]) -> list[str]:
    """Copies the host waited for: they cannot overlap kernels or other copies."""
    synchronous = sum(g.blocking_calls for g in copies)
    staged = sum(g.staged_calls for g in copies)
    if not synchronous and not staged:
        return []
    parts = []
    if synchronous:
        calls = "a synchronous call" if synchronous == 1 else "synchronous calls"
        parts.append(f"{synchronous} made with {calls} (cuMemcpyHtoD, cudaMemcpy)")
    if staged:
        parts.append(
            f"{plural(staged, 'asynchronous call')} from or to pageable memory, which the driver "
            "stages synchronously"
        )
    return [
        f"{plural(synchronous + staged, 'copy', 'copies')} blocked the host until "
        f"{'it' if synchronous + staged == 1 else 'they'} finished: "
        f"{' and '.join(parts)}. A blocked copy overlaps nothing: use the Async calls on a "
        "stream (non_blocking=True in PyTorch) with pinned host memory."
    ]


def unified_memory_advice(counters: UnifiedMemory | None) -> list[str]:
    """Managed memory's migrations and faults from CUPTI's counters, each a lower bound: the
    advice is the same whichever is zero, since a zero may be a migration CUPTI missed."""
    if not counters:
        return []

    def counter(name: str, key: str) -> int:
        return int(counters.get(name, {}).get(key, 0))

    to_gpu = counter("BYTES_TRANSFER_HTOD", "total")
    to_host = counter("BYTES_TRANSFER_DTOH", "total")
    gpu_faults = counter("GPU_PAGE_FAULT", "count")  # one record per fault group
    cpu_faults = counter("CPU_PAGE_FAULT_COUNT", "count")  # one record per fault
    if not (gpu_faults or cpu_faults or to_gpu or to_host):
        return []
    faults = (
        f"{plural(gpu_faults, 'GPU page-fault group')} and {plural(cpu_faults, 'CPU page fault')}"
    )
    return [
        f"Managed memory migrated at least {format_bytes(to_gpu)} to the GPU and at least "
        f"{format_bytes(to_host)} back, on at least {faults} ({LOWER_BOUNDS}). Each fault "
        "stalls the kernel or the host while the driver maps or moves pages, a fault at a "
        "time: prefetch the memory to where it is used next (cuMemPrefetchAsync / "
        "cudaMemPrefetchAsync), or copy explicitly; `memprof managed` shows the difference "
        "on this GPU."
    ]


def advice(
    copies: list[CopyGroup],
    bandwidth: dict[str, Any] | None,
    unified_memory: UnifiedMemory | None,
    small_copies: SmallCopyFigures | None = None,
    scale: RunScale | None = None,
) -> list[str]:
    """Every piece of advice the trace supports, or a line saying there is none; advice on
    copies under FOLD_SHARE of the run folds into one line (a model uploaded once from
    pageable memory is no reason to pin a DataLoader's batches)."""
    pageable_ms = [max(g.gpu_ms - g.small_gpu_ms, g.blocked_ms) for g in _large_pageable(copies)]
    on_copies = [
        *zip(pageable_advice(copies, bandwidth), pageable_ms, strict=True),
        *(
            (said, _small_cost_ms(copies))
            for said in small_copy_advice(copies, bandwidth, small_copies)
        ),
        *((said, math.fsum(g.blocked_ms for g in copies)) for said in blocking_advice(copies)),
    ]

    def folded(cost_ms: float) -> bool:  # a cost of 0 is one an older file did not keep
        return scale is not None and 0 < scale.of_run(cost_ms) < FOLD_SHARE

    lines = [said for said, cost_ms in on_copies if not folded(cost_ms)]
    cheap = [cost_ms for _, cost_ms in on_copies if folded(cost_ms)]
    if cheap and scale is not None:
        lines.append(
            f"{plural(len(cheap), 'piece')} of advice on copies (pageable, small or blocking) "
            f"cost under {FOLD_SHARE:.0%} of the program's {format_ms(scale.wall_ms)} each "
            f"({format_ms(math.fsum(cheap))} together, GPU or host time): the Copies by memory "
            "kind table holds them."
        )
    lines += unified_memory_advice(unified_memory)  # a lower bound: never folded away
    return lines or [
        f"No copy from pageable memory, none under {SMALL_LABEL}, none blocking the host and "
        "no managed-memory fault recorded: nothing to advise on memory."
    ]


def _large_pageable(copies: list[CopyGroup]) -> list[CopyGroup]:
    """Groups of pageable copies with some of SMALL_COPY_BYTES or more (pageable_advice's)."""
    return [g for g in copies if g.host_kind == "pageable" and g.calls > g.small_calls]


def _small_cost_ms(copies: list[CopyGroup]) -> float:
    """The small copies' GPU time or their calls' share of host time, the larger."""
    gpu = math.fsum(g.small_gpu_ms for g in copies)
    host = math.fsum(g.call_ms * g.small_calls / g.calls for g in copies if g.calls)
    return max(gpu, host)


COPY_COLUMNS = [
    Column("Copy", "group", copy_name),
    Column("Calls", "group", lambda g: str(g.calls)),
    Column("Bytes", "group", lambda g: format_bytes(g.bytes)),
    Column("GPU time", "group", lambda g: format_ms(g.gpu_ms)),
    Column("GB/s", "group", lambda g: _or_dash(copy_gb_per_s(g), format_gb_per_s)),
    Column("Blocking", "group", lambda g: str(g.blocking_copies)),
    Column("Host blocked", "group", lambda g: _or_dash(copy_blocked_ms(g), format_ms)),
    Column(f"Under {SMALL_LABEL}", "group", lambda g: str(g.small_calls)),
]
COPIES_NOTE = (
    "GPU time: CUPTI's record of each copy on the GPU (the DMA alone), summed; GB/s: "
    "bytes over that time (10^9 bytes/s). Blocking: copies the host waited for (a "
    "synchronous call, or from or to pageable memory, which the driver stages through "
    "its own pinned buffer). Host blocked: those copies' calls, entry to exit, summed: "
    "staging included, what the program waited and what it measures around such a "
    "copy (- where the trace did not record it)."
)


def _or_dash(value: float | None, shown: Callable[[float], str]) -> str:
    return "-" if value is None else shown(value)


def copies_table(copies: list[CopyGroup], bandwidth: dict[str, Any] | None) -> Table:
    """Each copy group's row, its CSV row the group's (group "copies": copy_group_rows)."""
    rows = [{"group": g} for g in copies]
    copies_by_kind = table("Copies by memory kind", COPY_COLUMNS, rows, [COPIES_NOTE])
    h2d, d2h = pinned_gb_per_s(bandwidth, "HtoD"), pinned_gb_per_s(bandwidth, "DtoH")
    how = (bandwidth or {}).get("how", "not measured")
    if h2d and d2h:
        size = format_bytes(int((bandwidth or {}).get("bytes", 0)))
        copies_by_kind.notes.append(
            f"This GPU's pinned bandwidth, for the advice: HtoD {format_gb_per_s(h2d)} GB/s, "
            f"DtoH {format_gb_per_s(d2h)} GB/s ({size} copies; {how})."
        )
    else:
        copies_by_kind.notes.append(f"This GPU's pinned bandwidth: {how}.")
    return copies_by_kind


def outcome_line(result: Result) -> str:
    extra = result.extra
    program = result.parameters.program or "the program"
    ended = f"exited with code {extra.exit_code}"
    if extra.error:
        ended = f"raised {extra.error} (exit code {extra.exit_code})"
    return (
        f"{program} {ended} after {extra.wall_s:.3f} s on {extra.gpu_name or 'the GPU'} "
        f"(driver {extra.driver_version or 'unknown'})."
    )


def timing_note(result: Result) -> str:
    """The profile's footnote: what its figures are and which calls it holds."""
    every = result.parameters.all_calls
    launches = any(m.group == "api" and "Launch" in m.name for m in result.measurements)
    return (
        "Timing: CUPTI's records of the whole program, "
        + ("nothing excluded (start-up calls included)" if every else "start-up included")
        + ". GPU activities: each operation's own time on the GPU, as nvprof printed; "
        "for a copy that is its DMA alone. A blocking copy (a synchronous call, or from or to "
        "pageable memory) held the host longer, staging included: its call's time is in API "
        "calls and, per kind of copy, in Host blocked below. "
        + (
            "API calls: every driver and runtime call, entry to exit."
            if every
            else WORK_CALLS_NOTE.format(launch="launch, " if launches else "")
        )
    )


WORK_CALLS_NOTE = (  # files traced before the callbacks timed calls hold launches too
    "API calls: only those that {launch}copy, set, allocate, free, register, prefetch or "
    "wait, entry to exit (--all-calls records every call)."
)


# -- where the time went ---------------------------------------------------------------------

LONG_GAP_SHARE = 0.1  # an idle gap of a tenth of the run or more: a pause, said in the verdict
PARTS = ("computing", "copying", "both", "idle")  # a Breakdown's parts, in the table's order
BREAKDOWN_NOTE = (
    "From CUPTI's records of each kernel, copy and memset on each GPU (its streams merged), "
    "over the program's wall time (the host's clock around it): Computing, kernels alone; "
    "Copying, copies or memsets alone; Both, the two at once; Idle, neither. A gap: the GPU "
    "idle between two pieces of its work; Host at, the line of the recorded call that "
    "overlapped the gap most (after: none did, the last before it)."
)


def _parts_ns(share: Breakdown) -> dict[str, int]:
    return {part: getattr(share, f"{part}_ns") for part in PARTS}


def dominant(share: Breakdown) -> str:
    """The part of the run that took the most of its wall time (PARTS' order on a tie)."""
    parts = _parts_ns(share)
    return max(PARTS, key=lambda part: (parts[part], -PARTS.index(part)))


def time_verdict(share: Breakdown, lines: list[SourceLine] | None = None) -> str:
    """What the largest part of one GPU's run means for what is worth changing."""
    part = dominant(share)
    return (
        TIME_VERDICTS[part]
        .format(
            gpu=f"GPU {share.device}",
            wall=format_ms(share.wall_ns / 1e6),
            busy=format_percent(share.share(share.wall_ns - share.idle_ns)),
            split=idle_split(share, lines or []) if part == "idle" else "",
            **{part: format_percent(share.share(ns)) for part, ns in _parts_ns(share).items()},
        )
        .strip()
    )


TIME_VERDICTS = {  # by the part of the run that took the most of its wall time
    "idle": (
        "{gpu} sat idle {idle} of the program's {wall}: it computed {computing}, copied "
        "{copying} and did both at once {both}. The host set the run's length (its Python, "
        "data loading, start-up and waits), not the GPU: faster kernels or copies can save "
        "at most the {busy} it was busy. {split}"
    ),
    "computing": (
        "{gpu} computed {computing} of the program's {wall} (copying alone {copying}, both "
        "at once {both}, idle {idle}): its kernels set the run's length; the copies below "
        "can save at most the {copying} spent copying alone."
    ),
    "copying": (
        "{gpu} copied, computing nothing, {copying} of the program's {wall} (computing alone "
        "{computing}, both at once {both}, idle {idle}): its copies set the run's length, so "
        "the advice on copies below is where its time is."
    ),
    "both": (
        "{gpu} copied while it computed for {both} of the program's {wall} (computing alone "
        "{computing}, copying alone {copying}, idle {idle}): its copies hide behind its "
        "kernels, which set the run's length."
    ),
}


def idle_split(share: Breakdown, lines: list[SourceLine]) -> str:
    """Where an idle GPU's time went: one-time waits (start-up, exit, long pauses) told apart
    from the gaps between its work, where a loop's steps wait."""

    def part(ns: int) -> str:
        return f"{format_ms(ns / 1e6)} ({format_percent(share.share(ns))})"

    said = []
    if share.outside_ns > 0:
        said.append(
            f"{part(share.outside_ns)} came before its first piece of work or after its last "
            "(imports, start-up, exit)"
        )
    long = [gap for gap in share.gaps if share.share(gap.duration_ns) >= LONG_GAP_SHARE]
    for gap in long:
        said.append(
            f"{part(gap.duration_ns)} in one pause at {format_ms(gap.start_ms)}, the "
            f"host at {gap_place(gap, lines)}"
        )
    rest_ns = share.idle_ns - share.outside_ns - sum(gap.duration_ns for gap in long)
    listed = "Its longest idle gaps are listed with the line the host was at." if share.gaps else ""
    if not said:
        return listed
    once = "one-time waits" if len(said) > 1 else "a one-time wait"
    rest = (
        f" The other {part(rest_ns)} of idle time fell in shorter gaps between its work, a "
        "loop's steps' waits among them."
        if rest_ns > 0
        else ""
    )
    return f"Of the run, {'; '.join(said)}: {once}, not each step's.{rest} {listed}".strip()


TIME_COLUMNS = [Column("GPU", "gpu")] + [Column(part.capitalize(), part) for part in PARTS]
GAP_COLUMNS = [
    Column("GPU", "gpu"),
    Column("At", "gap", lambda gap: format_ms(gap.start_ms)),
    Column("Idle for", "gap", lambda gap: format_ms(gap.idle_ms)),
    Column("Host at", "place"),
]
GAPS_NOTE = "At: from the first recorded event."


def time_tables(result: Result) -> tuple[list[Table], list[str]]:
    """The run's breakdown per GPU, its longest idle gaps, and what they mean (none without
    a timeline or GPU work)."""
    shares = breakdown_of(result)
    if not shares:
        return [], []
    lines = result.extra.lines or []
    parts = [
        {"gpu": str(share.device)}
        | {
            name: f"{format_ms(ns / 1e6)} {format_percent(share.share(ns))}"
            for name, ns in _parts_ns(share).items()
        }
        for share in shares
    ]
    tables = [table("Where the time went", TIME_COLUMNS, parts, [BREAKDOWN_NOTE])]
    gaps = [  # each its CSV row: group "gap" (memprof.output.where)
        {"gpu": str(share.device), "gap": gap, "place": gap_place(gap, lines)}
        for share in shares
        for gap in share.gaps
    ]
    if gaps:
        tables.append(table("Longest idle gaps", GAP_COLUMNS, gaps, [GAPS_NOTE]))
    return tables, [time_verdict(share, lines) for share in shares]


# -- the framework's own work ------------------------------------------------------------------

# Kernels only XLA's autotuner runs while it compiles (its redzone checks, the comparison of
# candidates' results, buffer fills, the delay that times them): stream_executor's, never a
# program's own, so the one-time cost of compiling is told apart from the steps'
XLA_TUNING_KERNELS = (
    "RedzoneAllocatorKernel",
    "xla_fp_comparison",
    "RepeatBufferKernel",
    "DelayKernel",
)
XLA_KERNELS = re.compile(
    r"(?:void )?stream_executor::(?:\w+::|\(anonymous namespace\)::)*"
    r"(?:" + "|".join(XLA_TUNING_KERNELS) + r")\w*[(<]"
)


def _tuning(result: Result) -> list:
    """XLA's autotuning kernels: each name matched once (a trace's 10^5 records repeat few)."""
    gpu = [m for m in result.measurements if m.group == "gpu"]
    tuning = {name for name in {m.name for m in gpu} if XLA_KERNELS.match(name)}
    return [m for m in gpu if m.name in tuning] if tuning else []


RUNTIME_WORDS = {"copy": "copies", "memset": "memsets", "alloc": "allocations", "free": "frees"}
RUNTIME_WORDS |= {"wait": "waits", "register": "registrations"}


def framework_verdicts(result: Result, scale: RunScale) -> list[str]:
    """The framework's own work, told apart from the program's: XLA's and cuDNN's
    autotuning, and the calls XLA's runtime made on its own threads."""
    said = []
    tuning = _tuning(result)
    if tuning:
        kernels, cost = _tuning_cost(tuning, scale)
        said.append(
            f"XLA's autotuning ran at least {kernels} while it compiled the program "
            "(stream_executor's redzone checks, result comparisons, buffer fills and timing "
            f"delays): {cost}, done once per compiled program, not per step. JAX's persistent "
            "compilation cache "
            "(jax_compilation_cache_dir) keeps it out of later runs; "
            "XLA_FLAGS=--xla_gpu_autotune_level=0 skips it, at the risk of slower kernels."
        )
    runtime = runtime_lines(result)
    if runtime:
        calls = sum(line.calls for line in runtime)
        kinds = dict.fromkeys("copy" if line.is_copy else line.activity for line in runtime)
        what = ", ".join(RUNTIME_WORDS.get(kind, kind) for kind in kinds)
        places = _places(f"{line.file}:{line.line}" for line in runtime)
        said.append(
            f"XLA's runtime made {plural(calls, 'call')} on its own threads ({what}; marked "
            f"(other thread) in the Where tables, at {places}): "
            f"{format_ms(math.fsum(line.gpu_ms for line in runtime))} of GPU time and "
            f"{format_ms(math.fsum(line.host_ms for line in runtime))} of host time on those "
            "threads. JAX makes these calls for the program, so no advice on lines names "
            "them (the advice on copies by memory kind counts their copies with the "
            "program's): the program changes them only through what it asks of JAX (the "
            "arrays it moves between host and GPU, and how often it reads a result back)."
        )
    return said + cudnn_verdict(result, scale)


def cudnn_tuning(result: Result) -> list[str]:
    """The cuDNN kernels that ran only while cuDNN timed its algorithms (benchmark on):
    never launched once the launches settle into steps (steady_start); none without steps."""
    timeline = result.extra.timeline
    if not result.extra.cudnn_benchmark or timeline is None:
        return []
    kernel = GPU_CATEGORIES.index("kernel")
    launches = [
        name
        for category, name, *_ in timeline.gpu  # in order of start
        if category == kernel and "cudnn" in timeline.names[name]
    ]
    firsts: dict[int, int] = {}
    for at, name in enumerate(launches):
        firsts.setdefault(name, at)
    start = steady_start(launches, max(firsts.values(), default=0))
    if start is None:
        return []
    steady = set(launches[start:])
    return [timeline.names[name] for name in firsts if name not in steady]


def steady_start(launches: list[int], last_new: int) -> int | None:
    """Where the launches become steps: the shortest sequence repeating at least twice to
    the end, begun within one repetition of the last new kernel; None where there is none."""
    end = len(launches) - 1
    for period in range(1, len(launches) // 2 + 1):
        if launches[end - period] != launches[end]:
            continue
        at = end - period
        while at >= 0 and launches[at] == launches[at + period]:
            at -= 1
        start = at + 1
        if len(launches) - start >= 2 * period:  # the steps' own, not a multiple of it
            return start if start <= last_new + period else None
    return None


def _tuning_cost(tuning: list, scale: RunScale) -> tuple[str, str]:
    """An autotuner's kernels counted, and their time with its share of all the GPU's work."""
    tuning_ms = math.fsum(s for m in tuning for s in m.samples_ms)
    share = format_percent(tuning_ms / scale.gpu_ms) if scale.gpu_ms > 0 else "-"
    return plural(sum(len(m.samples_ms) for m in tuning), "kernel"), (
        f"{format_ms(tuning_ms)}, {share} of the GPU's {format_ms(scale.gpu_ms)} of work "
        "(kernels, copies and memsets summed)"
    )


def cudnn_verdict(result: Result, scale: RunScale) -> list[str]:
    """cuDNN's autotuning and when torch.backends.cudnn.benchmark pays; nothing with it off."""
    names = set(cudnn_tuning(result))
    tuning = [m for m in result.measurements if m.group == "gpu" and m.name in names]
    if not tuning:
        return []
    kernels, cost = _tuning_cost(tuning, scale)
    return [
        f"cuDNN's autotuning (torch.backends.cudnn.benchmark on) ran at least {kernels} of "
        f"{plural(len(tuning), 'kind')} that the program's later steps never ran: {cost}, "
        "spent timing each new convolution shape's algorithms, once per shape, not per step. It "
        "pays when shapes stay fixed (each step then runs the fastest algorithm); where "
        "batch or image sizes vary, each new shape is timed again: set "
        "torch.backends.cudnn.benchmark = False there."
    ]


def runtime_lines(result: Result) -> list[SourceLine]:
    """Lines of calls on XLA's runtime threads (no Python frames) where XLA ran the program's
    GPU work (it imported jax, or its autotuner ran): JAX's, not the program's."""
    if "jax" not in result.extra.libraries and not _tuning(result):
        return []
    return [line for line in result.extra.lines or [] if line.origin == "thread"]


def summarize(result: Result) -> Summary:
    """The trace's tables (time, copies by memory kind, Where) and its advice."""
    copies, bandwidth = result.extra.copies, result.extra.pinned_bandwidth
    totals = result.timing.unified_memory if result.timing else None
    # the Unified Memory section is the profile's own, as nvprof printed it (memprof.render)
    time, verdicts = time_tables(result)
    tables = time + ([copies_table(copies, bandwidth)] if copies else [])
    scale = run_scale(result)
    said = advice(copies, bandwidth, totals, result.extra.small_copies, scale)
    conclusions = [outcome_line(result), *verdicts, *framework_verdicts(result, scale), *said]
    lines = result.extra.lines
    if lines is not None:
        tables += where_tables(lines, result.parameters.stacks)
        runtime = runtime_lines(result)
        own = [line for line in lines if line not in runtime]
        conclusions += line_advice(own, result.extra.libraries, scale)
    if result.extra.lines_note:
        conclusions.append(f"Source lines: {result.extra.lines_note}.")
    return Summary(
        tables=tables, conclusions=conclusions, show_profile=True, timing_note=timing_note(result)
    )


COPY_MEASURES = {  # the copies of a trace's operations, in this order, before the arrays'
    "HtoD": "each copy host → device, by memory kinds and size",
    "DtoH": "each copy device → host",
    "DtoD": "each copy within the GPU",
    "HtoH": "each copy within the host",
    "PtoP": "each copy between GPUs",
}


class Trace(base.Experiment):
    """Your own program under CUPTI: the Result memprof.trace.collect records."""

    name = "trace"
    Params = TraceParams  # what a trace records: what ran, not the command line
    Extra = TraceExtra
    measures = (
        *(
            base.Measure(
                "gpu",
                kind.lower(),
                COPY_MEASURES.get(kind, f"each {kind} copy (CUDA arrays)"),
                "one operation",
                False,
            )
            for kind in sorted(get_args(CopyDirection), key=lambda kind: kind not in COPY_MEASURES)
        ),
        base.Measure("gpu", "memset", "each memset", "one operation", False),
        base.Measure("gpu", "kernel", "each kernel, by name", "one operation", False),
        base.Measure(
            "api",
            "api_call",
            "each driver and runtime call that launches, copies, sets, allocates, frees, "
            "registers, prefetches or waits (with --all-calls, every call)",
            "driver call",
            False,
        ),
    )

    @classmethod
    def result_shape(cls) -> ResultShape:
        """Checked without the GPU's facts: extra.gpu_name and driver_version say which."""
        experiment = cls()
        check = functools.partial(base.check_recorded, experiment)
        return ResultShape(cls.Params, cls.Extra, check, experiment.derived)

    def check_consistency(self, result: Result) -> None:
        if result.extra.error and result.extra.exit_code == 0:
            raise SchemaError(
                "extra.exit_code", f"is 0, but the program raised {result.extra.error!r}"
            )
        bandwidth = result.extra.pinned_bandwidth or {}
        for name in ("gpu_name", "driver_version"):  # the advice's figures are this GPU's
            whose, ran = bandwidth.get(name), getattr(result.extra, name)
            if whose is not None and ran and whose != ran:
                raise SchemaError(
                    f"extra.pinned_bandwidth.{name}",
                    f"is {whose!r}, but the program ran with {ran!r}: the advice would use "
                    "another GPU's figures",
                )
        measured = [key for key in ("h2d_gb_per_s", "d2h_gb_per_s") if key in bandwidth]
        for name in ("bytes", "how"):  # the Copies table says at what size and how
            value = bandwidth.get(name)
            if measured and not value:
                raise SchemaError(
                    f"extra.pinned_bandwidth.{name}",
                    f"is {'missing' if value is None else repr(value)}, but "
                    f"extra.pinned_bandwidth.{measured[0]} is there: a measured bandwidth "
                    "keeps its copies' size and how it was had",
                )
        small = result.extra.small_copies
        if small is not None and small.costs and small.copies < 1:
            raise SchemaError(
                "extra.small_copies.copies", "is 0, but its costs are of copies moved at once"
            )
        copies = result.extra.copies
        rows = copy_rows(result)
        by_name = dict(rows)
        seen = set()
        for index, group in enumerate(copies):
            name = copy_row_name(group.direction, group.source, group.destination)
            if name in seen:
                raise SchemaError(f"extra.copies[{index}]", f"is {name!r} again")
            seen.add(name)
            check_copy_group(group, by_name.pop(name, []), f"extra.copies[{index}]")
        for name in by_name:
            raise SchemaError("extra.copies", f"has no group for the measured {name!r}")
        if result.extra.blocked is not None:
            check_blocked(result.extra.blocked, copies, rows)
        check_lines(result)
        if not result.parameters.all_calls:
            for m in result.measurements:
                if m.group == "api" and not is_work_call(m.name):
                    raise SchemaError(
                        "measurements",
                        f"hold {m.name!r}, which neither launches nor copies, sets, "
                        "allocates, frees, registers, prefetches or waits, but "
                        "parameters.all_calls is false",
                    )
        check_timeline(result)


def copy_rows(result: Result) -> dict[str, list]:
    """The copy measurements by profile row, one per size; each of the direction it names."""
    by_name: defaultdict[str, list] = defaultdict(list)
    for m in result.measurements:  # 10^5 in a trace: the names tested once each, after
        if m.group == "gpu":
            by_name[m.name].append(m)
    rows = {name: found for name, found in by_name.items() if name.startswith("[CUDA memcpy ")}
    for name, copies in rows.items():
        named = COPY_NAME.match(name)
        wrong = (
            next((m for m in copies if m.operation != named[1].lower()), None) if named else None
        )
        if wrong is not None:
            index = next(i for i, m in enumerate(result.measurements) if m is wrong)
            raise SchemaError(
                f"measurements[{index}].operation", f"is {wrong.operation!r}, but it is {name!r}"
            )
    return rows


def _close(a: float, b: float) -> bool:
    """Sums of the same times in another order."""
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


COPY_NAME = re.compile(r"\[CUDA memcpy (\w+)\]")
# which end of a copy is on the host and which on the GPU, by CUPTI's memory kinds
HOST_ONLY, GPU_ONLY = {"pageable", "pinned"}, {"device", "device static", "array"}


_BYTES = attrgetter("bytes")


def check_copy_group(group: CopyGroup, rows: list, where: str) -> None:
    """A group's totals are its copies', the small ones apart; a host → device copy reads no
    GPU memory and writes no host memory (and back)."""
    ends = {"HtoD": (GPU_ONLY, HOST_ONLY), "DtoH": (HOST_ONLY, GPU_ONLY)}
    impossible = ends.get(group.direction, ((), ()))
    for field, kinds in zip(("source", "destination"), impossible, strict=True):
        kind = getattr(group, field)
        if kind in kinds:
            raise SchemaError(f"{where}.{field}", f"is {kind!r} in a {group.direction} copy")
    small = [m for m in rows if m.bytes < SMALL_COPY_BYTES]
    calls, small_calls = [len(m.samples_ms) for m in rows], [len(m.samples_ms) for m in small]
    totals = {  # each sum over the copies at C speed: a trace holds 10^5
        "calls": (group.calls, sum(calls)),
        "bytes": (group.bytes, sum(map(mul, map(_BYTES, rows), calls))),
        "small_calls": (group.small_calls, sum(small_calls)),
        "small_bytes": (group.small_bytes, sum(map(mul, map(_BYTES, small), small_calls))),
    }
    for field, (found, measured) in totals.items():
        if found != measured:
            raise SchemaError(f"{where}.{field}", f"is {found}, but its copies make {measured}")
    for field, found, measured in (
        ("gpu_ms", group.gpu_ms, math.fsum([s for m in rows for s in m.samples_ms])),
        ("small_gpu_ms", group.small_gpu_ms, math.fsum([s for m in small for s in m.samples_ms])),
    ):
        if not _close(found, measured):
            raise SchemaError(f"{where}.{field}", f"is {found}, but its copies took {measured}")
    if group.blocking_calls > group.calls:
        raise SchemaError(
            f"{where}.blocking_calls", f"is {group.blocking_calls}, more than calls ({group.calls})"
        )
    if group.blocked_ms > group.call_ms and not _close(group.blocked_ms, group.call_ms):
        raise SchemaError(
            f"{where}.blocked_ms",
            f"is {group.blocked_ms}, more than all its calls took (call_ms {group.call_ms})",
        )


def check_blocked(blocked: list[BlockedCopies], copies: list[CopyGroup], rows: dict) -> None:
    """Blocking copies by row and size: measured, as many as each group blocked on."""
    blocking = {row.name for row in blocked} & rows.keys()  # the rows that blocked, only
    measured = {(m.name, m.bytes): m.samples_ms for name in blocking for m in rows[name]}
    calls: defaultdict[str, int] = defaultdict(int)
    waited: defaultdict[str, list[float]] = defaultdict(list)
    for index, row in enumerate(blocked):  # one a size: 10^4 in a trace
        samples_ms = measured.get((row.name, row.bytes), [])
        count, row_calls, gpu_ms = len(samples_ms), row.calls, row.gpu_ms
        if row_calls > count:
            raise SchemaError(
                f"extra.blocked[{index}].calls",
                f"is {row_calls}, but {count} such copies were measured",
            )
        if count == 1:  # most sizes are copied once: the sums below without sorting
            least_ms = most_ms = float(samples_ms[0]) if row_calls else 0.0  # fsum of one
        else:
            ordered = sorted(samples_ms)  # its calls' copies are row.calls of these
            least_ms = math.fsum(ordered[:row_calls])
            most_ms = math.fsum(ordered[count - row_calls :])
        if not least_ms <= gpu_ms <= most_ms and not any(
            _close(gpu_ms, edge) for edge in (least_ms, most_ms)
        ):
            raise SchemaError(
                f"extra.blocked[{index}].gpu_ms",
                f"is {gpu_ms}, but {row_calls} of its {count} measured copies took "
                f"{least_ms} to {most_ms}",
            )
        if row.paired > row_calls:
            raise SchemaError(
                f"extra.blocked[{index}].paired", f"is {row.paired}, more than calls ({row_calls})"
            )
        calls[row.name] += row_calls
        waited[row.name].append(row.blocked_ms)
    for index, group in enumerate(copies):
        name = copy_row_name(group.direction, group.source, group.destination)
        if calls.get(name, 0) != group.blocking_copies:
            raise SchemaError(
                f"extra.copies[{index}]",
                f"blocked the host on {group.blocking_copies} copies, but extra.blocked "
                f"has {calls.get(name, 0)}",
            )
        total = math.fsum(waited.get(name, []))
        if not _close(total, group.blocked_ms):
            raise SchemaError(
                f"extra.copies[{index}].blocked_ms",
                f"is {group.blocked_ms}, but extra.blocked's calls took {total}",
            )


def check_lines(result: Result) -> None:
    """The lines hold every copy and memset measured, once; each line once; no more callers
    than the stack depth kept."""
    lines, depth = result.extra.lines, result.parameters.stack_depth
    if lines is None:
        return
    if depth == 0:
        raise SchemaError("extra.lines", "holds lines, but parameters.stack_depth is 0")
    seen = set()
    wall_ms = result.extra.wall_s * 1e3
    for index, line in enumerate(lines):
        if line.key in seen:
            raise SchemaError(f"extra.lines[{index}]", f"is {line.place} {line.activity} again")
        seen.add(line.key)
        longest_ms = max(line.host_ms_each, default=0.0)
        if line.origin != "thread" and longest_ms > wall_ms and not _close(longest_ms, wall_ms):
            raise SchemaError(  # another thread may call on after the program's end
                f"extra.lines[{index}].host_ms_each",
                f"holds a call of {format_ms(longest_ms)}, longer than the program's "
                f"{format_ms(wall_ms)} (extra.wall_s)",
            )
        for number, chain in enumerate(line.chains):
            if len(chain.frames) >= depth:
                raise SchemaError(
                    f"extra.lines[{index}].chains[{number}].frames",
                    f"has {len(chain.frames)} frames, but a stack depth of {depth} keeps "
                    f"{depth - 1} callers",
                )
    check_line_calls(result, lines)
    measured: dict[str, list] = {}  # activity -> its measurements
    for m in result.measurements:
        named = COPY_NAME.match(m.name) if m.group == "gpu" else None
        if named or (m.group == "gpu" and m.operation == "memset"):  # "HtoD pageable -> device"
            activity = f"{named[1]} {m.name[named.end() :].strip()}" if named else "memset"
            measured.setdefault(activity, []).append(m)
    grouped = dict(by_activity(lines))
    for activity in set(measured) | {a for a in grouped if a not in CALL_KINDS[2:]}:
        if activity == "copy":
            continue
        rows, held = measured.get(activity, []), grouped.get(activity, [])
        nbytes = sum(m.bytes * len(m.samples_ms) for m in rows)
        gpu_ms = math.fsum(s for m in rows for s in m.samples_ms)
        line_bytes = sum(line.bytes for line in held)
        if line_bytes != nbytes:
            raise SchemaError(
                "extra.lines", f"hold {line_bytes} bytes of {activity}, but it measured {nbytes}"
            )
        line_ms = math.fsum(s for line in held for s in line.gpu_ms_each)
        if not _close(line_ms, gpu_ms):
            raise SchemaError(
                "extra.lines", f"hold {line_ms} ms of {activity}, but it measured {gpu_ms}"
            )


def check_line_calls(result: Result, lines: list[SourceLine]) -> None:
    """Lines of one driver call made no more of it than the profile counts (where it does)."""
    profiled: Counter[str] = Counter()  # a call's name without its version -> calls
    for m in result.measurements:
        if m.group == "api":
            profiled[base_name(m.name)] += len(m.samples_ms)
    made: Counter[str] = Counter()
    for line in lines:
        if len(line.api) == 1 and line.api[0] in profiled:
            made[line.api[0]] += line.calls
    for name, calls in made.items():
        if calls > profiled[name]:
            raise SchemaError(
                "extra.lines",
                f"hold {calls} calls of {name}, but the profile counts {profiled[name]}",
            )


def check_timeline(result: Result) -> None:
    """The timeline holds every GPU operation and call measured, once, as long as the
    profile says, and only lines the trace has."""
    timeline = result.extra.timeline
    if timeline is None:
        return
    lines = len(result.extra.lines or [])
    beyond = max([row[7] for row in timeline.gpu] + [row[4] for row in timeline.api], default=-1)
    if beyond >= lines:
        raise SchemaError("extra.timeline", f"names line {beyond}, but there are {lines}")
    measured: dict[tuple[str, str], list[float]] = {}
    for m in result.measurements:
        measured.setdefault((m.group, m.name), []).extend(m.samples_ms)
    drawn: dict[tuple[str, str], list[float]] = {}
    for rows, group, at in ((timeline.gpu, "gpu", 3), (timeline.api, "api", 2)):
        for row in rows:
            name = timeline.names[row[1 if group == "gpu" else 0]]
            drawn.setdefault((group, name), []).append(row[at] / 1e6)
    for key in sorted(set(measured) | set(drawn)):
        found, wanted = sorted(drawn.get(key, [])), sorted(measured.get(key, []))
        if len(found) != len(wanted) or not all(map(_close, found, wanted)):
            raise SchemaError(
                "extra.timeline",
                f"holds {len(found)} {key[0]} events of {key[1]!r} "
                f"({format_ms(math.fsum(found))}), but the profile measured {len(wanted)} "
                f"({format_ms(math.fsum(wanted))})",
            )


# -- where: the program's lines behind the copies, memsets, allocations and waits ------------

WHERE_TOP = 3  # lines shown per activity: the top 3 by each of GPU time, bytes, host, calls
LINES_ADVISED = 3  # lines named per finding
REPEATED = 2  # calls at one line that make it a loop's: one wait or allocation is not advice
ADVISED_ORIGINS = ("program", "thread")  # lines the program can change
CALL_TITLES = {
    "copy": "copies without a GPU record",
    "memset": "memsets",
    "alloc": "allocations",
    "free": "frees",
    "register": "host memory registrations",
    "prefetch": "prefetches",
    "wait": "waits for the GPU",
}
WHERE_CALLERS_NOTE = " A trace run with `memprof trace --stacks` shows each line's callers."
WHERE_NOTE = (
    "Line: the innermost line of your program on the call's stack (files relative to the "
    "program's folder); (other thread): made on a thread without Python frames, shown at the "
    "main thread's line then; (library): no line of yours on that thread, the library's. "
    "Calls: API calls. GPU time: CUPTI's records of their work, summed. Host: the calls, "
    "entry to exit, summed: what the line waited for (a pageable copy's staging, a wait's "
    "GPU work). Shown: the {top} lines with the most GPU time, bytes, host time and calls "
    "(the most of each highlighted)."
)


def _activity_order(activity: str, lines: list[SourceLine]) -> tuple:
    """Copies first, the most GPU time first; then memsets and the calls, in CALL_KINDS order."""
    if activity not in CALL_KINDS:
        return (0, -math.fsum(line.gpu_ms for line in lines), activity)
    return (1 + CALL_KINDS.index(activity), 0.0, activity)


def by_activity(lines: list[SourceLine]) -> list[tuple[str, list[SourceLine]]]:
    grouped: dict[str, list[SourceLine]] = {}
    for line in lines:
        grouped.setdefault(line.activity, []).append(line)
    return sorted(grouped.items(), key=lambda item: _activity_order(*item))


def top_lines(lines: list[SourceLine], top: int = WHERE_TOP) -> list[SourceLine]:
    """The lines among the `top` of any measure (GPU time, bytes, host time, calls), the
    most time first."""
    picked: dict[int, SourceLine] = {}
    for measure in (attrgetter(name) for name in ("gpu_ms", "bytes", "host_ms", "calls")):
        ranked = sorted((s for s in lines if measure(s) > 0), key=measure, reverse=True)
        for line in ranked[:top]:
            picked[id(line)] = line
    return sorted(
        picked.values(), key=lambda s: (-(s.gpu_ms + s.host_ms), -s.calls, s.file, s.line)
    )


def _size_words(line: SourceLine) -> str:
    if line.smallest_bytes == line.largest_bytes:
        return format_bytes(line.largest_bytes)
    return f"{format_bytes(line.smallest_bytes)} to {format_bytes(line.largest_bytes)}"


def _lines_column(header: str, figure: str, shown: Callable[[Any], str]) -> Column:
    """A Where column: one line's figure, or the other lines' summed (a Derived)."""

    def cell(one: SourceLine | Derived) -> str:
        lines = one if isinstance(one, Derived) else Derived("", (one,), "lines")
        return _or_dash(lines.line_total(figure), shown)

    return Column(header, figure, cell)


WHERE_FIGURES = ("calls", "bytes", "gpu_ms", "host_ms")  # each a column's key
WHERE_WORK = [  # copies and memsets: bytes and GPU time
    Column("Line", "place"),
    _lines_column("Calls", "calls", str),
    _lines_column("Bytes", "bytes", format_bytes),
    _lines_column("GPU time", "gpu_ms", format_ms),
    _lines_column("Host", "host_ms", format_ms),
]
WHERE_CALLS = [  # the other calls: which call, and how long the host spent in it
    Column("Line", "place"),
    Column("Call", "call"),
    _lines_column("Calls", "calls", str),
    _lines_column("Host", "host_ms", format_ms),
]


def where_table(activity: str, lines: list[SourceLine], show_chains: bool) -> Table:
    """One activity's top lines (with their callers on request), then the rest summed."""
    columns = WHERE_WORK if lines[0].timed_on_gpu else WHERE_CALLS
    title = CALL_TITLES[activity] if activity in CALL_KINDS else f"copies {activity}"
    blank = dict.fromkeys(("call", *WHERE_FIGURES), "")
    rows: list[dict[str, Any]] = []
    best: dict[str, tuple[float, int]] = {}  # figure -> (the most, its row)
    shown = top_lines(lines)
    for line in shown:
        for figure in WHERE_FIGURES:
            value = getattr(line, figure)
            if value > best.get(figure, (0, -1))[0]:
                best[figure] = (value, len(rows))
        place = f"{line.place} {line.function}" if show_chains and line.chains else line.place
        call = ", ".join(line.api) or "-"
        # its CSV row: the line's (group "line")
        rows.append(dict.fromkeys(WHERE_FIGURES, line) | {"place": place, "call": call})
        for chain in line.chains if show_chains else ():
            for index, frame in enumerate(chain.frames):
                calls = str(chain.calls) if index == 0 else ""
                place = f"  ← {frame.file}:{frame.line} {frame.function}"
                rows.append(blank | {"place": place, "calls": calls})
    rest = [line for line in lines if all(line is not s for s in shown)]
    if rest:  # its CSV row: a derived one, the lines summed
        others = Derived(f"Where: {title}, {plural(len(rest), 'other line')}", tuple(rest), "lines")
        place = f"({plural(len(rest), 'other line')})"
        rows.append(dict.fromkeys(WHERE_FIGURES, others) | {"place": place, "call": ""})
    made = table(f"Where: {title}", columns, rows)
    keys = [column.of for column in columns]
    made.highlighted = [(row, keys.index(key)) for key, (_, row) in best.items() if key in keys]
    return made


def where_tables(lines: list[SourceLine], show_chains: bool) -> list[Table]:
    """One table per activity, copies first; how to read them under the last."""
    tables = [where_table(activity, group, show_chains) for activity, group in by_activity(lines)]
    if tables:
        callers = "" if show_chains else WHERE_CALLERS_NOTE
        tables[-1].notes.append(WHERE_NOTE.format(top=WHERE_TOP) + callers)
    return tables


# What to do about a line, in the words of the library the program used (the first of these
# it imported), else in the CUDA API's.
LIBRARY_ORDER = ("torch", "cupy", "numba", "pycuda")
PAGEABLE_REMEDY = {
    ("torch", "HtoD"): (
        "pass pin_memory=True to the DataLoader (or pin the tensor once, .pin_memory()) and "
        "copy with non_blocking=True"
    ),
    ("torch", "DtoH"): (
        "copy into a pinned tensor (torch.empty(..., pin_memory=True), allocated once) with "
        "non_blocking=True"
    ),
    ("cupy", None): (
        "copy from or to pinned memory (cupyx.empty_pinned, allocated once) on a stream"
    ),
    ("numba", None): (
        "allocate the host array pinned (numba.cuda.pinned_array, once) and copy on a stream"
    ),
    ("pycuda", None): (
        "allocate the host array pinned (pycuda.driver.pagelocked_empty, once) and copy with "
        "memcpy_htod_async / memcpy_dtoh_async"
    ),
    (None, None): (
        "allocate the host buffer pinned (cudaHostAlloc, cuMemHostAlloc) once and reuse it"
    ),
}
# What a wait waited for, by the call that waited (its name without version suffixes)
SYNC_SCOPES = {
    "cuCtxSynchronize": "device",
    "cudaDeviceSynchronize": "device",
    "cudaThreadSynchronize": "device",
    "cuStreamSynchronize": "stream",
    "cudaStreamSynchronize": "stream",
    "cuEventSynchronize": "event",
    "cudaEventSynchronize": "event",
}
SCALAR_BYTES = 16  # a read of one value copies one element back: complex128 at most
WAIT_REMEDY = {
    "item": (
        "each reads one value back ({scalar}: a copy of {size} and a wait for all the work "
        "queued on its stream, every call): read such values every few steps, or keep them "
        "on the GPU"
    ),
    "copy": (
        "these are the waits of blocking copies made at this line ({blocking}): each waits "
        "for all the work queued on its stream, and the copy overlaps nothing; copy "
        "asynchronously ({asynchronous}) from or to pinned memory, and wait once, where the "
        "data is used"
    ),
    "event": (
        "an event's synchronize waits only for the work queued before that event was "
        "recorded: the narrowest wait there is; where the host needs no result yet, record "
        "it later or poll it (query()) and do host work meanwhile"
    ),
    "stream": (
        "a stream's synchronize waits for all the work queued on that stream: wait on an "
        "event recorded right after the work whose result the host needs, and only where "
        "it needs it"
    ),
    "device": (
        "a device-wide synchronize waits for the work queued on every stream of the GPU "
        "({device}): wait on the one stream or event that holds the result, and only where "
        "the host needs it"
    ),
    "other": (
        "the host waits here for the GPU's queued work: synchronize only where it needs a result"
    ),
}
WAIT_WORDS = {  # the library's own words in the sentences above, the CUDA API's by default
    "torch": {
        "scalar": ".item(), float() or a print of a one-element CUDA tensor",
        "blocking": ".to(), .cpu(), copy_() without non_blocking=True",
        "asynchronous": "non_blocking=True",
        "device": "torch.cuda.synchronize()",
    },
    "cupy": {"scalar": ".item() or float() of a CuPy scalar", "device": "Device.synchronize()"},
    None: {
        "scalar": "a one-value read",
        "blocking": "synchronous calls, or from or to pageable memory",
        "asynchronous": "cudaMemcpyAsync on a stream",
        "device": "cudaDeviceSynchronize, cuCtxSynchronize",
    },
}


def wait_cause(wait: SourceLine, beside: list[SourceLine]) -> str:
    """What a line's waits were: as many stream waits as blocking copies there (of one value
    back: .item()), else the broadest scope its calls waited on."""
    scopes = {SYNC_SCOPES.get(name) for name in wait.api}
    copies = [line for line in beside if line.is_copy]
    if scopes == {"stream"} and copies and wait.calls <= sum(c.calls for c in copies):
        back = [c for c in copies if c.copy_ends()[0] == "DtoH"]
        if back and back == copies and max(c.largest_bytes for c in back) <= SCALAR_BYTES:
            return "item"
        return "copy"
    return next((scope for scope in ("device", "stream", "event") if scope in scopes), "other")


def wait_remedy(wait: SourceLine, beside: list[SourceLine], library: str | None) -> str:
    cause = wait_cause(wait, beside)
    words = {**WAIT_WORDS[None], **WAIT_WORDS.get(library, {})}
    copies = [line for line in beside if line.is_copy]
    size = _size_words(max(copies, key=lambda c: c.largest_bytes)) if copies else ""
    return WAIT_REMEDY[cause].format(size=size, **words)


# What an allocator call costs, by the calls a line made (names without version suffixes):
# a free of device or pinned memory, and an unregistration, wait for the work queued on every
# stream of the GPU; a cudaMalloc may wait too, where the driver takes back memory freed
# before; a stream-ordered call (cudaMallocAsync, cuMemFreeAsync) waits for nothing.
DEVICE_WIDE_FREES = ("cudaFree", "cuMemFree", "cudaFreeHost", "cuMemFreeHost", "cudaFreeArray")
PINNING_ALLOCS = ("cudaHostAlloc", "cudaMallocHost", "cuMemHostAlloc", "cuMemAllocHost")
UNREGISTERS = ("cudaHostUnregister", "cuMemHostUnregister")
POOL_REMEDY = "a stream-ordered pool (cudaMallocAsync and cudaFreeAsync, cuMemPool)"
CALL_REMEDY = {
    "alloc": (
        "each can wait for the GPU too (where the driver takes back memory freed before) "
        f"and costs the host every call: allocate once, before the loop, and reuse the "
        f"memory, or allocate from {POOL_REMEDY}"
    ),
    "pin": (
        "each pins the pages of a new host buffer, at a host cost that grows with its size: "
        "allocate it once, before the loop, and reuse it"
    ),
    "pool": (
        "these are stream-ordered, from a pool, and wait for no other work, but each still "
        "costs the host: allocate once, before the loop, where the sizes allow"
    ),
    "free": (
        "each waits for all the work queued on every stream of the GPU before it frees: free "
        f"once, after the loop, or allocate from {POOL_REMEDY}, whose frees wait for nothing"
    ),
    "other free": "free once, after the loop, and reuse the memory meanwhile",
    "torch alloc": (
        "PyTorch's caching allocator asks CUDA for memory only where its cache holds no free "
        "block that fits (a first step, a new shape, or after torch.cuda.empty_cache()): keep "
        "the step's shapes fixed and do not call empty_cache() in the loop"
    ),
    "torch free": (
        "PyTorch's caching allocator returns memory to CUDA only in torch.cuda.empty_cache() "
        "or when an allocation finds no room and it frees its cache to retry, and each "
        "cudaFree waits for all the work queued on every stream of the GPU: do not call "
        "empty_cache() in the loop, and keep the step's memory below the GPU's"
    ),
    "register": "register the buffer once and reuse it: registering pins its pages each time",
    "unregister": (
        "register the buffer once and unregister it after the loop: registering pins its "
        "pages each time, and unregistering waits for all the work queued on every stream "
        "of the GPU"
    ),
}


def call_cause(line: SourceLine, library: str | None) -> str:
    """Which CALL_REMEDY sentence a line gets: its costliest call decides (a device-wide
    free among stream-ordered ones is still a device-wide free)."""
    names = set(line.api)
    if line.activity == "register":
        return "unregister" if names & set(UNREGISTERS) else "register"
    if names and all(name.endswith("Async") for name in names):
        return "pool"
    if line.activity == "free":
        if not names & set(DEVICE_WIDE_FREES):
            return "other free"
        return "torch free" if library == "torch" and "cudaFree" in names else "free"
    if names <= set(PINNING_ALLOCS):
        return "pin"
    return "torch alloc" if library == "torch" and "cudaMalloc" in names else "alloc"


CALL_WORDS = {"alloc": "allocation", "free": "free", "register": "registration"}


FOLD_SHARE = 0.01  # advice whose line cost under 1% of the run, host and GPU alike: one line
FOLD_PLACES = 5  # places named in that line


def _places(places: Iterable[str]) -> str:
    """The first FOLD_PLACES places, each once: `a.py:1, a.py:7 and 3 more`."""
    named = list(dict.fromkeys(places))
    more = f" and {len(named) - FOLD_PLACES} more" if len(named) > FOLD_PLACES else ""
    return ", ".join(named[:FOLD_PLACES]) + more


@dataclass(frozen=True)
class RunScale:
    """What a line's cost is a share of: the program's wall time and all the GPU's time."""

    wall_ms: float
    gpu_ms: float  # every kernel, copy and memset, summed (the profile's GPU activities)

    def of_run(self, ms: float) -> float:
        return ms / self.wall_ms if self.wall_ms > 0 else 0.0

    def cost(self, line: SourceLine) -> float:
        """The larger of its GPU time and the host time it blocked, as a share of the run."""
        return self.of_run(max(line.gpu_ms, line.host_ms))


def run_scale(result: Result) -> RunScale:
    gpu = math.fsum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms)
    return RunScale(result.extra.wall_s * 1e3, gpu)


def _cost(line: SourceLine, scale: RunScale | None = None) -> str:
    """`38.6 ms of GPU time, the host blocked 41 ms`, with their shares where scale is known."""
    parts = []
    if line.gpu_ms_each:
        share = f" ({format_percent(line.gpu_ms / scale.gpu_ms)} of all)" if scale else ""
        parts.append(f"{format_ms(line.gpu_ms)} of GPU time{share}")
    if line.host_ms_each:
        share = f" ({format_percent(scale.of_run(line.host_ms))} of the run)" if scale else ""
        parts.append(f"the host blocked {format_ms(line.host_ms)}{share}")
    return ", ".join(parts)


def _ranked(lines: list[SourceLine], keep, key=lambda s: s.gpu_ms + s.host_ms) -> list[SourceLine]:
    chosen = [s for s in lines if s.origin in ADVISED_ORIGINS and keep(s)]
    return sorted(chosen, key=key, reverse=True)[:LINES_ADVISED]


def line_advice(
    lines: list[SourceLine], libraries: list[str], scale: RunScale | None = None
) -> list[str]:
    """The advice, line by line: pageable copies, repeated small copies, waits and calls
    made again and again at one line, the costliest first; under FOLD_SHARE in one line."""
    said = _line_findings(lines, next((n for n in LIBRARY_ORDER if n in libraries), None))
    if scale is None:
        return [_advised(line, what, remedy) for line, what, remedy in said]
    said.sort(key=lambda found: -scale.cost(found[0]))
    costly = [found for found in said if scale.cost(found[0]) >= FOLD_SHARE]
    out = [_advised(line, what, remedy, scale) for line, what, remedy in costly]
    cheap = [found[0] for found in said[len(costly) :]]
    if cheap:
        places = _places(line.place for line in cheap)
        gpu = format_ms(math.fsum(line.gpu_ms for line in cheap))
        host = format_ms(math.fsum(line.host_ms for line in cheap))
        out.append(
            f"{plural(len(cheap), 'finding')} at {places} cost under {FOLD_SHARE:.0%} "
            f"of the program's {format_ms(scale.wall_ms)} each, in GPU time and in host time "
            f"blocked ({gpu} and {host} together): the Where tables hold them."
        )
    return out


def _line_findings(lines: list[SourceLine], library: str | None) -> list[tuple]:
    """(line, what it did, what to do) of each line worth advice, finding by finding."""
    said = []
    at_place: dict[tuple, list[SourceLine]] = {}
    for line in lines:
        at_place.setdefault(line.key[1:], []).append(line)
    for line in _ranked(
        lines, lambda s: s.host_kind() == "pageable" and s.largest_bytes >= SMALL_COPY_BYTES
    ):
        direction = line.copy_ends()[0]
        remedy = PAGEABLE_REMEDY.get((library, direction)) or PAGEABLE_REMEDY.get(
            (library, None), PAGEABLE_REMEDY[None, None]
        )
        callers = pageable_callers(line, at_place[line.key[1:]])
        if callers:
            named = ", ".join(
                f"{place} ({plural(calls, 'copy', 'copies')})" for place, calls in callers
            )
            remedy += f"; the pageable memory came from {named}: the line to change"
        copies = plural(line.calls, f"pageable {direction} copy", f"pageable {direction} copies")
        said.append((line, f"{copies} of {_size_words(line)}", remedy))
    small = _ranked(
        lines,
        lambda s: s.is_copy and 0 < s.largest_bytes < SMALL_COPY_BYTES and s.calls >= REPEATED,
        lambda s: s.calls,
    )
    for line in small:
        remedy = "each is latency, not bandwidth; gather them into one buffer and copy it once"
        said.append((line, f"{line.calls} copies of {_size_words(line)}", remedy))
    for line in _ranked(lines, lambda s: s.activity == "wait" and s.calls >= REPEATED):
        remedy = wait_remedy(line, at_place[line.key[1:]], library)
        said.append((line, f"{line.calls} waits ({', '.join(line.api)})", remedy))
    for line in _ranked(lines, lambda s: s.activity in CALL_WORDS and s.calls >= REPEATED):
        what = f"{plural(line.calls, CALL_WORDS[line.activity])} ({', '.join(line.api)})"
        said.append((line, what, CALL_REMEDY[call_cause(line, library)]))
    return said


def pageable_callers(line: SourceLine, beside: list[SourceLine]) -> list[tuple[str, int]]:
    """Where a helper line copies for its callers, the callers that chose pageable memory:
    each chain's first frame that parts from every pinned copy's chain at that line ([]
    where the chains do not tell: one caller, or none different from the pinned)."""
    direction = line.copy_ends()[0]
    pinned = [
        chain.frames
        for other in beside
        if other.host_kind() == "pinned" and other.copy_ends()[0] == direction
        for chain in other.chains
    ]
    calls: Counter[str] = Counter()
    for chain in line.chains:
        frames = chain.frames
        parting = next(
            (
                frame
                for depth, frame in enumerate(frames)
                if not any(other[: depth + 1] == frames[: depth + 1] for other in pinned)
            ),
            None,
        )
        if parting is not None:
            calls[f"{parting.file}:{parting.line}"] += chain.calls
    if not pinned and len(calls) < 2:
        return []
    return calls.most_common()


def _advised(line: SourceLine, what: str, remedy: str, scale: RunScale | None = None) -> str:
    """`train.py:42: 134 pageable HtoD copies of 4 MiB, 38.6ms of GPU time, ...: remedy.`"""
    cost = _cost(line, scale)
    return f"{line.place}: {what}{', ' + cost if cost else ''}: {remedy}."
