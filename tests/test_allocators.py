"""Stream-ordered pools, virtual memory management and the allocate-use-free loop (alloc).

Three kinds of test, none of them of a figure:
- the GPU-side procedures run on tests/fakegpu.py, a driver double that moves real bytes and
  keeps the driver's rules: everything allocated must be freed, and the data checks check;
- the summary's logic on Results built here from SYNTHETIC samples: they were not recorded on
  any GPU, they are shaped to put a crossover where each test wants it;
- one-line errors for what is missing: cuda-bindings, a capability, a driver call.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from memprof.core import bindings, memory, verify
from memprof.core.activity import ApiRecord
from memprof.core.measure import same_call
from memprof.errors import (
    EnvironmentProblem,
    ExitCode,
    InvalidArgument,
    MemprofError,
    OutOfMemory,
    install_command,
)
from memprof.experiments import alloc, compare, experiment_named, pools, shape_of, summarize
from memprof.experiments.alloc import Alloc, AllocExtra, AllocParams
from memprof.experiments.base import RunContext, declared_keys, declared_measures
from memprof.experiments.common import stops_at
from memprof.model.figures import steady_ms
from memprof.model.formatting import format_ms
from memprof.model.results import Measurement, Result
from memprof.output.profile import profile_rows
from tests.conftest import load_fixture, load_legacy, load_older, printed_rows, render_text
from tests.fakegpu import CUresult, FakeBindings, FakeSession

EVERYTHING = {
    "canMapHostMemory": 1,
    "unifiedAddressing": 1,
    "managedMemory": 0,  # managed and registered memory need the real driver: left out
    "hostRegisterSupported": 0,
    "memoryPoolsSupported": 1,
    "virtualMemoryManagementSupported": 1,
}
MiB = 1 << 20


@pytest.fixture
def fake_gpu(monkeypatch):
    """make(attributes, experiment, **bindings options) -> a FakeSession with fake cuda-bindings."""

    def make(attributes=EVERYTHING, experiment=Alloc, **options):
        session = FakeSession(attributes, declared_keys(experiment))
        fake = FakeBindings(session.gpu, **options)
        monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
        return session

    bindings._allocation_properties.cache_clear()
    bindings._access.cache_clear()
    yield make
    bindings._allocation_properties.cache_clear()
    bindings._access.cache_clear()


def run_on(session, experiment, params, attributes=EVERYTHING) -> Result:
    """Run an experiment on a fake session and close it, as memprof.experiments.base.run does."""
    ctx = RunContext(params, session=session, facts={0: SimpleNamespace(attributes=attributes)})
    try:
        extra = experiment.run(ctx)
        measurements = session.profiler.measurements()
    finally:
        session.close()
    gpu = load_older("alloc").device  # every run records its GPU's facts
    return Result(experiment.name, params, gpu, measurements, ctx.checks, extra)


def recorded(result: Result) -> dict[tuple[str, str], set[tuple[str, int]]]:
    found: dict[tuple[str, str], set[tuple[str, int]]] = {}
    for m in result.measurements:
        found.setdefault((m.group, m.operation), set()).add((m.kind, m.bytes))
    return found


# -- the GPU side, on the fake GPU -----------------------------------------------------------


def test_alloc_measures_every_allocator_at_every_size_and_frees_all_it_allocated(fake_gpu):
    session = fake_gpu()
    params = AllocParams(powers=(19, 22), repeat=2, warmup=1)  # 2 MiB and 16 MiB
    result = run_on(session, Alloc(), params)
    assert session.gpu.leaks() == {}  # every allocation, reservation, mapping and pool
    assert result.passed, [c for c in result.checks if not c.passed]
    assert [c.name for c in result.checks] == [
        "memset of stream-ordered (cuMemAllocAsync)",
        "memset of pool keeping memory (threshold)",
        "memset of virtual memory (cuMemMap)",
        "grown to twice the size, cuMemAlloc, copy, cuMemFree",
        "grown to twice the size, in place (VMM)",
    ]
    sizes = {2 * MiB, 16 * MiB}
    found = recorded(result)

    def kinds(group: str, operation: str) -> set[str]:
        entries = found[group, operation]
        assert {nbytes for _, nbytes in entries} == sizes, (group, operation)
        return {kind for kind, _ in entries}

    calls = ("alloc_new", "free_call")
    assert all(kinds("api", op) == {"device", "pool", "pool_kept"} for op in calls)
    for operation in ("alloc_reused", "alloc_after_sync", "sync_after_free"):
        assert kinds("api", operation) == {"pool", "pool_kept"}
    assert kinds("api", "trim") == {"pool_kept"}  # the default pool gave it back already
    assert kinds("gpu", "stream_alloc") == kinds("gpu", "stream_free") == {"pool", "pool_kept"}
    assert kinds("gpu", "first_use") == {"device", "pool", "pool_kept", "vmm"}
    assert kinds("gpu", "use_again") == {"device"}
    for operation in ("reserve", "create", "map", "set_access", "unmap", "release_memory"):
        assert kinds("api", operation) == {"vmm"}
    assert kinds("api", "grow_in_place") == {"vmm"}
    assert kinds("api", "grow_by_copy") == {"device"}
    assert kinds("host", "loop") == {"device", "pool", "pool_kept", "vmm"}
    assert kinds("api", "call_floor") == {"pool", "pool_kept", "vmm"}  # each cycle's floor
    for m in result.measurements:
        if m.operation == "loop":
            assert len(m.samples_ms) == pools.LOOP_ITERATIONS  # every iteration, in order
        elif m.group == "api" and m.operation in ("alloc_new", "map", "call_floor"):
            assert len(m.samples_ms) == params.repeat  # warm-ups never counted
    record = result.extra.allocators
    assert record.granularity_bytes == 2 * MiB and record.default_pool_threshold_bytes == 0
    assert record.loop_kinds == ["device", "pool", "pool_kept", "vmm"]


def test_every_phase_of_alloc_shows_progress_up_to_its_total(fake_gpu):
    seen = []
    params = AllocParams(powers=(18, 19), repeat=1, warmup=0)
    ctx = RunContext(
        params,
        progress=lambda description, done, total: seen.append((description, done, total)),
        session=fake_gpu(),
        facts={0: SimpleNamespace(attributes=EVERYTHING)},
    )
    try:
        Alloc().run(ctx)
    finally:
        ctx.session.close()
    total = seen[0][2]
    assert all(step_total == total for _, _, step_total in seen)
    assert [done for _, done, _ in seen] == list(range(total + 1))  # one step each, in order
    descriptions = [description for description, _, _ in seen]
    assert descriptions[-1] == "done"
    assert "allocate-use-free loop, 2 MiB" in descriptions
    assert descriptions[-2] == "checking what a memset wrote, vmm 2 MiB"


def test_a_run_saved_and_loaded_renders_every_allocator_table(fake_gpu, tmp_path):
    result = run_on(fake_gpu(), Alloc(), AllocParams(powers=(19, 22), repeat=2, warmup=1))
    path = tmp_path / "alloc.json"
    path.write_text(result.to_json())
    loaded = Result.load(path, shape_of)
    assert loaded.extra == result.extra
    titles = [table.title for table in summarize(loaded).tables]
    assert titles[:6] == [
        f"{what} time, {group}" for what in ("Allocate", "Free") for group, _ in alloc.KIND_GROUPS
    ]
    assert titles[6:] == [
        "Stream-ordered allocation, median of 2",
        "Stream-ordered free, median of 2",
        "Virtual memory management, median of 2",
        "Growing a buffer to twice its size, median of 2",
        "First use, median of 2",
        "Allocate, use, free, sync, 50 times: per iteration",
    ]
    for width in (60, 80, 120):
        text = render_text(loaded, width)
        assert "pool keeping freed memory" in text and "16 MiB" in text
        names = {row.name for row in profile_rows(loaded.measurements)}  # printed whole
        wide = [
            line for line in text.splitlines() if len(line) > width and line.strip() not in names
        ]
        assert not wide, wide


def test_a_copy_that_loses_half_the_data_fails_the_growth_check(fake_gpu, monkeypatch):
    session = fake_gpu()
    real_copy = session.cuda.memcpy_dtod_async
    monkeypatch.setattr(
        session.cuda,
        "memcpy_dtod_async",
        lambda destination, source, nbytes, stream: real_copy(
            destination, source, nbytes // 2, stream
        ),
    )
    result = run_on(session, Alloc(), AllocParams(powers=(19,), repeat=1, warmup=0))
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["grown to twice the size, cuMemAlloc, copy, cuMemFree"]
    assert failed[0].detail.startswith("2 MiB: Arrays do not match!")
    assert session.gpu.leaks() == {}


def test_a_gpu_without_pools_or_virtual_memory_skips_each_in_one_line(fake_gpu):
    attributes = dict(EVERYTHING, memoryPoolsSupported=0, virtualMemoryManagementSupported=0)
    result = run_on(
        fake_gpu(attributes), Alloc(), AllocParams(powers=(18,), repeat=1, warmup=0), attributes
    )
    assert result.extra.allocators is None
    assert result.extra.skipped[-3:] == [
        "pool memory needs memoryPoolsSupported (MEMORY_POOLS_SUPPORTED), which is 0 here",
        "pool_kept memory needs memoryPoolsSupported (MEMORY_POOLS_SUPPORTED), which is 0 here",
        "vmm memory needs virtualMemoryManagementSupported "
        "(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), which is 0 here",
    ]
    titles = [table.title for table in summarize(result).tables]
    assert all(title.startswith(("Allocate time", "Free time")) for title in titles)
    assert "device memory" in titles[-1]  # cuMemAlloc alone: no pool or VMM tables


def test_virtual_memory_without_pools_still_gets_its_tables(fake_gpu):
    attributes = dict(EVERYTHING, memoryPoolsSupported=0)
    session = fake_gpu(attributes)
    result = run_on(session, Alloc(), AllocParams(powers=(19,), repeat=1, warmup=0), attributes)
    record = result.extra.allocators
    assert record.pools == [] and record.vmm and record.loop_kinds == ["device", "vmm"]
    titles = [table.title for table in summarize(result).tables]
    assert "Virtual memory management, median of 1" in titles
    assert not any(title.startswith("Stream-ordered") for title in titles)
    assert session.gpu.leaks() == {}


def test_without_cuda_bindings_a_run_stops_saying_how_to_install_it(monkeypatch):
    """The capability flags every run records (memprof.core.devicefacts) include three that
    only cuda-bindings reads: a run without it stops there, in one line."""
    why = f"cuda-bindings is not installed ({install_command(bindings.BINDINGS)})"
    monkeypatch.setattr(bindings, "_import", lambda: (None, why))
    with pytest.raises(EnvironmentProblem, match="cuda-bindings is not installed"):
        bindings.device_attribute("MEMORY_POOLS_SUPPORTED", 0)
    with pytest.raises(EnvironmentProblem) as raised:
        bindings.driver()
    assert raised.value.exit_code == ExitCode.ENVIRONMENT
    assert str(raised.value) == bindings.install_hint()


def test_a_failed_driver_call_is_one_line_naming_the_call_and_the_error(fake_gpu):
    fake_gpu()
    with pytest.raises(
        OutOfMemory, match=r"^cuMemCreate failed: out of memory \(CUDA_ERROR_OUT_OF_MEMORY\)$"
    ):
        bindings.unpack("cuMemCreate", (CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))
    with pytest.raises(EnvironmentProblem, match="does not support it"):
        bindings.unpack("cuMemPoolCreate", (CUresult.CUDA_ERROR_NOT_SUPPORTED, None))
    with pytest.raises(MemprofError) as raised:
        bindings.unpack("cuMemMap", (CUresult.CUDA_ERROR_INVALID_VALUE,))
    assert str(raised.value) == "cuMemMap failed: CUDA_ERROR_INVALID_VALUE"
    assert raised.value.exit_code == ExitCode.CHECK_FAILED
    assert bindings.unpack("cuMemFreeAsync", (CUresult.CUDA_SUCCESS,)) is None
    assert bindings.unpack("cuMemCreate", (CUresult.CUDA_SUCCESS, 7)) == 7
    assert bindings.unpack("cuMemcpyBatchAsync", (CUresult.CUDA_SUCCESS, 0, 1)) == (0, 1)


def test_a_call_the_driver_lacks_says_which_cuda_the_driver_supports(fake_gpu, monkeypatch):
    fake_gpu(driver_version=12060)

    def missing(*arguments):
        raise RuntimeError('Function "cuMemcpyBatchAsync" not found')

    monkeypatch.setattr(FakeBindings, "cuMemcpyBatchAsync", missing)
    with pytest.raises(
        EnvironmentProblem, match=r"not in this CUDA driver \(it supports CUDA 12\.6\)"
    ):
        bindings.call("cuMemcpyBatchAsync")


def test_an_out_of_memory_mapping_frees_its_addresses_and_says_what_was_free(fake_gpu, monkeypatch):
    session = fake_gpu()
    monkeypatch.setattr(
        FakeBindings, "cuMemCreate", lambda *a: (CUresult.CUDA_ERROR_OUT_OF_MEMORY, None)
    )
    with pytest.raises(OutOfMemory) as raised:
        memory.allocate(session, "vmm", 1 << 20)
    assert "(vmm) failed: out of memory (64 GiB of 80 GiB device memory free)" in str(raised.value)
    assert raised.value.exit_code == ExitCode.OUT_OF_MEMORY
    session.close()
    assert session.gpu.leaks() == {}  # the reservation went back


def test_a_mapping_the_driver_refuses_is_undone_step_by_step(fake_gpu, monkeypatch):
    session = fake_gpu()
    monkeypatch.setattr(FakeBindings, "cuMemMap", lambda *a: (CUresult.CUDA_ERROR_INVALID_VALUE,))
    with pytest.raises(MemprofError, match=r"^cuMemMap failed: CUDA_ERROR_INVALID_VALUE$"):
        memory.allocate(session, "vmm", 1 << 20)
    session.close()
    assert session.gpu.leaks() == {}  # memory released, addresses freed, nothing unmapped


def test_each_pool_kind_allocates_from_its_own_pool(fake_gpu):
    session = fake_gpu()
    default = memory.allocate(session, "pool", 1024, "uint8")
    kept = memory.allocate(session, "pool_kept", 1024, "uint8")
    pools_used = session.gpu.pool_allocations
    assert pools_used[default.device_pointer].default
    assert not pools_used[kept.device_pointer].default
    assert pools_used[kept.device_pointer].threshold == bindings.KEEP_EVERYTHING
    default.free(), kept.free()
    session.close()
    assert session.gpu.leaks() == {}  # the kept pool destroyed with the session


def test_emptying_the_pools_trims_each_kinds_own_pool_to_nothing(fake_gpu, monkeypatch):
    """A pool's "new" allocation is from an empty pool: the default pool and memprof's own
    kept pool are each trimmed to nothing, not one of them twice."""
    session = fake_gpu()
    fake, _ = bindings._import()
    trimmed = []

    def trim(pool, keep):
        trimmed.append((pool, keep))
        return (CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(fake, "cuMemPoolTrimTo", trim)
    allocators = pools.Allocators(session, ["pool", "pool_kept"])
    allocators.empty_pools()
    kept = memory.MEMORY_KINDS["pool_kept"].pool(session)
    assert kept is not None and kept is not allocators.default_pool
    assert trimmed == [(allocators.default_pool, 0), (kept, 0)]
    session.close()


# -- CUPTI's record of a driver call ---------------------------------------------------------


class FakeActivity:
    """The part of memprof.core.activity.ActivityLog the profiler uses."""

    def __init__(self) -> None:
        self.tags, self.stack, self.api = 0, [], {}

    def new_tag(self) -> int:
        self.tags += 1
        return self.tags

    def push(self, tag: int) -> None:
        self.stack.append(tag)

    def pop(self) -> None:
        self.stack.pop()

    def flush(self) -> None:
        pass

    def gpu_records(self) -> dict:
        return {}

    def api_records(self) -> dict:
        return self.api

    def record(self, *names_and_ms) -> None:
        """The driver calls CUPTI saw under the current tag."""
        self.api.setdefault(self.stack[0], []).extend(ApiRecord(n, ms) for n, ms in names_and_ms)


def test_a_driver_call_is_cuptis_record_of_that_call_alone(fake_gpu):
    session = fake_gpu()
    profiler = session.profiler
    profiler.activity = activity = FakeActivity()
    profiler.declared = None
    with profiler.timed():
        with profiler.driver_call("cuMemAllocAsync", "alloc_new", "pool", 4096):
            activity.record(("cuMemAllocAsync", 0.004), ("cuCtxGetCurrent", 1.0))
        with (
            profiler.events("gpu", "memset", "first_use", "pool", 4096),
            profiler.driver_call("cuMemFreeAsync", "free_call", "pool", 4096),
        ):  # nested: the outer operation's tag holds the call
            activity.record(("cuMemFreeAsync_ptsz", 0.002))
        with profiler.driver_call("cuMemPoolTrimTo", "trim", "pool_kept", 4096):
            pass  # CUPTI saw no such call: the host clock stands in
    found = {m.operation: m for m in profiler.measurements() if m.group == "api"}
    assert (found["alloc_new"].samples_ms, found["alloc_new"].source) == ([0.004], "cupti")
    assert (found["free_call"].samples_ms, found["free_call"].source) == ([0.002], "cupti")
    assert found["trim"].source == "host" and found["trim"].samples_ms[0] < 100
    session.close()


def test_cuptis_names_of_a_call_are_matched_to_the_call_made():
    assert same_call("cuMemAlloc_v2", "cuMemAlloc")
    assert same_call("cuMemcpyBatchAsync_v2_ptsz", "cuMemcpyBatchAsync")
    assert same_call("cuStreamSynchronize", "cuStreamSynchronize")
    assert not same_call("cuMemAllocFromPoolAsync", "cuMemAlloc")
    assert not same_call("cuMemAllocAsync", "cuMemAlloc")


def test_the_api_rows_are_cuptis_driver_calls_alone_where_cupti_recorded_them():
    call = Measurement("api", "cuMemAllocAsync", "alloc_new", "pool", 4096, [0.004], "cupti")
    record = Measurement("api", "cuMemAllocAsync", "driver_call", None, 0, [0.004], "cupti")
    rows = profile_rows([call, record])
    assert [row.name for row in rows] == ["cuMemAllocAsync"]  # one row, not counted twice
    rows = profile_rows([Measurement("api", "cuMemAlloc", "alloc", "device", 8, [0.05], "host")])
    assert [row.name for row in rows] == ["cuMemAlloc (device)"]  # no CUPTI: the host clock


# -- the summary's logic, on SYNTHETIC samples ------------------------------------------------


def test_stops_at_is_the_start_of_the_last_run_of_sizes_where_it_no_longer_held():
    assert stops_at({1: True, 2: True, 4: False, 8: False}) == 4
    assert stops_at({1: True, 2: False, 4: True, 8: False}) == 8  # where it stops for good
    assert stops_at({1: True, 2: False, 4: True}) is None  # it still held at the largest
    assert stops_at({1: False, 2: False}) == 1


def test_a_pool_pays_from_the_iteration_where_its_total_falls_below_cuMemAllocs():
    assert pools.pays_from([10.0, 1, 1, 1, 1], [3.0] * 5) == 5  # 14 < 15
    assert pools.pays_from([10.0, 1, 1, 1], [3.0] * 4) is None  # 13 > 12: not yet
    assert pools.pays_from([1.0], [2.0]) == 1
    assert steady_ms([50.0, 1, 2, 3]) == 2  # the cold first iteration left out
    assert steady_ms([4.0]) == 4


def synthetic_loop_result(
    per_iteration_us: dict[str, list[float]], cold_us: float = 500.0
) -> Result:
    """An alloc Result holding only loop samples, SYNTHETIC: at each of 256 KiB, 1 MiB, 4 MiB
    and 16 MiB, 50 iterations of the given time (microseconds), a pool's first one cold."""
    powers = (16, 18, 20, 22)
    measurements = []
    for kind, values in per_iteration_us.items():
        for power, value in zip(powers, values, strict=True):
            first = cold_us if kind.startswith("pool") else value
            samples = [first / 1000] + [value / 1000] * 49
            measurements.append(
                Measurement("host", "loop", "loop", kind, 4 << power, samples, "host")
            )
    record = pools.AllocatorsRecord(
        pools=[k for k in per_iteration_us if k.startswith("pool")],
        vmm=False,
        granularity_bytes=None,
        default_pool_threshold_bytes=0,
        loop_kinds=list(per_iteration_us),
        loop_iterations=50,
    )
    extra = AllocExtra(kinds=[], skipped=[], allocators=record)
    return Result("alloc", AllocParams(powers=powers), None, measurements, [], extra)


