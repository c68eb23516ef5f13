"""The sweep's verdicts, from the recorded H200 sweep (tests/fixtures/h200_sweep.json):
- each kind's peak (the highest point of its curve, wherever it is) and the first size
  reaching 90% of it, recomputed here for every kind and direction;
- crossovers: a kind overtakes another only where each leads by at least 5% on its side,
  the leader named with its figure first; curves within 5% cross nothing.
"""

from __future__ import annotations

import statistics

import pytest

from memprof.experiments import summarize
from memprof.experiments.common import size_label
from memprof.experiments.sweep import crossovers
from memprof.model.formatting import format_bytes, format_gb_per_s
from memprof.model.results import Result
from tests.conftest import replace
from tests.verdict_tools import cell, fixture, gb_per_s, matches, scaled, table

WORDS = {"h2d": "host → device", "d2h": "device → host"}


def recorded() -> Result:
    return fixture("h200_sweep")


def curve(result: Result, kind: str, direction: str) -> list[tuple[int, float]]:
    """(power, GB/s) of one kind, from the median of its back-to-back batches."""
    points = []
    for power in result.parameters.powers:
        nbytes = 4 << power
        (m,) = [
            m
            for m in result.measurements
            if matches(m, group="gpu", operation=direction, kind=kind, nbytes=nbytes)
        ]
        points.append((power, gb_per_s(nbytes, statistics.median(m.throughput_ms or m.samples_ms))))
    return points


def test_peak_and_ninety_percent_of_it_for_every_kind_and_direction():
    result = recorded()
    shape = table(summarize(result), "where 90% of the peak is reached")
    differs = 0  # where 80% of the peak comes earlier than 90%: the threshold matters
    for kind in result.parameters.kinds:
        for direction in result.parameters.directions:
            points = curve(result, kind, direction)
            peak_power, peak = max(points, key=lambda point: point[1])
            ninety = next(power for power, gbs in points if gbs >= 0.9 * peak)
            eighty = next(power for power, gbs in points if gbs >= 0.8 * peak)
            differs += eighty != ninety
            row = (kind, WORDS[direction])
            assert cell(shape, "Peak GB/s", *row) == format_gb_per_s(peak)
            assert cell(shape, "at", *row) == size_label(peak_power)
            assert cell(shape, "90% of peak from", *row) == size_label(ninety)
    assert differs > 0
    assert any(
        max(curve(result, k, d), key=lambda p: p[1]) != curve(result, k, d)[-1]
        for k in result.parameters.kinds
        for d in result.parameters.directions
    )  # a peak before the largest size: the peak is not the last point


def test_the_recorded_curves_cross_nothing_clearly():
    summary = summarize(recorded())
    assert summary.conclusions == [
        "No crossovers: the order of the kinds was the same at every size."
    ]


def test_a_kind_that_falls_behind_clearly_is_overtaken_and_the_leader_is_named():
    result = recorded()
    top = result.parameters.powers[-2:]  # pinned slowed 10x at the two largest sizes
    for power in top:
        result = scaled(
            result, 10.0, group="gpu", operation="h2d", kind="pinned", nbytes=4 << power
        )
    pinned, pageable = dict(curve(result, "pinned", "h2d")), dict(curve(result, "pageable", "h2d"))
    # the last size where pinned led by 5% or more, then the first where pageable did
    led = [p for p in result.parameters.powers if pinned[p] >= 1.05 * pageable[p]]
    overtaken = next(p for p in result.parameters.powers if pageable[p] >= 1.05 * pinned[p])
    before = max(p for p in led if p < overtaken)
    expected = (
        f"host → device: pageable overtakes pinned between 2^{before} and 2^{overtaken} "
        f"(at {format_bytes(4 << overtaken)}: {format_gb_per_s(pageable[overtaken])} vs "
        f"{format_gb_per_s(pinned[overtaken])} GB/s)."
    )
    assert expected in summarize(result).conclusions
    assert not any("pinned overtakes pageable" in line for line in summarize(result).conclusions)


def series(a: list[float], b: list[float]) -> dict[str, list[tuple[int, float, float]]]:
    return {
        "first": [(10 + i, 0.0, gbs) for i, gbs in enumerate(a)],
        "second": [(10 + i, 0.0, gbs) for i, gbs in enumerate(b)],
    }


@pytest.mark.parametrize(
    ("lead", "crosses"), [(1.04, False), (1.049, False), (1.051, True), (1.2, True)]
)
def test_curves_cross_only_where_each_leads_by_five_percent(lead, crosses):
    found = crossovers(series([10.0 * lead, 10.0, 10.0], [10.0, 10.0, 10.0 * lead]))
    if crosses:
        assert found == [
            f"second overtakes first between 2^10 and 2^12 (at 16 KiB: "
            f"{format_gb_per_s(10.0 * lead)} vs {format_gb_per_s(10.0)} GB/s)"
        ]
    else:
        assert found == []


def test_a_curve_that_keeps_its_lead_crosses_nothing_and_one_that_comes_back_crosses_twice():
    assert crossovers(series([20.0, 30.0, 40.0], [10.0, 10.0, 10.0])) == []
    found = crossovers(series([20.0, 10.0, 20.0], [10.0, 20.0, 10.0]))
    assert [line.split(" (")[0] for line in found] == [
        "second overtakes first between 2^10 and 2^11",
        "first overtakes second between 2^11 and 2^12",
    ]


def test_a_lead_of_exactly_five_percent_is_a_lead():
    found = crossovers(series([2.1, 2.0, 2.0], [2.0, 2.0, 2.1]))  # 2.1 = 1.05 x 2.0 exactly
    assert [line.split(" (")[0] for line in found] == [
        "second overtakes first between 2^10 and 2^12"
    ]


def test_ninety_percent_of_the_peak_is_reached_at_exactly_ninety_percent():
    from memprof.experiments.sweep import _ninety_percent_size

    points = [(10, 0.0, 5.0), (11, 0.0, 9.0), (12, 0.0, 9.5), (13, 0.0, 10.0)]
    assert _ninety_percent_size(points) == 11  # 9.0 = 0.9 x 10.0
    assert _ninety_percent_size([(10, 0.0, 8.99), *points[2:]]) == 12


@pytest.mark.parametrize("width", [40, 60])
def test_each_chart_is_drawn_for_the_consoles_width(width):
    """A console narrower than the chart's own 120 columns gets one drawn for it: every line
    fits, the axis note included."""
    summary = summarize(recorded())
    assert len(summary.charts) == 2  # one per direction
    for chart in summary.charts:
        lines = chart.lines_for(width)
        assert max(len(line) for line in lines) <= width < max(len(line) for line in chart.lines)
        assert lines[-1].endswith("(2^n floats)")


@pytest.mark.parametrize(
    ("skipped", "said"),
    [
        (
            ["managed: no concurrent managed access"],
            ["Skipped: managed: no concurrent managed access."],
        ),
        ([], []),
        (None, []),  # an older file
    ],
)
def test_the_kinds_skipped_are_said_under_the_per_kind_table(skipped, said):
    result = recorded()
    result = replace(result, extra=replace(result.extra, skipped=skipped))
    assert table(summarize(result), "Per kind").notes[1:] == said
