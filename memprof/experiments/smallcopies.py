"""`memprof smallcopies`: N copies of S bytes between host and device, done five ways.

A training loop moves many small tensors (a ResNet-18 step traced by memprof made 104
pageable copies under 64 KiB), each mostly fixed cost: one call per copy from pinned or from
pageable memory, one cuMemcpyBatchAsync, numpy gathering into one pinned buffer then one copy,
or one kernel through zero-copy memory. Ways are ranked by their wall clock, from the first
call until the stream is synchronized, what a program reuses built beforehand; their GPU time
(gated CUDA events) beside it. Every way's data is verified. docs/small-copies.md says more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from memprof.experiments import base
from memprof.experiments.common import POISON_BYTE, found_or_none, stops_at
from memprof.model.figures import Derived, Figure, FigureOf, figure_finder
from memprof.model.formatting import format_bytes, format_ms, plural
from memprof.model.params import Range, param
from memprof.model.results import Check, Result
from memprof.model.schema import INCREASING, NON_EMPTY, SchemaError
from memprof.model.summary import Column, Summary, Table, table

WAYS = ("pinned", "pageable", "batched", "gathered", "kernel")
WAY_NAMES = {
    "pinned": "one call per copy from pinned memory",
    "pageable": "one call per copy from pageable memory",
    "batched": "one cuMemcpyBatchAsync",
    "gathered": "gathered into one pinned buffer, one copy",
    "kernel": "one kernel through zero-copy memory",
}
BATCHED_WAYS = ("batched", "gathered", "kernel")  # what one call per copy is measured against
DIRECTIONS = base.DIRECTIONS
EQUIVALENT = 0.05  # within 5% of the best way counts as not losing
SMALL_BYTES = 64 << 10  # the verdicts name the fastest way at the smallest size and at this
PIECE_GAP = 256  # bytes between pieces in a pinned or mapped arena: they lie apart
BLOCK_SIZE = 256
MIN_POWER, MAX_POWER = 2, 24  # 16 bytes (the kernel moves 16-byte words) to 64 MiB
MAX_COPIES = 256  # copies queued behind one gate: well within a stream's queue

Powers = Annotated[tuple[Annotated[int, Range(MIN_POWER, MAX_POWER)], ...], NON_EMPTY, INCREASING]
Copies = Annotated[int, Range(1, MAX_COPIES)]


@dataclass(frozen=True)
class SmallCopiesParams:
    # 4 KiB to 64 KiB, a training step's small tensors, and 256 KiB beyond them (--to 18 and
    # more where one call per copy still loses there)
    powers: Powers = base.powers_param((10, 12, 14, 16), step=1)
    copies: Copies = param(
        128,
        f"Copies moved at once, N (1 to {MAX_COPIES}): a training step's many small tensors.",
    )
    directions: base.Directions = base.directions_param()
    repeat: base.Repeat = base.repeat_param(10)
    warmup: base.Warmup = base.warmup_param(2)


@dataclass(frozen=True)
class SmallCopiesExtra:
    ways: list[str]  # the ways measured, in table order
    skipped: list[str]  # why each other way was left out
    # The batch's argument arrays and gathering's views built before the wall clock started,
    # as a program reuses them (False: files before, whose wall clock held memprof's building
    # of them on every call and gathering piece by piece in Python).
    arguments_prebuilt: bool = False


def _measures() -> tuple[base.Measure, ...]:
    """Each sample times N copies (parameters.copies) of one copy's bytes, at every size: a
    figure per operation is per copy."""

    def each(group: Any, operation: str, what: str, basis: Any, arrays: Any = 1) -> Any:
        return base.Measure(
            group, operation, what, basis, False, arrays, per_sample="copies", kinds="extra.ways"
        )

    found = []
    for d, words in DIRECTIONS.items():
        found += [
            each("span", d, f"N copies {words}, one way, back to back", "back to back"),
            each("api", f"{d}_calls", f"N pageable copies {words}", "driver call"),
            each("host", f"{d}_wall", "a way from first call to done", "host clock", None),
        ]
    return (
        *found,
        each("host", "gather", "numpy gathering N pieces into pinned memory", "host clock"),
        each("host", "scatter", "numpy scattering N pieces from pinned memory", "host clock"),
    )


class SmallCopies(base.Experiment):
    name = "smallcopies"
    description = (
        "Sizes are 2^N float32 per copy (--from/--to, default 4 KiB to 256 KiB); --copies is "
        "how many are moved at once. Ways are ranked by their wall clock per copy, from the "
        "first call to the stream synchronized (what a program waits); their GPU time back to "
        "back (gated CUDA events, the host's part on top) beside it."
    )
    Params = SmallCopiesParams
    Extra = SmallCopiesExtra
    measures = _measures()

    def run(self, ctx: base.RunContext) -> SmallCopiesExtra:
        """Every way at every size in every direction, each verified."""
        from memprof.core import memory

        session, params = ctx.session, ctx.params
        largest = base.FLOAT32_BYTES << max(params.powers)
        count = params.copies
        # host: a pinned and a mapped arena, the staging buffer, the pageable pieces, the data
        # and a read-back; device: the pieces side by side and their pointer table
        memory.require_memory(
            session,
            device_bytes=count * largest + 8 * count,
            host_bytes=2 * count * (largest + 2 * PIECE_GAP) + 4 * count * largest,
        )
        ways, skipped = available_ways(ctx.facts[session.device_index].attributes)
        step = ctx.steps(len(params.powers) * len(params.directions) * len(ways))
        problems: dict[tuple[str, str], list[str]] = {
            (direction, way): [] for direction in params.directions for way in ways
        }
        for power in params.powers:
            nbytes = base.FLOAT32_BYTES << power
            with Pieces(session, count, nbytes, seed=power) as pieces:
                for direction in params.directions:
                    pieces.sources(direction)
                    for way in ways:
                        step(f"{way} {DIRECTIONS[direction]}, {format_bytes(nbytes)}")
                        problem = pieces.measure(way, direction, params.warmup, params.repeat)
                        if problem:
                            problems[direction, way].append(f"{format_bytes(nbytes)}: {problem}")
        sizes = len(params.powers)
        for (direction, way), found in problems.items():
            detail = found[0] if found else f"Check result success! ({plural(sizes, 'size')})"
            name = f"{WAY_NAMES[way]}, {DIRECTIONS[direction]}"
            ctx.check(Check(name, not found, sizes * count, detail))
        step("done")
        return SmallCopiesExtra(ways=ways, skipped=skipped, arguments_prebuilt=True)

    def check_consistency(self, result: Result) -> None:
        extra = result.extra
        for index, way in enumerate(extra.ways):
            if way not in WAYS or way in extra.ways[:index]:
                raise SchemaError(
                    f"extra.ways[{index}]", f"is {way!r}: ways are {', '.join(WAYS)}, each once"
                )
        copies = result.parameters.copies
        for index, m in enumerate(result.measurements):
            counted = _COUNTED.match(m.name)  # "128 x one call per copy ...": what a cost divides
            if counted and int(counted[1]) != copies:
                raise SchemaError(
                    f"measurements[{index}].name",
                    f"is of {counted[1]} copies, but parameters.copies is {copies}: every "
                    "per-copy cost would be divided by the wrong count",
                )
        _require_every_way(result)


_COUNTED = re.compile(r"(\d+) x ")


# -- the GPU side ----------------------------------------------------------------------------


def available_ways(attributes: dict[str, int]) -> tuple[list[str], list[str]]:
    """(the ways this GPU, driver and cuda-bindings can do, why each other one cannot)."""
    from memprof.core import bindings, memory

    reasons = {
        "batched": bindings.batch_copy_missing_reason(),
        "kernel": memory.MEMORY_KINDS["mapped"].unsupported_reason(attributes),
    }
    skipped = [
        f"{way} ({WAY_NAMES[way]}): {why}" for way, why in reasons.items() if why is not None
    ]
    return [way for way in WAYS if reasons.get(way) is None], skipped


class Pieces:
    """N pieces of one size in every place the five ways read or write them, and the ways."""

    def __init__(self, session: Any, count: int, nbytes: int, seed: int) -> None:
        import numpy as np

        self.session, self.count, self.nbytes = session, count, nbytes
        self.profiler = session.profiler
        self.data = np.random.default_rng(seed).integers(0, 256, (count, nbytes), np.uint8)
        self.stride = -(-nbytes // PIECE_GAP) * PIECE_GAP + PIECE_GAP
        self._buffers: list[Any] = []

    def __enter__(self) -> Pieces:
        import numpy as np

        session, count, nbytes, stride = self.session, self.count, self.nbytes, self.stride
        with self.profiler.paused():  # set-up, not a measurement
            pinned, mapped, staging, device, table = (
                self._allocate(kind, size, dtype)
                for kind, size, dtype in (
                    ("pinned", count * stride, np.uint8),
                    ("mapped", count * stride, np.uint8),
                    ("pinned", count * nbytes, np.uint8),
                    ("device", count * nbytes, np.uint8),
                    ("device", count, np.uint64),
                )
            )
        pageable = np.empty(count * stride, np.uint8)  # ordinary memory, as tensors are
        self.pinned = _pieces(pinned.array, count, stride, nbytes)
        self.mapped = _pieces(mapped.array, count, stride, nbytes)
        self.pageable = _pieces(pageable, count, stride, nbytes)
        self.mapped_pointers = np.array(
            [mapped.device_pointer + i * stride for i in range(count)], np.uint64
        )
        # every piece at once, row by row, for one numpy call to gather or scatter them all
        self.pageable_rows = pageable.reshape(count, stride)[:, :nbytes]
        self.staging = staging.array
        self.device = device.device_pointer
        self.table = table.device_pointer
        session.cuda.memcpy_htod(self.table, self.mapped_pointers)
        return self

    def _allocate(self, kind: str, count: int, dtype: Any) -> Any:
        from memprof.core import memory

        buffer = memory.allocate(self.session, kind, count, dtype)
        self._buffers.append(buffer)
        return buffer

    def __exit__(self, *_: Any) -> None:
        self.session.synchronize()
        with self.profiler.paused():
            for buffer in reversed(self._buffers):
                buffer.free()
        self._buffers.clear()

    # -- the five ways ----------------------------------------------------------------------

    def plan(self, way: str, direction: str) -> Plan:
        """What one way does in one direction."""
        cuda, count, nbytes = self.session.cuda, self.count, self.nbytes
        device = [self.device + i * nbytes for i in range(count)]
        h2d = direction == "h2d"
        if way == "pinned":
            return Plan(queue=_one_call_each(cuda, h2d, device, self.pinned, asynchronous=True))
        if way == "pageable":
            blocking = _one_call_each(cuda, h2d, device, self.pageable, asynchronous=False)
            return Plan(blocking=blocking, call="cuMemcpyHtoD" if h2d else "cuMemcpyDtoH")
        if way == "batched":
            return Plan(queue=self._batched(h2d, device))
        if way == "gathered":
            return self._gathered(h2d)
        return Plan(queue=self._kernel(h2d))

    def _batched(self, h2d: bool, device: list[int]) -> Any:
        """One cuMemcpyBatchAsync, its argument arrays built here, once: a program batching
        copies builds them once and reuses them."""
        from memprof.core import bindings

        host = [piece.ctypes.data for piece in self.pinned]
        sizes = [self.nbytes] * self.count
        batch = bindings.BatchCopy.of(*((device, host) if h2d else (host, device)), sizes)
        handle = int(self.profiler.stream.handle)  # the stream every plan is queued on
        return lambda stream: batch.enqueue(handle)

    def _gathered(self, h2d: bool) -> Plan:
        """numpy gathers every piece into the staging buffer with one call (a C loop over the
        pieces, as torch.cat is), through views built here, once."""
        import numpy as np

        cuda, staging, pieces = self.session.cuda, self.staging, self.pageable_rows
        rows = staging.reshape(self.count, self.nbytes)
        if h2d:
            return Plan(
                queue=lambda stream: cuda.memcpy_htod_async(self.device, staging, stream),
                before=lambda: np.copyto(rows, pieces),
            )
        return Plan(
            queue=lambda stream: cuda.memcpy_dtoh_async(staging, self.device, stream),
            after=lambda: np.copyto(pieces, rows),
        )

    def _kernel(self, h2d: bool) -> Any:
        import numpy as np

        from memprof.core.kernels import load_kernel

        name = "gatherPieces" if h2d else "scatterPieces"
        function = load_kernel(self.session, "small_copies.cu", name).function
        words = self.count * self.nbytes // 16
        limit = 8 * self.session.attribute("MULTIPROCESSOR_COUNT")
        grid = (max(1, min(limit, -(-words // BLOCK_SIZE))), 1)
        pointers = (self.table, self.device) if h2d else (self.device, self.table)
        size, count = np.int64(self.nbytes), np.int32(self.count)
        return lambda stream: function.prepared_async_call(
            grid, (BLOCK_SIZE, 1, 1), stream, *pointers, size, count
        )

    # -- timing and checking -----------------------------------------------------------------

    def measure(self, way: str, direction: str, warmup: int, repeat: int | None) -> str | None:
        """Time one way's GPU time and host work, then its wall clock (the same calls, warm:
        no warm-ups), on sources() filled and destinations poisoned; what went wrong, if any."""
        plan = self.plan(way, direction)
        self._poison(way, direction)
        for timing, warm in ((self._timed, warmup), (self._wall, 0)):  # gated, then not
            self.profiler.repeat(lambda timing=timing: timing(plan, way, direction), warm, repeat)
        return self._verify(way, direction)

    def _timed(self, plan: Plan, way: str, direction: str) -> None:
        profiler, stream, nbytes = self.profiler, self.profiler.stream, self.nbytes
        if plan.before is not None:
            with profiler.host_clock("host", "numpy gather", "gather", way, nbytes):
                plan.before()
        if plan.blocking is not None:
            with profiler.driver_call(plan.call, f"{direction}_calls", way, nbytes):
                plan.blocking()
        if plan.queue is not None:
            name = f"{self.count} x {WAY_NAMES[way]}"
            with profiler.untraced(), profiler.events("span", name, direction, way, nbytes):
                plan.queue(stream)
        if plan.after is not None:
            stream.synchronize()
            with profiler.host_clock("host", "numpy scatter", "scatter", way, nbytes):
                plan.after()

    def _wall(self, plan: Plan, way: str, direction: str) -> None:
        profiler, stream = self.profiler, self.profiler.stream
        name = f"{self.count} x {WAY_NAMES[way]}, wall clock"
        with (
            profiler.untraced(),
            profiler.host_clock("host", name, f"{direction}_wall", way, self.nbytes),
        ):
            for part in (plan.before, plan.blocking):
                if part is not None:
                    part()
            if plan.queue is not None:
                plan.queue(stream)
            stream.synchronize()
            if plan.after is not None:
                plan.after()

    def sources(self, direction: str) -> None:
        """The data where the copies start: every host piece, or device memory."""
        self.session.synchronize()
        if direction == "h2d":
            for pieces in (self.pinned, self.mapped, self.pageable):
                for piece, values in zip(pieces, self.data, strict=True):
                    piece[:] = values
        else:
            self.session.cuda.memcpy_htod(self.device, self.data)

    def _destinations(self, way: str) -> list[Any]:
        """Where a way leaves the pieces on the host (device to host)."""
        if way in ("pinned", "batched"):
            return self.pinned
        if way == "kernel":
            return self.mapped
        return self.pageable

    def _poison(self, way: str, direction: str) -> None:
        """Overwrite where the copies land, so a piece never written fails the check."""
        cuda, stream = self.session.cuda, self.profiler.stream
        self.session.synchronize()
        if direction == "h2d":
            cuda.memset_d8_async(self.device, POISON_BYTE, self.count * self.nbytes, stream)
            stream.synchronize()
        else:
            for piece in self._destinations(way):
                piece.fill(POISON_BYTE)

    def _verify(self, way: str, direction: str) -> str | None:
        import numpy as np

        from memprof.core.verify import compare_arrays

        self.session.synchronize()
        if direction == "h2d":
            received = np.empty(self.count * self.nbytes, np.uint8)
            self.session.cuda.memcpy_dtoh(received, self.device)
        else:
            received = np.concatenate(self._destinations(way))
        check = compare_arrays(way, received, self.data.reshape(-1))
        return None if check.passed else check.detail


def _pieces(arena: Any, count: int, stride: int, nbytes: int) -> list[Any]:
    """The pieces of an arena, `stride` bytes apart."""
    return [arena[i * stride : i * stride + nbytes] for i in range(count)]


@dataclass
class Plan:
    """One way in one direction: GPU work queued on a stream (gated when timed), blocking
    driver calls, and host work before or after."""

    queue: Any = None  # (stream) -> None
    blocking: Any = None  # () -> None: synchronous calls
    call: str = ""  # the blocking calls' driver function, as CUPTI names it
    before: Any = None  # () -> None: numpy gathering
    after: Any = None  # () -> None: numpy scattering, once the GPU work is done


def _one_call_each(
    cuda: Any, h2d: bool, device: list[int], host: list[Any], asynchronous: bool
) -> Any:
    """One driver call per piece: asynchronous on the stream given, or blocking."""
    pairs = [(d, h) if h2d else (h, d) for d, h in zip(device, host, strict=True)]
    call = cuda.memcpy_htod if h2d else cuda.memcpy_dtoh
    if asynchronous:
        call = cuda.memcpy_htod_async if h2d else cuda.memcpy_dtoh_async

        def copies(stream: Any) -> None:
            for destination, source in pairs:
                call(destination, source, stream)

    else:

        def copies() -> None:
            for destination, source in pairs:
                call(destination, source)

    return copies


# -- the summary ----------------------------------------------------------------------------


def cost(
    result: Result, way: str, direction: str, nbytes: int, of: FigureOf
) -> Figure | Derived | None:
    """All N pieces' GPU time back to back, plus numpy's gathering or scattering (a Derived
    sum); pageable: the blocking calls themselves. None: not measured."""
    if way == "pageable":
        parts = [("api", f"{direction}_calls")]
    elif way == "gathered":
        parts = [("host", "gather" if direction == "h2d" else "scatter"), ("span", direction)]
    else:
        parts = [("span", direction)]
    found = [found_or_none(result, group, operation, way, nbytes) for group, operation in parts]
    if None in found:
        return None
    if len(found) == 1:
        return of(found[0])
    name = f"{result.parameters.copies} x {WAY_NAMES[way]}, numpy's part added"
    return Derived(name, tuple(of(m) for m in found))


def wall(result: Result, way: str, direction: str, nbytes: int, of: FigureOf) -> Figure | None:
    """What a program waits for all N pieces one way: from its first call until the stream is
    synchronized, on the host clock (the figure the ways are ranked by)."""
    found = found_or_none(result, "host", f"{direction}_wall", way, nbytes)
    return None if found is None else of(found)


def sizes(result: Result) -> list[int]:
    return [base.FLOAT32_BYTES << power for power in result.parameters.powers]


def _per_copy(result: Result, direction: str, figure: Any) -> dict[int, dict[str, float]]:
    """size -> way -> figure(result, way, direction, size, of) per copy, where measured."""
    of = figure_finder(result, SmallCopies.measures)
    found: dict[int, dict[str, float]] = {}
    for nbytes in sizes(result):
        for way in result.extra.ways:
            value = figure(result, way, direction, nbytes, of)
            if value is not None:
                found.setdefault(nbytes, {})[way] = value.per_operation_ms
    return found


def per_copy_costs(result: Result, direction: str = "h2d") -> dict[int, dict[str, float]]:
    """size -> way -> GPU time (and host work) per copy (ms), for every way measured there."""
    return _per_copy(result, direction, cost)


def per_copy_walls(result: Result, direction: str = "h2d") -> dict[int, dict[str, float]]:
    """size -> way -> wall clock per copy (ms), for every way measured there."""
    return _per_copy(result, direction, wall)


def stops_losing(costs: dict[int, dict[str, float]], way: str = "pinned") -> int | None:
    """The smallest size from which `way` is within 5% of the best batched way at every
    larger size (None: it still lost at the largest)."""
    losing = {}
    for nbytes, by_way in costs.items():
        others = [by_way[w] for w in BATCHED_WAYS if w in by_way]
        if way in by_way and others:
            losing[nbytes] = by_way[way] > min(others) * (1 + EQUIVALENT)
    return stops_at(losing)


def _require_every_way(result: Result) -> None:
    """A run measures every way it lists at every size, both ways it was asked: a file that
    lacks one is not such a run (it rendered as empty tables)."""
    of = figure_finder(result, SmallCopies.measures)
    for direction in result.parameters.directions:
        for nbytes in sizes(result):
            for way in result.extra.ways:
                for figure, what in ((cost, "copies"), (wall, "wall clock of copies")):
                    if figure(result, way, direction, nbytes, of) is None:
                        raise SchemaError(
                            "measurements",
                            f"has no {way} {what} {DIRECTIONS[direction]} of "
                            f"{format_bytes(nbytes)}, which extra.ways and parameters say this "
                            "run made",
                        )


def _direction_tables(result: Result, direction: str) -> list[Table]:
    """Wall clock per copy, GPU time per copy and in all: each cell a figure's (per
    operation: per copy; the median: all N), each row's figures its sources."""
    of = figure_finder(result, SmallCopies.measures)
    ways, words = result.extra.ways, DIRECTIONS[direction]
    count = result.parameters.copies
    rows: tuple[list, list, list] = ([], [], [])
    for nbytes in sizes(result):
        walls = [wall(result, way, direction, nbytes, of) for way in ways]
        costs = [cost(result, way, direction, nbytes, of) for way in ways]
        for found, made in zip((walls, costs, costs), rows, strict=True):
            made.append({"size": format_bytes(nbytes), **dict(zip(ways, found, strict=True))})
    tables = []
    for what, shows, made in zip(
        ("wall clock per copy", "GPU time per copy", "GPU time, total"),
        ("per_operation_ms", "per_operation_ms", "median_ms"),
        rows,
        strict=True,
    ):
        columns = [Column("Size", "size"), *(Column(way, way, shows) for way in ways)]
        one = table(f"{count} copies {words}: {what}", columns, made)
        for index, row in enumerate(made):  # the best of a row: the least time
            present = [
                (getattr(row[way], shows), n)
                for n, way in enumerate(ways, 1)
                if row[way] is not None
            ]
            if present:
                one.highlighted.append((index, min(present)[1]))
        tables.append(one)
    return tables