def test_the_loop_says_at_which_size_a_pool_stops_helping():
    result = synthetic_loop_result({"device": [50, 55, 60, 280], "pool": [5, 5, 59, 300]})
    verdict = pools.loop_verdict(result, "pool")
    assert verdict == (
        "In the loop the default pool (cuMemAllocAsync) helped up to 1 MiB (5.0000us against "
        "55.000us per iteration at 1 MiB) and stopped helping at 4 MiB (59.000us against "
        "60.000us per iteration at 4 MiB); its total fell below cuMemAlloc's from iteration 10."
    )


def test_the_loop_says_when_a_pool_helped_everywhere_or_nowhere():
    result = synthetic_loop_result(
        {"device": [50, 55, 60, 280], "pool": [60, 60, 60, 300], "pool_kept": [5, 5, 5, 5]}
    )
    kept = pools.loop_verdict(result, "pool_kept")
    assert kept.startswith(
        "In the loop the pool keeping freed memory (cuMemAllocFromPoolAsync) beat "
        "cuMemAlloc/cuMemFree at every size (5.0000us against 280.00us per iteration at 16 MiB)"
    )
    default = pools.loop_verdict(result, "pool")
    assert default.startswith("In the loop the default pool (cuMemAllocAsync) never beat")


def test_compare_shows_an_allocators_row_where_a_run_measured_it():
    result = load_legacy("compare")  # recorded before the allocators
    nbytes = 4 << result.parameters.power
    result.measurements += [  # SYNTHETIC: a pool's allocation and kernel read
        Measurement("api", "cuMemAllocAsync", "alloc", "pool", nbytes, [0.002], "host"),
        Measurement("gpu", "readSum", "kernel_read", "pool", nbytes, [0.02], "cupti"),
    ]
    table = compare.summarize(result).tables[0]
    labels = [row[0] for row in table.rows]
    assert memory.label("pool") in labels and memory.label("pool_kept") not in labels
    row = table.rows[labels.index(memory.label("pool"))]
    assert row[1] == "2.0000us" and row[4] == "3355"  # 64 MiB in 20 us


