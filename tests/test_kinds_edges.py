"""pinned, zero-copy and write-combined summaries where no recorded fixture can tell a right
answer from a wrong one (issue 37's mutation round on their modules): each kind's own check
in the allocation table, an older file's memcpy row and its ceiling note, one direction's
staging alone, ceiling remarks for a file without pageable's host side, a link not recorded,
and the conclusions' words whole where the fixtures never reach them.

Saved files are edited as JSON and loaded by memprof, so each case is one memprof accepts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import load, summarize
from memprof.model.formatting import format_gb_per_s
from memprof.model.results import Result
from memprof.model.summary import Table
from tests.conftest import FIXTURES, replace
from tests.verdict_tools import cell, fixture, scaled, table, the, with_samples


def loaded(tmp_path: Path, name: str, edit: Callable[[dict], None]) -> Result:
    """The fixture `name` with `edit` applied to its JSON, saved and loaded by memprof."""
    document = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    edit(document)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return load(path)


def renamed(old: str, new: str) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        for m in document["measurements"]:
            if m["operation"] == old:
                m["operation"] = new

    return edit


def dropped(operation: str) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        kept = [m for m in document["measurements"] if m["operation"] != operation]
        document["measurements"] = kept

    return edit


def both(*edits: Callable[[dict], None]) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        for one in edits:
            one(document)

    return edit


def first_cells(t: Table) -> list[list[str]]:
    return [row[:2] for row in t.rows]


# -- pinned: the allocation table's Result column -------------------------------------------


def failed(kind: str) -> Callable[[dict], None]:
    """The check of `kind` host memory failed, as a mismatch is saved."""

    def edit(document: dict) -> None:
        (check,) = (c for c in document["checks"] if f", {kind} host memory" in c["name"])
        check.update(passed=False, detail="Arrays do not match! 1 of 8 elements")

    return edit


def results_column(result: Result) -> dict[str, str]:
    costs = table(summarize(result), "Allocation of")
    return {kind: cell(costs, "Result", kind) for kind in ("pageable", "pinned")}


def test_each_kinds_result_is_its_own_check(tmp_path):
    """A failed pinned check marks the pinned row alone, a failed pageable one the pageable
    row alone, and a file without checks says so for both, never 'verified'."""
    pinned_failed = loaded(tmp_path, "h200_pinned_p20", failed("pinned"))
    assert results_column(pinned_failed) == {"pageable": "verified", "pinned": "FAILED"}
    pageable_failed = loaded(tmp_path, "h200_pinned_p20", failed("pageable"))
    assert results_column(pageable_failed) == {"pageable": "FAILED", "pinned": "verified"}
    unchecked = loaded(tmp_path, "h200_pinned_p20", lambda d: d.update(checks=[]))
    assert results_column(unchecked) == dict.fromkeys(("pageable", "pinned"), "no check recorded")


# -- pinned: pageable copies' host side --------------------------------------------------------


def host_gb_per_s(result: Result, operation: str) -> str:
    m = the(result, group="host", operation=operation)
    return format_gb_per_s(m.bytes / ((m.throughput_stats or m.stats).median_ms / 1e3) / 1e9)


def test_an_older_files_memcpy_is_one_host_to_host_row_and_the_pageable_ceiling_note(tmp_path):
    """A file from before the staging rows holds one memcpy between two pageable buffers: one
    'memcpy, host → host' row (not a staging row per direction) and the note that says the
    pageable copies are held to it."""
    edit = both(renamed("staging_h2d", "memcpy"), dropped("staging_d2h"))
    result = loaded(tmp_path, "h200_pinned_p20", edit)
    transfers = table(summarize(result), "Transfers of")
    assert first_cells(transfers)[4:] == [["memcpy", "host → host"]]
    assert cell(transfers, "GB/s", "memcpy", "host → host") == host_gb_per_s(result, "memcpy")
    assert transfers.notes[-1] == (
        "Pageable copies against the lower of the link and the memcpy row (memcpy: one "
        "thread, back-to-back copies between two pageable buffers of this size, host "
        "clock, this run; a file from an older memprof, whose pageable copies can beat "
        "it: docs/ceilings.md)."
    )


def test_one_directions_staging_alone_is_its_row_and_the_staged_note(tmp_path):
    """Staging recorded for one direction: its one row, and the note of staged copies."""
    for kept, gone, label in (
        ("staging_h2d", "staging_d2h", "host → device"),
        ("staging_d2h", "staging_h2d", "device → host"),
    ):
        result = loaded(tmp_path, "h200_pinned_p20", dropped(gone))
        transfers = table(summarize(result), "Transfers of")
        assert first_cells(transfers)[4:] == [["staging", label]]
        assert cell(transfers, "GB/s", "staging", label) == host_gb_per_s(result, kept)
        assert transfers.notes[-1].startswith(
            "Pageable copies against the lower of the link and the staging row of their direction:"
        )


def test_without_pageables_host_side_only_pinned_copies_are_held_to_the_link():
    """An older file without the staging rows: pinned copies far below the link are named,
    pageable ones (whose ceiling would be half known) never, however slow."""
    result = fixture("legacy_v2_pinned_p20")
    for kind in ("pinned", "pageable"):
        result = scaled(result, 4.0, group="gpu", kind=kind)
    remarks = summarize(result).conclusions[1:]
    assert [line.split(" reached ")[0] for line in remarks] == [
        "Pinned host → device",
        "Pinned device → host",
    ]
    assert all(line.endswith("something other than the PCIe held it back.") for line in remarks)


def test_pinned_no_dearer_than_pageable_says_so_in_its_own_sentence():
    from memprof.experiments.pinned import _conclusion

    median = {("pageable", "h2d"): 1.0, ("pinned", "h2d"): 0.5,
              ("pageable", "d2h"): 1.0, ("pinned", "d2h"): 0.5}  # fmt: skip
    equal_cost = {"pinned": 1.0, "pageable": 1.0}
    line = _conclusion(median, equal_cost, 4 << 20, {"pinned": 8.4, "pageable": 4.2})
    assert line == (
        "Pinned memory copied 4 MiB host → device 2.00x faster than pageable (8.40 vs 4.20 "
        "GB/s) and device → host 2.00x faster. Allocating and freeing pinned memory cost no "
        "more than pageable here: pin every buffer you transfer."
    )


# -- pinned: an older file's derived sizes ---------------------------------------------------


def extra_set(**values) -> Callable[[dict], None]:
    return lambda document: document["extra"].update(values)


def test_an_older_files_sizes_are_held_to_the_power_and_named_as_counts(tmp_path):
    """extra.elements and extra.bytes_per_array, which schema 2 files held, must be what the
    power makes (2^20 floats, 4 MiB): refused one off and shown as whole numbers, 1048576 and
    never 1048576.0; accepted as they are."""
    name = "legacy_v2_pinned_p20"
    loaded(tmp_path, name, extra_set(elements=1 << 20, bytes_per_array=4 << 20))
    for field, wrong, made in (
        ("elements", (1 << 20) - 1, 1 << 20),
        ("elements", (1 << 20) + 1, 1 << 20),
        ("bytes_per_array", (4 << 20) + 4, 4 << 20),
    ):
        with pytest.raises(InvalidArgument) as refused:
            loaded(tmp_path, name, extra_set(**{field: wrong}))
        assert str(refused.value).endswith(
            f"extra.{field} is {wrong}, but the parameters and measurements make {made}"
        )


# -- zero-copy: a link not recorded ------------------------------------------------------------


def test_zero_copy_reads_ceiling_is_said_unknown_where_no_link_was_recorded():
    result = fixture("h200_zerocopy_p20")
    device = replace(result.device, pcie_generation=None, pcie_width=None)
    result = replace(result, device=device, gpu_states=None)
    note = table(summarize(result), "sumArrays on device memory").notes[1]
    assert note.endswith(
        "every read crosses the link host → device, so its ceiling is the link, unknown here."
    )


# -- write-combined: the trap's sentence whole -------------------------------------------------


def test_the_write_combined_trap_says_what_to_use_it_for():
    result = fixture("h200_writecombined")
    result = with_samples(result, [1.0] * 3, operation="host_read", kind="mapped")
    result = with_samples(result, [4.0] * 3, operation="host_read", kind="writecombined")
    line = summarize(result).conclusions[0]
    assert line.startswith("The host read write-combined memory 4.0x slower than cached pinned ")
    assert line.endswith(
        "the cached speed: use write-combined memory only for buffers the CPU fills and never "
        "reads back."
    )
