"""managed's and streams' conclusions on both sides of their edges, from the recorded H200
runs (tests/fixtures/h200_managed.json, h200_streams.json) with one step moved:
- managed: a prefetch pays where the prefetch and the launch after it, together, beat the
  on-demand first launch (the prefetch's own time counted); the first launch against a
  resident one;
- streams: the ideal overlapped time (the longest stage plus one chunk of each other),
  the share of it the streams reached, pageable memory "needs pinned" from 15% slower than
  the pinned overlap; the run kept of several is the one of median total time.
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
from types import SimpleNamespace

import numpy as np
import pytest

from memprof.core.measure import StreamsRun
from memprof.core.repetitions import Repetitions
from memprof.experiments import streams, summarize
from memprof.model.formatting import format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.output.export import csv_rows
from tests.conftest import array_bytes, replace
from tests.verdict_tools import cell, conclusion, fixture, scaled, table, the, with_samples

# -- managed ----------------------------------------------------------------------------------


def managed() -> Result:
    return fixture("h200_managed")


def median(result: Result, group: str, operation: str, kind: str) -> float:
    return statistics.median(the(result, group=group, operation=operation, kind=kind).samples_ms)


def prefetched_at(result: Result, launch_share: float, prefetch_share: float) -> Result:
    """The prefetched launch and the prefetch moved to shares of the on-demand first launch."""
    on_demand = median(result, "gpu", "kernel_first", "managed")
    for operation, share in (("kernel_first", launch_share), ("prefetch", prefetch_share)):
        now = median(result, "gpu", operation, "managed+prefetch")
        result = scaled(
            result,
            share * on_demand / now,
            group="gpu",
            operation=operation,
            kind="managed+prefetch",
        )
    return result


PAYS = "prefetch managed memory before the kernel that needs it."
DOES_NOT = "here prefetching did not beat on-demand migration."


@pytest.mark.parametrize(
    ("launch", "prefetch", "words"),
    [
        (0.05, 0.90, PAYS),  # 95% of on demand
        (0.05, 1.00, DOES_NOT),  # 105%: the prefetch alone is as slow as on demand
        (0.60, 0.45, DOES_NOT),  # neither alone is, both together are slower
        (0.45, 0.45, PAYS),
    ],
)
def test_a_prefetch_pays_only_where_it_and_the_launch_after_it_beat_on_demand(
    launch, prefetch, words
):
    result = prefetched_at(managed(), launch, prefetch)
    together = median(result, "gpu", "kernel_first", "managed+prefetch") + median(
        result, "gpu", "prefetch", "managed+prefetch"
    )
    line = conclusion(summarize(result), "On-demand migration")
    assert f"Prefetch plus launch took {format_ms(together)}: {words}" in line


def test_the_first_launch_is_set_against_a_resident_one_and_what_it_moved():
    result = managed()
    on_demand = median(result, "gpu", "kernel_first", "managed")
    resident = median(result, "gpu", "kernel", "managed")
    moved = 3 * array_bytes(result)  # the kernel's three arrays, from its Params
    line = conclusion(summarize(result), "On-demand migration")
    assert line.startswith(
        f"On-demand migration made the first launch {on_demand / resident:.0f}x slower than a "
        f"resident one ({format_ms(on_demand)} vs {format_ms(resident)}, pages arriving at "
        f"{format_gb_per_s(moved / (on_demand / 1e3) / 1e9)} GB/s)"
    )
    explicit = median(result, "span", "end_to_end", "device")
    assert f"in {format_ms(explicit)}." in line


def test_a_file_without_its_device_says_nothing_of_concurrent_managed_access():
    from memprof.experiments.managed import Managed

    result = managed()
    assert Managed().derived(result)["concurrent_managed_access"] is True  # the H200's
    assert Managed().derived(replace(result, device=None)) == {
        "bytes_per_array": array_bytes(result)
    }


# -- streams ----------------------------------------------------------------------------------


def pipeline() -> Result:
    return fixture("h200_streams")


def stage_ms(result: Result, stage: str) -> float:
    """One chunk's median time of a stage on one stream (the chunks are of one size)."""
    return median(result, "gpu", stage, "pinned, 1 stream")


def total_ms(result: Result, label: str) -> float:
    return median(result, "span", "total", label)


