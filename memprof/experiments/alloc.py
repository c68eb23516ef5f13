"""`memprof alloc`: what allocating and freeing each memory kind costs as sizes grow (seed 000).

Each kind at each size on the host clock (numpy's with every page touched: that is when the OS
provides memory); pools and virtual memory: memprof.experiments.pools. Host memory from
HOST_ONCE_FROM_BYTES up is allocated once: its cost is its pages, the same every time (three
1 GiB allocations on the H200 mostly agreed within 4%), and repeating it was most of alloc's time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from memprof.experiments import base
from memprof.experiments.common import size_label
from memprof.experiments.pools import MEASURES as ALLOCATOR_MEASURES
from memprof.experiments.pools import AllocatorsRecord, summary_parts
from memprof.model.figures import Derived, figure_finder
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.params import param
from memprof.model.results import Result
from memprof.model.schema import DISTINCT, NON_EMPTY, ByteCount, SchemaError
from memprof.model.summary import Column, Summary, Table, table

HOST_ONCE_FROM_BYTES = 256 << 20  # host memory from this size on: one allocation, no warm-up
# the kinds whose allocation is host memory (memory.MEMORY_KINDS' host_copies), by name: a
# saved file is read without importing the GPU side (tests/test_allocators.py holds them equal)
HOST_KINDS = ("pageable", "pinned", "portable", "writecombined", "mapped", "registered")


@dataclass(frozen=True)
class AllocParams:
    powers: base.Powers = base.powers_param((16, 18, 20, 22, 24, 26, 28), step=2)
    repeat: base.Repeat = param(
        3,
        "Timed repetitions of each allocation (1 to 10000); host memory of 256 MiB and more "
        "is allocated once.",
        flags=("--repeat", "-r"),
    )
    warmup: base.Warmup = base.warmup_param(1)


@dataclass(frozen=True)
class AllocExtra:
    kinds: Annotated[list[str], NON_EMPTY, DISTINCT]  # the kinds this GPU supports, in order
    skipped: list[str]  # why each other kind was left out
    # pools, virtual memory and the loop (None: none measured, and files from before them)
    allocators: AllocatorsRecord | None = None
    # host memory (kinds with host_copies) from this size on allocated once per size, not
    # warmed up (None: every allocation --repeat times, as files before)
    host_once_from_bytes: ByteCount | None = None


class Alloc(base.Experiment):
    name = "alloc"
    Params = AllocParams
    Extra = AllocExtra
    measures = (  # host memory of HOST_ONCE_FROM_BYTES and more is allocated once (its own check)
        *(
            dataclasses.replace(measure, per_repeat=False, kinds="extra.kinds")
            for measure in base.ALLOCATIONS
        ),
        *ALLOCATOR_MEASURES,
    )

    def run(self, ctx: base.RunContext) -> AllocExtra:
        from memprof.core import memory
        from memprof.experiments import pools

        session, params = ctx.session, ctx.params
        largest = base.FLOAT32_BYTES << max(params.powers)
        # One buffer at a time is alive, except growing by copy (the old one and one of twice
        # its size) and its check (twice the size on the host); managed memory may migrate to
        # the GPU, so it counts there.
        memory.require_memory(session, device_bytes=3 * largest, host_bytes=2 * largest)
        supported, skipped = memory.supported_kinds(
            ctx.facts[session.device_index].attributes, memory.single_gpu_kinds()
        )
        kinds = [kind.name for kind in supported]
        modern = [kind.name for kind in supported if kind.via_bindings]
        # the kinds phase, then per size the pools and the loop, then a check per kind
        total = len(kinds) * len(params.powers)
        total += 2 * len(params.powers) + len(modern) if modern else 0
        step = ctx.steps(total)
        for power in params.powers:
            for kind in kinds:
                step(f"{kind} memory, {size_label(power)}: allocate and free")
                warmup, repeat = repetitions(kind, base.FLOAT32_BYTES << power, params)
                allocate = partial(memory.allocate, session, kind, 1 << power)
                session.profiler.repeat(lambda allocate=allocate: allocate().free(), warmup, repeat)
        record = pools.measure(ctx, modern, step) if modern else None
        step("done")
        return AllocExtra(kinds, skipped, record, HOST_ONCE_FROM_BYTES)

    def check_consistency(self, result: Result) -> None:
        record = result.extra.allocators
        if record is not None and record.vmm != bool(record.granularity_bytes):
            raise SchemaError(
                "extra.allocators.granularity_bytes",
                f"is {record.granularity_bytes}, but extra.allocators.vmm is "
                f"{str(record.vmm).lower()}: a run that measured virtual memory management "
                "records its granularity (a positive byte count), one that did not records null",
            )
        for index, m in enumerate(result.measurements):
            if (m.group, m.operation) in ALLOCATION_KEYS:
                expected = allocations(result, m.kind, m.bytes)
                if len(m.samples_ms) != expected:
                    raise SchemaError(
                        f"measurements[{index}].samples_ms",
                        f"holds {len(m.samples_ms)} allocations of {m.kind} memory, but "
                        f"parameters.repeat and extra.host_once_from_bytes say {expected}",
                    )
            looped = record is not None and (m.group, m.operation) == ("host", "loop")
            if looped and len(m.samples_ms) != record.loop_iterations:
                raise SchemaError(
                    f"measurements[{index}].samples_ms",
                    f"holds {len(m.samples_ms)} iterations, but "
                    f"extra.allocators.loop_iterations is {record.loop_iterations}",
                )


ALLOCATION_KEYS = frozenset(measure.key for measure in base.ALLOCATIONS)


def _once(kind: str, nbytes: int, threshold: int | None) -> bool:
    """Whether an allocation is made once: host memory from `threshold` (None: never) on."""
    return kind in HOST_KINDS and threshold is not None and nbytes >= threshold


def repetitions(kind: str, nbytes: int, params: AllocParams) -> tuple[int, int]:
    """(warm-ups, timed repetitions) of one kind's allocation at one size."""
    return (0, 1) if _once(kind, nbytes, HOST_ONCE_FROM_BYTES) else (params.warmup, params.repeat)


