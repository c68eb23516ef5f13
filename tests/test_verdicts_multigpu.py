"""The verdicts of runs over two GPUs, each on both sides of its threshold, from the recorded
H200 x2 runs (tests/fixtures/h200x2_hostlink.json, h200x2_peer.json) with figures moved:
- hostlink: all GPUs at once under 90% of the sum of each alone share something on the way;
  the figures summed over every GPU, the ratio at once / alone (not its inverse);
- peer: both directions at once against the faster direction alone, "in full" from 1.8x;
  the latency per dependent load and its ratio to the reading GPU's own memory.
"""

from __future__ import annotations

import math

import pytest

from memprof.experiments import summarize
from memprof.model.formatting import format_gb_per_s
from memprof.model.results import Result
from tests.verdict_tools import (
    cell,
    conclusion,
    fixture,
    gb_per_s,
    per_operation_ms,
    scaled,
    table,
    the,
)

LABELS = {"h2d": "Host → device", "d2h": "Device → host"}
WORDS = {"h2d": "host → device", "d2h": "device → host"}


# -- hostlink ---------------------------------------------------------------------------------


def hostlink() -> Result:
    return fixture("h200x2_hostlink")


def figure(result: Result, operation: str, gpu: int) -> float:
    m = the(result, group="gpu", operation=operation, gpus=(gpu,))
    return gb_per_s(m.bytes, per_operation_ms(m))


def sums(result: Result, direction: str) -> tuple[float, float]:
    """(every GPU alone, every GPU at once), GB/s summed."""
    alone = math.fsum(figure(result, direction, gpu) for gpu in (0, 1))
    together = math.fsum(figure(result, f"{direction}_at_once", gpu) for gpu in (0, 1))
    return alone, together


def at_once_ratio(result: Result, direction: str, ratio: float) -> Result:
    """Every GPU's copies at once slowed alike so together / alone is `ratio`."""
    alone, together = sums(result, direction)
    return scaled(result, together / (ratio * alone), group="gpu", operation=f"{direction}_at_once")


SHARED = "they share something on the way"
OWN = "each GPU keeps its own path to host memory"


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
@pytest.mark.parametrize(("ratio", "words"), [(0.905, OWN), (0.895, SHARED), (0.85, SHARED)])
def test_hostlink_shares_something_under_ninety_percent_of_the_sum_alone(direction, ratio, words):
    result = at_once_ratio(hostlink(), direction, ratio)
    line = conclusion(summarize(result), LABELS[direction])
    assert words in line
    alone, together = sums(result, direction)
    assert f"moved {format_gb_per_s(together)} GB/s in total, {together / alone:.0%} of " in line
    assert f"of the {format_gb_per_s(alone)} GB/s they reach one at a time" in line


def test_hostlink_at_exactly_ninety_percent_keeps_its_own_path_and_just_under_shares():
    from types import SimpleNamespace

    from memprof.experiments.hostlink import SHARED_BELOW, _conclusion

    alone, together = SimpleNamespace(gb_per_s=100.0), SimpleNamespace(gb_per_s=90.0)
    for ratio, words in ((SHARED_BELOW, OWN), (math.nextafter(SHARED_BELOW, 0), SHARED)):
        line = _conclusion("Host → device", 2, alone, together, SimpleNamespace(ratio=ratio))
        assert words in line


def test_hostlink_sums_every_gpu_and_divides_at_once_by_alone():
    # GPU 1 at once at half its rate alone, GPU 0 unchanged: the sum falls by a quarter
    result = scaled(hostlink(), 2.0, group="gpu", operation="h2d_at_once", gpus=(1,))
    t = table(summarize(result), "each GPU alone and all")
    for gpu in (0, 1):
        ratio = figure(result, "h2d_at_once", gpu) / figure(result, "h2d", gpu)
        assert cell(t, "At once / alone", f"GPU {gpu}", WORDS["h2d"]) == f"{ratio:.2f}x"
    alone, together = sums(result, "h2d")
    assert cell(t, "All at once, GB/s", "total", WORDS["h2d"]) == format_gb_per_s(together)
    assert cell(t, "Alone, GB/s", "total", WORDS["h2d"]) == format_gb_per_s(alone)
    assert cell(t, "At once / alone", "total", WORDS["h2d"]) == f"{together / alone:.2f}x"
    assert SHARED in conclusion(summarize(result), LABELS["h2d"])


