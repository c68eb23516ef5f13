"""uva, register and alloc summaries where no recorded fixture tells a right answer from a
wrong one (issue 37's mutation round on their modules): uva's ceiling note for a file without
link or HBM figures, and register's conclusion whole where registration saved nothing."""

from __future__ import annotations

from memprof.experiments import summarize
from tests.conftest import replace
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
