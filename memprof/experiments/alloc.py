"""`memprof alloc`: what allocating and freeing each memory kind costs as sizes grow (seed 000).

Every kind in memory.MEMORY_KINDS that this GPU supports is allocated and freed at every
size, timed on the host clock: numpy (with the first touch of every page, which is when the
OS really provides memory), cuMemAlloc, cuMemHostAlloc (default, mapped, write-combined,
portable), cuMemAllocManaged, and numpy plus cuMemHostRegister. Sizes that would not fit
in free device or host memory are refused before anything is allocated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from memprof.core import memory
from memprof.core.devicefacts import collect
from memprof.core.session import GpuSession
from memprof.experiments.common import FLOAT32_BYTES, Progress, no_progress, size_label
from memprof.model.formatting import format_ms
from memprof.model.results import Result
from memprof.model.summary import Summary, Table


def alloc_kinds() -> list[memory.MemoryKind]:
    """Every kind one GPU allocates by itself, in table order (peer memory needs two)."""
    return memory.kinds_where(lambda kind: kind.devices_needed == 1)


GIB = 1 << 30


@dataclass(frozen=True)
class AllocParams:
    powers: tuple[int, ...] = (16, 18, 20, 22, 24, 26, 28)
    repeat: int = 3
    warmup: int = 1


# What a saved Result holds: `parameters` (every field) and `extra`, checked at load.
PARAMS = AllocParams
EXTRA_FIELDS = {
    "kinds": list[str],
    "skipped": list[str],
}


def run(session: GpuSession, params: AllocParams, progress: Progress = no_progress) -> Result:
    facts = collect(session)
    largest = FLOAT32_BYTES << max(params.powers)
    # One buffer at a time is alive; managed memory may migrate to the GPU, so it counts there.
    memory.require_memory(session, device_bytes=largest, host_bytes=largest)
    supported, skipped = memory.supported_kinds(facts.attributes, alloc_kinds())
    kinds = [kind.name for kind in supported]
    total = len(kinds) * len(params.powers)
    done = 0
    for power in params.powers:
        for kind in kinds:
            progress(f"{kind} {size_label(power)}", done, total)
            session.profiler.repeat(
                lambda kind=kind, power=power: memory.allocate(session, kind, 1 << power).free(),
                params.warmup,
                params.repeat,
            )
            done += 1
    progress("done", total, total)
    return Result(
        command="alloc",
        parameters=asdict(params),
        device=facts,
        measurements=session.profiler.measurements(),
        extra={"kinds": kinds, "skipped": skipped},
    )


def summarize(result: Result) -> Summary:
    powers = result.parameters["powers"]
    kinds = result.extra["kinds"]
    largest = FLOAT32_BYTES << max(powers)
    tables = []
    for operation, title in (("alloc", "Allocate"), ("free", "Free")):

        def median_ms(kind: str, nbytes: int, operation: str = operation) -> float:
            return result.find(operation, kind, byte_count=nbytes).stats.median_ms

        table = Table(
            f"{title} time, median of {result.parameters['repeat']}",
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
    ] + [f"Skipped: {reason}." for reason in result.extra["skipped"]]

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
