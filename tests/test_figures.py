"""memprof.model.figures: a measurement's figures as its measure declares them, and the
loader's refusal of a figure above its physical bound, each rule on both sides of its edge."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.experiments import experiment_named, load
from memprof.experiments.base import declared_measures
from memprof.model.ceilings import Ceiling, hbm_ceiling, pcie_ceiling, peer_ceiling
from memprof.model.figures import (
    CACHE_BOUND,
    Derived,
    ceiling_of,
    check_bounds,
    direction_of,
    figure,
    figure_finder,
    hard_ceiling,
    host_side,
    ideal_overlapped_ms,
    steady_ms,
)
from memprof.model.formatting import format_ms
from memprof.model.lines import SourceLine
from memprof.model.measures import ABOVE_BOUND, Measure
from memprof.model.results import Measurement
from memprof.model.schema import SchemaError
from tests.conftest import FIXTURES, load_legacy, replace
from tests.test_ceilings import switch_links, with_staging
from tests.test_gpu_state import healthy

MIB = 1 << 20
COPY = Measure("gpu", "h2d", "a copy", "back to back", arrays=1, shows="throughput")
KERNEL = Measure("gpu", "kernel", "a read", "one operation", arrays=1, bound="hbm", traffic=2)


def measured(samples, throughput=(), nbytes=MIB, **fields) -> Measurement:
    return Measurement(
        "gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", nbytes, list(samples),
        throughput_ms=list(throughput), batch=10 if throughput else 0, **fields,
    )  # fmt: skip


@pytest.fixture(scope="module")
def device_run():
    return load(FIXTURES / "h200_device.json")


def test_gb_per_s_is_of_back_to_back_batches_where_measured_and_of_one_operation_else():
    result = SimpleNamespace(device=None, gpu_states=None)
    batched = figure(result, measured([2.0, 2.0, 2.0], [1.0, 1.0, 3.0]), None)
    assert batched.gb_per_s is None  # no measure: nothing declared moves
    found = figure(result, measured([2.0, 4.0, 3.0], [1.0, 1.0, 3.0]), COPY)
    assert (found.back_to_back, found.per_operation_ms) == (True, 1.0)
    assert found.gb_per_s == pytest.approx(MIB / 1e-3 / 1e9)
    single = figure(result, measured([2.0, 4.0, 3.0]), COPY)
    assert (single.back_to_back, single.per_operation_ms) == (False, 3.0)  # the median
    best = figure(result, measured([2.0, 4.0, 3.0]), replace(COPY, at="best"))
    assert best.per_operation_ms == 2.0  # STREAM's best


@pytest.mark.parametrize(
    ("measure", "nbytes", "samples"),
    [(replace(COPY, arrays=0), MIB, [1.0]), (COPY, 0, [1.0]), (COPY, MIB, [0.0]),
     (replace(COPY, traffic=0), MIB, [1.0])],
)  # fmt: skip
def test_what_moves_nothing_or_takes_no_time_has_no_gb_per_s(measure, nbytes, samples):
    result = SimpleNamespace(device=None, gpu_states=None)
    found = figure(result, measured(samples, nbytes=nbytes), measure)
    assert found.gb_per_s is None and found.share is None and found.moved_bytes is None


def test_a_share_needs_a_ceiling_above_zero():
    found = figure(SimpleNamespace(device=None, gpu_states=None), measured([1.0]), COPY)
    assert found.share is None  # no ceiling recorded
    assert replace(found, ceiling=Ceiling(2.0, "PCIe", "")).share == found.gb_per_s / 2.0
    assert replace(found, ceiling=Ceiling(0.0, "PCIe", "")).share is None


def test_each_operation_of_a_sample_of_several_divides_its_median():
    result = SimpleNamespace(device=None, gpu_states=None, parameters=SimpleNamespace(copies=8))
    samples = measured([8.0, 2.0, 4.0])
    assert figure(result, samples, COPY).per_operation_ms == 4.0
    assert figure(result, samples, replace(COPY, per_sample=4)).per_operation_ms == 1.0
    assert figure(result, samples, replace(COPY, per_sample="copies")).per_operation_ms == 0.5


def test_a_sample_of_several_operations_gives_each_ones_time_and_gb_per_s():
    """smallcopies' batch of 128 copies of 4 KiB: per copy, and the bytes of all 128 over the
    time of all 128 (not one copy's bytes over 128's time, 0.192 GB/s where they made 24.6)."""
    result = load(FIXTURES / "h200_smallcopies.json")
    batch = result.find("h2d", "batched", "span", 4096)
    wall = result.find("h2d_wall", "batched", "host", 4096)
    declared = {
        measure.key: measure for measure in declared_measures(experiment_named("smallcopies"))
    }
    copies = figure(result, batch, declared["span", "h2d"])
    waited = figure(result, wall, declared["host", "h2d_wall"])
    assert copies.per_operation_ms == pytest.approx(batch.stats.median_ms / 128)
    assert copies.gb_per_s == pytest.approx(128 * 4096 / batch.stats.median_ms / 1e6)
    assert round(copies.gb_per_s, 1) == 24.6
    assert format_ms(waited.per_operation_ms) == "2.6293us"  # as the table prints it


def test_a_staged_copys_figures_are_its_calls_never_cuptis_record_of_its_dma():
    """A pageable copy blocks its caller while the driver stages it; CUPTI records only the
    DMA after that. zerocopy's 4 MiB: the call 0.358 ms (11.7 GB/s), the DMA 0.275 ms."""
    result = load(FIXTURES / "h200_zerocopy_p20.json")
    declared = {measure.key: measure for measure in declared_measures(experiment_named("zerocopy"))}
    for kind in ("pageable", "device"):
        copy = next(m for m in result.measurements if (m.group, m.kind) == ("gpu", kind))
        found = figure(result, copy, declared["gpu", copy.operation])
        if kind == "pageable":
            call = result.find(copy.operation, kind, "api", copy.bytes)
            assert found.latency_ms == found.per_operation_ms == call.stats.median_ms
            assert round(found.gb_per_s, 1) == 11.7
        else:  # an unstaged copy: CUPTI's record is the copy
            assert found.latency_ms == found.median_ms == found.per_operation_ms
    sweep = load(FIXTURES / "h200_sweep.json")
    smallest = sweep.find("h2d", "pageable", "gpu", min(sweep_sizes(sweep)))
    found = figure(sweep, smallest, declared_measures(experiment_named("sweep"))[0])
    # no call recorded: back to back, timed as the calls return (6.68 us; the DMA 0.832)
    assert format_ms(found.latency_ms) == "6.6827us" and found.median_ms == 0.000832