def test_every_allocator_measure_is_declared_optional_and_loads_back():
    declared = declared_measures(experiment_named("alloc"))
    for measure in pools.MEASURES:
        assert measure in declared and not measure.required
    fixture = json.loads(load_legacy("alloc").to_json())
    assert fixture["extra"]["allocators"] is None  # recorded before the allocators existed


# -- the floor of how a driver call is timed, on the H200's recorded run ------------------------


def with_floor(result: Result, floor_ms: float, source: str = "cupti") -> Result:
    """The recorded run with a SYNTHETIC floor (cuCtxGetDevice, as each cycle now times it) of
    floor_ms at every size, the recording being older than the floor."""
    for nbytes in {m.bytes for m in result.measurements if m.operation == "alloc_reused"}:
        result.measurements.append(
            Measurement("api", "cuCtxGetDevice", "call_floor", "pool", nbytes, [floor_ms], source)
        )
    return result


def table(result: Result, title: str) -> tuple[list[str], dict[str, list[str]]]:
    """(notes, size -> cells) of the table whose title starts with `title`."""
    found = next(t for t in summarize(result).tables if t.title.startswith(title))
    return found.notes, {row[0]: row[1:] for row in printed_rows(found)}


def test_a_call_whose_figure_the_floor_is_over_a_tenth_of_is_marked():
    figure = load_older("alloc").find("alloc_reused", "pool", "api", 64 * MiB).stats.median_ms
    column = 2  # pool reused
    for factor, marked in ((1.01, True), (0.99, False)):
        result = with_floor(load_older("alloc"), pools.FLOOR_SHARE * figure * factor)
        _, rows = table(result, "Stream-ordered allocation")
        assert rows["64 MiB"][column].endswith(pools.NEAR_FLOOR) is marked
        assert rows["64 MiB"][column].rstrip(pools.NEAR_FLOOR) == format_ms(figure)
        assert rows["64 MiB"][0] == format_ms(  # cuMemAlloc: tens of microseconds, unmarked
            load_older("alloc").find("alloc_new", "device", "api", 64 * MiB).stats.median_ms
        )


