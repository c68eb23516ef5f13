"""The single-GPU memory kinds' conclusions on both sides of each edge, from the recorded H200
runs (tests/fixtures/h200_*.json) with one step moved:
- pinned: "faster" or "slower" per direction, and pinning paying off after N round trips,
  at once, or never;
- zero-copy: beat explicit copies at every size, at N of M, or never; its kernel slower at
  every size or not; "every read crosses PCIe" beyond 1.5x; data read once copied first, or
  zero-copy paying up to N passes; against pageable copies the same way;
- uva: the same addresses or not, how far apart the two pointers ran;
- write-combined: the documented trap from host reads 1.5x slower;
- register: paying for itself after N copies, or not speeding them up;
- device: the best of each kernel over its fastest run, against HBM's peak;
- portable: a foreign context's copies under 90% of the portable buffer's are staged.
"""

from __future__ import annotations

import math
import statistics

import pytest

from memprof.experiments import summarize
from memprof.model.formatting import format_gb_per_s
from memprof.model.results import Result
from tests.conftest import replace
from tests.verdict_tools import (
    cell,
    conclusion,
    edited,
    fixture,
    gb_per_s,
    per_operation_ms,
    scaled,
    table,
    the,
    with_samples,
)


def median(m) -> float:
    return statistics.median(m.samples_ms)


# -- pinned -----------------------------------------------------------------------------------


def pinned() -> Result:
    return fixture("h200_pinned_p20")


def copy_ms(result: Result, direction: str, kind: str) -> float:
    return per_operation_ms(the(result, group="gpu", operation=direction, kind=kind))


def pinned_copies_at(result: Result, direction: str, share_of_pageable: float) -> Result:
    """Pinned copies of one direction moved to `share` x the time of pageable ones; at 1, given
    pageable's very timings (a tie scaled there could round either side of it)."""
    if share_of_pageable == 1:
        pageable = the(result, group="gpu", operation=direction, kind="pageable")
        timings = {
            "samples_ms": pageable.samples_ms,
            "throughput_ms": pageable.throughput_ms,
            "events_ms": pageable.events_ms,
        }
        return edited(
            result, lambda m: replace(m, **timings), group="gpu", operation=direction, kind="pinned"
        )
    factor = share_of_pageable * copy_ms(result, direction, "pageable")
    factor /= copy_ms(result, direction, "pinned")
    return scaled(result, factor, group="gpu", operation=direction, kind="pinned")


@pytest.mark.parametrize(("share", "word"), [(0.5, "faster"), (1.0, "faster"), (1.25, "slower")])
def test_pinned_copies_are_faster_or_slower_than_pageable_per_direction(share, word):
    result = pinned_copies_at(pinned(), "d2h", share)
    speedup = copy_ms(result, "d2h", "pageable") / copy_ms(result, "d2h", "pinned")
    line = conclusion(summarize(result), "Pinned memory copied")
    assert f"and device → host {speedup:.2f}x {word}." in line
    h2d = copy_ms(result, "h2d", "pageable") / copy_ms(result, "h2d", "pinned")
    assert f"host → device {h2d:.2f}x faster than pageable" in line
    result = pinned_copies_at(pinned(), "h2d", share)
    line = conclusion(summarize(result), "Pinned memory copied")
    speedup = copy_ms(result, "h2d", "pageable") / copy_ms(result, "h2d", "pinned")
    assert f"host → device {speedup:.2f}x {word} than pageable" in line


def round_trip_cost(result: Result, kind: str) -> float:
    alloc = the(result, operation="alloc", kind=kind)
    free = the(result, operation="free", kind=kind)
    return median(alloc) + median(free)


def saved_per_round_trip(result: Result) -> float:
    return sum(
        copy_ms(result, direction, "pageable") - copy_ms(result, direction, "pinned")
        for direction in ("h2d", "d2h")
    )


def test_pinning_pays_off_after_the_round_trips_its_extra_cost_takes():
    result = pinned()
    extra = round_trip_cost(result, "pinned") - round_trip_cost(result, "pageable")
    trips = math.ceil(extra / saved_per_round_trip(result))
    line = conclusion(summarize(result), "Pinned memory copied")
    assert line.endswith(
        f"so pinning pays off from {trips} round trips (HtoD + DtoH) of this size: pin buffers "
        "you reuse, allocate them once."
    )


