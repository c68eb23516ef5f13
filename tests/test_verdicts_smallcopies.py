"""The small-copies verdicts on both sides of their edges, from the recorded H200 run
(tests/fixtures/h200_smallcopies.json) with one way's copies moved against the others:
- each way's wall clock per copy (what a program waits: the host clock from its first call
  until the stream is synchronized, over the copies), its GPU time per copy and in total
  (gathered: numpy's gathering and the copy);
- the fastest way at a size is the one of least wall clock per copy, named by that figure
  (not its name), whatever the GPU time alone would name;
- one call per copy "stops losing" where its wall clock comes within 5% of the best batched
  way's for good, "lost at every size" where it never did, "never lost" where it never lost;
- memprof.experiments.common.stops_at: where something stops holding for good.

What a way costs is written once here (wall_ms, cost_ms). The verdicts' cases are built by
moving one way's wall clock alone (its GPU time left as recorded) or its GPU time alone, so a
verdict ranked by the other clock fails.
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
    "pinned": "one call per copy from pinned memory",
    "pageable": "one call per copy from pageable memory",
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


def wall_ms(result: Result, way: str, direction: str, nbytes: int) -> float:
    """All N copies one way as a program waits for them: the host clock around them."""
    return median_of(result, "host", f"{direction}_wall", way, nbytes)


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


def wall_per_copy(result: Result, way: str, direction: str, nbytes: int) -> float:
    return wall_ms(result, way, direction, nbytes) / result.parameters.copies


def gpu_per_copy(result: Result, way: str, direction: str, nbytes: int) -> float:
    return cost_ms(result, way, direction, nbytes) / result.parameters.copies


def sizes(result: Result) -> list[int]:
    return [4 << power for power in result.parameters.powers]


def wall_moved(result: Result, way: str, direction: str, nbytes: int, factor: float) -> Result:
    """One way's wall clock at one size multiplied by factor; its GPU time as recorded."""
    return scaled(
        result, factor, group="host", operation=f"{direction}_wall", kind=way, nbytes=nbytes
    )


def gpu_moved(result: Result, way: str, direction: str, nbytes: int, factor: float) -> Result:
    """One way's GPU time at one size multiplied by factor; its wall clock as recorded."""
    return scaled(result, factor, group="span", operation=direction, kind=way, nbytes=nbytes)


def best_batched(result: Result, direction: str, nbytes: int) -> str:
    return min(BATCHED, key=lambda way: wall_per_copy(result, way, direction, nbytes))


def pinned_at(result: Result, direction: str, shares: dict[int, float]) -> Result:
    """One call per copy from pinned memory, its wall clock moved to `share` x the best
    batched way's (its GPU time left as recorded)."""
    for nbytes, share in shares.items():
        best = wall_per_copy(result, best_batched(result, direction, nbytes), direction, nbytes)
        factor = share * best / wall_per_copy(result, "pinned", direction, nbytes)
        result = wall_moved(result, "pinned", direction, nbytes, factor)
    return result


def gpu_names_another(result: Result, direction: str, nbytes: int, among: tuple) -> Result:
    """The way of least wall clock per copy among `among`, the GPU-side part of its cost (its
    span: gathered's numpy work stays) moved so that its GPU time is 1.5x the largest of the
    others': the GPU time alone would name another way."""
    best = min(among, key=lambda way: wall_per_copy(result, way, direction, nbytes))
    others = max(gpu_per_copy(result, way, direction, nbytes) for way in among if way != best)
    span = median_of(result, "span", direction, best, nbytes) / result.parameters.copies
    host = gpu_per_copy(result, best, direction, nbytes) - span  # gathered's numpy work, or 0
    assert 1.5 * others > host
    result = gpu_moved(result, best, direction, nbytes, (1.5 * others - host) / span)
    gpu_best = min(among, key=lambda way: gpu_per_copy(result, way, direction, nbytes))
    assert gpu_best != best
    return result


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_every_per_copy_cell_is_the_ways_whole_cost_over_the_copies(direction):
    result = recorded()
    count = result.parameters.copies
    summary = summarize(result)
    wall = table(summary, f"{count} copies {WORDS[direction]}: wall clock per copy")
    gpu = table(summary, f"{count} copies {WORDS[direction]}: GPU time per copy")
    total = table(summary, f"{count} copies {WORDS[direction]}: GPU time, total")
    for nbytes in sizes(result):
        for way in result.extra.ways:
            size = format_bytes(nbytes)
            assert cell(wall, way, size) == format_ms(wall_per_copy(result, way, direction, nbytes))
            assert cell(gpu, way, size) == format_ms(gpu_per_copy(result, way, direction, nbytes))
            assert cell(total, way, size) == format_ms(cost_ms(result, way, direction, nbytes))


def fastest_line(result: Result, direction: str, nbytes: int) -> str:
    opening = f"{WORDS[direction].capitalize()}, {result.parameters.copies} copies of "
    return conclusion(summarize(result), opening + f"{format_bytes(nbytes)}:")