def ideal_ms(result: Result) -> float:
    params = result.parameters
    sizes = chunk_sizes(1 << params.power, params.streams)
    assert len(set(sizes)) == 1, sizes  # chunks of one size: each stage's total is N chunks
    chunks = len(sizes)
    stages = {stage: stage_ms(result, stage) for stage in ("h2d", "kernel", "d2h")}
    longest = max(stages, key=stages.get)
    return chunks * stages[longest] + sum(ms for s, ms in stages.items() if s != longest)


def test_the_ideal_is_the_longest_stage_and_one_chunk_of_each_other():
    result = scaled(pipeline(), 2.0, group="gpu", operation="kernel", kind="pinned, 1 stream")
    ideal = ideal_ms(result)
    modes = table(summarize(result), "Whole pipeline")
    assert modes.notes[0].startswith(f"Ideal overlapped time {format_ms(ideal)}: ")
    assert modes.rows[-1][:2] == ["ideal overlap", format_ms(ideal)]


def test_the_streams_share_of_the_ideal_is_ideal_over_their_own_time():
    result = pipeline()
    overlapped, serial = total_ms(result, "pinned, 4 streams"), total_ms(result, "pinned, 1 stream")
    line = conclusion(summarize(result), "streams ran the pipeline")
    assert (
        f"4 streams ran the pipeline in {format_ms(overlapped)} against {format_ms(serial)} on "
        f"one stream ({serial / overlapped:.2f}x), {ideal_ms(result) / overlapped:.0%} of the "
        "ideal overlap"
    ) in line


@pytest.mark.parametrize(
    ("slower", "words"),
    [
        (1.14, "here pageable memory kept most of the overlap."),
        (1.16, "overlap needs pinned memory."),
        (1.5, "overlap needs pinned memory."),
    ],
)
def test_pageable_memory_needs_pinned_from_fifteen_percent_slower_than_the_overlap(slower, words):
    result = pipeline()
    wanted = slower * total_ms(result, "pinned, 4 streams")
    result = scaled(
        result,
        wanted / total_ms(result, "pageable, 4 streams"),
        group="span",
        operation="total",
        kind="pageable, 4 streams",
    )
    line = conclusion(summarize(result), "streams ran the pipeline")
    assert line.endswith(f"took {format_ms(wanted)}: {words}")


class _Profiler:
    """Runs whose total times come in the order given."""

    repetitions = Repetitions()  # the noise target; --repeat N makes it N exactly

    def __init__(self, totals: list[float]) -> None:
        self.totals = iter(totals)

    @contextlib.contextmanager
    def paused(self):
        yield

    def on_streams(self, operations, pageable, span) -> StreamsRun:
        return StreamsRun([], next(self.totals), "events")


