"""Blocking copies keep two figures: the GPU's DMA (CUPTI's memcpy record) and the time their
call held the host (the API record of the same correlation id). Small record lists built
here, not recordings; trace_check's choice of figure per row is pinned down too."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprof.core.activity import ApiRecord, GpuRecord
from memprof.experiments import load as load_result
from memprof.experiments import summarize
from memprof.experiments import trace as trace_summary
from memprof.model.formatting import format_ms
from memprof.model.results import Measurement, Result
from memprof.model.schema import SchemaError
from memprof.output.profile import profile_rows
from memprof.output.render import timing_note
from memprof.trace.collect import (
    BlockedCopies,
    Outcome,
    Program,
    Recording,
    blocked_copies,
    copy_groups,
    is_blocking,
    measurements_from_records,
    trace_result,
)
from tests.benchmark_scripts import script
from tests.conftest import load_fixture, render_text

ROW = "[CUDA memcpy HtoD] pageable -> device"

MiB = 1 << 20
PAGEABLE_HTOD = "[CUDA memcpy HtoD] pageable -> device"


def memcpy(source: str, destination: str, nbytes: int, dma_us: float, asynchronous: bool, cid: int):
    direction = "HTOD" if destination == "device" else "DTOH"
    return GpuRecord(
        "memcpy", direction, 0, int(dma_us * 1000), nbytes, source, destination, asynchronous, cid
    )


def records() -> tuple[list[GpuRecord], list[ApiRecord]]:
    """Synchronous pageable HtoD (driver call only), an Async pageable HtoD made through the
    runtime (cudaMemcpyAsync and the driver call it made share the id), a synchronous pinned
    DtoH, an Async pinned HtoD (not blocking), and a pageable copy CUPTI has no call for."""
    gpu = [
        memcpy("pageable", "device", 4 * MiB, 300, False, 1),
        memcpy("pageable", "device", 4 * MiB, 310, True, 2),
        memcpy("device", "pinned", 4 * MiB, 90, False, 3),
        memcpy("pinned", "device", 4 * MiB, 80, True, 4),
        memcpy("pageable", "device", 32 * MiB, 2000, False, 5),
    ]
    api = [
        ApiRecord("cuMemcpyHtoD_v2", 0.45, 1),
        ApiRecord("cudaMemcpyAsync", 0.50, 2),  # the runtime call encloses ...
        ApiRecord("cuMemcpyHtoDAsync_v2", 0.40, 2),  # ... the driver call it made
        ApiRecord("cuMemcpyDtoH_v2", 0.10, 3),
        ApiRecord("cuMemcpyHtoDAsync_v2", 0.005, 4),
    ]
    return gpu, api


def test_a_copy_blocks_when_its_call_is_synchronous_or_its_host_memory_pageable():
    gpu, _ = records()
    assert [is_blocking(r) for r in gpu] == [True, True, True, False, True]


def test_blocking_copies_pair_with_the_longest_call_of_their_correlation_id():
    rows = {(b.name, b.bytes): b for b in blocked_copies(*records())}
    four = rows[PAGEABLE_HTOD, 4 * MiB]
    assert (four.calls, four.paired) == (2, 2)
    assert four.gpu_ms == pytest.approx(0.61)
    assert four.blocked_ms == pytest.approx(0.45 + 0.50)  # cudaMemcpyAsync, not its driver call
    assert rows["[CUDA memcpy DtoH] device -> pinned", 4 * MiB].blocked_ms == pytest.approx(0.1)
    unpaired = rows[PAGEABLE_HTOD, 32 * MiB]
    assert (unpaired.calls, unpaired.paired, unpaired.blocked_ms) == (1, 0, 0.0)
    assert ("[CUDA memcpy HtoD] pinned -> device", 4 * MiB) not in rows  # asynchronous


def test_copy_groups_sum_host_blocked_time_of_blocking_copies_only():
    groups = {(g.direction, g.source): g for g in copy_groups(*records())}
    pageable = groups["HtoD", "pageable"]
    assert pageable.blocked_ms == pytest.approx(0.95)
    assert pageable.blocking_copies == 3  # one Async call from pageable memory among them
    assert pageable.blocking_calls == 2
    assert groups["DtoH", "device"].blocked_ms == pytest.approx(0.1)
    pinned = groups["HtoD", "pinned"]
    assert (pinned.blocked_ms, pinned.blocking_copies) == (0.0, 0)
    assert pinned.call_ms == pytest.approx(0.005)


def test_nvprof_rows_stay_the_gpus_dma_time():
    rows = {r.name: r for r in profile_rows(measurements_from_records(*records()))}
    assert rows[PAGEABLE_HTOD].stats.total_ms == pytest.approx(0.3 + 0.31 + 2.0)


def traced() -> Result:
    gpu, api = records()
    recording = Recording(gpu, api, None, None, "NVIDIA H200", "580")
    return trace_result(Program("p.py", None), Outcome(0, None, 1.0), recording, 0, {})


def test_the_copies_table_shows_gpu_time_and_host_blocked_side_by_side():
    table = trace_summary.copies_table(copy_groups(*records()), {})
    blocked = table.headers.index("Host blocked")
    rows = {row[0]: row for row in table.rows}
    pageable = rows["HtoD pageable -> device"]
    assert pageable[table.headers.index("GPU time")] == format_ms(2.61)
    assert pageable[blocked] == format_ms(0.95)
    assert pageable[table.headers.index("Blocking")] == "3"
    assert rows["HtoD pinned -> device"][blocked] == "-"
    assert "DMA alone" in table.notes[0] and "Host blocked" in table.notes[0]


@pytest.mark.parametrize(
    ("bandwidth", "said"),
    [
        (
            {"h2d_gb_per_s": 25.0, "d2h_gb_per_s": 20.5, "bytes": 64 << 20, "how": "cache"},
            "This GPU's pinned bandwidth, for the advice: HtoD 25.0 GB/s, DtoH 20.5 GB/s "
            "(64 MiB copies; cache).",
        ),
        (
            {"h2d_gb_per_s": 25.0, "d2h_gb_per_s": 20.5},
            "This GPU's pinned bandwidth, for the advice: HtoD 25.0 GB/s, DtoH 20.5 GB/s "
            "(0 B copies; not measured).",
        ),
        ({"d2h_gb_per_s": 20.5, "how": "measured"}, "This GPU's pinned bandwidth: measured."),
        ({"h2d_gb_per_s": 25.0, "how": "measured"}, "This GPU's pinned bandwidth: measured."),
        (None, "This GPU's pinned bandwidth: not measured."),
    ],
)
def test_the_copies_table_says_the_pinned_bandwidth_only_with_both_directions(bandwidth, said):
    """Each direction's figure in its own place, and the advice's source where either is
    missing: HtoD and DtoH told apart (25.0 against 20.5)."""
    table = trace_summary.copies_table(copy_groups(*records()), bandwidth)
    assert table.notes[1:] == [said]


def test_the_profile_footnote_names_dma_and_blocked_time_for_a_trace():
    note = summarize(traced()).timing_note
    assert "DMA alone" in note and "Host blocked" in note
    assert "--repeat" not in note  # a trace repeats nothing
    assert "API calls: every driver and runtime call" in note  # trace_result's default
    assert "nothing excluded (start-up calls included)" in note
    gpu, api = records()
    recording = Recording(gpu, api, None, None, "NVIDIA H200", "580")
    program, outcome = Program("p.py", None), Outcome(0, None, 1.0)
    work = trace_result(program, outcome, recording, 0, {}, all_calls=False)
    note = summarize(work).timing_note
    assert note.endswith(trace_summary.WORK_CALLS_NOTE.format(launch=""))
    assert "every driver and runtime call" not in note and "nothing excluded" not in note
    # a file traced when launches were recorded too says so
    launched = Recording(gpu, [*api, ApiRecord("cuLaunchKernel", 0.01, 9)], None, None, "H", "1")
    note = summarize(trace_result(program, outcome, launched, 0, {}, all_calls=False)).timing_note
    assert note.endswith("API calls: only those that launch, copy, set, allocate, free, "
                         "register, prefetch or wait, entry to exit (--all-calls records "
                         "every call).")  # fmt: skip
    pinned = load_fixture("pinned_p20")
    assert summarize(pinned).timing_note is None  # other commands: the run's own
    assert "--repeat" in timing_note(pinned)


def test_traces_saved_before_the_pairing_still_load_and_render():

    result = load_result(Path(__file__).parent / "fixtures" / "legacy_trace_pycuda_unpaired.json")
    assert result.extra.blocked is None
    text = render_text(result, width=200)
    assert "Host blocked" in text
    assert "DMA alone" in text


def test_a_recorded_trace_shows_each_blocking_kinds_host_time_beside_its_dma():
    result = load_fixture("trace_pycuda")
    table = trace_summary.copies_table(result.extra.copies, result.extra.pinned_bandwidth)
    rows = {row[0]: row for row in table.rows}
    blocked = table.headers.index("Host blocked")
    gpu = table.headers.index("GPU time")
    pageable = rows["HtoD pageable -> device"]
    assert pageable[blocked] != "-" and pageable[blocked] != pageable[gpu]
    assert rows["HtoD pinned -> device"][blocked] == "-"  # asynchronous: nothing to wait for


def load_trace_check():
    return script("trace_check")


def test_trace_check_compares_blocking_rows_with_blocked_time_and_others_with_gpu_time():
    check = load_trace_check()
    key = (PAGEABLE_HTOD, 4 * MiB)
    dma = Measurement("gpu", PAGEABLE_HTOD, "htod", None, 4 * MiB, [0.3, 0.31], source="cupti")
    paired = {key: BlockedCopies(*key, calls=2, gpu_ms=0.61, blocked_ms=0.95, paired=2)}
    assert check.trace_figure(key, 2, dma, paired) == (pytest.approx(0.95), "blocked")
    half = {key: BlockedCopies(*key, calls=2, gpu_ms=0.61, blocked_ms=0.45, paired=1)}
    assert check.trace_figure(key, 2, dma, half) == (pytest.approx(0.61), "GPU")
    assert check.trace_figure(key, 2, dma, {}) == (pytest.approx(0.61), "GPU")
    assert check.trace_figure(key, 2, None, {}) == (0.0, "GPU")


@pytest.mark.parametrize(
    ("samples", "calls", "gpu_ms", "kept"),
    [
        ([4.0, 1.0, 3.0, 2.0], 4, 4 + 3 + 2 + 1, True),  # every copy: their sum
        ([4.0, 1.0, 3.0, 2.0], 4, 10.1, False),
        ([4.0, 1.0, 3.0, 2.0], 2, 1 + 2, True),  # two of four: the shortest two
        ([4.0, 1.0, 3.0, 2.0], 2, 3 + 4, True),  # the longest two
        ([4.0, 1.0, 3.0, 2.0], 2, 1 + 4, True),  # any two: between the edges
        ([4.0, 1.0, 3.0, 2.0], 2, 3 + 4 + 1e-9, True),  # the longest two, summed in another order
        ([4.0, 1.0, 3.0, 2.0], 2, 2.9, False),
        ([4.0, 1.0, 3.0, 2.0], 2, 7.1, False),
        ([4.0, 1.0, 3.0, 2.0], 0, 0.0, True),
        ([4.0, 1.0, 3.0, 2.0], 0, 0.5, False),  # no blocking copy, but their DMA time
        ([2.0], 1, 2.0, True),  # a size copied once: no sorting
        ([2.0], 1, 2.1, False),
        ([2.0], 1, 1.9, False),
        ([2.0], 0, 0.0, True),
        ([2.0], 0, 2.0, False),
    ],
)
def test_a_blocked_rows_dma_time_is_that_of_as_many_of_its_measured_copies(
    samples, calls, gpu_ms, kept
):
    copies = Measurement("gpu", ROW, "h2d", "pageable", 4096, samples)
    row = BlockedCopies(ROW, 4096, calls, gpu_ms, 0.0, calls)
    if kept:
        trace_summary.check_blocked([row], [], {ROW: [copies]})
    else:
        with pytest.raises(SchemaError, match=r"extra\.blocked\[0\]\.gpu_ms is "):
            trace_summary.check_blocked([row], [], {ROW: [copies]})


def test_a_blocked_row_of_a_copy_row_never_measured_is_refused_naming_its_calls():
    """Only the rows that blocked are looked up: one the measurements lack has 0 copies."""
    copies = Measurement("gpu", ROW, "h2d", "pageable", 4096, [2.0])
    row = BlockedCopies("[CUDA memcpy DtoH] device -> pinned", 4096, 1, 2.0, 0.0, 1)
    with pytest.raises(SchemaError) as refused:
        trace_summary.check_blocked([row], [], {ROW: [copies]})
    assert str(refused.value) == ("extra.blocked[0].calls is 1, but 0 such copies were measured")


def test_a_blocked_row_pairing_more_copies_than_it_blocked_is_refused():
    copies = Measurement("gpu", ROW, "h2d", "pageable", 4096, [2.0])
    row = BlockedCopies(ROW, 4096, 1, 2.0, 0.5, 2)
    with pytest.raises(SchemaError) as refused:
        trace_summary.check_blocked([row], [], {ROW: [copies]})
    assert str(refused.value) == "extra.blocked[0].paired is 2, more than calls (1)"
