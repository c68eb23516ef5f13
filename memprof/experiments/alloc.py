"""`memprof alloc`: what allocating and freeing each memory kind costs as sizes grow (seed 000).

Every kind in memory.MEMORY_KINDS that this GPU supports is allocated and freed at every
size, timed on the host clock: numpy (with the first touch of every page, which is when the
OS really provides memory), cuMemAlloc, cuMemHostAlloc (default, mapped, write-combined,
portable), cuMemAllocManaged, and numpy plus cuMemHostRegister. Sizes that would not fit
in free device or host memory are refused before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from memprof.experiments import consistency
from memprof.experiments.base import (
    FLOAT32_BYTES,
    Experiment,
    Measure,
    Powers,
    Repeat,
    RunContext,
    Warmup,
    powers_param,
    repeat_param,
    warmup_param,
)
from memprof.experiments.common import size_label
from memprof.model.formatting import format_ms
from memprof.model.results import Result
from memprof.model.schema import DISTINCT, NON_EMPTY
from memprof.model.summary import Summary, Table

GIB = 1 << 30


@dataclass(frozen=True)
class AllocParams:
    powers: Powers = powers_param((16, 18, 20, 22, 24, 26, 28), step=2)
    repeat: Repeat = repeat_param(3)
    warmup: Warmup = warmup_param(1)


@dataclass(frozen=True)
class AllocExtra:
    kinds: Annotated[list[str], NON_EMPTY, DISTINCT]  # the kinds this GPU supports, in order
    skipped: list[str]  # why each other kind was left out


class Alloc(Experiment):
    name = "alloc"
    help = (
        "Allocation and free time of every memory kind across sizes (default 2^16 to 2^28 floats)."
    )
    Params = AllocParams
    Extra = AllocExtra
    measures = (
        Measure(
            "api", "alloc", "a driver allocation (cuMemAlloc, cuMemHostAlloc...)", "host clock"
        ),
        Measure("api", "free", "its free", "host clock"),
        Measure(
            "host", "alloc", "numpy.empty and every page written (+ registration)", "host clock"
        ),
        Measure("host", "free", "its free (and unregistration)", "host clock"),
    )

    def run(self, ctx: RunContext) -> AllocExtra:
        from memprof.core import memory

        session, params = ctx.session, ctx.params
        largest = FLOAT32_BYTES << max(params.powers)
        # One buffer at a time is alive; managed memory may migrate to the GPU, so it counts there.
        memory.require_memory(session, device_bytes=largest, host_bytes=largest)
        supported, skipped = memory.supported_kinds(
            ctx.facts[session.device_index].attributes,
            memory.single_gpu_kinds(),
        )
        kinds = [kind.name for kind in supported]
        total = len(kinds) * len(params.powers)
        done = 0
        for power in params.powers:
            for kind in kinds:
                ctx.progress(f"{kind} {size_label(power)}", done, total)
                session.profiler.repeat(
                    lambda kind=kind, power=power: memory.allocate(
                        session, kind, 1 << power
                    ).free(),
                    params.warmup,
                    params.repeat,
                )
                done += 1
        ctx.progress("done", total, total)
        return AllocExtra(kinds, skipped)

    def summarize(self, result: Result) -> Summary:
        return summarize(result)

    def check_consistency(self, result: Result) -> None:
        sizes = [FLOAT32_BYTES << power for power in result.parameters.powers]
        moves = {(group, op): 1 for group in ("api", "host") for op in ("alloc", "free")}
        consistency.measured_bytes(result, {**moves, ("api", "driver_call"): 0}, sizes, "2^powers")
        consistency.kinds_among(result, dict.fromkeys(moves, result.extra.kinds))


def summarize(result: Result) -> Summary:
    powers = result.parameters.powers
    kinds = result.extra.kinds
    largest = FLOAT32_BYTES << max(powers)
    tables = []
    for operation, title in (("alloc", "Allocate"), ("free", "Free")):

        def median_ms(kind: str, nbytes: int, operation: str = operation) -> float:
            return result.find(operation, kind, byte_count=nbytes).stats.median_ms

        table = Table(
            f"{title} time, median of {result.parameters.repeat}",
            ["Size", *list(kinds)],
            notes=[
                "Calls: "
                + "; ".join(
                    f"{kind} = {result.find(operation, kind, byte_count=largest).name}"
                    for kind in kinds
                )
                + "."
            ],
        )
        for power in powers:
            nbytes = FLOAT32_BYTES << power
            table.add_row(size_label(power), *(format_ms(median_ms(k, nbytes)) for k in kinds))
        table.add_row(
            "ms per GiB, largest",
            *(f"{median_ms(k, largest) * GIB / largest:,.2f}" for k in kinds),
        )
        tables.append(table)
    tables[0].notes += [
        "Host clock around each call. Pageable and registered include writing every page "
        "(numpy.empty only reserves address space; the first touch is when memory is provided). "
        "cuMemAllocManaged provides no pages yet: they appear, and cost, on first touch.",
    ] + [f"Skipped: {reason}." for reason in result.extra.skipped]

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
    conclusion += ". Allocate pinned and device memory once, outside loops, and reuse it."
    return Summary(tables=tables, conclusions=[conclusion], show_profile=True)