def test_the_floor_is_said_on_screen_with_its_figure():
    result = with_floor(load_older("alloc"), 0.0004)
    notes, _ = table(result, "Stream-ordered allocation")
    assert notes[1] == (
        "Floor: 400ns, what cuCtxGetDevice (a call that does next to nothing) read, timed the "
        "same way in this run: that much of any call's figure may be how it was timed. *: the "
        "floor is over 10% of the figure: read it as an upper bound of the call's own time."
    )
    assert table(result, "Stream-ordered free")[0][0] == "Floor 400ns and *: as in the table above."
    assert table(result, "Virtual memory management")[0][1].startswith("Floor 400ns and *")
    assert pools.call_floor_ms(result) == pytest.approx(0.0004)


def test_the_floor_is_the_median_of_every_size_and_cycle():
    result = load_older("alloc")
    floors_us = [1, 2, 3, 50, 4]  # SYNTHETIC: one slow sample, which the median leaves out
    for index, floor_us in enumerate(floors_us):
        kind = ("pool", "vmm")[index % 2]
        result.measurements.append(
            Measurement(
                "api", "cuCtxGetDevice", "call_floor", kind, (index + 1) << 20, [floor_us / 1e3]
            )
        )
        result.measurements[-1].source = "cupti"
    assert pools.call_floor_ms(result) == pytest.approx(0.003)


