"""The decisions the experiments' summaries make, each tested on both sides of its threshold.

Inputs are built here, or derived in memory from a recorded result with one figure changed,
so every test fails when a threshold, a rounding or a comparison is wrong.
"""

from __future__ import annotations

import re

import pytest

from memprof.experiments import compare, pinned, streams, sweep
from memprof.experiments.common import gpu_timing, largest_batch
from memprof.model.formatting import format_ms
from tests.conftest import load_fixture, replace

# -- sweep: where 90% of the peak is reached ---------------------------------------------------


def test_ninety_percent_of_peak_is_the_first_size_at_or_above_it():
    points = [(10, 0.0, 30.0), (11, 0.0, 60.0), (12, 0.0, 89.9), (13, 0.0, 90.0), (14, 0.0, 100.0)]
    assert sweep._ninety_percent_size(points) == 13
    points[3] = (13, 0.0, 89.99)
    assert sweep._ninety_percent_size(points) == 14


def test_ninety_percent_of_peak_is_relative_to_the_peak_anywhere_in_the_curve():
    points = [(8, 0.0, 46.0), (9, 0.0, 50.0), (10, 0.0, 45.0)]  # peak in the middle
    assert sweep._ninety_percent_size(points) == 8


def test_sweep_table_shows_where_each_curve_reaches_ninety_percent():
    result = load_fixture("sweep")
    shape = next(t for t in sweep.summarize(result).tables if t.title.startswith("Per kind"))
    found = sweep.curves(result)
    directions = {label: direction for direction, label in sweep.DIRECTIONS.items()}
    for row in shape.rows:
        points = found[row[0], directions[row[1]]]
        assert row[-1] == sweep.size_label(sweep._ninety_percent_size(points))


# -- streams: does overlap need pinned memory? -------------------------------------------------


def _streams_with_pageable_at(factor: float):
    """The recorded streams run, its pageable pipeline set to `factor` x the overlapped one."""
    result = load_fixture("streams")
    labels = streams.mode_labels(result.parameters.streams)
    overlapped = result.find("total", labels["overlapped"], "span").stats.median_ms
    result.find("total", labels["pageable"], "span").samples_ms = [overlapped * factor] * 3
    return result


@pytest.mark.parametrize(
    ("factor", "verdict"),
    [
        (1.0, "here pageable memory kept most of the overlap"),
        (1.14, "here pageable memory kept most of the overlap"),
        (1.16, "overlap needs pinned memory"),
        (1.6, "overlap needs pinned memory"),
    ],
)
def test_streams_says_overlap_needs_pinned_memory_beyond_15_percent(factor, verdict):
    [conclusion] = streams.summarize(_streams_with_pageable_at(factor)).conclusions
    assert conclusion.endswith(verdict + ".")


# -- pinned: after how many round trips pinning pays off ---------------------------------------


def _medians(pageable_ms: float, pinned_ms: float) -> dict[tuple[str, str], float]:
    return {
        ("pageable", "h2d"): pageable_ms,
        ("pageable", "d2h"): pageable_ms,
        ("pinned", "h2d"): pinned_ms,
        ("pinned", "d2h"): pinned_ms,
    }


@pytest.mark.parametrize(
    ("extra_cost_ms", "round_trips"),
    [(10.0, "3 round trips"), (8.0, "2 round trips"), (3.0, "1 round trip "), (4.1, "2 round")],
)
def test_pinning_pays_off_after_the_next_whole_round_trip(extra_cost_ms, round_trips):
    # each round trip (HtoD + DtoH) saves 2 x (3 - 1) = 4 ms
    conclusion = pinned._conclusion(
        _medians(3.0, 1.0), {"pageable": 1.0, "pinned": 1.0 + extra_cost_ms}, 4 << 20, H2D
    )
    assert f"pays off from {round_trips}" in conclusion
    assert "host → device 3.00x faster than pageable" in conclusion
    assert "device → host 3.00x faster" in conclusion


H2D = {"pinned": 4.19, "pageable": 1.40}  # GB/s: what the table would show


def test_pinning_that_costs_nothing_or_saves_nothing_says_so():
    cheap = pinned._conclusion(_medians(3.0, 1.0), {"pageable": 2.0, "pinned": 2.0}, 1 << 20, H2D)
    assert cheap.endswith("pin every buffer you transfer.")
    useless = pinned._conclusion(_medians(1.0, 1.0), {"pageable": 1.0, "pinned": 5.0}, 1 << 20, H2D)
    assert useless.endswith("it is not worth its allocation cost.")
    slower = pinned._conclusion(_medians(1.0, 2.0), {"pageable": 1.0, "pinned": 5.0}, 1 << 20, H2D)
    assert "0.50x slower than pageable" in slower