# -- peer ---------------------------------------------------------------------------------------


def peer() -> Result:
    return fixture("h200x2_peer")


def peer_figure(result: Result, method: str, a: int, b: int) -> float:
    m = the(result, group="gpu", operation=method, gpus=(a, b))
    return gb_per_s(m.bytes, per_operation_ms(m))


def both_ways_at(result: Result, times_one_way: float) -> Result:
    """Both directions at once slowed alike so their total is `times_one_way` x the faster
    direction alone."""
    one_way = max(peer_figure(result, "ce_on", 0, 1), peer_figure(result, "ce_on", 1, 0))
    total = peer_figure(result, "ce_bidir", 0, 1) + peer_figure(result, "ce_bidir", 1, 0)
    return scaled(result, total / (times_one_way * one_way), group="gpu", operation="ce_bidir")


@pytest.mark.parametrize(
    ("times", "words"),
    [
        (1.85, "carries both directions in full."),
        (1.75, "is shared."),
        (1.6, "is shared."),
    ],
)
def test_both_directions_carry_in_full_from_one_point_eight_times_one_direction(times, words):
    line = conclusion(summarize(both_ways_at(peer(), times)), "at once")
    assert f"{times:.2f}x one direction: the link {words}" in line


def test_both_directions_are_set_against_the_faster_direction_alone():
    # GPU 1 → GPU 0 alone at 70% of its recorded rate: the faster one is still GPU 0 → 1
    result = scaled(peer(), 1 / 0.7, group="gpu", operation="ce_on", gpus=(1, 0))
    result = both_ways_at(result, 1.75)  # 1.75x the faster, 2.5x the slower: shared
    line = conclusion(summarize(result), "at once")
    assert "1.75x one direction: the link is shared." in line


def latency_us(result: Result, a: int, b: int) -> float:
    m = the(result, group="gpu", operation="latency", gpus=(a, b))
    return m.stats.median_ms * 1e3 / result.parameters.latency_steps  # loads per sample


def test_latency_is_per_dependent_load_and_set_against_the_reading_gpus_own():
    # GPU 0 reading its own memory made 3x slower: GPU 1's ratio must not move
    result = scaled(peer(), 3.0, group="gpu", operation="latency", gpus=(0, 0))
    t = table(summarize(result), "Latency of one 4-byte read")
    for a, b in ((0, 0), (0, 1), (1, 0), (1, 1)):
        assert cell(t, f"GPU {b}", f"GPU {a}") == f"{latency_us(result, a, b):.2f}"
    line = conclusion(summarize(result), "One read of GPU 0's memory from GPU 1")
    ratio = latency_us(result, 0, 1) / latency_us(result, 1, 1)
    assert f"takes {latency_us(result, 0, 1):.2f} µs, {ratio:.1f}x a read of its own" in line
    assert f"({latency_us(result, 1, 1):.2f} µs)" in line


def test_both_directions_at_once_add_each_directions_own_figure():
    # GPU 1 → GPU 0 at once made 1.5x slower: the total is not twice either direction
    result = scaled(peer(), 1.5, group="gpu", operation="ce_bidir", gpus=(1, 0))
    total = peer_figure(result, "ce_bidir", 0, 1) + peer_figure(result, "ce_bidir", 1, 0)
    one_way = max(peer_figure(result, "ce_on", 0, 1), peer_figure(result, "ce_on", 1, 0))
    line = conclusion(summarize(result), "at once")
    assert line.startswith(
        f"GPU 0 ↔ GPU 1 at once: {format_gb_per_s(total)} GB/s in total, "
        f"{total / one_way:.2f}x one direction"
    )
    notes = table(summarize(result), "both directions at once").notes
    assert f"GPU 0 ↔ GPU 1: {format_gb_per_s(total)} GB/s in total." in notes
