"""memprof.model.figures: a measurement's figures as its measure declares them, and the
loader's refusal of a figure above its physical bound, each rule on both sides of its edge."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.experiments import experiment_named, load
from memprof.experiments.base import declared_measures
from memprof.model.ceilings import Ceiling, hbm_ceiling
from memprof.model.figures import (
    CACHE_BOUND,
    Derived,
    ceiling_of,
    check_bounds,
    direction_of,
    figure,
    hard_ceiling,
    host_side,
)
from memprof.model.formatting import format_ms
from memprof.model.measures import ABOVE_BOUND, Measure
from memprof.model.results import Measurement
from memprof.model.schema import SchemaError
from tests.conftest import FIXTURES, replace

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
