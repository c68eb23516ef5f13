"""alloc's tables of the modern allocators (memprof.experiments.pools), read cell by cell
from the recorded H200 run (tests/fixtures/h200_alloc.json): each column is the measurement
its header names (group, operation, kind), at the row's size; a driver call's cell is marked
where the floor is over a tenth of it, and no other cell is; each table's notes whole.
"""

from __future__ import annotations

import re
import statistics

import pytest

from memprof.experiments import pools, summarize
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Result
from memprof.model.summary import Table
from tests.conftest import load_fixture, load_older, printed_rows, replace
from tests.test_allocators import synthetic_loop_result
from tests.verdict_tools import matches, the, with_samples

MARK = "*"
# each table's columns after Size: header (its unit left off) -> what it shows
POOL_ALLOCATION = {
    "cuMemAlloc": ("api", "alloc_new", "device"),
    "pool new": ("api", "alloc_new", "pool"),
    "pool reused": ("api", "alloc_reused", "pool"),
    "pool after sync": ("api", "alloc_after_sync", "pool"),
    "kept new": ("api", "alloc_new", "pool_kept"),
    "kept reused": ("api", "alloc_reused", "pool_kept"),
    "kept after sync": ("api", "alloc_after_sync", "pool_kept"),
}
POOL_FREE = {
    "cuMemFree": ("api", "free_call", "device"),
    "pool free": ("api", "free_call", "pool"),
    "pool sync": ("api", "sync_after_free", "pool"),
    "kept free": ("api", "free_call", "pool_kept"),
    "kept sync": ("api", "sync_after_free", "pool_kept"),
    "kept trim": ("api", "trim", "pool_kept"),
}
VMM = {
    "Reserve": ("api", "reserve", "vmm"),
    "Create": ("api", "create", "vmm"),
    "Map": ("api", "map", "vmm"),
    "Access": ("api", "set_access", "vmm"),
    "Unmap": ("api", "unmap", "vmm"),
    "Release": ("api", "release_memory", "vmm"),
    "Free range": ("api", "address_free", "vmm"),
}
FIRST_USE = {
    "cuMemAlloc": ("gpu", "first_use", "device"),
    "cuMemAlloc again": ("gpu", "use_again", "device"),
    "pool": ("gpu", "first_use", "pool"),
    "kept": ("gpu", "first_use", "pool_kept"),
    "VMM": ("gpu", "first_use", "vmm"),
}
LOOP = {
    "cuMemAlloc": ("host", "loop", "device"),
    "default pool": ("host", "loop", "pool"),
    "kept pool": ("host", "loop", "pool_kept"),
    "VMM remap": ("host", "loop", "vmm"),
}


def recorded() -> Result:
    return load_fixture("alloc")


def sizes(result: Result) -> list[int]:
    return [4 << power for power in result.parameters.powers]


def floor_ms(result: Result) -> float:
    """The median of every cuCtxGetDevice the run timed (all on CUPTI, as its calls)."""
    return statistics.median(
        s for m in result.measurements if m.operation == "call_floor" for s in m.samples_ms
    )


def found(result: Result, title: str) -> Table:
    return next(t for t in summarize(result).tables if t.title.startswith(title))


def cells(t: Table) -> dict[str, dict[str, str]]:
    """size -> header (without its unit) -> the cell as printed; the first column: Size."""
    headers = [re.sub(r" \((ns|us|ms|s)\)$", "", h) for h in t.headers]
    assert headers[0] == "Size"
    return {row[0]: dict(zip(headers[1:], row[1:], strict=True)) for row in printed_rows(t)}


def median(result: Result, group: str, operation: str, kind: str, nbytes: int) -> float:
    m = the(result, group=group, operation=operation, kind=kind, nbytes=nbytes)
    return statistics.median(m.samples_ms)


