"""The small-copies verdicts' edges the recorded run does not reach
(memprof.experiments.smallcopies): one call per copy exactly 5% over the best batched way
does not lose, a size missing either side is not compared, a run without a batched way says
so, and the GPU-time note says which clock timed the pageable calls.
"""

from __future__ import annotations

from memprof.experiments import base, smallcopies, summarize
from memprof.model.results import Result
from tests.conftest import replace
from tests.verdict_tools import fixture, table


def recorded() -> Result:
    return fixture("h200_smallcopies")


def test_one_call_per_copy_exactly_five_percent_over_the_best_batched_way_does_not_lose():
    assert smallcopies.EQUIVALENT == 0.05
    assert 100.0 * (1 + smallcopies.EQUIVALENT) == 105.0  # on the edge, in floats too
    costs = {4: {"pinned": 106.0, "batched": 100.0}, 8: {"pinned": 105.0, "batched": 100.0}}
    assert smallcopies.stops_losing(costs) == 8
    costs[8]["pinned"] = 105.01
    assert smallcopies.stops_losing(costs) is None


def test_a_size_without_one_call_per_copy_or_a_batched_way_is_not_compared():
    costs = {
        4: {"batched": 1.0},  # nothing to compare
        8: {"pinned": 3.0, "pageable": 1.0},  # no batched way
        16: {"pinned": 2.0, "kernel": 1.0},
        32: {"pinned": 1.0, "gathered": 1.0},
    }
    assert smallcopies.stops_losing(costs) == 32


def test_a_run_without_a_batched_way_says_there_was_none_to_compare_with():
    result = recorded()
    kept = ["pinned", "pageable"]
    result = replace(
        result,
        measurements=[m for m in result.measurements if m.kind in kept],
        extra=replace(result.extra, ways=kept),
    )
    said = summarize(result).conclusions
    assert "Host → device: no batched way was measured to compare one call per copy with." in said
    assert "Device → host: no batched way was measured to compare one call per copy with." in said


def gpu_note(result: Result) -> str:
    return table(summarize(result), "host → device: GPU time per copy").notes[0]


def test_the_gpu_note_says_which_clock_timed_the_pageable_calls():
    result = recorded()
    assert gpu_note(result) == (
        "GPU time: the GPU work queued behind a GPU-side gate between two CUDA events (CUPTI "
        "paused), back to back; pageable: the blocking calls themselves (CUPTI's records of "
        "them, staging included); gathered: numpy's host clock added. Per copy: total / copies. "
        f"Medians of {base.repetitions(result)}; best of each row in bold."
    )
    one = next(m for m in result.measurements if m.operation == "h2d_calls")
    one.source = "host"  # one of them on the host clock: not all CUPTI's
    assert "themselves (the host clock around them, staging included);" in gpu_note(result)