def test_a_floor_not_timed_as_the_calls_were_is_no_floor():
    result = with_floor(load_older("alloc"), 0.0004, source="host")  # the calls: CUPTI's
    assert pools.call_floor_ms(result) is None
    notes, rows = table(result, "Stream-ordered allocation")
    assert notes[1].startswith("No floor: cuCtxGetDevice was not timed as the calls were")
    assert not any(cell.endswith(pools.NEAR_FLOOR) for cells in rows.values() for cell in cells)


def test_a_file_from_before_the_floor_says_it_has_none():
    notes, _ = table(load_older("alloc"), "Stream-ordered allocation")
    assert notes[1].startswith("No floor: an older memprof did not time a call that does nothing")


def test_only_driver_calls_are_marked_and_the_conclusion_says_what_the_mark_means():
    figure = load_older("alloc").find("alloc_reused", "pool", "api", 1 << 30).stats.median_ms
    result = with_floor(load_older("alloc"), figure)  # every call under 10x it marked
    _, first_use = table(result, "First use")
    assert not any(cell.endswith(pools.NEAR_FLOOR) for c in first_use.values() for cell in c)
    conclusion = next(c for c in summarize(result).conclusions if "cuMemAlloc took" in c)
    assert f"{format_ms(figure)}* reused right after cuMemFreeAsync" in conclusion
    assert conclusion.endswith(f"(*: near the floor of how calls are timed, {format_ms(figure)}.)")
    tiny = with_floor(load_older("alloc"), figure / 1000)  # nothing near it
    plain = next(c for c in summarize(tiny).conclusions if "cuMemAlloc took" in c)
    assert "*" not in plain


