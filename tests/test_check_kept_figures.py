"""What a saved check keeps beside its measurements decides its verdicts wherever it is read,
so the loader holds it to the run as it holds the measurements: both directions at once and
every retry's copies to the link (or HBM) that bounds them; a retry to a line whose attempt
before it did not PASS; a kept --reference to the run's GPU model and to what such a GPU can
reach. Each rule is tried on both sides of its boundary."""

from __future__ import annotations

import dataclasses
import math

import msgspec
import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import check, shape_of
from memprof.experiments.check import (
    MARGIN,
    CheckReference,
    CheckRetry,
    RetriedCopies,
    device_bytes,
    figure,
    host_bytes,
    lines,
)
from memprof.model.ceilings import hbm_ceiling
from memprof.model.device import pcie_bandwidth_gb_per_s
from memprof.model.measures import ABOVE_BOUND
from memprof.model.results import Result
from tests.check_results import check_result, slower
from tests.test_check_gates import retried, retry
from tests.test_gpu_state import healthy

PCIE_GEN5_X16 = 32 * 128 / 130 * 16 / 8  # GB/s per direction: 63.0
HBM_H200 = hbm_ceiling(check_result().device).gb_per_s  # the H200's: clock x bus width


def watched(result: Result) -> Result:
    result.gpu_states = [healthy()]
    return result


def loads(result: Result) -> Result:
    """The Result as `memprof report` reads it back (InvalidArgument if refused)."""
    return Result.from_json(result.to_json(), shape_of, "check.json")


