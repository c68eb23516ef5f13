"""trace's advice on both sides of each edge, from the recorded traces of a PyCUDA and a
PyTorch program on the H200 (tests/fixtures/h200_trace_pycuda.json, h200_trace_torch.json)
with their copy groups or this GPU's figures edited:
- pageable copies of 64 KiB or more: "pin them" only where pinned copies at this GPU's
  bandwidth would be faster than they were, the small ones left to the small-copy advice;
- copies under 64 KiB: set against pageable figures where at least half came from pageable
  memory, else against pinned ones; "did not pay" where batching was no faster;
- blocked copies: synchronous calls and asynchronous ones from or to pageable memory, each
  copy counted once.
"""

from __future__ import annotations

import pytest

from memprof.experiments import summarize
from memprof.experiments.trace import measured_gain
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.trace.collect import SmallCopyCost, SmallCopyFigures
from tests.conftest import replace
from tests.verdict_tools import conclusion, fixture

# the words of each piece of advice, on recordings whose copies cost under 1% of the run
pytestmark = pytest.mark.usefixtures("unfolded_advice")


def pycuda() -> Result:
    return fixture("h200_trace_pycuda")


def torch() -> Result:
    return fixture("h200_trace_torch")


def with_extra(result: Result, **changes) -> Result:
    return replace(result, extra=replace(result.extra, **changes))


def group(result: Result, direction: str, source: str, destination: str):
    (found,) = [
        g
        for g in result.extra.copies
        if (g.direction, g.source, g.destination) == (direction, source, destination)
    ]
    return found


def with_group(result: Result, direction: str, source: str, destination: str, **changes):
    copies = [
        replace(g, **changes)
        if (g.direction, g.source, g.destination) == (direction, source, destination)
        else g
        for g in result.extra.copies
    ]
    return with_extra(result, copies=copies)


def with_pinned(result: Result, h2d_gb_per_s: float) -> Result:
    return with_extra(
        result, pinned_bandwidth={**result.extra.pinned_bandwidth, "h2d_gb_per_s": h2d_gb_per_s}
    )


# -- pageable copies ------------------------------------------------------------------------


def large_pageable(result: Result) -> tuple[int, int, float]:
    """(calls, bytes, GPU ms) of the pageable copies host → device of 64 KiB or more."""
    g = group(result, "HtoD", "pageable", "device")
    return g.calls - g.small_calls, g.bytes - g.small_bytes, g.gpu_ms - g.small_gpu_ms


@pytest.mark.parametrize("trace", [pycuda, torch])
@pytest.mark.parametrize(("pinned_share", "pins"), [(1.05, True), (0.95, False)])
def test_pinning_is_advised_only_where_pinned_copies_would_be_faster(trace, pinned_share, pins):
    calls, nbytes, gpu_ms = large_pageable(trace())
    achieved = nbytes / (gpu_ms / 1e3) / 1e9
    pinned = pinned_share * achieved
    result = with_pinned(trace(), pinned)
    line = conclusion(summarize(result), "pageable HtoD copies of 64 KiB or more")
    opening = (  # the calls' host time is left to the small copies' advice here
        f"{calls} pageable HtoD copies of 64 KiB or more moved {format_bytes(nbytes)} in "
        f"{format_ms(gpu_ms)} on the GPU"
    )
    if pins:
        would = nbytes / (pinned * 1e9) * 1e3
        assert line.startswith(f"{opening}; from pinned memory they would take about ")
        assert f"from pinned memory they would take about {format_ms(would)}" in line
        assert "Allocate those host buffers pinned" in line
    else:
        assert line.startswith(f"{opening}, at {format_gb_per_s(achieved)} GB/s: no slower ")
        assert "pinning would not speed them up" in line


def test_pageable_copies_without_small_ones_say_how_long_their_calls_held_the_host():
    result = pycuda()
    g = group(result, "DtoH", "device", "pageable")
    line = conclusion(summarize(result), f"{g.calls} pageable DtoH copies moved")
    assert line.startswith(
        f"{g.calls} pageable DtoH copies moved {format_bytes(g.bytes)} in {format_ms(g.gpu_ms)} "
        f"on the GPU (their calls held the host {format_ms(g.call_ms)})"
    )


# -- small copies -----------------------------------------------------------------------------


def small_line(result: Result) -> str:
    return conclusion(summarize(result), "under 64 KiB (")


CLOCKS = {"wall": "wall clock", "gpu": "GPU time"}


def with_clock(result: Result, clock: str) -> Result:
    """The small-copy costs said to be of `clock` ("gpu": a trace saved before memprof took
    the wall clock per copy)."""
    return with_extra(result, small_copies=replace(result.extra.small_copies, clock=clock))


