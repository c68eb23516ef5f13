"""The allocators' verdicts (alloc and memprof.experiments.pools) on both sides of each edge,
from the recorded H200 run (tests/fixtures/h200_alloc.json) with the allocate-use-free
loop's iterations edited:
- a pool helps where its steady iteration is more than 5% under cuMemAlloc's, "at every
  size" only where it helped at every size, "helped up to X and stopped" where it stops;
- the steady iteration is the median of iterations 2 on (the first finds the pool empty);
- "its total fell below cuMemAlloc's from iteration N" from running totals;
- the cheapest and dearest allocation at the largest size.
"""

from __future__ import annotations

import statistics

import pytest

from memprof.experiments import summarize
from memprof.model.formatting import format_bytes, format_ms
from memprof.model.results import Result
from tests.verdict_tools import cell, conclusion, fixture, scaled, table, the, with_samples

KEPT = "In the loop the pool keeping freed memory"
DEFAULT = "In the loop the default pool"


def recorded() -> Result:
    return fixture("h200_alloc")


def sizes(result: Result) -> list[int]:
    return [4 << power for power in result.parameters.powers]


def steady(result: Result, kind: str, nbytes: int) -> float:
    samples = the(result, group="host", operation="loop", kind=kind, nbytes=nbytes).samples_ms
    return statistics.median(samples[1:])


def pool_at(result: Result, kind: str, shares: dict[int, float]) -> Result:
    """The pool's loop at each size moved to `share` x cuMemAlloc's steady iteration."""
    for nbytes, share in shares.items():
        factor = share * steady(result, "device", nbytes) / steady(result, kind, nbytes)
        result = scaled(result, factor, group="host", operation="loop", kind=kind, nbytes=nbytes)
    return result


def figures(result: Result, kind: str, nbytes: int) -> str:
    pool, device = steady(result, kind, nbytes), steady(result, "device", nbytes)
    return f"{format_ms(pool)} against {format_ms(device)} per iteration at {format_bytes(nbytes)}"


def test_a_pool_that_helped_at_every_size_says_so_with_cumemallocs_figures():
    result = pool_at(recorded(), "pool_kept", dict.fromkeys(sizes(recorded()), 0.9))
    line = conclusion(summarize(result), KEPT)
    assert "beat cuMemAlloc/cuMemFree at every size" in line
    assert figures(result, "pool_kept", max(sizes(result))) in line


def test_a_pool_that_helped_at_the_largest_only_does_not_say_every_size():
    every = sizes(recorded())
    shares = {n: 0.9 for n in every} | {min(every): 1.2}
    line = conclusion(summarize(pool_at(recorded(), "pool_kept", shares)), KEPT)
    assert "at the largest, not every, size" in line
    assert "at every size" not in line


@pytest.mark.parametrize(("share", "helped"), [(0.94, True), (0.96, False), (1.2, False)])
def test_a_pool_helps_only_more_than_five_percent_under_cumemalloc(share, helped):
    result = pool_at(recorded(), "pool", dict.fromkeys(sizes(recorded()), share))
    line = conclusion(summarize(result), DEFAULT)
    if helped:
        assert "beat cuMemAlloc/cuMemFree at every size" in line
    else:
        assert "never beat cuMemAlloc/cuMemFree by more than 5%" in line
        smallest, largest = min(sizes(result)), max(sizes(result))
        assert f"({figures(result, 'pool', smallest)}; {figures(result, 'pool', largest)})" in line


def test_a_pool_that_stops_helping_names_the_last_size_it_helped_and_the_first_it_did_not():
    every = sizes(recorded())
    last, stop = every[2], every[3]
    shares = {n: (0.8 if n <= last else 1.1) for n in every}
    result = pool_at(recorded(), "pool", shares)
    line = conclusion(summarize(result), DEFAULT)
    assert (
        f"helped up to {format_bytes(last)} ({figures(result, 'pool', last)}) and stopped "
        f"helping at {format_bytes(stop)} ({figures(result, 'pool', stop)})"
    ) in line