def sweep_sizes(result) -> list[int]:
    return [m.bytes for m in result.measurements if m.group == "gpu"]


@pytest.mark.parametrize(
    ("operation", "name", "direction"),
    [("h2d_wall", "x", "h2d"), ("d2h", "x", "d2h"), ("copy", "[CUDA memcpy DtoH]", "d2h"),
     ("copy", "[CUDA memcpy HtoD]", "h2d")],
)  # fmt: skip
def test_a_host_copys_direction_is_its_operations_else_its_names(operation, name, direction):
    assert direction_of(replace(measured([1.0]), operation=operation, name=name)) == direction


def test_the_host_side_reads_its_back_to_back_time_where_it_has_one():
    result = load(FIXTURES / "h200_pinned_p20.json")
    side = host_side(result, 4 * MIB, "h2d")
    m = side.measurement
    assert side.staged and m.operation == "staging_h2d"
    stats = m.throughput_stats or m.stats
    assert side.gb_per_s == pytest.approx(4 * MIB / (stats.median_ms * 1e-3) / 1e9)
    assert host_side(result, 3 * MIB, "h2d") is None


def test_a_peer_copy_is_bounded_only_between_two_gpus(device_run):
    peer = replace(COPY, bound="nvlink")
    assert ceiling_of(device_run, replace(measured([1.0]), gpus=(0,)), peer) is None