@pytest.mark.parametrize(
    ("title", "columns"),
    [
        ("Stream-ordered allocation, median of 3", POOL_ALLOCATION),
        ("Stream-ordered free, median of 3", POOL_FREE),
        ("Virtual memory management, median of 3", VMM),
        ("First use, median of 3", FIRST_USE),
    ],
)
def test_each_cell_is_the_median_its_header_names_and_only_a_call_near_the_floor_is_marked(
    title, columns
):
    result = recorded()
    floor = floor_ms(result)
    t = found(result, title)
    assert t.title == title
    rows = cells(t)
    assert list(rows) == [format_bytes(n) for n in sizes(result)]
    marked = 0
    for nbytes in sizes(result):
        row = rows[format_bytes(nbytes)]
        assert list(row) == list(columns)
        for header, (group, operation, kind) in columns.items():
            value = median(result, group, operation, kind, nbytes)
            mark = MARK if group == "api" and floor > 0.1 * value else ""
            assert row[header] == format_ms(value) + mark, (nbytes, header)
            marked += bool(mark)
    # the recording has cells on both sides of the mark, but for the GPU's memsets
    assert marked > 0 or title.startswith("First use")


def test_the_loops_cell_is_its_steady_iteration_without_the_cold_first():
    result = recorded()
    t = found(result, "Allocate, use, free, sync")
    assert t.title == "Allocate, use, free, sync, 50 times: per iteration"
    rows = cells(t)
    for nbytes in sizes(result):
        row = rows[format_bytes(nbytes)]
        assert list(row) == list(LOOP)
        for header, (group, operation, kind) in LOOP.items():
            samples = the(
                result, group=group, operation=operation, kind=kind, nbytes=nbytes
            ).samples_ms
            assert len(samples) == 50
            assert row[header] == format_ms(statistics.median(samples[1:])), (nbytes, header)


def test_growing_is_each_ways_median_and_how_many_times_faster_in_place_was():
    result = recorded()
    t = found(result, "Growing a buffer to twice its size")
    assert t.title == "Growing a buffer to twice its size, median of 3"
    rows = cells(t)
    for nbytes in sizes(result):
        in_place = median(result, "api", "grow_in_place", "vmm", nbytes)
        by_copy = median(result, "api", "grow_by_copy", "device", nbytes)
        assert rows[format_bytes(nbytes)] == {
            "In place (VMM)": format_ms(in_place),
            "New + copy + free": format_ms(by_copy),
            "In place is": f"{by_copy / in_place:.2f}x faster",
        }


def test_each_tables_notes_whole():
    result = recorded()
    largest = max(sizes(result))
    floor = format_ms(floor_ms(result))

    def stream_side(kind: str) -> str:
        alloc = median(result, "gpu", "stream_alloc", kind, largest)
        free = median(result, "gpu", "stream_free", kind, largest)
        return f"{format_ms(alloc)} and {format_ms(free)}"

    assert found(result, "Stream-ordered allocation").notes == [
        "Driver calls: CUPTI's record of each call (in the driver, entry to exit).",
        f"Floor: {floor}, what cuCtxGetDevice (a call that does next to nothing) read, timed "
        "the same way in this run: that much of any call's figure may be how it was timed. *: "
        "the floor is over 10% of the figure: read it as an upper bound of the call's own time.",
        "pool: the device's default pool (cuMemAllocAsync), release threshold 0 B: it gives "
        "freed memory back at the next synchronization. kept: a pool of memprof's own "
        "(cuMemAllocFromPoolAsync) whose threshold keeps all freed memory.",
        "new: from an empty pool; reused: right after cuMemFreeAsync of the same size in the "
        "same stream; after sync: after that free and a stream synchronization.",
        "The calls only queue work: what the stream itself spent on an allocation and a free "
        "(gated CUDA events around each, less an empty pair's interval) at 1 GiB: "
        f"pool {stream_side('pool')}; kept {stream_side('pool_kept')}.",
    ]
    assert found(result, "Stream-ordered free").notes == [
        f"Floor {floor} and *: as in the table above.",
        "free: cuMemFreeAsync (cuMemFree for cuMemAlloc); sync: the cuStreamSynchronize right "
        "after it, where a pool gives memory above its threshold back (no GPU work waits "
        "there); trim: cuMemPoolTrimTo(0) of the pool that kept the memory.",
    ]
    assert found(result, "Virtual memory management").notes == [
        "Driver calls: CUPTI's record of each call (in the driver, entry to exit).",
        f"Floor {floor} and *: as in the table above.",
        "Reserve: cuMemAddressReserve; Create: cuMemCreate (physical memory); Map: cuMemMap; "
        "Access: cuMemSetAccess (read-write for this GPU); Unmap: cuMemUnmap; Release: "
        "cuMemRelease; Free range: cuMemAddressFree. Sizes round up to the allocation "
        "granularity, 2 MiB here.",
    ]
    assert found(result, "Growing a buffer").notes == [
        "Host clock around each. In place: cuMemCreate, cuMemMap and cuMemSetAccess of the "
        "added half, after the buffer (its addresses reserved at twice the size, as a "
        "growing allocator reserves them). New + copy + free: cuMemAlloc of twice the size, "
        "cuMemcpyDtoDAsync of the data, cuMemFree of the old buffer, the copy waited for."
    ]
    assert found(result, "First use").notes == [
        "A memset of the whole new buffer (the size asked for), its GPU time: CUPTI's record "
        "of it, or gated CUDA events. cuMemAlloc again: a second memset of the same memory."
    ]
    assert found(result, "Allocate, use, free, sync").notes == [
        "Host clock around each whole iteration (Python's calls included), median of "
        "iterations 2 to 50: the first one finds the pools empty. An iteration: allocate one "
        "buffer, memset it, free it, synchronize the stream, as a training step does. VMM "
        "remap: the address range kept; cuMemCreate, cuMemMap, cuMemSetAccess, memset, "
        "synchronize, cuMemUnmap, cuMemRelease."
    ]


