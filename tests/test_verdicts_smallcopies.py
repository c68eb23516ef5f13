"""The small-copies verdicts on both sides of their edges, from the recorded H200 run
(tests/fixtures/h200_smallcopies.json) with one way's copies moved against the others:
- each way's cost per copy (total / copies; gathered: numpy's gathering and the copy);
- the fastest way at a size is the cheapest one, named by its cost (not its name);
- one call per copy "stops losing" where it comes within 5% of the best batched way for
  good, "lost at every size" where it never did, "never lost" where it never lost;
- memprof.experiments.common.stops_at: where something stops holding for good.

What a way costs is written once here (cost_ms): the ranking the summary uses.
"""

from __future__ import annotations

import statistics

import pytest

from memprof.experiments import summarize
from memprof.experiments.common import stops_at
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Result
from tests.verdict_tools import cell, conclusion, fixture, matches, scaled, table

BATCHED = ("batched", "gathered", "kernel")
WORDS = {"h2d": "host → device", "d2h": "device → host"}
NAMES = {
    "batched": "one cuMemcpyBatchAsync",
    "gathered": "gathered into one pinned buffer, one copy",
    "kernel": "one kernel through zero-copy memory",
}


def recorded() -> Result:
    return fixture("h200_smallcopies")


def median_of(result: Result, group: str, operation: str, way: str, nbytes: int) -> float:
    found = [
        m
        for m in result.measurements
        if matches(m, group=group, operation=operation, kind=way, nbytes=nbytes)
    ]
    assert len(found) == 1
    return statistics.median(found[0].samples_ms)


def cost_ms(result: Result, way: str, direction: str, nbytes: int) -> float:
    """All N copies one way: GPU time back to back, numpy's host work for gathered; pageable:
    the blocking calls themselves."""
    if way == "pageable":
        return median_of(result, "api", f"{direction}_calls", way, nbytes)
    total = median_of(result, "span", direction, way, nbytes)
    if way == "gathered":
        host = "gather" if direction == "h2d" else "scatter"
        total += median_of(result, "host", host, way, nbytes)
    return total


def per_copy(result: Result, way: str, direction: str, nbytes: int) -> float:
    return cost_ms(result, way, direction, nbytes) / result.parameters.copies


def sizes(result: Result) -> list[int]:
    return [4 << power for power in result.parameters.powers]


def pinned_at(result: Result, direction: str, shares: dict[int, float]) -> Result:
    """One call per copy from pinned memory moved to `share` x the best batched way."""
    for nbytes, share in shares.items():
        best = min(per_copy(result, way, direction, nbytes) for way in BATCHED)
        factor = share * best / per_copy(result, "pinned", direction, nbytes)
        result = scaled(
            result, factor, group="span", operation=direction, kind="pinned", nbytes=nbytes
        )
    return result


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_every_per_copy_cell_is_the_ways_whole_cost_over_the_copies(direction):
    result = recorded()
    count = result.parameters.copies
    t = table(summarize(result), f"{count} copies {WORDS[direction]}: per copy")
    for nbytes in sizes(result):
        for way in result.extra.ways:
            expected = format_ms(per_copy(result, way, direction, nbytes))
            assert cell(t, way, format_bytes(nbytes)) == expected, (way, nbytes)
    total = table(summarize(result), f"{count} copies {WORDS[direction]}: total")
    largest = max(sizes(result))
    assert cell(total, "gathered", format_bytes(largest)) == format_ms(
        cost_ms(result, "gathered", direction, largest)
    )


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_the_fastest_way_is_the_cheapest_per_copy_at_4_and_64_kib(direction):
    result = recorded()
    for nbytes in (4 << 10, 64 << 10):
        costs = {way: per_copy(result, way, direction, nbytes) for way in result.extra.ways}
        best = min(costs, key=costs.get)
        opening = f"{WORDS[direction].capitalize()}, 128 copies of {format_bytes(nbytes)}:"
        line = conclusion(summarize(result), opening)
        assert f"the fastest was {NAMES[best]}, {format_ms(costs[best])} per copy" in line
        ratio = costs["pinned"] / costs[best]
        pinned = f"{format_ms(costs['pinned'])} one call per copy from pinned memory ({ratio:.1f}x)"
        assert pinned in line


def test_a_slower_kernel_hands_the_fastest_place_to_the_next_cheapest_way():
    result = scaled(recorded(), 20.0, group="span", kind="kernel")
    nbytes = 4 << 10
    costs = {way: per_copy(result, way, "h2d", nbytes) for way in result.extra.ways}
    best = min(costs, key=costs.get)
    assert best != "kernel"
    line = conclusion(summarize(result), f"Host → device, 128 copies of {format_bytes(nbytes)}")
    assert f"the fastest was {NAMES[best]}" in line


def crossover(result: Result, direction: str) -> str:
    return conclusion(summarize(result), f"{WORDS[direction].capitalize()}: one call per copy")


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_one_call_per_copy_lost_at_every_size_against_the_best_batched_way(direction):
    result = recorded()
    largest = max(sizes(result))
    best = min(BATCHED, key=lambda way: per_copy(result, way, direction, largest))
    line = crossover(result, direction)
    assert f"lost at every size up to {format_bytes(largest)}" in line
    assert (
        f"({format_ms(per_copy(result, 'pinned', direction, largest))} per copy against "
        f"{format_ms(per_copy(result, best, direction, largest))} {NAMES[best]})"
    ) in line


@pytest.mark.parametrize(("share", "stops"), [(1.04, True), (1.06, False)])
def test_one_call_per_copy_stops_losing_within_five_percent_of_the_best(share, stops):
    every = sizes(recorded())
    result = pinned_at(recorded(), "h2d", {n: share for n in every[2:]})
    line = crossover(result, "h2d")
    if stops:
        assert f"stops losing at {format_bytes(every[2])}" in line
        assert line.endswith("batch copies smaller than that.")
    else:
        assert f"lost at every size up to {format_bytes(every[-1])}" in line


def test_one_call_per_copy_that_never_lost_says_so_at_the_smallest_size():
    every = sizes(recorded())
    result = pinned_at(recorded(), "d2h", dict.fromkeys(every, 0.9))
    line = crossover(result, "d2h")
    assert "never lost by more than 5% to a batched way" in line
    assert f"({format_bytes(every[0])}: " in line


def test_losing_again_at_a_larger_size_moves_where_it_stops_losing_up():
    every = sizes(recorded())
    # within 5% at the second size, losing at the third, within 5% at the largest
    shares = {every[1]: 1.0, every[2]: 1.5, every[3]: 1.0}
    line = crossover(pinned_at(recorded(), "h2d", shares), "h2d")
    assert f"stops losing at {format_bytes(every[3])}" in line


@pytest.mark.parametrize(
    ("holds", "stop"),
    [
        ({1: True, 2: True, 4: True}, None),
        ({1: True, 2: False, 4: False}, 2),
        ({1: False, 2: False, 4: False}, 1),
        ({1: True, 2: False, 4: True, 8: False, 16: False}, 8),
        ({16: False, 1: True, 8: False, 2: False, 4: True}, 8),  # in any order
        ({1: False, 2: False, 4: True}, None),
    ],
)
def test_stops_at_is_where_it_stops_holding_for_good(holds, stop):
    assert stops_at(holds) == stop