def test_hbm_bounds_what_the_l2_cache_cannot_hold_and_the_cache_the_rest(device_run):
    l2 = device_run.device.l2_cache_bytes
    hbm = hbm_ceiling(device_run.device)
    at_edge = replace(measured([1.0]), bytes=l2)  # read and written: 2 x L2, not more
    assert hard_ceiling(device_run, at_edge, KERNEL).gb_per_s == CACHE_BOUND * hbm.gb_per_s
    beyond = replace(measured([1.0]), bytes=l2 + 1)
    assert hard_ceiling(device_run, beyond, KERNEL) == hbm
    assert hard_ceiling(device_run, beyond, replace(KERNEL, traffic=1)).limiter == "L2 cache"


def above_by(result, index: int, share: float):
    """The result with measurement `index` as fast as `share` of its hard ceiling."""
    m = result.measurements[index]
    measure = next(d for d in DEVICE_MEASURES() if d.key == (m.group, m.operation))
    limit = hard_ceiling(result, m, measure).gb_per_s
    found = figure(result, m, measure).gb_per_s
    factor = found / (share * limit)
    faster = replace(
        m,
        samples_ms=[t * factor for t in m.samples_ms],
        throughput_ms=[t * factor for t in m.throughput_ms],
    )
    measurements = list(result.measurements)
    measurements[index] = faster
    return replace(result, measurements=measurements)


def DEVICE_MEASURES():
    from memprof.experiments import experiment_class

    return declared_measures(experiment_class("device"))


def test_a_figure_up_to_its_noise_allowance_above_its_bound_loads_and_beyond_is_refused(
    device_run,
):
    index = next(
        i
        for i, m in enumerate(device_run.measurements)
        if m.group == "gpu" and m.name.startswith("stream_copy")
    )
    declared = DEVICE_MEASURES()
    check_bounds(above_by(device_run, index, ABOVE_BOUND * 0.999), declared)
    with pytest.raises(SchemaError, match=rf"measurements\[{index}\]\.") as refused:
        check_bounds(above_by(device_run, index, ABOVE_BOUND * 1.001), declared)
    assert "of its HBM ceiling" in str(refused.value)
    unbounded = [replace(measure, bound=None) for measure in declared]
    check_bounds(above_by(device_run, index, 3.0), unbounded)  # nothing declared: no bound


def test_an_even_count_of_samples_has_the_middle_two_for_its_median():
    result = SimpleNamespace(device=None, gpu_states=None)
    assert figure(result, measured([4.0, 1.0, 2.0, 8.0]), COPY).per_operation_ms == 3.0
    assert figure(result, measured([1.0, 3.0]), COPY).per_operation_ms == 2.0
    assert figure(result, measured([5.0]), COPY).per_operation_ms == 5.0


def test_the_bytes_a_gb_per_s_counts_are_its_bytes_times_its_traffic():
    result = SimpleNamespace(device=None, gpu_states=None)
    found = figure(result, measured([1.0], nbytes=3 * MIB), replace(COPY, traffic=2))
    assert found.moved_bytes == 6 * MIB
    assert found.gb_per_s == pytest.approx(6 * MIB / 1e-3 / 1e9)


def test_a_pipelines_gb_per_s_is_all_its_bytes_over_all_its_time():
    result = SimpleNamespace(device=None, gpu_states=None)
    parts = tuple(figure(result, measured([t], nbytes=MIB), COPY) for t in (1.0, 3.0))
    chunks = Derived("copies", parts, "chunks")
    assert (chunks.median_ms, chunks.moved_bytes) == (4.0, 2 * MIB)
    # not the mean of its chunks' GB/s (1 MiB in 1 ms and in 3 ms)
    assert chunks.gb_per_s == pytest.approx(2 * MIB / 4e-3 / 1e9)
    assert Derived("per chunk", parts, "mean").median_ms == 2.0
    assert Derived("none", (), "chunks").gb_per_s is None
    nothing = figure(result, measured([1.0]), replace(COPY, arrays=0))
    assert Derived("copy and launch", (parts[0], nothing), "chunks").gb_per_s is None
    # a sum of work on the same bytes (smallcopies' gathering and its copy) has no GB/s
    assert Derived("gathered and copied", parts).gb_per_s is None