# -- alloc's time: large host allocations once --------------------------------------------------


def test_host_memory_from_256_mib_is_allocated_once_and_everything_else_as_asked():
    params = AllocParams(repeat=3, warmup=1)
    at = alloc.HOST_ONCE_FROM_BYTES
    assert alloc.repetitions("pinned", at, params) == (0, 1)
    assert alloc.repetitions("pinned", at - 1, params) == (1, 3)
    assert alloc.repetitions("pageable", at, params) == (0, 1)
    assert alloc.repetitions("device", 4 * at, params) == (1, 3)  # cheap at every size
    host = {kind.name for kind in memory.MEMORY_KINDS.values() if kind.host_copies}
    assert set(alloc.HOST_KINDS) == host


def test_a_run_allocating_host_memory_once_saves_what_it_did_and_loads_back(
    fake_gpu, monkeypatch, tmp_path
):
    monkeypatch.setattr(alloc, "HOST_ONCE_FROM_BYTES", 4 * MiB)  # small, for the fake GPU
    params = AllocParams(powers=(19, 20), repeat=3, warmup=1)  # 2 MiB and 4 MiB
    result = run_on(fake_gpu(), Alloc(), params)
    assert result.extra.host_once_from_bytes == 4 * MiB
    counts = {
        (m.group, m.operation, m.kind, m.bytes): len(m.samples_ms)
        for m in result.measurements
        if m.operation in ("alloc", "free")
    }
    assert counts["api", "alloc", "pinned", 4 * MiB] == counts["host", "free", "pageable", 4 * MiB]
    assert counts["api", "alloc", "pinned", 4 * MiB] == 1
    assert counts["api", "alloc", "pinned", 2 * MiB] == 3
    assert counts["api", "alloc", "device", 4 * MiB] == 3
    text = render_text(result, 100)
    assert "Host memory of 4 MiB and more: one allocation per size, not warmed up" in text
    path = tmp_path / "alloc.json"
    path.write_text(result.to_json())
    assert Result.load(path, shape_of).extra == result.extra
    data = json.loads(result.to_json())
    row = next(
        m
        for m in data["measurements"]
        if (m["operation"], m["kind"]) == ("alloc", "pinned") and m["bytes"] == 4 * MiB
    )
    row["samples_ms"] *= 3  # three allocations where the run says it made one
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="holds 3 allocations of pinned memory, but"):
        Result.load(path, shape_of)