def expected_fastest(result: Result, direction: str, nbytes: int) -> str:
    """The sentence's figures, computed here: the way of least wall clock per copy, its GPU
    time beside, and how many times faster it was than each way of one call per copy."""
    walls = {way: wall_per_copy(result, way, direction, nbytes) for way in result.extra.ways}
    best = min(walls, key=walls.get)
    gpu = gpu_per_copy(result, best, direction, nbytes)
    text = (
        f"the fastest was {NAMES[best]}, {format_ms(walls[best])} per copy from the first call "
        f"to the stream synchronized ({format_ms(gpu)} of GPU time)"
    )
    faster = [
        f"{walls[way] / walls[best]:.1f}x faster than {NAMES[way]} ({format_ms(walls[way])}; "
        f"GPU time {format_ms(gpu_per_copy(result, way, direction, nbytes))})"
        for way in ("pinned", "pageable")
        if way != best
    ]
    return text + (f": {' and '.join(faster)}." if faster else ".")


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_the_fastest_way_is_the_least_wall_clock_per_copy_at_4_and_64_kib(direction):
    result = recorded()
    for nbytes in (4 << 10, 64 << 10):
        result = gpu_names_another(result, direction, nbytes, tuple(result.extra.ways))
        assert fastest_line(result, direction, nbytes).endswith(
            expected_fastest(result, direction, nbytes)
        )


def test_a_slower_wall_clock_hands_the_fastest_place_to_the_next_way():
    """The fastest way's wall clock made 20x: the next one by wall clock is named, though
    its GPU time alone still names the way that lost its place."""
    result, nbytes = recorded(), 4 << 10
    walls = {way: wall_per_copy(result, way, "h2d", nbytes) for way in result.extra.ways}
    first = min(walls, key=walls.get)
    result = wall_moved(result, first, "h2d", nbytes, 20.0)
    line = fastest_line(result, "h2d", nbytes)
    assert f"the fastest was {NAMES[first]}" not in line
    assert line.endswith(expected_fastest(result, "h2d", nbytes))


def crossover(result: Result, direction: str) -> str:
    return conclusion(
        summarize(result),
        f"{WORDS[direction].capitalize()}, by the wall clock: one call per copy from pinned",
    )


def against(result: Result, direction: str, nbytes: int, named: bool = True) -> str:
    """'{pinned} per copy against {best batched} {its name}; GPU time {pinned} against
    {best batched}', the best batched way by wall clock."""
    best = best_batched(result, direction, nbytes)
    name = f" {NAMES[best]}" if named else ""
    return (
        f"{format_ms(wall_per_copy(result, 'pinned', direction, nbytes))} per copy against "
        f"{format_ms(wall_per_copy(result, best, direction, nbytes))}{name}; GPU time "
        f"{format_ms(gpu_per_copy(result, 'pinned', direction, nbytes))} against "
        f"{format_ms(gpu_per_copy(result, best, direction, nbytes))}"
    )


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_one_call_per_copy_lost_at_every_size_against_the_best_batched_way(direction):
    every = sizes(recorded())
    result = pinned_at(recorded(), direction, dict.fromkeys(every, 1.5))
    largest = every[-1]
    result = gpu_names_another(result, direction, largest, BATCHED)
    line = crossover(result, direction)
    assert f"lost at every size up to {format_bytes(largest)} " in line
    assert f"({against(result, direction, largest)}): batch copies of any size" in line


@pytest.mark.parametrize(("share", "stops"), [(1.04, True), (1.06, False)])
def test_one_call_per_copy_stops_losing_within_five_percent_of_the_best(share, stops):
    every = sizes(recorded())
    shares = {n: 1.5 for n in every[:2]} | {n: share for n in every[2:]}
    result = pinned_at(recorded(), "h2d", shares)
    line = crossover(result, "h2d")
    if stops:
        assert (
            f"stops losing at {format_bytes(every[2])} ({against(result, 'h2d', every[2])})" in line
        )
        assert line.endswith("batch copies smaller than that.")
    else:
        assert f"lost at every size up to {format_bytes(every[-1])}" in line


def test_one_call_per_copy_that_never_lost_says_so_at_the_smallest_size():
    every = sizes(recorded())
    result = pinned_at(recorded(), "d2h", dict.fromkeys(every, 0.9))
    line = crossover(result, "d2h")
    assert "never lost by more than 5% to a batched way" in line
    assert f"({format_bytes(every[0])}: {against(result, 'd2h', every[0], named=False)})." in line


def test_the_gpu_time_alone_does_not_move_where_one_call_per_copy_stops_losing():
    """One call per copy within 5% by the wall clock from the third size, its GPU time made
    twice the best batched way's everywhere: the wall clock still decides."""
    every = sizes(recorded())
    result = pinned_at(recorded(), "h2d", {n: 1.5 for n in every[:2]} | {n: 1.0 for n in every[2:]})
    for nbytes in every:
        best = min(gpu_per_copy(result, way, "h2d", nbytes) for way in BATCHED)
        factor = 2 * best / gpu_per_copy(result, "pinned", "h2d", nbytes)
        result = gpu_moved(result, "pinned", "h2d", nbytes, factor)
    assert f"stops losing at {format_bytes(every[2])}" in crossover(result, "h2d")


def test_losing_again_at_a_larger_size_moves_where_it_stops_losing_up():
    every = sizes(recorded())
    # losing at the smallest, within 5% at the second size, losing at the third, within 5%
    # at the largest
    shares = {every[0]: 1.5, every[1]: 1.0, every[2]: 1.5, every[3]: 1.0}
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