@pytest.mark.parametrize("clock", ["wall", "gpu"])
def test_half_of_the_small_copies_from_pageable_memory_are_set_against_pageable_figures(clock):
    result = with_clock(pycuda(), clock)  # 50 pageable and 50 pinned small copies: half
    cost = next(c for c in result.extra.small_copies.costs if c.bytes == 4096)
    line = small_line(result)
    assert (
        f"On this GPU 128 copies of 4 KiB from pageable memory cost {format_ms(cost.pageable_ms)} "
        f"per copy one call each and {format_ms(cost.gathered_ms)} gathered into one pinned "
        f"buffer and copied once ({CLOCKS[clock]} per copy): "
        f"{cost.pageable_ms / cost.gathered_ms:.1f}x faster"
    ) in line


@pytest.mark.parametrize("clock", ["wall", "gpu"])
def test_fewer_than_half_from_pageable_memory_are_set_against_pinned_and_one_batch(clock):
    result = with_group(
        with_clock(pycuda(), clock),
        "HtoD",
        "pageable",
        "device",
        small_calls=49,
        small_bytes=49 * 4096,
        calls=63,
        bytes=group(pycuda(), "HtoD", "pageable", "device").bytes - 4096,
    )
    cost = next(c for c in result.extra.small_copies.costs if c.bytes == 4096)
    line = small_line(result)
    assert (
        f"128 copies of 4 KiB from pinned memory cost {format_ms(cost.pinned_ms)} per copy one "
        f"call each and {format_ms(cost.batched_ms)} in one cuMemcpyBatchAsync "
        f"({CLOCKS[clock]} per copy): {cost.pinned_ms / cost.batched_ms:.1f}x faster"
    ) in line


@pytest.mark.parametrize(
    ("average_kib", "cited"), [(7, 4 << 10), (9, 16 << 10), (31, 16 << 10), (33, 64 << 10)]
)
def test_the_size_cited_is_the_measured_one_nearest_the_average_small_copy(average_kib, cited):
    """Measured at 4, 16, 64 and 256 KiB: the nearest on a log scale (8 KiB and 32 KiB lie
    half way), not the smallest."""
    result = pycuda()
    for source in ("pageable", "pinned"):
        g = group(result, "HtoD", source, "device")
        small_bytes = g.small_calls * average_kib * 1024
        result = with_group(
            result,
            "HtoD",
            source,
            "device",
            small_bytes=small_bytes,
            bytes=g.bytes - g.small_bytes + small_bytes,
        )
    assert [c.bytes for c in result.extra.small_copies.costs] == [
        4 << 10,
        16 << 10,
        64 << 10,
        256 << 10,
    ]
    cost = next(c for c in result.extra.small_copies.costs if c.bytes == cited)
    assert (
        f"128 copies of {format_bytes(cited)} from pageable memory cost "
        f"{format_ms(cost.pageable_ms)} per copy"
    ) in small_line(result)


def test_pinned_copies_where_no_batch_was_measured_are_set_against_gathering():
    """A GPU or driver without cuMemcpyBatchAsync: its copies from pinned memory are set
    against the one way left, gathered from pageable memory into one pinned copy."""
    cost = SmallCopyCost(4096, pinned_ms=0.02, pageable_ms=0.03, gathered_ms=0.005)
    measured = SmallCopyFigures("measured now", 128, [cost], "wall")
    assert measured_gain(measured, 4096, from_pageable=False) == (
        f"On this GPU 128 copies of 4 KiB from pinned memory cost {format_ms(0.02)} per copy "
        f"one call each and {format_ms(0.005)} gathered from pageable memory into one pinned "
        "buffer and copied once (wall clock per copy): 4.0x faster (`memprof smallcopies`, "
        "measured now)."
    )


@pytest.mark.parametrize(("batched_ms", "paid"), [(0.0199, True), (0.02, False), (0.0, False)])
def test_batching_pays_only_where_it_was_faster_and_took_any_time(batched_ms, paid):
    """As fast as one call each is no gain; a batch timed at zero is no figure to divide by."""
    cost = SmallCopyCost(4096, 0.02, 0.03, 0.01, batched_ms=batched_ms)
    said = measured_gain(SmallCopyFigures("measured now", 128, [cost], "wall"), 4096, False)
    assert said.startswith("On this GPU batching did not pay: ") != paid
    assert ("x faster (`memprof smallcopies`, measured now)." in said) == paid


def test_copies_of_a_byte_cite_the_size_of_a_byte():
    """The nearest size on a log scale holds at its floor too: 1 B is nearer 1 B than 2 B."""
    costs = [SmallCopyCost(n, 0.02, 0.03, 0.01) for n in (2, 1)]
    said = measured_gain(SmallCopyFigures("measured now", 64, costs, "wall"), 1, True)
    assert said.startswith("On this GPU 64 copies of 1 B from pageable memory")


def test_batching_that_was_no_faster_is_said_to_have_not_paid():
    result = pycuda()
    costs = [replace(c, gathered_ms=c.pageable_ms * 1.01) for c in result.extra.small_copies.costs]
    small = replace(result.extra.small_copies, costs=costs)
    line = small_line(with_extra(result, small_copies=small))
    assert "On this GPU batching did not pay: 128 copies of 4 KiB from pageable memory" in line