def test_the_once_note_is_shown_only_where_a_size_was_allocated_once():
    result = load_older("alloc")  # recorded before: every allocation three times
    assert result.extra.host_once_from_bytes is None and alloc.once_note(result) is None
    at = alloc.HOST_ONCE_FROM_BYTES
    largest = 4 << max(result.parameters.powers)
    for threshold, repeat, shown in ((largest, 3, True), (largest + 1, 3, False), (at, 1, False)):
        result.extra = dataclasses.replace(result.extra, host_once_from_bytes=threshold)
        result.parameters = dataclasses.replace(result.parameters, repeat=repeat)
        assert (alloc.once_note(result) is not None) is shown


# -- checks as exact as before, fast enough for gigabytes --------------------------------------


@pytest.mark.parametrize("where", [0, 7, 8, 4095, 9 * (1 << 10) + 3])
def test_a_constant_check_finds_one_byte_wrong_anywhere(where, monkeypatch):
    monkeypatch.setattr(verify, "CHUNK_BYTES", 4 << 10)  # several chunks, an unaligned tail
    data = np.full(10 * (1 << 10) + 5, 0x5A, np.uint8)
    assert verify.compare_constant("memset", data, 0x5A).passed
    data[where] = 0x5B
    check = verify.compare_constant("memset", data, 0x5A)
    expected = verify.compare_arrays("memset", data, np.full(data.shape, 0x5A, np.uint8))
    assert not check.passed and check == expected  # compare_arrays' own detail
    unaligned = verify.compare_constant("memset", data[1:], 0x5A)  # not on 8 bytes
    assert unaligned.passed is (where == 0)


def test_every_check_reads_back_into_one_host_buffer(fake_gpu):
    session = fake_gpu()
    allocators = pools.Allocators(session, ["pool", "vmm"])
    allocators.readback_bytes = 1 << 20
    first = allocators.readback(4096)
    later = allocators.readback(1 << 20)
    assert first.size == 4096 and later.size == 1 << 20
    assert first.ctypes.data == later.ctypes.data  # the same pages, provided once
    assert allocators.readback(2 << 20).size == 2 << 20  # more than told: a larger one
    session.close()


def test_a_run_of_today_shows_the_floor_it_timed_beside_its_calls():
    import statistics

    from memprof.model.formatting import format_ms

    result = load_fixture("alloc")  # recorded with the floor, on CUPTI as its calls
    floors = [s for m in result.measurements if m.operation == "call_floor" for s in m.samples_ms]
    assert floors and pools.call_floor_ms(result) == statistics.median(floors)
    notes, _ = table(result, "Stream-ordered allocation")
    assert notes[1].startswith(
        f"Floor: {format_ms(statistics.median(floors))}, what cuCtxGetDevice"
    )