def test_a_default_pool_threshold_not_recorded_is_said_unknown():
    result = recorded()
    record = replace(result.extra.allocators, default_pool_threshold_bytes=None)
    result.extra = replace(result.extra, allocators=record)
    note = found(result, "Stream-ordered allocation").notes[2]
    assert note.startswith(
        "pool: the device's default pool (cuMemAllocAsync), release threshold unknown: it gives"
    )


def test_pool_tables_name_only_the_pools_measured():
    result = recorded()
    record = replace(result.extra.allocators, pools=["pool"])
    allocation, free = pools.pool_tables(result, record)
    assert [h.removesuffix(" (us)") for h in allocation.headers] == [
        "Size",
        "cuMemAlloc",
        "pool new",
        "pool reused",
        "pool after sync",
    ]
    assert [h.removesuffix(" (us)") for h in free.headers] == [
        "Size",
        "cuMemFree",
        "pool free",
        "pool sync",
    ]  # no trim: the default pool keeps nothing to trim
    alloc = median(result, "gpu", "stream_alloc", "pool", 1 << 30)
    free_ms = median(result, "gpu", "stream_free", "pool", 1 << 30)
    assert allocation.notes[-1].endswith(
        f"at 1 GiB: pool {format_ms(alloc)} and {format_ms(free_ms)}."
    )


# -- the verdicts' edges, on SYNTHETIC samples ------------------------------------------------


def test_a_pool_pays_only_once_its_total_is_strictly_below_and_stops_at_the_shorter_run():
    assert pools.pays_from([2.0, 1.0], [1.0, 2.0]) is None  # 3 against 3: not below
    assert pools.pays_from([2.0, 1.0, 1.0], [1.0, 2.0, 2.0]) == 3  # 4 against 5
    assert pools.pays_from([3.0, 1.0, 0.1], [2.0, 2.0]) is None  # the iterations both ran
    assert pools.pays_from([], []) is None


def test_a_figure_is_near_the_floor_only_where_the_floor_is_over_a_tenth_of_it():
    assert pools.FLOOR_SHARE == 0.1
    assert not pools.near_floor(2.0, 0.2)  # exactly a tenth
    assert pools.near_floor(2.0, 0.2000001)
    assert not pools.near_floor(2.0, 0.1999999)
    assert not pools.near_floor(0.0001, None)  # no floor: nothing is near it


def test_a_pool_exactly_five_percent_under_cumemalloc_does_not_help():
    result = synthetic_loop_result({"device": [100, 100, 100, 100], "pool": [95, 95, 95, 94]})
    edge = 100 / 1000 * (1 - pools.EQUIVALENT)
    assert edge == 95 / 1000  # on the edge, in floats too
    verdict = pools.loop_verdict(result, "pool")
    assert verdict == (
        "In the loop the default pool (cuMemAllocAsync) beat cuMemAlloc/cuMemFree at the "
        "largest, not every, size (94.000us against 100.00us per iteration at 16 MiB)."
    )