def test_each_direction_says_faster_or_slower_by_its_own_ratio():
    medians = {
        ("pageable", "h2d"): 2.0,
        ("pinned", "h2d"): 1.0,
        ("pageable", "d2h"): 1.0,
        ("pinned", "d2h"): 2.0,
    }
    costs = {"pageable": 1.0, "pinned": 5.0}
    h2d = {"pinned": 1.0, "pageable": 0.5}
    text = pinned._conclusion(medians, costs, 1 << 20, h2d)
    assert "host → device 2.00x faster" in text and "device → host 0.50x slower" in text
    swapped = {(kind, {"h2d": "d2h", "d2h": "h2d"}[way]): v for (kind, way), v in medians.items()}
    text = pinned._conclusion(swapped, costs, 1 << 20, h2d)
    assert "host → device 0.50x slower" in text and "device → host 2.00x faster" in text


def test_pinned_conclusion_of_the_recorded_run_uses_per_copy_times():
    result = load_fixture("pinned_p20")
    [conclusion] = pinned.summarize(result).conclusions
    per_copy = {}
    for m in result.measurements:  # back-to-back batches: what bandwidth means
        if m.group == "gpu" and m.operation in ("h2d", "d2h"):
            batches = sorted(m.throughput_ms)
            middle = len(batches) // 2
            median = (
                batches[middle] if len(batches) % 2 else sum(batches[middle - 1 : middle + 1]) / 2
            )
            per_copy[m.kind, m.operation] = median
    speedup = per_copy["pageable", "h2d"] / per_copy["pinned", "h2d"]
    assert f"host → device {speedup:.2f}x faster" in conclusion


# -- compare: the best of every column ---------------------------------------------------------

_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def _milliseconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(ns|us|ms|s)", text).groups()
    return float(number) * _UNITS_MS[unit]


def test_compare_highlights_the_largest_bandwidth_and_the_smallest_allocation():
    table = compare.summarize(load_fixture("compare")).tables[0]
    highlighted = dict((column, row) for row, column in table.highlighted)
    assert sorted(highlighted) == list(range(1, len(table.headers)))
    for column, header in enumerate(table.headers[1:], start=1):
        cells = {
            row: cell for row, cells in enumerate(table.rows) if (cell := cells[column]) != "-"
        }
        if header == "Allocate":
            values = {row: _milliseconds(cell) for row, cell in cells.items()}
            best = min(values.values())
        else:
            values = {row: float(cell) for row, cell in cells.items()}
            best = max(values.values())
        assert values[highlighted[column]] == best, header
        assert len(set(values.values())) > 1  # the column has a worst, too


def test_compare_highlight_follows_the_figures_not_the_row_order():
    result = load_fixture("compare")
    for m in result.measurements:  # make device memory the slowest kernel read
        if m.operation == "kernel_read" and m.kind == "device" and m.group == "gpu":
            m.samples_ms = [s * 1000 for s in m.samples_ms]
    table = compare.summarize(result).tables[0]
    column = table.headers.index("Kernel read GB/s")
    [row] = [r for r, c in table.highlighted if c == column]
    assert table.rows[row][0] == "managed, prefetched"


def test_format_ms_round_trips_through_the_parser_above():
    assert _milliseconds(format_ms(1.5)) == 1.5
    assert _milliseconds(format_ms(0.0123)) == pytest.approx(0.0123)


def test_a_tables_note_says_how_its_gpu_operations_were_timed():
    result = load_fixture("register")
    assert result.timing.source == "cupti"
    assert gpu_timing(result) == "CUPTI's record of each operation"
    events = replace(result, timing=replace(result.timing, source="events"))
    assert gpu_timing(events) == "gated CUDA events around each operation"
    assert gpu_timing(replace(result, timing=None)) == "CUDA events around each operation"


@pytest.mark.parametrize(
    ("fixture", "cupti", "events"),
    [
        ("sweep", "from CUPTI's records of them;", "from gated CUDA events around each;"),
        (
            "zerocopy_sweep",
            "Kernel: CUPTI's record of each launch,",
            "Kernel: gated CUDA events around each launch,",
        ),
    ],
)
def test_sweep_and_zerocopy_notes_say_how_single_operations_were_timed(fixture, cupti, events):
    """CUPTI's records where the run had them, else the gated events (None: older files)."""
    from memprof.experiments import summarize

    result = load_fixture(fixture)
    assert result.timing.source == "cupti"
    for timing, words in (
        (result.timing, cupti),
        (replace(result.timing, source="events"), events),
        (None, events),
    ):
        notes = " ".join(
            " ".join(table.notes) for table in summarize(replace(result, timing=timing)).tables
        )
        assert words in notes, (timing, words)


def test_the_batch_a_note_names_is_the_largest_the_run_made():
    result = load_fixture("pinned_p20")
    batches = [m.batch for m in result.measurements]
    assert largest_batch(result) == max(batches) > min(batches) >= 0
    assert largest_batch(replace(result, measurements=[])) == 0