def test_small_copies_are_counted_apart_from_large_ones_and_their_time_per_copy():
    result = pycuda()
    small = [g for g in result.extra.copies if g.small_calls]
    calls = sum(g.small_calls for g in small)
    gpu_ms = sum(g.small_gpu_ms for g in small)
    nbytes = sum(g.small_bytes for g in small)
    line = small_line(result)
    assert line.startswith(
        f"{calls} copies under 64 KiB (50 HtoD pageable -> device, 50 HtoD pinned -> device) "
        f"moved {format_bytes(nbytes)} in {format_ms(gpu_ms)} on the GPU, "
        f"{format_ms(gpu_ms / calls)} each"
    )


# -- blocked copies ---------------------------------------------------------------------------


@pytest.mark.parametrize(("synchronous", "expected"), [(0, 74), (30, 74), (64, 74)])
def test_each_blocked_copy_is_counted_once_synchronous_or_staged(synchronous, expected):
    # the pageable copies host → device: `synchronous` of the 64 made with blocking calls
    result = with_group(torch(), "HtoD", "pageable", "device", blocking_calls=synchronous)
    line = conclusion(summarize(result), "blocked the host")
    assert line.startswith(f"{expected} copies blocked the host until they finished")
    staged = expected - synchronous
    if synchronous:
        assert f"{synchronous} made with synchronous calls" in line
    assert f"{staged} asynchronous calls from or to pageable memory" in line


def test_synchronous_copies_from_pinned_memory_block_too():
    result = with_group(pycuda(), "HtoD", "pinned", "device", blocking_calls=3)
    line = conclusion(summarize(result), "blocked the host")
    assert line.startswith("77 copies blocked the host until they finished: 77 made with")


def test_advice_on_copies_folds_below_one_percent_of_the_run_and_only_then(monkeypatch):
    """Each piece of advice on copies carries its cost (GPU time or host time held, the
    larger); under 1% of the run's wall time it folds into one line, at 1% it is said."""
    from memprof.experiments import trace
    from memprof.experiments.trace import RunScale, advice
    from memprof.trace.collect import CopyGroup

    monkeypatch.setattr(trace, "FOLD_SHARE", 0.01)  # what a user gets

    def pageable(blocked_ms: float) -> CopyGroup:
        return CopyGroup(
            "HtoD", "pageable", "device", calls=4, bytes=64 << 20, gpu_ms=blocked_ms / 2,
            call_ms=blocked_ms, blocked_ms=blocked_ms,
        )  # fmt: skip

    bandwidth = {"h2d_gb_per_s": 50.0, "d2h_gb_per_s": 50.0, "how": "measured"}
    second = RunScale(wall_ms=1000.0, gpu_ms=20.0)
    said = advice([pageable(10.0)], bandwidth, None, None, second)
    assert said[0].startswith("4 pageable HtoD copies moved 64 MiB")  # 1.0%: said
    assert not any("cost under 1%" in line for line in said)
    folded = advice([pageable(9.99)], bandwidth, None, None, second)
    assert len(folded) == 1  # the pageable and the blocking advice, both under 1%
    assert folded[0].startswith("2 pieces of advice on copies (pageable, small or blocking)")
    assert "under 1% of the program's 1.0000s each (19.980ms together" in folded[0]
    assert advice([pageable(9.99)], bandwidth, None)[0].startswith("4 pageable")  # no scale
    unknown = pageable(0.0)  # a file from before memprof kept the host time blocked
    unknown.gpu_ms = 0.0
    assert not any(
        "cost under" in line for line in advice([unknown], bandwidth, None, None, second)
    )
    # small copies cost their share of their group's call time: 2 of 4 calls of 20 ms, 1%
    for call_ms, said_alone in ((20.0, True), (19.98, False)):
        small = CopyGroup(
            "HtoD", "pinned", "device", calls=4, bytes=2 * 1024 + 2 * (1 << 20),
            gpu_ms=0.2, call_ms=call_ms, small_calls=2, small_bytes=2 * 1024,
            small_gpu_ms=0.002,
        )  # fmt: skip
        (line,) = advice([small], bandwidth, None, None, second)
        assert line.startswith("2 copies under 64 KiB") == said_alone, line
    assert folded[0].endswith("GPU or host time): the Copies by memory kind table holds them.")
    # large pageable copies cost their own GPU time, the small ones' left out: 10 ms less
    # 0.02 ms of small copies is under 1%
    for gpu_ms, said_alone in ((10.02, True), (10.0, False)):
        mixed = CopyGroup(
            "HtoD", "pageable", "device", calls=4, bytes=(64 << 20) + 1024, gpu_ms=gpu_ms,
            small_calls=1, small_bytes=1024, small_gpu_ms=0.02,
        )  # fmt: skip
        said = advice([mixed], bandwidth, None, None, second)
        assert said[0].startswith("3 pageable HtoD copies of 64 KiB or more") == said_alone
    managed = {"BYTES_TRANSFER_HTOD": {"total": 1 << 20}}
    kept = advice([pageable(1.0)], bandwidth, managed, None, second)
    assert kept[-1].startswith("Managed memory migrated at least 1 MiB")  # never folded