@pytest.mark.parametrize(
    "totals", [[5.0, 1.0, 3.0, 4.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0], [9.0, 3.0, 1.0, 2.0, 8.0]]
)
def test_the_run_kept_is_the_one_of_median_total_time(totals):
    params = SimpleNamespace(warmup=1, repeat=len(totals) - 1)
    run = streams._median_run(_Profiler(totals), [], None, False, params, np.zeros(4, np.float32))
    timed = totals[1:]  # the first is the warm-up's
    assert run.total_ms == sorted(timed)[len(timed) // 2]


class _Recorder(_Profiler):
    """Runs of one settled total (as many as asked), each call's arguments kept."""

    def __init__(self) -> None:
        super().__init__(itertools.repeat(2.0))
        self.calls: list[tuple] = []

    def on_streams(self, operations, pageable, span) -> StreamsRun:
        self.calls.append((operations, pageable, span))
        return super().on_streams(operations, pageable, span)


@pytest.mark.parametrize("pageable", [False, True])
def test_every_run_warm_or_timed_is_of_the_operations_mode_and_span_given(pageable):
    """Without --repeat the runs go on until their total settles: a settled one stops at the
    noise target's minimum."""
    profiler, operations, span = _Recorder(), ["h2d", "kernel", "d2h"], object()
    params = SimpleNamespace(warmup=2, repeat=None)
    target = np.zeros(4, np.float32)
    run = streams._median_run(profiler, operations, span, pageable, params, target)
    assert run.total_ms == 2.0
    assert len(profiler.calls) == 2 + Repetitions().minimum
    assert set(map(id, (call[0] for call in profiler.calls))) == {id(operations)}
    assert {call[1:] for call in profiler.calls} == {(pageable, span)}
    assert np.isnan(target).all()  # poisoned before each timed run


def chunk_sizes(elements: int, chunks: int) -> list[int]:
    """Elements of each chunk: `chunks` of one size rounded up, the last the remainder."""
    size = -(-elements // chunks)
    return [min(size, elements - start) for start in range(0, elements, size)]


def uneven_chunks(result: Result, power: int = 4, streams: int = 6) -> Result:
    """The run of 2^power elements cut for `streams` (16 for 6: five chunks of 3 and the
    remainder, 1): the one-stream stage times of each size scaled from the recorded chunk's
    (the largest taking its time, the others in proportion), the modes labelled with the new
    count of streams."""
    recorded_streams = result.parameters.streams
    sizes = chunk_sizes(1 << power, streams)
    assert len(set(sizes)) == 2 and len(sizes) == streams, sizes
    measurements = []
    for m in result.measurements:
        if m.group == "gpu" and m.kind == "pinned, 1 stream":
            for size in sorted(set(sizes)):
                factor = size / max(sizes)
                measurements.append(
                    replace(
                        m,
                        bytes=4 * size,
                        samples_ms=[s * factor for s in m.samples_ms],
                        throughput_ms=[s * factor for s in m.throughput_ms],
                        events_ms=[s * factor for s in m.events_ms],
                    )
                )
        else:
            kind = (m.kind or "").replace(f"{recorded_streams} streams", f"{streams} streams")
            measurements.append(replace(m, kind=kind or m.kind))
    parameters = replace(result.parameters, power=power, streams=streams)
    return replace(result, parameters=parameters, measurements=measurements)


def test_stage_times_of_uneven_chunks_are_summed_and_averaged_per_chunk():
    result = uneven_chunks(pipeline())
    sizes = chunk_sizes(1 << result.parameters.power, result.parameters.streams)
    stages = table(summarize(result), "Stages on one stream")
    per_chunk = {}
    for stage, name in (("h2d", "[CUDA memcpy HtoD]"), ("kernel", "busyWork"),
                        ("d2h", "[CUDA memcpy DtoH]")):  # fmt: skip
        total = sum(
            statistics.median(
                the(
                    result, group="gpu", operation=stage, kind="pinned, 1 stream", nbytes=4 * size
                ).samples_ms
            )
            for size in sizes
        )
        per_chunk[stage] = (total, total / len(sizes))
        assert cell(stages, "Total", name) == format_ms(total)
        assert cell(stages, "Per chunk", name) == format_ms(total / len(sizes))
    longest = max(per_chunk, key=lambda stage: per_chunk[stage][0])
    ideal = per_chunk[longest][0] + sum(
        chunk for stage, (_, chunk) in per_chunk.items() if stage != longest
    )
    note = table(summarize(result), "Whole pipeline").notes[0]
    assert note.startswith(f"Ideal overlapped time {format_ms(ideal)}: ")


def test_uneven_chunks_per_chunk_and_gb_per_s_are_the_csvs_declared_figures():
    """The stages table's per-chunk time and GB/s of chunks of two sizes are declared figures
    (a "mean" and a "chunks" row), found in the CSV at the printed precision."""
    from tests.test_export import tables_against_csv

    result = uneven_chunks(pipeline())
    assert tables_against_csv(result) > 0
    summary = summarize(result)
    rows = {row["name"]: row for row in csv_rows(result, summary.figures, summary.derived)}
    h2d = rows["[CUDA memcpy HtoD], every chunk"]
    assert h2d["bytes"] == 4 * (1 << result.parameters.power)  # every chunk's
    assert h2d["gb_per_s"] == pytest.approx(h2d["moved_bytes"] / h2d["median_ms"] / 1e6)
    stages = table(summary, "Stages on one stream")
    assert cell(stages, "GB/s", "[CUDA memcpy HtoD]") == format_gb_per_s(h2d["gb_per_s"])
    assert cell(stages, "Of ceiling", "[CUDA memcpy HtoD]").endswith(f" {h2d['limiter']}")
    assert h2d["ceiling_share"] == pytest.approx(h2d["gb_per_s"] / h2d["ceiling_gb_per_s"])


def test_a_prefetch_as_slow_as_on_demand_does_not_pay_and_one_unmeasured_says_nothing():
    from types import SimpleNamespace

    from memprof.experiments.managed import _conclusion

    def took(ms: float):
        return SimpleNamespace(median_ms=ms, gb_per_s=1.0)

    first = {"managed": took(10.0), "managed+prefetch": took(4.0)}
    resident, explicit = took(1.0), took(2.0)
    assert _conclusion(first, resident, explicit, took(6.0)).endswith(DOES_NOT)  # 10 = 10
    assert _conclusion(first, resident, explicit, took(5.99)).endswith(PAYS)
    without = _conclusion(first, resident, explicit, None)  # no prefetch timed: no sentence
    alone = _conclusion({"managed": took(10.0)}, resident, explicit, took(1.0))
    assert "Prefetch" not in without and "Prefetch" not in alone


def test_each_modes_row_is_set_against_serial_and_the_ideal():
    result = pipeline()
    ideal, serial = ideal_ms(result), total_ms(result, "pinned, 1 stream")
    rows = {row[0]: row for row in table(summarize(result), "Whole pipeline").rows}
    for label in ("pinned, 1 stream", "pinned, 4 streams", "pageable, 4 streams"):
        total = total_ms(result, label)
        assert rows[label][2:] == [f"{serial / total:.2f}x", f"{ideal / total:.0%}"], label
    assert rows["ideal overlap"][2:] == [f"{serial / ideal:.2f}x", "-"]  # itself: no ratio


def test_pageable_exactly_fifteen_percent_slower_keeps_the_overlap():
    result = pipeline()
    result = with_samples(
        result, [2.0] * 3, group="span", operation="total", kind="pinned, 4 streams"
    )
    at_edge = with_samples(
        result, [2.3] * 3, group="span", operation="total", kind="pageable, 4 streams"
    )
    line = conclusion(summarize(at_edge), "streams ran the pipeline")
    assert line.endswith("here pageable memory kept most of the overlap.")


def test_stage_sums_add_up_the_chunks_of_the_mode_asked_for():
    result = pipeline()  # 4 chunks of one size: each stage's sum is 4 of its chunk's median
    sums = {mode: streams.stage_sums(result, mode) for mode in streams.MODES}
    for mode, label in streams.mode_labels(4).items():
        for stage in ("h2d", "kernel", "d2h"):
            chunk_ms = median(result, "gpu", stage, label)
            assert sums[mode][stage].median_ms == pytest.approx(4 * chunk_ms), (mode, stage)
    assert sums["overlapped"]["h2d"].median_ms != sums["serial"]["h2d"].median_ms  # apart


def test_the_csv_names_the_ideal_and_its_ratio_as_the_table_shows_them():
    result = pipeline()
    summary = summarize(result)
    rows = {row["name"]: row for row in csv_rows(result, summary.figures, summary.derived)}
    ideal, serial = ideal_ms(result), total_ms(result, "pinned, 1 stream")
    assert rows["ideal overlap of the one-stream stages"]["median_ms"] == pytest.approx(ideal)
    against = rows["ideal overlap vs serial"]
    assert against["ratio"] == pytest.approx(serial / ideal)
    assert against["derived_from"] == (
        "all chunks (pinned, 1 stream) / ideal overlap of the one-stream stages (pinned, 1 stream)"
    )


@pytest.mark.parametrize(
    ("kernel_ms", "why"),
    [(None, "(the measured HtoD time of the whole data)."), (2.5, "(--kernel-ms).")],
)
def test_the_kernel_note_says_what_its_time_was_tuned_to(kernel_ms, why):
    result = pipeline()
    target_ms = result.extra.kernel_target_ms if kernel_ms is None else kernel_ms
    result = replace(
        result,
        parameters=replace(result.parameters, kernel_ms=kernel_ms),
        extra=replace(result.extra, kernel_target_ms=target_ms),
    )
    assert table(summarize(result), "Stages on one stream").notes[0] == (
        f"busyWork runs {result.extra.iterations} iterations per element, tuned to take about "
        f"{format_ms(target_ms)} over all the data {why}"
    )


def test_the_csv_names_each_stages_per_chunk_time_by_its_operation():
    result = pipeline()
    summary = summarize(result)
    rows = {row["name"]: row for row in csv_rows(result, summary.figures, summary.derived)}
    for stage, name in (("h2d", "[CUDA memcpy HtoD]"), ("kernel", "busyWork"),
                        ("d2h", "[CUDA memcpy DtoH]")):  # fmt: skip
        chunk_ms = stage_ms(result, stage)
        assert rows[f"{name}, per chunk"]["median_ms"] == pytest.approx(chunk_ms), stage