def _wall_notes(result: Result) -> list[str]:
    """How the wall clock (what the ways are ranked by) was taken, and what each way is."""
    notes = [
        "What a program waits, and what the conclusions rank by: the host clock from a way's "
        "first call until the stream is synchronized, Python's calls included (one call per "
        "copy pays a call per copy, as any program does), the batch's argument arrays and "
        "gathering's views built beforehand, as a program reuses them. Medians of "
        f"{base.repetitions(result)}; best of each row in bold.",
    ]
    if not result.extra.arguments_prebuilt:
        notes.append(
            "Recorded by an older memprof, whose wall clock also held its own building of the "
            "batch's arguments on every call and gathering piece by piece in Python: its "
            "batched and gathered figures read high."
        )
    notes += [
        "pinned / pageable: one driver call per copy (cuMemcpyHtoDAsync from pinned memory; "
        "cuMemcpyHtoD from numpy arrays, which the driver stages). batched: one "
        "cuMemcpyBatchAsync of all from pinned memory. gathered: numpy gathers the pageable "
        "pieces into one pinned buffer, then one copy (device → host: one copy, then numpy "
        "scatters). kernel: one kernel moving every piece through mapped (zero-copy) memory.",
        *(f"Skipped: {reason}." for reason in result.extra.skipped),
    ]
    return notes


