"""uva, register and alloc summaries where no recorded fixture tells a right answer from a
wrong one (issue 37's mutation round on their modules): uva's ceiling note for a file without
link or HBM figures, register's conclusion whole where registration saved nothing, its
kernel note without a link, and its ceiling note for a file with one direction's staging and
for an older file's one memcpy; alloc's refusals of a saved file in their words whole."""

from __future__ import annotations

import json

import pytest

from memprof.experiments import summarize
from tests.conftest import FIXTURES, replace
from tests.test_kinds_edges import both, dropped, host_gb_per_s, loaded, renamed
from tests.test_loader_contradictions import edited, refusal
from tests.verdict_tools import fixture, table, with_samples


def test_uvas_ceiling_note_says_which_figures_the_file_lacks():
    result = fixture("h200_uva")
    device = replace(result.device, pcie_generation=None, pcie_width=None, memory_clock_khz=None)
    result = replace(result, device=device, gpu_states=None)
    notes = table(summarize(result), "sumArrays over").notes
    assert notes[1] == (
        "Of ceiling: mapped memory against the link, not recorded in this file; device memory "
        "against HBM."
    )


def test_registration_that_saved_nothing_says_so_in_its_sentence_whole():
    result = fixture("h200_register")
    result = with_samples(result, [1.0] * 3, operation="register")
    result = with_samples(result, [2.0] * 3, operation="unregister")
    for group, kind in (("api", "pageable"), ("gpu", "registered")):
        result = with_samples(result, [0.5] * 3, group=group, operation="h2d", kind=kind)
    line = summarize(result).conclusions[0]
    start, end = line.index(": registration"), line.index(". Register buffers")
    assert line[start:end] == ": registration did not speed up copies here"


def test_registers_kernel_note_gives_no_share_of_a_link_not_recorded():
    result = fixture("h200_register")
    result = replace(result, device=replace(result.device, pcie_generation=None), gpu_states=None)
    (transfers,) = [t for t in summarize(result).tables if t.title == "Transfers"]
    note = transfers.notes[1]
    assert note.startswith("A kernel reading two registered arrays through DEVICEMAP took ")
    assert note.endswith(" GB/s over PCIe).") and "of the link" not in note


@pytest.mark.parametrize("gone", ["staging_h2d", "staging_d2h"])
def test_one_directions_staging_alone_holds_the_pageable_array_to_the_link_only(tmp_path, gone):
    """The staged note names both directions' host side: with one missing, the link alone."""
    result = loaded(tmp_path, "h200_register", dropped(gone))
    notes = table(summarize(result), "Transfers against their ceiling").notes
    assert notes[1] == (
        "The pageable array against the link only: the host side of pageable copies was not "
        "recorded (a file from an older memprof)."
    )


def test_an_older_files_memcpy_holds_the_pageable_array_to_it_in_its_own_words(tmp_path):
    result = loaded(
        tmp_path, "h200_register", both(renamed("staging_h2d", "memcpy"), dropped("staging_d2h"))
    )
    notes = table(summarize(result), "Transfers against their ceiling").notes
    assert notes[1] == (
        "The pageable array against the lower of the link and one host thread's memcpy "
        "between two pageable buffers of its size, this run: "
        f"{host_gb_per_s(result, 'memcpy')} GB/s (a file from an older memprof: pageable "
        "copies can beat it, docs/ceilings.md)."
    )
    staged = table(summarize(fixture("h200_register")), "Transfers against their ceiling")
    assert staged.notes[1].startswith(
        "The pageable array against the lower of the link and its host side: one host "
        "thread staging it through a 256 KiB buffer, chunk by chunk, as the driver does, "
        "this run: "
    )


def test_alloc_refuses_a_granularity_against_vmm_saying_what_each_run_records():
    def edit(data: dict) -> None:
        data["extra"]["allocators"].update(vmm=False, granularity_bytes=2 << 20)

    assert refusal(edited("h200_alloc", edit)) == (
        "run.json: extra.allocators.granularity_bytes is 2097152, but extra.allocators.vmm is "
        "false: a run that measured virtual memory management records its granularity (a "
        "positive byte count), one that did not records null"
    )


def test_alloc_refuses_an_allocation_of_a_kind_not_run_naming_every_kind_it_ran():
    def edit(data: dict) -> None:
        data["extra"]["kinds"] = ["pageable", "device"]

    said = refusal(edited("h200_alloc", edit))
    assert said.endswith(
        ".kind is 'pinned', but an api 'alloc' of this run is one of 'pageable', 'device'"
    )


@pytest.mark.parametrize("operation", ["alloc", "free"])
def test_alloc_refuses_a_free_or_an_allocation_timed_more_often_than_the_run_says(operation):
    document = json.loads((FIXTURES / "h200_alloc.json").read_text(encoding="utf-8"))
    index, m = next(
        (i, m)
        for i, m in enumerate(document["measurements"])
        if (m["operation"], m["kind"]) == (operation, "pinned")
    )
    m["samples_ms"].append(m["samples_ms"][0])
    held = len(m["samples_ms"])
    assert refusal(json.dumps(document)) == (
        f"run.json: measurements[{index}].samples_ms holds {held} allocations of pinned memory, "
        f"but parameters.repeat and extra.host_once_from_bytes say {held - 1}"
    )


def test_allocs_conclusion_compares_pinned_with_numpy_only_where_both_ran(tmp_path):
    def without_pageable(data: dict) -> None:
        data["extra"]["kinds"].remove("pageable")
        kept = [m for m in data["measurements"] if m["kind"] != "pageable"]
        data["measurements"] = kept

    both_ran = summarize(fixture("h200_alloc")).conclusions[0]
    assert "x numpy's " in both_ran
    assert both_ran.endswith(
        " with every page touched. Allocate pinned and device memory once, outside loops, "
        "and reuse it."
    )
    line = summarize(loaded(tmp_path, "h200_alloc", without_pageable)).conclusions[0]
    assert "pinned memory (cuMemHostAlloc) took" not in line and "numpy" not in line
    assert line.endswith(". Allocate pinned and device memory once, outside loops, and reuse it.")