def test_a_pipelines_ceiling_is_the_one_its_chunks_share_and_none_of_several():
    result = SimpleNamespace(device=None, gpu_states=None)
    link, staging = Ceiling(60.0, "PCIe", "the link"), Ceiling(30.0, "staging", "a memcpy")
    parts = [replace(figure(result, measured([t]), COPY), ceiling=link) for t in (1.0, 3.0)]
    assert Derived("copies", tuple(parts), "chunks").ceiling == link
    assert Derived("sum", tuple(parts)).ceiling is None  # no GB/s, so nothing bounds it
    mixed = (parts[0], replace(parts[1], ceiling=staging))
    assert Derived("copies", mixed, "chunks").ceiling is None


def test_the_refusal_names_the_times_the_figure_came_from(device_run):
    index, m = next(
        (i, m)
        for i, m in enumerate(device_run.measurements)
        if m.group == "gpu" and m.name.startswith("stream_copy")
    )
    field = "throughput_ms" if m.throughput_ms else "samples_ms"
    with pytest.raises(SchemaError) as refused:
        check_bounds(above_by(device_run, index, 2.0), DEVICE_MEASURES())
    assert str(refused.value).startswith(f"measurements[{index}].{field} makes ")
    alone = replace(m, throughput_ms=[], batch=0)
    measurements = list(device_run.measurements)
    measurements[index] = alone
    single = replace(device_run, measurements=measurements)
    with pytest.raises(SchemaError) as refused:
        check_bounds(above_by(single, index, 2.0), DEVICE_MEASURES())
    assert str(refused.value).startswith(f"measurements[{index}].samples_ms makes ")


def test_the_host_side_is_of_its_back_to_back_batches_where_it_has_them():
    result = load(FIXTURES / "h200_pinned_p20.json")
    index, m = next(
        (i, m) for i, m in enumerate(result.measurements) if m.operation == "staging_h2d"
    )
    batched = replace(m, throughput_ms=[0.5, 0.5, 0.5], batch=3, samples_ms=[2.0, 2.0, 2.0])
    measurements = list(result.measurements)
    measurements[index] = batched
    side = host_side(replace(result, measurements=measurements), m.bytes, "h2d")
    assert side.gb_per_s == pytest.approx(m.bytes / 0.5e-3 / 1e9)


# -- the edges a mutation run (issue 37) found no test on ------------------------------------


def test_an_undeclared_measurement_is_one_operation_per_sample():
    result = SimpleNamespace(device=None, gpu_states=None)
    found = figure(result, measured([2.0, 4.0, 3.0]), None)
    assert (found.per_operation_ms, found.gb_per_s, found.ceiling) == (3.0, None, None)


def test_one_byte_is_a_copy_with_a_gb_per_s_and_none_has_no_ceiling(device_run):
    one = figure(SimpleNamespace(device=None, gpu_states=None), measured([1.0], nbytes=1), COPY)
    assert one.gb_per_s == pytest.approx(1 / 1e-3 / 1e9)
    assert figure(device_run, measured([1.0]), KERNEL).ceiling == hbm_ceiling(device_run.device)
    assert figure(device_run, measured([1.0], nbytes=0), KERNEL).ceiling is None  # no GB/s


def test_a_staged_copy_without_its_call_or_batches_keeps_cuptis_time():
    """No call and no back-to-back batches recorded: nothing but the DMA's record to read."""
    result = SimpleNamespace(device=None, gpu_states=None, _by_operation=dict)
    alone = replace(measured([2.0, 4.0, 3.0]), kind="pageable", source="cupti")
    found = figure(result, alone, replace(COPY, at="best", call="h2d"))
    assert (found.call_ms, found.latency_ms, found.per_operation_ms) == (None, 3.0, 2.0)
    batched = replace(measured([2.0, 4.0, 3.0], [1.0]), kind="pageable", source="cupti")
    assert figure(result, batched, replace(COPY, call="h2d")).latency_ms == 1.0