def test_a_pool_that_helps_again_above_a_miss_stops_where_it_stops_for_good():
    every = sizes(recorded())
    # helps, misses at every[1], helps at every[2], then never again from every[3]
    shares = {n: 0.8 for n in every[:3]} | {every[1]: 1.1} | {n: 1.1 for n in every[3:]}
    line = conclusion(summarize(pool_at(recorded(), "pool", shares)), DEFAULT)
    assert f"helped up to {format_bytes(every[2])}" in line
    assert f"stopped helping at {format_bytes(every[3])}" in line


def test_the_steady_iteration_leaves_out_the_first_cold_one():
    largest = max(sizes(recorded()))
    iterations = [100.0] + [1.0] * 25 + [2.0] * 24  # cold, then 49 steady ones
    result = with_samples(
        recorded(), iterations, group="host", operation="loop", kind="pool", nbytes=largest
    )
    t = table(summarize(result), "Allocate, use, free, sync")
    assert cell(t, "default pool", format_bytes(largest)) == format_ms(1.0)


def running_total_crossing(pool: list[float], device: list[float]) -> int | None:
    pool_total = device_total = 0.0
    for iteration, (p, d) in enumerate(zip(pool, device, strict=True), start=1):
        pool_total, device_total = pool_total + p, device_total + d
        if pool_total < device_total:
            return iteration
    return None


def test_the_pools_total_falls_below_cumemallocs_by_running_totals_not_one_iteration():
    largest = max(sizes(recorded()))
    pool = [10.0] + [1.0] * 49  # a cold first iteration, then cheap
    device = [3.0] * 50
    assert running_total_crossing(pool, device) == 5
    result = with_samples(
        recorded(), pool, group="host", operation="loop", kind="pool_kept", nbytes=largest
    )
    result = with_samples(
        result, device, group="host", operation="loop", kind="device", nbytes=largest
    )
    line = conclusion(summarize(result), KEPT)
    assert line.endswith("its total fell below cuMemAlloc's from iteration 5.")


def test_a_pool_whose_total_never_falls_below_says_nothing_of_an_iteration():
    largest = max(sizes(recorded()))
    pool = [200.0] + [1.0] * 49  # 249 in all against cuMemAlloc's 150
    result = with_samples(
        recorded(), pool, group="host", operation="loop", kind="pool_kept", nbytes=largest
    )
    result = with_samples(
        result, [3.0] * 50, group="host", operation="loop", kind="device", nbytes=largest
    )
    line = conclusion(summarize(result), KEPT)
    assert line.endswith(f"per iteration at {format_bytes(largest)}).")


def test_the_cheapest_and_dearest_allocation_are_ranked_by_their_median_at_the_largest():
    result = recorded()
    largest = max(sizes(result))
    cost = {
        kind: the(result, group=None, operation="alloc", kind=kind, nbytes=largest).stats.median_ms
        for kind in result.extra.kinds
    }
    cheapest, dearest = min(cost, key=cost.get), max(cost, key=cost.get)
    line = conclusion(summarize(result), "the cheapest allocation was")
    assert (
        f"the cheapest allocation was {cheapest} ({format_ms(cost[cheapest])}) and the dearest "
        f"{dearest} ({format_ms(cost[dearest])})"
    ) in line
    ratio = cost["pinned"] / cost["pageable"]
    assert f"took {format_ms(cost['pinned'])}, {ratio:.1f}x numpy's" in line


def test_growing_in_place_against_a_new_buffer_and_a_copy():
    result = recorded()
    largest = max(sizes(result))
    in_place = the(result, operation="grow_in_place", nbytes=largest).stats.median_ms
    by_copy = the(result, operation="grow_by_copy", nbytes=largest).stats.median_ms
    line = conclusion(summarize(result), "Growing a")
    assert f"took {format_ms(in_place)} in place" in line
    assert f"against {format_ms(by_copy)} for cuMemAlloc" in line
    assert line.endswith(f"({by_copy / in_place:.2f}x).")