def _gpu_notes(result: Result) -> list[str]:
    sources = {m.source for m in result.measurements if m.operation.endswith("_calls")}
    calls = "CUPTI's records of them" if sources == {"cupti"} else "the host clock around them"
    return [
        "GPU time: the GPU work queued behind a GPU-side gate between two CUDA events (CUPTI "
        f"paused), back to back; pageable: the blocking calls themselves ({calls}, staging "
        "included); gathered: numpy's host clock added. Per copy: total / copies. Medians of "
        f"{base.repetitions(result)}; best of each row in bold.",
    ]


def _verdicts(result: Result, direction: str) -> list[str]:
    """The fastest way at the training-loop sizes, and where one call per copy stops losing,
    both by the wall clock per copy; the GPU time beside."""
    walls, gpu = per_copy_walls(result, direction), per_copy_costs(result, direction)
    count, words = result.parameters.copies, DIRECTIONS[direction]
    lines = []
    small = [n for n in walls if n <= SMALL_BYTES] or [min(walls)]
    for nbytes in sorted({min(small), max(small)}):
        by_way, gpu_of = walls[nbytes], gpu.get(nbytes, {})
        best = min(by_way, key=by_way.get)
        faster = [
            f"{by_way[way] / by_way[best]:.1f}x faster than {WAY_NAMES[way]} "
            f"({format_ms(by_way[way])}; GPU time {_figure(gpu_of, way)})"
            for way in ("pinned", "pageable")
            if way in by_way and way != best
        ]
        line = (
            f"{words.capitalize()}, {count} copies of {format_bytes(nbytes)}: the fastest was "
            f"{WAY_NAMES[best]}, {format_ms(by_way[best])} per copy from the first call to the "
            f"stream synchronized ({_figure(gpu_of, best)} of GPU time)"
        )
        lines.append(line + (f": {' and '.join(faster)}." if faster else "."))
    lines.append(_crossover(walls, gpu, words))
    return lines


