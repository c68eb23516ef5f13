"""alloc's tables read whole (issue 37's mutation round on its table and summary builders):
the kinds grouped as a user reads them, each table's Size column and per-GiB row, the
figures behind that row, and the notes under the last allocation table in their words."""

from __future__ import annotations

from memprof.experiments import summarize
from memprof.experiments.alloc import KIND_GROUPS, kind_groups
from memprof.experiments.base import FLOAT32_BYTES
from memprof.model.figures import Derived
from memprof.model.formatting import format_bytes
from tests.verdict_tools import fixture

NUMPY, PINNED, DEVICE = (title for title, _ in KIND_GROUPS)


def test_kinds_of_no_group_go_last_under_other_memory_in_the_runs_order():
    kinds = ["vmm", "later", "pinned", "pageable", "sooner", "device"]
    assert kind_groups(kinds) == [
        (NUMPY, ["pageable"]),
        (PINNED, ["pinned"]),
        (DEVICE, ["vmm", "device"]),
        ("other memory", ["later", "sooner"]),
    ]


def test_kinds_all_in_groups_leave_no_other_table_and_empty_groups_none():
    assert kind_groups(["device", "managed"]) == [(NUMPY, ["managed"]), (DEVICE, ["device"])]
    assert kind_groups(["later"]) == [("other memory", ["later"])]


def alloc_tables():
    result = fixture("h200_alloc")
    summary = summarize(result)
    return result, summary, summary.tables[:6]


def test_each_operation_has_a_table_per_group_and_the_summary_shows_the_profile():
    _, summary, tables = alloc_tables()
    assert [t.title for t in tables] == [
        f"{operation} time, {group}"
        for operation in ("Allocate", "Free")
        for group in (NUMPY, PINNED, DEVICE)
    ]
    assert summary.show_profile is True


def test_each_table_has_its_sizes_then_the_per_gib_row_under_size():
    result, _, tables = alloc_tables()
    powers = result.parameters.powers
    sizes = [format_bytes(FLOAT32_BYTES << power) for power in powers]
    for t in tables:
        assert t.headers[0] == "Size"
        assert [row[0] for row in t.rows] == [*sizes, "per GiB, largest"]


def test_the_per_gib_row_is_each_kinds_largest_allocation_named_as_the_csv_names_it():
    result, _, tables = alloc_tables()
    largest = FLOAT32_BYTES << max(result.parameters.powers)
    for t, operation in zip(tables, ["alloc"] * 3 + ["free"] * 3, strict=True):
        assert len(t.figures[-1]) == len(t.headers) > 1
        for kind, figure in t.figures[-1].items():
            if kind == "size":
                continue
            assert isinstance(figure, Derived)
            assert figure.name == f"{kind} {operation}, per GiB"
            assert figure.formula == "per_gib"
            (part,) = figure.parts
            assert part.measurement is result.find(operation, kind, byte_count=largest)


def test_the_last_allocation_tables_notes_whole_and_the_others_none():
    _, _, tables = alloc_tables()
    assert [t.notes for t in tables[:-1]] == [[]] * 5
    calls = (
        "pageable = numpy.empty + first touch / numpy free; "
        "pinned = cuMemHostAlloc / cuMemFreeHost; portable = cuMemHostAlloc / cuMemFreeHost; "
        "writecombined = cuMemHostAlloc / cuMemFreeHost; mapped = cuMemHostAlloc / cuMemFreeHost; "
        "registered = numpy.empty + first touch + cuMemHostRegister / cuMemHostUnregister; "
        "managed = cuMemAllocManaged / cuMemFree; device = cuMemAlloc / cuMemFree; "
        "pool = cuMemAllocAsync / cuMemFreeAsync; "
        "pool_kept = cuMemAllocFromPoolAsync / cuMemFreeAsync; "
        "vmm = cuMemAddressReserve + cuMemCreate + cuMemMap + cuMemSetAccess / "
        "cuMemUnmap + cuMemRelease + cuMemAddressFree"
    )
    assert tables[-1].notes == [
        "Medians of each call on the host clock. Pageable and registered include writing every "
        "page (numpy.empty only reserves address space; the first touch is when memory is "
        "provided). cuMemAllocManaged provides no pages yet: they appear, and cost, on first "
        "touch.",
        f"Calls: {calls}.",
        "Host memory of 256 MiB and more: one allocation per size, not warmed up (its cost is "
        "its pages, the same every time, and tenths of a second).",
        "Stream-ordered kinds (pool, pool_kept) free with cuMemFreeAsync and nothing "
        "synchronizes between repetitions: each allocation reuses the last one's memory. The "
        "tables below take them apart.",
    ]