def test_pinning_that_pays_off_in_one_round_trip_says_one_trip():
    result = pinned()
    # the pinned allocation made cheap: its extra cost under one round trip's saving
    wanted = round_trip_cost(result, "pageable") + 0.5 * saved_per_round_trip(result)
    factor = wanted / round_trip_cost(result, "pinned")
    for operation in ("alloc", "free"):
        result = scaled(result, factor, operation=operation, kind="pinned")
    line = conclusion(summarize(result), "Pinned memory copied")
    assert "pays off from 1 round trip (HtoD + DtoH)" in line


def test_pinned_memory_no_dearer_than_pageable_is_pinned_everywhere():
    result = pinned()
    factor = 0.9 * round_trip_cost(result, "pageable") / round_trip_cost(result, "pinned")
    for operation in ("alloc", "free"):
        result = scaled(result, factor, operation=operation, kind="pinned")
    line = conclusion(summarize(result), "Pinned memory copied")
    assert line.endswith("cost no more than pageable here: pin every buffer you transfer.")


def test_pinned_copies_that_saved_nothing_are_not_worth_their_cost():
    result = pinned_copies_at(pinned_copies_at(pinned(), "h2d", 1.2), "d2h", 0.9)
    assert saved_per_round_trip(result) < 0
    line = conclusion(summarize(result), "Pinned memory copied")
    assert line.endswith(
        "Pinning did not speed up transfers here: it is not worth its allocation cost."
    )


# -- zero-copy ----------------------------------------------------------------------------------


def zerocopy() -> Result:
    return fixture("h200_zerocopy_sweep")


def step(result: Result, group: str, operation: str, kind: str, nbytes: int) -> float:
    return median(the(result, group=group, operation=operation, kind=kind, nbytes=nbytes))


def powers(result: Result) -> list[int]:
    return list(result.parameters.powers)


def end_to_end_at(result: Result, power: int, share: float, kind: str = "device") -> Result:
    """Zero-copy's end-to-end time at a size moved to `share` x the `kind` path's."""
    nbytes = 3 * (4 << power)
    other = step(result, "span", "end_to_end", kind, nbytes)
    zero = step(result, "span", "end_to_end", "mapped", nbytes)
    return scaled(
        result,
        share * other / zero,
        group="span",
        operation="end_to_end",
        kind="mapped",
        nbytes=nbytes,
    )


def zerocopy_lines(result: Result) -> list[str]:
    return summarize(result).conclusions