def _figure(by_way: dict[str, float], way: str) -> str:
    return format_ms(by_way[way]) if way in by_way else "not measured"


def _crossover(
    walls: dict[int, dict[str, float]], gpu: dict[int, dict[str, float]], words: str
) -> str:
    def figures(nbytes: int, named: bool = True) -> str:
        """One call per copy from pinned memory against the best batched way at nbytes."""
        by_way, gpu_of = walls[nbytes], gpu.get(nbytes, {})
        way = min((w for w in BATCHED_WAYS if w in by_way), key=by_way.get)
        name = f" {WAY_NAMES[way]}" if named else ""
        return (
            f"{format_ms(by_way['pinned'])} per copy against {format_ms(by_way[way])}{name}; GPU "
            f"time {_figure(gpu_of, 'pinned')} against {_figure(gpu_of, way)}"
        )

    opening = f"{words.capitalize()}, by the wall clock: one call per copy from pinned memory"
    compared = [
        n for n in walls if "pinned" in walls[n] and any(w in walls[n] for w in BATCHED_WAYS)
    ]
    if not compared:
        return (
            f"{words.capitalize()}: no batched way was measured to compare one call per copy with."
        )
    stop = stops_losing({n: walls[n] for n in compared})
    largest, smallest = max(compared), min(compared)
    if stop is None:
        return (
            f"{opening} lost at every size up to {format_bytes(largest)} "
            f"({figures(largest)}): batch copies of any size measured."
        )
    if stop == smallest:
        return (
            f"{opening} never lost by more than {EQUIVALENT:.0%} to a batched way "
            f"({format_bytes(stop)}: {figures(stop, named=False)})."
        )
    return (
        f"{opening} stops losing at {format_bytes(stop)} ({figures(stop)}): batch copies smaller "
        "than that."
    )


def summarize(result: Result) -> Summary:
    tables, conclusions = [], []
    for direction in result.parameters.directions:
        tables += _direction_tables(result, direction)
        if per_copy_walls(result, direction):
            conclusions += _verdicts(result, direction)
    if tables:
        tables[0].notes = _wall_notes(result)
        tables[1].notes = _gpu_notes(result)
    if not conclusions:
        conclusions.append("No way was measured: nothing to compare.")
    return Summary(tables=tables, conclusions=conclusions, show_profile=False)