def test_a_steady_figure_leaves_out_the_first_sample_only():
    result = SimpleNamespace(device=None, gpu_states=None)
    cold_first = figure(result, measured([100.0, 1.0, 2.0, 3.0]), COPY)
    assert Derived("loop", (cold_first,), "steady").median_ms == 2.0  # not 2.5, with it
    assert steady_ms([100.0, 1.0]) == 1.0
    assert steady_ms([5.0]) == 5.0


def test_an_ideal_overlap_is_the_longest_stage_and_one_chunk_of_each_other():
    # the longest stage by its total (10), not by its chunk (3)
    assert ideal_overlapped_ms([(10.0, 1.0), (4.0, 2.0), (6.0, 3.0)]) == 15.0


def test_a_lines_host_time_is_none_where_no_line_recorded_one():
    lines = (
        SourceLine("cudaMalloc", "a.py", 3, "f", "user", 1, ["cudaMalloc"]),
        SourceLine("cudaFree", "a.py", 4, "f", "user", 2, ["cudaFree"]),
    )
    total = Derived("other lines", lines, "lines")
    assert (total.line_total("calls"), total.line_total("host_ms")) == (3, None)
    timed = (replace(lines[0], host_ms_each=[0.25]), lines[1])
    assert Derived("other lines", timed, "lines").line_total("host_ms") == 0.25


def test_a_finder_makes_each_measurements_figure_once_and_its_own():
    result = SimpleNamespace(device=None, gpu_states=None)
    first, second = measured([1.0]), measured([2.0])
    of = figure_finder(result, [COPY])
    assert of(first) is of(first) and of(second) is of(second)
    assert (of(first).median_ms, of(second).median_ms) == (1.0, 2.0)


def test_nothing_declared_has_no_ceiling(device_run):
    assert ceiling_of(device_run, measured([1.0]), None) is None
    assert hard_ceiling(device_run, measured([1.0]), None) is None


def test_a_pageable_copy_is_bounded_by_the_link_where_its_host_side_is_faster():
    result = with_staging(load_legacy("pinned_p20"), 4 * MIB, 1000.0, 1000.0)
    pageable = replace(measured([1.0], nbytes=4 * MIB), kind="pageable")
    link = replace(COPY, bound="link")
    assert ceiling_of(result, pageable, link) == pcie_ceiling(result)
    slow = with_staging(load_legacy("pinned_p20"), 4 * MIB, 5.0, 5.0)
    assert ceiling_of(slow, pageable, link).limiter == "staging"


def test_a_copys_hard_ceiling_is_its_own_gpus_link():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(0), healthy(1, pcie_generation=4)]
    link = replace(COPY, bound="link")
    on_second = hard_ceiling(result, replace(measured([1.0]), gpus=(1,)), link)
    assert on_second == pcie_ceiling(result, 1) != pcie_ceiling(result, 0)


def test_a_peer_copys_hard_ceiling_is_its_nvlink():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(0, nvlinks=switch_links(18)), healthy(1, nvlinks=switch_links(18))]
    pair = replace(measured([1.0]), gpus=(0, 1))
    assert hard_ceiling(result, pair, replace(COPY, bound="nvlink")) == peer_ceiling(result, 0, 1)
    assert hard_ceiling(result, pair, replace(COPY, bound="nvlink")) is not None


def test_no_device_facts_no_hbm_bound():
    result = SimpleNamespace(device=None, gpu_states=None)
    assert hard_ceiling(result, measured([1.0]), KERNEL) is None


def test_the_cache_edge_counts_the_traffic_of_the_measurements_kind(device_run):
    l2 = device_run.device.l2_cache_bytes
    by_kind = replace(KERNEL, traffic={"pinned": 2})  # measured() records pinned
    beyond = replace(measured([1.0]), bytes=l2 + 1)
    assert hard_ceiling(device_run, beyond, by_kind) == hbm_ceiling(device_run.device)


BOUNDED = replace(COPY, bound="hbm")  # what check_bounds holds to a ceiling