def allocations(result: Result, kind: str, nbytes: int) -> int:
    """How many timed allocations of a kind at a size a saved run holds."""
    return 1 if _once(kind, nbytes, result.extra.host_once_from_bytes) else result.parameters.repeat


def once_note(result: Result) -> str | None:
    """Which allocations were made once (None: every one as --repeat says)."""
    threshold = result.extra.host_once_from_bytes
    largest = base.FLOAT32_BYTES << max(result.parameters.powers)
    if threshold is None or largest < threshold or result.parameters.repeat == 1:
        return None
    return (
        f"Host memory of {format_bytes(threshold)} and more: one allocation per size, not "
        "warmed up (its cost is its pages, the same every time, and tenths of a second)."
    )


# The kinds side by side in tables of their own, grouped by what they are, so each fits a
# terminal of 80 columns (a kind of no group, a later one, goes in a last table).
KIND_GROUPS = (
    ("numpy memory, pinned in place or migrating", ("pageable", "registered", "managed")),
    ("pinned host memory (cuMemHostAlloc)", ("pinned", "portable", "writecombined", "mapped")),
    ("device memory", ("device", "pool", "pool_kept", "vmm")),
)


def kind_groups(kinds: list[str]) -> list[tuple[str, list[str]]]:
    """The run's kinds by KIND_GROUPS, in the run's order, empty groups left out."""
    grouped = [(title, [k for k in kinds if k in members]) for title, members in KIND_GROUPS]
    others = [k for k in kinds if not any(k in members for _, members in KIND_GROUPS)]
    return [(title, found) for title, found in [*grouped, ("other memory", others)] if found]


def summarize(result: Result) -> Summary:
    tables = []
    for operation, title in (("alloc", "Allocate"), ("free", "Free")):
        for group, kinds in kind_groups(result.extra.kinds):
            tables.append(_kinds_table(result, operation, f"{title} time, {group}", kinds))
    tables[-1].notes += [
        "Medians of each call on the host clock. Pageable and registered include writing "
        "every page (numpy.empty only reserves address space; the first touch is when memory "
        "is provided). cuMemAllocManaged provides no pages yet: they appear, and cost, on "
        "first touch.",
        "Calls: "
        + "; ".join(f"{kind} = {_call_names(result, kind)}" for kind in result.extra.kinds)
        + ".",
    ] + [f"Skipped: {reason}." for reason in result.extra.skipped]
    once = once_note(result)
    if once:
        tables[-1].notes.append(once)
    conclusions = [_cheapest_and_dearest(result)]
    record = result.extra.allocators
    if record is not None:
        tables[-1].notes.append(
            "Stream-ordered kinds (pool, pool_kept) free with cuMemFreeAsync and nothing "
            "synchronizes between repetitions: each allocation reuses the last one's memory. "
            "The tables below take them apart."
        )
        more_tables, more_conclusions = summary_parts(result, record)
        tables += more_tables
        conclusions += more_conclusions
    return Summary(tables=tables, conclusions=conclusions, show_profile=True)


def _call_names(result: Result, kind: str) -> str:
    """What allocating and freeing a kind calls: 'cuMemHostAlloc / cuMemFreeHost'."""
    largest = base.FLOAT32_BYTES << max(result.parameters.powers)
    return " / ".join(
        result.find(operation, kind, byte_count=largest).name for operation in ("alloc", "free")
    )


def _kinds_table(result: Result, operation: str, title: str, kinds: list[str]) -> Table:
    """Some kinds' allocation (or free) at every size, and per GiB at the largest."""
    powers = result.parameters.powers
    largest = base.FLOAT32_BYTES << max(powers)

    def found(kind: str, nbytes: int):
        return result.find(operation, kind, byte_count=nbytes)

    rows = [
        {"size": format_bytes(nbytes), **{kind: found(kind, nbytes) for kind in kinds}}
        for nbytes in (base.FLOAT32_BYTES << power for power in powers)
    ]
    of = figure_finder(result, Alloc.measures)
    per_gib = {
        kind: Derived(f"{kind} {operation}, per GiB", (of(found(kind, largest)),), "per_gib")
        for kind in kinds
    }
    rows.append({"size": "per GiB, largest", **per_gib})
    columns = [Column("Size", "size"), *(Column(kind, kind, "median_ms") for kind in kinds)]
    return table(title, columns, rows)


def _cheapest_and_dearest(result: Result) -> str:
    powers, kinds = result.parameters.powers, result.extra.kinds
    largest = base.FLOAT32_BYTES << max(powers)

    def cost(kind: str) -> float:
        return result.find("alloc", kind, byte_count=largest).stats.median_ms

    ranked = sorted(kinds, key=cost)
    cheapest, dearest = ranked[0], ranked[-1]
    conclusion = (
        f"At {size_label(max(powers))} the cheapest allocation was {cheapest} "
        f"({format_ms(cost(cheapest))}) and the dearest {dearest} ({format_ms(cost(dearest))})"
    )
    if "pinned" in kinds and "pageable" in kinds:
        conclusion += (
            f"; pinned memory (cuMemHostAlloc) took {format_ms(cost('pinned'))}, "
            f"{cost('pinned') / cost('pageable'):.1f}x numpy's {format_ms(cost('pageable'))} with "
            "every page touched"
        )
    return conclusion + ". Allocate pinned and device memory once, outside loops, and reuse it."