def test_the_pool_conclusion_whole_each_call_marked_on_its_own_side_of_the_floor():
    result = recorded()
    largest, floor = 1 << 30, floor_ms(result)

    def call(operation: str, kind: str) -> str:
        value = median(result, "api", operation, kind, largest)
        return format_ms(value) + (MARK if floor > 0.1 * value else "")

    assert call("alloc_new", "device") == "106.05us"  # unmarked beside the marked ones
    assert call("alloc_after_sync", "pool").endswith("ms")
    line = next(c for c in summarize(result).conclusions if c.startswith("At 1 GiB cuMemAlloc"))
    assert line == (
        f"At 1 GiB cuMemAlloc took {call('alloc_new', 'device')}; a stream-ordered allocation "
        f"from the default pool (cuMemAllocAsync) {call('alloc_reused', 'pool')} reused right "
        f"after cuMemFreeAsync and {call('alloc_after_sync', 'pool')} after a synchronization; "
        "from the pool keeping freed memory (cuMemAllocFromPoolAsync) "
        f"{call('alloc_reused', 'pool_kept')} reused right after cuMemFreeAsync and "
        f"{call('alloc_after_sync', 'pool_kept')} after a synchronization. A pool only saves "
        "the allocation while it still holds the memory. (*: near the floor of how calls are "
        f"timed, {format_ms(floor)}.)"
    )


@pytest.mark.parametrize(
    ("title", "operation"),
    [
        ("Stream-ordered allocation", "alloc_new"),
        ("Stream-ordered allocation", "alloc_reused"),
        ("Stream-ordered allocation", "free_call"),
        ("Stream-ordered allocation", "trim"),
        *(("Virtual memory management", op) for _, (_, op, _) in VMM.items()),
    ],
)
def test_a_table_of_calls_some_of_one_operation_on_the_host_clock_says_so(title, operation):
    result = recorded()
    one = next(m for m in result.measurements if (m.group, m.operation) == ("api", operation))
    one.source = "host"
    assert found(result, title).notes[0] == (
        "Driver calls: CUPTI's record of each call where it had one, else the host clock."
    )


def without(result: Result, **match) -> Result:
    """The result less every measurement that matches (at least one)."""
    kept = [m for m in result.measurements if not matches(m, **match)]
    assert len(kept) < len(result.measurements), match
    return replace(result, measurements=kept)


def test_the_stream_side_note_names_only_the_pools_with_both_figures_at_the_largest():
    result = recorded()
    largest = 1 << 30
    alloc = median(result, "gpu", "stream_alloc", "pool", largest)
    free = median(result, "gpu", "stream_free", "pool", largest)
    one = without(result, operation="stream_free", kind="pool_kept", nbytes=largest)
    note = found(one, "Stream-ordered allocation").notes[-1]
    assert note.endswith(f"at 1 GiB: pool {format_ms(alloc)} and {format_ms(free)}.")
    none = without(one, operation="stream_alloc", kind="pool", nbytes=largest)
    assert found(none, "Stream-ordered allocation").notes[-1].endswith("at 1 GiB: not measured.")


def test_a_file_without_a_floor_says_why_in_full_once_then_by_reference():
    older = load_older("alloc")  # recorded before the floor
    allocation = found(older, "Stream-ordered allocation")
    free = found(older, "Stream-ordered free")
    assert allocation.notes[1] == (
        "No floor: an older memprof did not time a call that does nothing, so a figure under a "
        "few microseconds may be largely how it was timed, not the call."
    )
    assert free.notes[0] == "No floor: as in the table above."
    result = recorded()
    for m in result.measurements:
        if m.operation == "call_floor":
            m.source = "host"  # the calls: CUPTI's
    assert found(result, "Stream-ordered allocation").notes[1] == (
        "No floor: cuCtxGetDevice was not timed as the calls were (CUPTI kept no record of it), "
        "so a figure under a few microseconds may be largely how it was timed, not the call."
    )


def test_virtual_memory_without_pools_says_the_floor_in_full():
    result = recorded()
    record = replace(result.extra.allocators, pools=[])
    vmm, _ = pools.vmm_tables(result, record)
    assert vmm.notes[1].startswith(f"Floor: {format_ms(floor_ms(result))}, what cuCtxGetDevice")
    with_pools, _ = pools.vmm_tables(result, result.extra.allocators)
    floor = format_ms(floor_ms(result))
    assert with_pools.notes[1] == f"Floor {floor} and *: as in the table above."