@pytest.mark.parametrize(
    ("shares", "headline"),
    [
        ((0.99,) * 8, "Zero-copy beat explicit copies end to end at every size measured."),
        ((1.0,) * 8, "Zero-copy never beat explicit copies end to end at these sizes."),
        ((0.9, 1.1, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
         "Zero-copy beat explicit copies end to end at 2 of 8 sizes (2^10, 2^14)."),
    ],
)  # fmt: skip
def test_zero_copy_beats_copies_end_to_end_at_every_size_some_or_none(shares, headline):
    result = zerocopy()
    for power, share in zip(powers(result), shares, strict=True):
        result = end_to_end_at(result, power, share)
    assert zerocopy_lines(result)[0].startswith(headline)


def kernel_at(result: Result, power: int, ratio: float) -> Result:
    nbytes = 3 * (4 << power)
    device = step(result, "gpu", "kernel", "device", nbytes)
    zero = step(result, "gpu", "kernel", "mapped", nbytes)
    return scaled(
        result, ratio * device / zero, group="gpu", operation="kernel", kind="mapped", nbytes=nbytes
    )


def test_a_zero_copy_kernel_slower_at_every_size_says_so_and_one_faster_somewhere_does_not():
    result = zerocopy()
    line = conclusion(summarize(result), "Per kernel")
    assert line.startswith(
        "Per kernel, reading zero-copy memory was slower than device memory at every size"
    )
    faster_once = kernel_at(result, powers(result)[0], 0.8)
    line = conclusion(summarize(faster_once), "Per kernel")
    assert line.startswith("Per kernel, zero-copy took 0.8x to ")


@pytest.mark.parametrize(("ratio", "crosses"), [(1.55, True), (1.45, False)])
def test_every_read_crosses_pcie_where_the_kernel_took_over_one_and_a_half_times(ratio, crosses):
    result = kernel_at(zerocopy(), powers(zerocopy())[-1], ratio)
    first = zerocopy_lines(result)[0]
    assert f"its kernel took {ratio:.1f}x as long as on device memory" in first
    assert first.endswith(", because every read crosses PCIe.") is crosses


def test_zero_copy_pays_for_data_read_once_up_to_the_passes_a_copy_costs():
    result = zerocopy()
    power = powers(result)[-1]
    nbytes = 4 << power
    copy_in = 2 * step(result, "gpu", "h2d", "mapped", nbytes)
    device = step(result, "gpu", "kernel", "device", 3 * nbytes)
    # one zero-copy pass 0.3x the copy's cost slower than device memory: 3.3 passes pay
    result = kernel_at(result, power, (device + 0.3 * copy_in) / device)
    line = conclusion(summarize(result), "zero-copy pays for data the GPU reads once")
    extra = step(result, "gpu", "kernel", "mapped", 3 * nbytes) - device
    assert f"so from {int(copy_in / extra) + 1} passes on, copy the data." in line
    slower = kernel_at(zerocopy(), power, (device + 1.1 * copy_in) / device)
    assert any(
        "even data read once is better copied first" in line for line in zerocopy_lines(slower)
    )


@pytest.mark.parametrize(
    ("shares", "words"),
    [
        ((0.99,) * 8, "faster end to end at every size"),
        ((0.9, 1.1) * 4, "faster end to end at 4 of 8 sizes"),
        ((1.0,) * 8, "never won end to end"),
    ],
)
def test_zero_copy_against_pageable_copies_wins_everywhere_somewhere_or_nowhere(shares, words):
    result = zerocopy()
    for power, share in zip(powers(result), shares, strict=True):
        result = end_to_end_at(result, power, share, kind="pageable")
    assert words in conclusion(summarize(result), "Against copies from pageable memory")


# -- uva ------------------------------------------------------------------------------------------


def test_uva_says_whether_the_addresses_were_equal_and_how_far_apart_the_pointers_ran():
    result = fixture("h200_uva")
    uva = median(the(result, operation="kernel", kind="uva"))
    mapped = median(the(result, operation="kernel", kind="mapped"))
    device = median(the(result, operation="kernel", kind="device"))
    line = summarize(result).conclusions[0]
    assert line.startswith("The driver reported the host addresses as the device addresses")
    assert f"({abs(uva / mapped - 1):.0%} apart)" in line
    assert f"{uva / device:.1f}x the time of device memory" in line
    slower = scaled(result, 1.2, operation="kernel", kind="uva")
    assert "(20% apart)" in summarize(slower).conclusions[0]
    pointers = result.extra.pointers
    apart = replace(
        result,
        extra=replace(
            result.extra,
            pointers=replace(pointers, a=replace(pointers.a, device=pointers.a.device + 4096)),
        ),
    )
    assert (
        summarize(apart)
        .conclusions[0]
        .startswith("The device addresses differ from the host ones, yet under UVA")
    )
    pairs = table(summarize(apart), "Addresses of the mapped buffers")
    assert (cell(pairs, "Equal", "a"), cell(pairs, "Equal", "b")) == ("no", "yes")
    moved = f"0x{pointers.a.device + 4096:x}"
    assert cell(pairs, "Device pointer (cuMemHostGetDevicePointer)", "a") == moved


# -- write-combined ---------------------------------------------------------------------------


@pytest.mark.parametrize(("slowdown", "trap"), [(1.44, False), (1.56, True), (10.0, True)])
def test_the_write_combined_trap_is_named_from_host_reads_one_and_a_half_times_slower(
    slowdown, trap
):
    result = fixture("h200_writecombined")
    cached = median(the(result, operation="host_read", kind="mapped"))
    wc = median(the(result, operation="host_read", kind="writecombined"))
    result = scaled(result, slowdown * cached / wc, operation="host_read", kind="writecombined")
    line = summarize(result).conclusions[0]
    if trap:
        assert line.startswith(
            f"The host read write-combined memory {slowdown:.1f}x slower than cached pinned"
        )
    else:
        assert line.startswith("The documented trap did not appear on this machine")
        assert f"{slowdown:.2f}x the time of cached memory" in line


# -- register ------------------------------------------------------------------------------------


def test_registration_pays_for_itself_after_its_cost_over_each_copys_saving():
    result = fixture("h200_register")
    cost = median(the(result, operation="register")) + median(the(result, operation="unregister"))
    # a pageable copy: its call's, the host clock around it (CUPTI records its DMA alone)
    pageable = median(the(result, group="api", operation="h2d", kind="pageable"))
    registered = median(the(result, group="gpu", operation="h2d", kind="registered"))
    line = summarize(result).conclusions[0]
    assert (
        f"registration pays for itself after {cost / (pageable - registered):.1f} host → "
        "device copies" in line
    )
    slower = scaled(
        result, 1.01 * pageable / registered, group="gpu", operation="h2d", kind="registered"
    )
    assert "registration did not speed up copies here" in summarize(slower).conclusions[0]


def test_registration_is_costed_at_its_median_and_pays_only_for_a_real_saving():
    result = fixture("h200_register")
    skewed = with_samples(result, [1.0, 1.0, 1.0, 100.0], operation="register")
    skewed = with_samples(skewed, [2.0, 2.0, 2.0, 50.0], operation="unregister")
    for group, kind in (("api", "pageable"), ("gpu", "registered")):  # one copy's time each:
        # the same, nothing saved (a pageable copy's is its call's)
        skewed = with_samples(skewed, [0.5, 0.5, 0.5], group=group, operation="h2d", kind=kind)
    line = summarize(skewed).conclusions[0]
    assert line.startswith("Registering the array cost 1.0000ms (and 2.0000ms to undo)")
    assert "registration did not speed up copies here" in line
    saving = with_samples(skewed, [0.25] * 3, group="gpu", operation="h2d", kind="registered")
    assert (
        "registration pays for itself after 12.0 host → device copies"
        in (summarize(saving).conclusions[0])
    )  # 3 ms of median cost over 0.25 ms saved a copy


# -- device ---------------------------------------------------------------------------------------


def test_device_bandwidth_is_each_kernels_best_run_against_hbms_peak():
    result = fixture("h200_device")
    facts = result.device
    peak = 2 * facts.memory_clock_khz * 1e3 * facts.memory_bus_width_bits / 8 / 1e9
    line = summarize(result).conclusions[0]
    best = {}
    for m in result.measurements:
        if m.group == "gpu" and m.operation == "kernel":
            best[m.name.split("(")[0]] = gb_per_s(m.bytes, min(m.samples_ms))
    triad = next(v for k, v in best.items() if "triad" in k.lower())
    assert line.startswith(
        f"Triad reached {triad:,.0f} GB/s, {triad / peak:.1%} of the theoretical"
    )
    # a slow run more leaves the best run's figure as it was
    outlier = edited(
        result,
        lambda m: replace(m, samples_ms=[*m.samples_ms, 10 * max(m.samples_ms)]),
        group="gpu",
        operation="kernel",
    )
    assert summarize(outlier).conclusions[0] == line


# -- portable ------------------------------------------------------------------------------------


def portable() -> Result:
    return fixture("h200x2_portable")


@pytest.mark.parametrize(("share", "pinned"), [(0.905, True), (0.895, False), (0.5, False)])
def test_a_foreign_context_under_ninety_percent_of_portable_stages_the_copies(share, pinned):
    result = portable()
    owner_other = [m for m in result.measurements if m.kind == "pinned" and m.operation == "h2d"]
    gpu = max(m.gpus[0] for m in owner_other)  # the GPU that is not the buffer's owner
    foreign = the(result, operation="h2d", kind="pinned", gpus=(gpu,))
    own = the(result, operation="h2d", kind="portable", gpus=(gpu,))
    factor = per_operation_ms(own) / share / per_operation_ms(foreign)
    result = scaled(result, factor, operation="h2d", kind="pinned", gpus=(gpu,))
    line = conclusion(summarize(result), f"GPU {gpu}, host → device")
    if pinned:
        assert line.endswith(
            "its context treats the buffer as pinned too, so PORTABLE changed nothing here."
        )
    else:
        assert "its context treats the buffer as pageable and stages the copies" in line
    foreign_gb = gb_per_s(foreign.bytes, per_operation_ms(foreign) * factor)
    assert f"moved {format_gb_per_s(foreign_gb)} GB/s" in line


# -- zerocopy's sentences at their boundaries, from rows built to sit on each --------------------
# (power, bytes, kernel on device, kernel on zero-copy, end to end device, end to end zero-copy,
# one HtoD copy): what zerocopy.summarize hands its conclusions


def zero_copy_said(*rows: tuple) -> list[str]:
    from memprof.experiments.zerocopy import _conclusions

    return _conclusions(list(rows))


def test_a_tie_end_to_end_is_no_win_for_zero_copy():
    said = zero_copy_said((20, 0, 1.0, 3.0, 5.0, 5.0, 1.0))
    assert said[0].startswith("Zero-copy never beat explicit copies end to end")
    won = zero_copy_said((20, 0, 1.0, 3.0, 5.0, 4.99, 1.0))
    assert won[0].startswith("Zero-copy beat explicit copies end to end at every size")
    mixed = zero_copy_said((18, 0, 1.0, 3.0, 5.0, 5.0, 1.0), (20, 0, 1.0, 3.0, 5.0, 4.99, 1.0))
    assert mixed[0].startswith("Zero-copy beat explicit copies end to end at 1 of 2 sizes (2^20)")


@pytest.mark.parametrize(("zero", "because"), [(1.5, False), (1.51, True)])
def test_a_kernel_over_half_again_as_long_is_blamed_on_pcie(zero, because):
    said = zero_copy_said((20, 0, 1.0, zero, 5.0, 6.0, 1.0))[0]
    assert said.endswith(", because every read crosses PCIe.") is because


def test_per_kernel_words_say_slower_at_every_size_only_where_every_ratio_is_above_one():
    slower = zero_copy_said((10, 0, 1.0, 2.0, 5.0, 6.0, 1.0), (12, 0, 1.0, 4.0, 5.0, 6.0, 1.0))
    assert slower[1].startswith(
        "Per kernel, reading zero-copy memory was slower than device memory at every size, "
        "2.0x to 4.0x as long (2^10: 2.0x): where zero-copy wins end to end, it wins by "
        "skipping the copies, not by reading faster."
    )
    even = zero_copy_said((10, 0, 1.0, 1.0, 5.0, 6.0, 1.0), (12, 0, 1.0, 4.0, 5.0, 6.0, 1.0))
    assert even[1].startswith("Per kernel, zero-copy took 1.0x to 4.0x as long as device memory")


@pytest.mark.parametrize(
    ("kernel_zero", "h2d", "words"),
    [
        (1.0, 1.0, None),  # no extra time per pass: nothing to weigh
        (5.0, 1.0, "even data read once is better copied first"),  # 2 ms to copy, 4 a pass
        (3.0, 1.0, "from 2 passes on, copy the data"),  # copying costs exactly one pass
        (2.0, 1.0, "from 3 passes on, copy the data"),
    ],
)
def test_how_many_passes_zero_copy_pays_for(kernel_zero, h2d, words):
    said = zero_copy_said((20, 0, 1.0, kernel_zero, 5.0, 6.0, h2d))
    if words is None:
        assert len(said) == 2
    else:
        assert words in said[2]


# -- pinned's break-even and write-combined's read-back, at their edges ------------------------


def pinned_said(pageable_ms: float, pinned_ms: float, alloc_pinned: float) -> str:
    from memprof.experiments.pinned import _conclusion

    median = {("pageable", "h2d"): pageable_ms, ("pinned", "h2d"): pinned_ms,
              ("pageable", "d2h"): pageable_ms, ("pinned", "d2h"): pinned_ms}  # fmt: skip
    alloc = {"pinned": alloc_pinned, "pageable": 1.0}
    return _conclusion(median, alloc, 4 << 20, {"pinned": 50.0, "pageable": 12.0})


def test_pinning_that_saves_exactly_nothing_is_not_worth_its_allocation():
    assert pinned_said(1.0, 1.0, 2.0).endswith(
        "Pinning did not speed up transfers here: it is not worth its allocation cost."
    )
    assert "so pinning pays off from 2 round trips" in pinned_said(1.0, 0.75, 2.0)  # 1 / 0.5
    assert "so pinning pays off from 1 round trip (HtoD" in pinned_said(1.0, 0.5, 2.0)
    assert pinned_said(1.0, 0.5, 1.0).endswith("pin every buffer you transfer.")  # no extra cost


def test_host_reads_exactly_one_and_a_half_times_slower_are_the_trap():
    result = fixture("h200_writecombined")
    result = with_samples(result, [2.0] * 3, operation="host_read", kind="mapped")
    at_edge = with_samples(result, [3.0] * 3, operation="host_read", kind="writecombined")
    assert (
        summarize(at_edge)
        .conclusions[0]
        .startswith("The host read write-combined memory 1.5x slower than cached pinned")
    )
    under = with_samples(result, [2.99] * 3, operation="host_read", kind="writecombined")
    assert summarize(under).conclusions[0].startswith("The documented trap did not appear")