def refused(result: Result, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        loads(result)


@pytest.mark.parametrize("operation", ["h2d_at_once", "d2h_at_once"])
def test_both_at_once_is_held_to_the_link_like_each_direction_alone(operation):
    just_under = 0.99 * ABOVE_BOUND * PCIE_GEN5_X16
    loads(slower(watched(check_result()), operation, just_under))
    over = slower(watched(check_result()), operation, 1.01 * ABOVE_BOUND * PCIE_GEN5_X16)
    refused(over, "nothing moves faster than its PCIe")
    refused(slower(watched(check_result()), operation, 6_710_886.4), "nothing moves faster")


@pytest.mark.parametrize(
    ("line", "operation", "ceiling"),
    [
        ("h2d", "h2d", PCIE_GEN5_X16),
        ("d2h", "d2h", PCIE_GEN5_X16),
        ("at_once", "h2d_at_once", PCIE_GEN5_X16),
        ("at_once", "d2h", PCIE_GEN5_X16),
        ("d2d", "d2d", HBM_H200),
    ],
)
def test_a_retrys_copies_are_held_to_what_bounds_them(line, operation, ceiling):
    first = {"h2d": 40.0, "d2h": 40.0, "at_once": 20.0, "d2d": 2000.0}[line]
    slow = "h2d_at_once" if line == "at_once" else line  # the first attempt: a FAIL
    for factor, kept in ((0.99, True), (1.01, False)):
        result = slower(watched(check_result()), slow, first)
        again = {operation: factor * ABOVE_BOUND * ceiling}
        if operation == "d2h":  # at once: judged against d2h alone, which may not pass either
            again["h2d_at_once"] = 20.0
        result = retried(result, retry(result, line, 1, **again))
        if kept:
            assert loads(result).extra.retries == result.extra.retries
        else:
            refused(result, r"retries\[0\]\.copies\[\d\]\.per_copy_ms makes")


def test_a_line_that_passed_at_once_is_never_measured_again():
    result = watched(check_result())  # both at once: PASS
    refused(
        retried(result, retry(result, "at_once", 1)),
        r"^check\.json: extra\.retries\[0\] measures 'at_once' again, but its attempt before "
        r"PASSed \(53\.3 \+ 54\.7 GB/s \(96%, 99%\)\): only a line that WARNed or FAILed is "
        r"measured again$",
    )
    failed = slower(watched(check_result()), "h2d_at_once", 20.0)
    assert loads(retried(failed, retry(failed, "at_once", 1))).extra.retries


def test_nor_a_line_after_the_retry_that_passed_it():
    result = slower(watched(check_result()), "h2d_at_once", 20.0)
    passed = retry(result, "at_once", 1, h2d_at_once=50.0)  # 90% of 55.5 alone: PASS
    result = retried(result, passed, retry(result, "at_once", 2))
    refused(result, r"retries\[1\] measures 'at_once' again")


def with_reference(result: Result, h2d: float, d2d: float = 4000.0, gpu: str = "") -> Result:
    kept = CheckReference(
        file="mine.json",
        gpu=gpu or result.device.name,
        host="known-good",
        created_at=result.created_at,
        bytes_per_copy=host_bytes(result),
        device_copy_bytes=device_bytes(result),
        h2d_gb_per_s=h2d,
        d2h_gb_per_s=h2d,
        d2d_gb_per_s=d2d,
    )
    result.extra = dataclasses.replace(result.extra, reference=kept)
    return result


def test_a_retry_stands_where_the_run_may_have_judged_its_line_otherwise():
    # a floor of 97%: 61.0 GB/s is under it (a WARN), 61.3 at it
    for gb_per_s, kept in ((61.0, True), (61.3, False)):
        result = slower(watched(check_result()), "h2d", gb_per_s)
        result.parameters = dataclasses.replace(result.parameters, h2d_floor_pct=97)
        result = retried(result, retry(result, "h2d", 1))
        if kept:
            assert loads(result).extra.retries
        else:
            refused(result, "its attempt before PASSed")
    # the run took its link from the device facts when it started: Gen1 there, and 60 GB/s
    # was above it (a FAIL) though NVML saw Gen5 during the run
    result = slower(watched(check_result()), "h2d", 60.0)
    result.device = msgspec.structs.replace(result.device, pcie_generation=1)
    assert loads(retried(result, retry(result, "h2d", 1))).extra.retries
    result.device = msgspec.structs.replace(result.device, pcie_generation=5)
    refused(retried(result, retry(result, "h2d", 1)), "its attempt before PASSed")


def test_without_a_kept_reference_a_retry_stands_where_a_shipped_one_could_have_warned():
    # A reference may hold up to ABOVE_BOUND of the link: a figure under MARGIN of that may
    # have been a WARN when the run judged it, whatever reference memprof shipped then.
    certain = MARGIN * ABOVE_BOUND * PCIE_GEN5_X16
    for gb_per_s, kept in ((0.995 * certain, True), (1.005 * certain, False)):
        result = slower(watched(check_result()), "h2d", gb_per_s)
        result = retried(result, retry(result, "h2d", 1))
        if kept:
            assert loads(result).extra.retries
        else:
            refused(result, "its attempt before PASSed")


def test_a_kept_reference_is_a_check_of_the_runs_gpu_model():
    loads(with_reference(watched(check_result()), h2d=55.0))
    other = with_reference(watched(check_result()), h2d=55.0, gpu="NVIDIA H100 80GB HBM3")
    refused(
        other,
        r"^check\.json: extra\.reference\.gpu is 'NVIDIA H100 80GB HBM3', but the run measured "
        r"'NVIDIA H200': a reference is a check of the same GPU model$",
    )


@pytest.mark.parametrize("field", ["h2d", "d2d"])
def test_a_kept_reference_holds_figures_such_a_gpu_can_reach(field):
    ceiling = PCIE_GEN5_X16 if field == "h2d" else HBM_H200
    for factor, kept in ((0.99, True), (1.01, False)):
        figures = {"h2d": 55.0, "d2d": 4000.0} | {field: factor * ABOVE_BOUND * ceiling}
        result = with_reference(watched(check_result()), **figures)
        if kept:
            assert loads(result).extra.reference == result.extra.reference
        else:
            refused(result, f"extra.reference.{field}_gb_per_s is .* can reach at most")
    refused(with_reference(watched(check_result()), h2d=1_000_000.0), "can reach at most")


def test_a_reference_from_a_better_slot_of_the_same_model_is_kept():
    # this GPU trained at Gen4 in its slot; the reference's machine had the Gen5 it can do
    result = check_result()
    for operation in ("h2d", "d2h", "h2d_at_once", "d2h_at_once"):
        slower(result, operation, 27.0)  # 86% of Gen4's 31.5
    result = with_reference(result, h2d=55.0)
    result.gpu_states = [healthy(pcie_generation=4)]  # trained below the Gen5 it can do
    assert loads(result).extra.reference.h2d_gb_per_s == 55.0
    gen4 = {"pcie_generation": 4, "pcie_max_generation": 4, "pcie_gpu_max_generation": 4}
    result.gpu_states = [healthy(**gen4)]
    result.device = msgspec.structs.replace(result.device, pcie_generation=4, pcie_max_generation=4)
    refused(result, "can reach at most 31.5 GB/s")  # a Gen4 GPU, whatever its slot


def exactly(result: Result, operation: str, gb_per_s: float, later: int = 0) -> Result:
    """The result with one figure's copies at exactly `gb_per_s` (the per-copy time nearest
    the plain division that gives it), or `later` such times faster."""
    slower(result, operation, gb_per_s)
    m = next(m for m in result.measurements if m.operation == operation)
    start = m.throughput_ms[0]
    for step in range(-300, 301):
        ms = start
        for _ in range(abs(step)):
            ms = math.nextafter(ms, math.copysign(math.inf, step))
        m.throughput_ms = [ms] * len(m.throughput_ms)
        if figure(result, operation) == gb_per_s:
            break
    else:
        raise AssertionError(f"no time per copy makes exactly {gb_per_s!r} GB/s")
    for _ in range(later):
        while figure(result, operation) <= gb_per_s:
            ms = math.nextafter(ms, 0)
            m.throughput_ms = [ms] * len(m.throughput_ms)
    m.samples_ms = list(m.throughput_ms)
    return result


def test_a_retry_is_refused_exactly_at_the_least_figure_certain_to_have_passed():
    certain = MARGIN * ABOVE_BOUND * PCIE_GEN5_X16  # the edge the test above goes round
    result = exactly(watched(check_result()), "h2d", certain)
    refused(retried(result, retry(result, "h2d", 1)), "its attempt before PASSed")


def on_gen6_x16():
    """check's run on a Gen6 x16 GPU in a Gen6 slot, as NVML saw it (121.0 GB/s)."""
    gen6 = {"pcie_generation": 6, "pcie_max_generation": 6}
    result = check_result()
    result.device = msgspec.structs.replace(result.device, **gen6)
    result.gpu_states = [healthy(**gen6, pcie_gpu_max_generation=6)]
    return result


def test_a_retry_is_refused_up_to_exactly_the_bound_of_the_link_the_run_started_on():
    # a Gen6 x16 GPU and slot (121.0 GB/s): a figure of exactly ABOVE_BOUND of it passed;
    # one a time per copy faster is no figure at all
    for later, words in ((0, "its attempt before PASSed"), (1, "nothing moves faster")):
        result = exactly(on_gen6_x16(), "h2d", ABOVE_BOUND * 121.0, later)
        refused(retried(result, retry(result, "h2d", 1)), words)


def test_a_device_copy_is_held_to_hbm_when_deciding_whether_it_passed():
    # a figure certain to pass against HBM, far above any PCIe link
    for share, kept in ((0.995, True), (1.0, False)):
        result = slower(watched(check_result()), "d2d", share * MARGIN * ABOVE_BOUND * HBM_H200)
        result = retried(result, retry(result, "d2d", 1))
        if kept:
            assert loads(result).extra.retries
        else:
            refused(result, r"retries\[0\] measures 'd2d' again, but its attempt before PASSed")


def test_a_retry_stands_where_the_link_the_run_started_on_is_unknown():
    result = slower(watched(check_result()), "h2d", 60.0)  # PASSed against NVML's link
    result.device = msgspec.structs.replace(result.device, pcie_generation=None)
    assert loads(retried(result, retry(result, "h2d", 1))).extra.retries


def test_without_nvml_a_reference_is_held_to_the_fastest_link_memprof_knows():
    gen6_x16 = 64 * 242 / 256 * 16 / 8  # 121.0 GB/s
    for factor, kept in ((0.99, True), (1.01, False)):
        result = with_reference(check_result(), h2d=factor * ABOVE_BOUND * gen6_x16)
        assert not result.gpu_states
        if kept:
            assert loads(result).extra.reference == result.extra.reference
        else:
            refused(result, "extra.reference.h2d_gb_per_s is .* can reach at most 121.0 GB/s")


def test_a_reference_of_a_gpu_whose_hbm_rate_is_unknown_holds_its_device_copy_to_nothing():
    result = watched(check_result())
    result.device = msgspec.structs.replace(result.device, memory_clock_khz=0)
    result = with_reference(result, h2d=55.0, d2d=1e5)
    assert loads(result).extra.reference.d2d_gb_per_s == 1e5


def test_a_kept_reference_exactly_at_the_bound_of_what_such_a_gpu_reaches_is_kept():
    most = pcie_bandwidth_gb_per_s(5, 16)  # the GPU's own highest generation, x16
    assert most == pytest.approx(PCIE_GEN5_X16)
    result = with_reference(watched(check_result()), h2d=ABOVE_BOUND * most)
    assert loads(result).extra.reference.h2d_gb_per_s == ABOVE_BOUND * most


def test_a_line_exactly_at_the_bound_of_its_ceiling_is_judged_and_one_faster_fails():
    for later, verdict in ((0, "PASS"), (1, "FAIL")):
        result = exactly(on_gen6_x16(), "h2d", ABOVE_BOUND * 121.0, later)
        line = lines(result, None)[1]
        assert line.verdict == verdict
        assert line.judged == (("Pinned host → device", figure(result, "h2d"), 0.85 * 121.0),)
        assert [getattr(one, "name", "measured") for one in line.sources] == [
            "[CUDA memcpy HtoD]",
            "Pinned host → device: expected",
        ]
        assert line.expected.endswith(", never above the ceiling") == (verdict == "FAIL")


def test_a_lines_reference_is_a_source_of_its_cells_named_so():
    result = with_reference(watched(check_result()), h2d=62.0)
    line = lines(result, result.extra.reference)[1]
    assert line.verdict == "WARN"  # 55.5 GB/s: under 90% of 62
    assert [one.name for one in line.sources[1:]] == ["Pinned host → device: expected", "reference"]
    assert check._latest(result, result.extra.reference, "h2d") == "WARN"
    assert check._latest(result, None, "h2d") == "PASS"


def test_a_retrys_copies_exactly_at_the_bound_of_their_link_are_kept():
    gen6 = {"pcie_generation": 6, "pcie_max_generation": 6}

    def on_gen6() -> Result:
        result = check_result()
        result.device = msgspec.structs.replace(result.device, **gen6)
        result.gpu_states = [healthy(**gen6, pcie_gpu_max_generation=6)]
        return result

    for later, kept in ((0, True), (1, False)):
        at = exactly(on_gen6(), "h2d", ABOVE_BOUND * 121.0, later)
        (per_copy_ms,) = {tuple(m.throughput_ms) for m in at.measurements if m.operation == "h2d"}
        result = slower(on_gen6(), "h2d", 40.0)  # the first attempt: a FAIL
        again = CheckRetry("h2d", 1, [RetriedCopies("h2d", 17, list(per_copy_ms))])
        result = retried(result, again)
        if kept:
            assert loads(result).extra.retries == [again]
        else:
            refused(result, r"retries\[0\]\.copies\[0\]\.per_copy_ms makes .* nothing moves faster")