def bounded_run(*measurements: Measurement) -> SimpleNamespace:
    return SimpleNamespace(device=None, gpu_states=None, measurements=list(measurements))


def limited_to(monkeypatch, gb_per_s: float) -> None:
    """Every hard ceiling at `gb_per_s` (check_bounds' rule, apart from how ceilings are made)."""
    from memprof.model import figures as module

    limit = Ceiling(gb_per_s, "PCIe", "a link")
    monkeypatch.setattr(module, "hard_ceiling", lambda result, m, measure: limit)


def test_a_figure_exactly_at_its_noise_allowance_loads(monkeypatch):
    # 2.1 GB/s (2.1e9 bytes in 1 s) against 2.0: exactly ABOVE_BOUND
    exactly = measured([1000.0], nbytes=2_100_000_000)
    assert figure(bounded_run(), exactly, BOUNDED).gb_per_s / 2.0 == ABOVE_BOUND
    limited_to(monkeypatch, 2.0)
    check_bounds(bounded_run(exactly), [BOUNDED])
    limited_to(monkeypatch, 1.999)
    with pytest.raises(SchemaError):
        check_bounds(bounded_run(exactly), [BOUNDED])


def test_a_ceiling_below_one_gb_per_s_still_bounds_and_one_of_zero_none(monkeypatch):
    limited_to(monkeypatch, 0.5)
    with pytest.raises(SchemaError, match=r"ceiling of 0\.5 GB/s"):
        check_bounds(bounded_run(measured([1.0], nbytes=MIB)), [BOUNDED])
    limited_to(monkeypatch, 0.0)
    check_bounds(bounded_run(measured([1.0], nbytes=MIB)), [BOUNDED])  # no ZeroDivisionError


def test_a_figure_without_gb_per_s_does_not_end_the_bounds_check(monkeypatch):
    limited_to(monkeypatch, 1.0)
    untimed = measured([0.0])  # no time: no GB/s
    with pytest.raises(SchemaError, match=r"^measurements\[1\]\.samples_ms makes "):
        check_bounds(bounded_run(untimed, measured([0.1])), [BOUNDED])


def test_a_refusal_of_back_to_back_copies_names_their_batches(monkeypatch):
    limited_to(monkeypatch, 1.0)
    with pytest.raises(SchemaError, match=r"^measurements\[0\]\.throughput_ms makes "):
        check_bounds(bounded_run(measured([1.0], [0.1])), [BOUNDED])


def test_a_host_copys_operation_decides_over_its_name():
    confusing = replace(measured([1.0]), operation="h2d_wall", name="[CUDA memcpy DtoH]")
    assert direction_of(confusing) == "h2d"


def test_only_chunks_count_bytes_and_a_total_or_floor_lacking_a_part_has_no_gb_per_s():
    """Bytes are counted for "chunks" alone (a mean or a total of copies moves no bytes of
    its own); a "total" with a part of no GB/s, or a "floor" without its share or its part's
    ceiling, has none."""
    result = SimpleNamespace(device=None, gpu_states=None)
    link = Ceiling(60.0, "PCIe", "the link")
    parts = tuple(
        replace(figure(result, measured([t], nbytes=MIB), COPY), ceiling=link) for t in (1.0, 2.0)
    )
    for formula in ("sum", "mean", "total", "floor", "reference"):
        assert Derived("copies", parts, formula).moved_bytes is None, formula
    assert Derived("copies", parts, "total").gb_per_s == pytest.approx(
        MIB / 1e-3 / 1e9 + MIB / 2e-3 / 1e9
    )
    nothing = figure(result, measured([1.0]), replace(COPY, arrays=0))
    assert Derived("copy and launch", (parts[0], nothing), "total").gb_per_s is None
    assert Derived("floor", parts[:1], "floor", share=0.5).gb_per_s == 30.0
    assert Derived("floor", parts[:1], "floor").gb_per_s is None
    unbounded = (replace(parts[0], ceiling=None),)
    assert Derived("floor", unbounded, "floor", share=0.5).gb_per_s is None