def test_a_run_without_cupti_says_its_calls_are_on_the_host_clock():
    result = recorded()
    for m in result.measurements:
        if m.group == "api":
            m.source = "host"
    for title in ("Stream-ordered allocation", "Virtual memory management"):
        assert found(result, title).notes[0] == (
            "Driver calls: the host clock around each call (no CUPTI: Python's cost of a call "
            "included)."
        )


@pytest.mark.parametrize("missing", ["pool", "device"])
def test_the_loop_verdict_reads_only_the_sizes_where_both_allocators_ran(missing):
    result = synthetic_loop_result({"device": [50, 55, 60, 280], "pool": [5, 5, 59, 300]})
    stop = 4 << 20  # where the pool stopped helping: without it, it helped wherever both ran
    result.measurements = [m for m in result.measurements if (m.kind, m.bytes) != (missing, stop)]
    verdict = pools.loop_verdict(result, "pool")
    assert verdict == (
        "In the loop the default pool (cuMemAllocAsync) helped up to 1 MiB (5.0000us against "
        "55.000us per iteration at 1 MiB) and stopped helping at 16 MiB (300.00us against "
        "280.00us per iteration at 16 MiB); its total fell below cuMemAlloc's from iteration 10."
    )


def test_virtual_memory_alone_in_a_file_without_a_floor_says_why_in_full():
    older = load_older("alloc")
    record = replace(older.extra.allocators, pools=[])
    vmm, _ = pools.vmm_tables(older, record)
    assert vmm.notes[1].startswith("No floor: an older memprof did not time a call that does")


def test_growing_not_measured_one_way_at_a_size_leaves_its_cells_empty():
    result = without(recorded(), operation="grow_by_copy", nbytes=1 << 20)
    rows = cells(found(result, "Growing a buffer"))
    in_place = median(result, "api", "grow_in_place", "vmm", 1 << 20)
    assert rows["1 MiB"] == {
        "In place (VMM)": format_ms(in_place),
        "New + copy + free": "-",
        "In place is": "-",
    }


def pool_conclusion(result: Result) -> str | None:
    return next((c for c in summarize(result).conclusions if "cuMemAlloc took" in c), None)


def test_the_pool_conclusion_names_only_the_pools_with_both_figures_at_the_largest():
    result = without(recorded(), operation="alloc_after_sync", kind="pool", nbytes=1 << 30)
    line = pool_conclusion(result)
    assert "from the default pool" not in line and " - " not in line
    assert "; a stream-ordered allocation from the pool keeping freed memory" in line
    reused = without(result, operation="alloc_reused", kind="pool_kept", nbytes=1 << 30)
    assert pool_conclusion(reused) is None  # no pool left to set against cuMemAlloc


def test_the_pool_conclusion_needs_cumemallocs_figure_at_the_largest():
    assert pool_conclusion(recorded()) is not None
    result = without(recorded(), operation="alloc_new", kind="device", nbytes=1 << 30)
    assert pool_conclusion(result) is None


def test_the_pool_conclusion_explains_the_mark_where_only_cumemallocs_figure_has_it():
    result = recorded()
    largest, floor = 1 << 30, floor_ms(result)
    # cuMemAlloc moved to 2x the floor (marked), the pools' figures to 20x (unmarked)
    result = with_samples(result, [2 * floor], operation="alloc_new", kind="device", nbytes=largest)
    for kind in ("pool", "pool_kept"):
        for operation in ("alloc_reused", "alloc_after_sync"):
            result = with_samples(
                result, [20 * floor], operation=operation, kind=kind, nbytes=largest
            )
    line = pool_conclusion(result)
    assert f"cuMemAlloc took {format_ms(2 * floor)}*;" in line
    assert f"{format_ms(20 * floor)} reused" in line
    assert line.endswith(f"(*: near the floor of how calls are timed, {format_ms(floor)}.)")


def test_the_pool_conclusion_with_nothing_marked_ends_without_the_marks_words():
    older = load_older("alloc")  # no floor: nothing marked
    assert pool_conclusion(older).endswith(
        "after a synchronization. A pool only saves the allocation while it still holds the memory."
    )


@pytest.mark.parametrize("missing", ["grow_in_place", "grow_by_copy"])
def test_growing_measured_one_way_alone_at_the_largest_concludes_nothing(missing):
    def growth(result: Result) -> list[str]:
        return [c for c in summarize(result).conclusions if c.startswith("Growing a")]

    assert len(growth(recorded())) == 1
    assert growth(without(recorded(), operation=missing, nbytes=1 << 30)) == []
