"""`memprof smallcopies`, and the trace's small-copy advice that cites it.

The five ways run on tests/fakegpu.py (real bytes, the driver's rules): every way moves every
piece to where the check looks, and a way that drops one fails. Summaries and advice are
tested on Results and cached figures built here from SYNTHETIC per-copy costs, not recorded
on any GPU, shaped to put the crossover where each test wants it.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from memprof import cli_trace as tracing
from memprof.cli import app
from memprof.core import bindings, driver
from memprof.errors import InvalidArgument, MemprofError
from memprof.experiments import shape_of, summarize
from memprof.experiments import smallcopies as small
from memprof.experiments import trace as trace_summary
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.smallcopies import SmallCopies, SmallCopiesExtra, SmallCopiesParams
from memprof.model import params as declared
from memprof.model.formatting import format_ms
from memprof.model.results import Measurement, Result
from memprof.output.profile import profile_rows
from memprof.trace import collect
from memprof.trace.collect import CopyGroup, SmallCopyCost, SmallCopyFigures
from tests.conftest import FIXTURES, load_fixture, load_older, printed_rows, render_text
from tests.fakegpu import FakeBindings, FakeFunction, FakeLibcuda, FakeSession

MAPPING = {"canMapHostMemory": 1, "unifiedAddressing": 1}
KiB = 1 << 10


@pytest.fixture
def fake_gpu(monkeypatch):
    def make(attributes=MAPPING, fail_index=False, **options):
        session = FakeSession(attributes, declared_keys(SmallCopies))
        fake = FakeBindings(session.gpu, **options)
        monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
        library = FakeLibcuda(session.gpu, fail_index)
        monkeypatch.setattr(driver, "libcuda", lambda: library)
        return session

    return make


def run_on(session, params: SmallCopiesParams, attributes=MAPPING) -> Result:
    ctx = RunContext(params, session=session, facts={0: SimpleNamespace(attributes=attributes)})
    try:
        extra = SmallCopies().run(ctx)
        measurements = session.profiler.measurements()
    finally:
        session.close()
    gpu = load_fixture("smallcopies").device  # every run records its GPU's facts
    return Result("smallcopies", params, gpu, measurements, ctx.checks, extra)


FEW = SmallCopiesParams(powers=(4, 10), copies=5, repeat=2, warmup=1)  # 64 B and 4 KiB


# -- options -----------------------------------------------------------------------------------


def test_the_defaults_answer_the_training_loop_case():
    params = SmallCopiesParams()
    sizes = [4 << power for power in params.powers]
    assert sizes == [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB]
    assert params.copies == 128 and params.directions == ("h2d", "d2h")


def test_options_parse_into_params_and_bad_values_are_one_line():
    options = {o.name: o.default for o in declared.cli_options(SmallCopiesParams)}
    chosen = declared.from_cli(
        SmallCopiesParams,
        {**options, "from_power": 10, "to_power": 12, "copies": 64, "directions": "h2d"},
    )
    assert (chosen.powers, chosen.copies, chosen.directions) == ((10, 11, 12), 64, ("h2d",))
    runner = CliRunner()
    for arguments, message in (
        (["--copies", "300"], "'--copies': 300 is outside the allowed range 1 to 256"),
        (["--from", "1", "--to", "4"], "'--from': 1 is outside the allowed range 2 to 24"),
        (["--direction", "up"], "'--direction'"),
    ):
        ran = runner.invoke(app, ["smallcopies", *arguments])
        assert ran.exit_code == 2 and message in ran.output, ran.output


def test_the_module_imports_nothing_heavy():
    code = (
        "import sys, memprof.experiments.smallcopies, memprof.experiments.pools; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pycuda', 'cuda')))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"


# -- the five ways, on the fake GPU ---------------------------------------------------------------


def test_every_way_moves_every_piece_both_ways_and_frees_what_it_allocated(fake_gpu):
    session = fake_gpu()
    result = run_on(session, FEW)
    assert session.gpu.leaks() == {}
    assert result.extra.ways == list(small.WAYS) and result.extra.skipped == []
    assert result.passed and len(result.checks) == 10
    found = {(m.group, m.operation, m.kind, m.bytes): m for m in result.measurements}
    for direction in ("h2d", "d2h"):
        for nbytes in (64, 4 * KiB):
            for way in ("pinned", "batched", "gathered", "kernel"):
                assert len(found["span", direction, way, nbytes].samples_ms) == FEW.repeat
            assert ("api", f"{direction}_calls", "pageable", nbytes) in found
            for way in small.WAYS:
                assert len(found["host", f"{direction}_wall", way, nbytes].samples_ms) == 2
    assert ("host", "gather", "gathered", 64) in found and (
        "host",
        "scatter",
        "gathered",
        64,
    ) in found
    assert "cuMemcpyBatchAsync" in session.gpu.calls


def test_every_way_shows_progress_up_to_the_total(fake_gpu):
    seen = []
    ctx = RunContext(
        FEW,
        progress=lambda description, done, total: seen.append((description, done, total)),
        session=fake_gpu(),
        facts={0: SimpleNamespace(attributes=MAPPING)},
    )
    try:
        SmallCopies().run(ctx)
    finally:
        ctx.session.close()
    total = len(FEW.powers) * len(FEW.directions) * len(small.WAYS)
    assert [(done, step_total) for _, done, step_total in seen] == [
        (done, total) for done in range(total + 1)
    ]
    assert seen[0][0] == "pinned host → device, 64 B" and seen[-1][0] == "done"


def test_a_kernel_that_drops_a_piece_fails_its_check(fake_gpu, monkeypatch):
    real_call = FakeFunction.prepared_async_call

    def drops_the_last(self, grid, block, stream, *arguments):
        *rest, count = arguments
        real_call(self, grid, block, stream, *rest, type(count)(int(count) - 1))

    monkeypatch.setattr(FakeFunction, "prepared_async_call", drops_the_last)
    result = run_on(fake_gpu(), FEW)
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == [
        "one kernel through zero-copy memory, host → device",
        "one kernel through zero-copy memory, device → host",
    ]
    detail = failed["one kernel through zero-copy memory, host → device"]
    assert detail.startswith("64 B: Arrays do not match!")  # at the first size, in its last piece
    assert "of 320 elements differ; first at index 256" in detail


def test_batched_copies_are_skipped_in_one_line_where_the_driver_lacks_them(fake_gpu):
    result = run_on(fake_gpu(driver_version=12060), FEW)
    assert "batched" not in result.extra.ways
    assert result.extra.skipped == [
        "batched (one cuMemcpyBatchAsync): cuMemcpyBatchAsync needs a driver for CUDA 12.8 or "
        "newer; this one supports CUDA 12.6"
    ]
    assert result.passed
    old_bindings = run_on(fake_gpu(batch=False), FEW)
    assert old_bindings.extra.skipped[0].startswith(
        "batched (one cuMemcpyBatchAsync): cuMemcpyBatchAsync is missing from cuda-bindings"
    )


def test_a_cuda_12_8_driver_takes_the_batch_with_its_fail_index(fake_gpu):
    session = fake_gpu(fail_index=True)  # exports cuMemcpyBatchAsync with failIdx, no _v2
    result = run_on(session, FEW)
    assert "batched" in result.extra.ways and result.passed
    assert "cuMemcpyBatchAsync" in session.gpu.calls


def test_a_driver_without_the_batch_symbol_skips_batched_in_one_line(fake_gpu, monkeypatch):
    session = fake_gpu()
    monkeypatch.setattr(driver, "libcuda", lambda: SimpleNamespace())  # exports neither form
    result = run_on(session, FEW)
    assert result.extra.skipped == [
        "batched (one cuMemcpyBatchAsync): the CUDA driver exports no cuMemcpyBatchAsync (it "
        "came with CUDA 12.8): update the driver"
    ]


def test_a_batch_the_driver_refuses_is_one_line_naming_the_call(fake_gpu):
    session = fake_gpu()
    data = np.arange(64, dtype=np.uint8)
    target = np.zeros(64, np.uint8)
    batch = bindings.BatchCopy.of([target.ctypes.data], [data.ctypes.data], [64])
    with pytest.raises(
        MemprofError, match=r"^cuMemcpyBatchAsync failed: CUDA_ERROR_INVALID_VALUE$"
    ):
        batch.enqueue(0)  # the legacy NULL stream, which the batch call refuses
    batch.enqueue(0x1000)
    assert (target == data).all()  # every argument array read as the driver reads it
    session.close()


def test_the_kernel_is_skipped_where_the_gpu_cannot_map_host_memory(fake_gpu):
    attributes = dict(MAPPING, canMapHostMemory=0)
    result = run_on(fake_gpu(attributes), FEW, attributes)
    assert result.extra.ways == ["pinned", "pageable", "batched", "gathered"]
    assert result.extra.skipped == [
        "kernel (one kernel through zero-copy memory): mapped memory needs canMapHostMemory "
        "(CAN_MAP_HOST_MEMORY), which is 0 here"
    ]


def test_a_run_saved_and_loaded_renders_at_every_width(fake_gpu, tmp_path):
    result = run_on(fake_gpu(), FEW)
    path = tmp_path / "small.json"
    path.write_text(result.to_json())
    loaded = Result.load(path, shape_of)
    assert loaded.extra == result.extra
    for width in (60, 80, 120):
        text = render_text(loaded, width)
        assert "5 copies host → device: GPU time per copy" in text
        assert "5 copies device → host: wall clock per copy" in text
        assert "Recorded by an older memprof" not in text  # arguments built before the clock
        names = {row.name for row in profile_rows(loaded.measurements)}  # printed whole
        wide = [
            line for line in text.splitlines() if len(line) > width and line.strip() not in names
        ]
        assert not wide, wide


# -- the summary, on SYNTHETIC costs -----------------------------------------------------------


def synthetic_result(costs_us: dict[int, dict[str, float]], copies: int = 100) -> Result:
    """A smallcopies Result host to device whose ways cost what `costs_us` says per copy
    (microseconds), SYNTHETIC: gathered's cost split half numpy, half copy."""
    powers = tuple(sorted({(nbytes // 4).bit_length() - 1 for nbytes in costs_us}))
    measurements = []
    for nbytes, by_way in costs_us.items():
        for way, per_copy_us in by_way.items():
            total = [per_copy_us * copies / 1000]
            if way == "pageable":
                parts = [("api", "h2d_calls", total)]
            elif way == "gathered":
                parts = [("host", "gather", [total[0] / 2]), ("span", "h2d", [total[0] / 2])]
            else:
                parts = [("span", "h2d", total)]
            for group, operation, samples in [*parts, ("host", "h2d_wall", total)]:
                measurements.append(Measurement(group, way, operation, way, nbytes, samples))
    params = SmallCopiesParams(powers=powers, copies=copies, directions=("h2d",))
    extra = SmallCopiesExtra(ways=list(small.WAYS), skipped=[])
    return Result("smallcopies", params, None, measurements, [], extra)


def costs(pinned: float, best_other: float) -> dict[str, float]:
    return {
        "pinned": pinned,
        "pageable": 4 * pinned,
        "batched": best_other,
        "gathered": best_other * 2,
        "kernel": best_other * 3,
    }


def test_gathereds_cost_counts_numpys_part_and_its_copy():
    result = synthetic_result({4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(4.0, 2.0)})
    per_copy = small.per_copy_costs(result)
    assert per_copy[64 * KiB]["gathered"] == pytest.approx(0.004)  # numpy's half counted
    assert per_copy[4 * KiB]["pageable"] == pytest.approx(0.012)  # the blocking calls


# -- the verdicts, on the H200's recorded run with some of its samples scaled --------------------

H2D = "h2d"
BATCHED_WAYS_GATED = ("pinned", "batched", "kernel")  # ways whose GPU time is the span alone


def recorded() -> Result:
    """tests/fixtures/h200_smallcopies.json, whose samples a test may scale."""
    return load_fixture("smallcopies")


def median_per_copy(result: Result, group: str, operation: str, way: str, nbytes: int) -> float:
    """A measurement's median per copy, straight from its samples (not through the summary)."""
    samples = result.find(operation, way, group, nbytes).samples_ms
    return statistics.median(samples) / result.parameters.copies


def wall(result: Result, way: str, nbytes: int, direction: str = H2D) -> float:
    return median_per_copy(result, "host", f"{direction}_wall", way, nbytes)


def scale_wall(result: Result, way: str, nbytes: int, per_copy_ms: float) -> None:
    """Scale a way's wall-clock samples host to device so their median is per_copy_ms a copy."""
    measurement = result.find(f"{H2D}_wall", way, "host", nbytes)
    factor = per_copy_ms / wall(result, way, nbytes)
    measurement.samples_ms = [sample * factor for sample in measurement.samples_ms]


def scale_gpu(result: Result, way: str, nbytes: int, factor: float) -> None:
    measurement = result.find(H2D, way, "span", nbytes)
    measurement.samples_ms = [sample * factor for sample in measurement.samples_ms]


def best_batched_wall(result: Result, nbytes: int) -> float:
    return min(wall(result, way, nbytes) for way in small.BATCHED_WAYS)


def verdicts(result: Result) -> list[str]:
    """The host-to-device conclusions: fastest at the smallest size, at 64 KiB, crossover."""
    return summarize(result).conclusions[:3]


def test_the_fastest_way_is_the_one_a_program_waits_least_for_with_its_gpu_time_beside():
    result = load_older("smallcopies")  # a run where the GPU time alone names another way
    nbytes = 64 * KiB
    walls = {way: wall(result, way, nbytes) for way in small.WAYS}
    gpu = {way: median_per_copy(result, "span", H2D, way, nbytes) for way in BATCHED_WAYS_GATED}
    fastest = min(walls, key=walls.get)
    assert fastest != min(gpu, key=gpu.get)  # here the GPU time alone would name another way
    line = verdicts(result)[1]
    assert line.startswith(
        f"Host → device, 128 copies of 64 KiB: the fastest was {small.WAY_NAMES[fastest]}, "
        f"{format_ms(walls[fastest])} per copy from the first call to the stream synchronized "
        f"({format_ms(gpu[fastest])} of GPU time): "
    )
    for way in ("pinned", "pageable"):  # N x faster by the wall clock, each GPU time beside
        assert (
            f"{walls[way] / walls[fastest]:.1f}x faster than {small.WAY_NAMES[way]} "
            f"({format_ms(walls[way])}; GPU time " in line
        )


def test_the_verdicts_are_at_the_smallest_size_and_at_64_kib_not_beyond():
    found = verdicts(recorded())
    assert found[0].startswith("Host → device, 128 copies of 4 KiB:")
    assert found[1].startswith("Host → device, 128 copies of 64 KiB:")  # 64 KiB itself is small
    assert found[2].startswith("Host → device, by the wall clock:")


def test_making_the_gpu_time_of_the_fastest_way_long_does_not_change_the_ranking():
    result = recorded()
    nbytes = 4 * KiB
    walls = {way: wall(result, way, nbytes) for way in small.WAYS}
    fastest = min(walls, key=walls.get)
    scale_gpu(result, fastest, nbytes, 1000.0)
    assert verdicts(result)[0].split(": the fastest was ")[1].startswith(small.WAY_NAMES[fastest])


def test_one_call_per_copy_named_fastest_is_compared_with_pageable_alone():
    result = recorded()
    nbytes = 4 * KiB
    scale_wall(result, "pinned", nbytes, min(wall(result, w, nbytes) for w in small.WAYS) / 2)
    line = verdicts(result)[0]
    assert "the fastest was one call per copy from pinned memory" in line
    assert (
        line.count("x faster than") == 1 and "faster than one call per copy from pageable" in line
    )


@pytest.mark.parametrize(
    ("factor", "expected"),
    [
        (1.049, "stops losing at 256 KiB"),  # within 5% of the best batched way: not losing
        (1.051, "lost at every size up to 256 KiB"),
    ],
)
def test_one_call_per_copy_stops_losing_where_its_wall_clock_comes_within_5_percent(
    factor, expected
):
    result = recorded()
    largest = 256 * KiB
    scale_wall(result, "pinned", largest, best_batched_wall(result, largest) * factor)
    scale_gpu(result, "pinned", largest, 10.0)  # the GPU time decides nothing
    crossover = verdicts(result)[2]
    assert expected in crossover
    assert crossover.startswith("Host → device, by the wall clock: one call per copy from pinned")


@pytest.mark.parametrize(
    ("factor", "expected"),
    [
        (1.049, "never lost by more than 5% to a batched way (4 KiB: "),
        (1.051, "stops losing at 16 KiB"),
    ],
)
def test_one_call_per_copy_that_never_lost_is_said_so(factor, expected):
    result = recorded()
    for nbytes in (16 * KiB, 64 * KiB, 256 * KiB):
        scale_wall(result, "pinned", nbytes, best_batched_wall(result, nbytes))
    smallest = 4 * KiB
    scale_wall(result, "pinned", smallest, best_batched_wall(result, smallest) * factor)
    assert expected in verdicts(result)[2]


def test_the_crossover_names_the_batched_way_a_program_waits_least_for():
    result = recorded()
    largest = 256 * KiB
    walls = {way: wall(result, way, largest) for way in small.BATCHED_WAYS}
    best = min(walls, key=walls.get)
    crossover = verdicts(result)[2]
    assert (
        f"({format_ms(wall(result, 'pinned', largest))} per copy against "
        f"{format_ms(walls[best])} {small.WAY_NAMES[best]}; GPU time " in crossover
    )


def test_a_file_recorded_before_the_arguments_were_prebuilt_loads_and_says_so(tmp_path):
    result = load_older("smallcopies")
    assert result.extra.arguments_prebuilt is False  # the fixture predates the field
    text = render_text(result, 100)
    assert "Recorded by an older memprof, whose wall clock also held its own building" in text
    assert "Recorded by an older memprof" not in render_text(recorded(), 100)  # today's
    data = json.loads((FIXTURES / "legacy_v3_smallcopies.json").read_text())
    data["extra"]["arguments_prebuilt"] = True
    path = tmp_path / "new.json"
    path.write_text(json.dumps(data))
    assert "Recorded by an older memprof" not in render_text(Result.load(path, shape_of), 100)


def test_a_file_without_the_wall_clock_of_a_way_it_lists_is_refused(tmp_path):
    data = json.loads((FIXTURES / "h200_smallcopies.json").read_text())
    data["measurements"] = [
        m
        for m in data["measurements"]
        if not (m["operation"] == "h2d_wall" and m["kind"] == "kernel" and m["bytes"] == 4096)
    ]
    path = tmp_path / "no_wall.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="has no kernel wall clock of copies host → device"):
        Result.load(path, shape_of)


def test_the_best_way_of_each_size_is_highlighted_in_every_table():
    result = synthetic_result({4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(1.0, 2.0)})
    tables = summarize(result).tables
    assert [t.title for t in tables] == [
        "100 copies host → device: wall clock per copy",
        "100 copies host → device: GPU time per copy",
        "100 copies host → device: GPU time, total",
    ]
    batched, pinned = small.WAYS.index("batched") + 1, small.WAYS.index("pinned") + 1
    assert tables[0].highlighted == tables[1].highlighted == [(0, batched), (1, pinned)]
    per_copy, total = printed_rows(tables[1]), printed_rows(tables[2])
    assert per_copy[0][batched] == "1.0000us" and total[0][batched] == "100.00us"


# -- the trace's advice ------------------------------------------------------------------------


def small_copies_group(host_kind: str = "pageable") -> list[CopyGroup]:
    """104 copies of 16 KiB host to device, as a training step makes."""
    group = CopyGroup("HtoD", host_kind, "device", calls=104, bytes=104 * 16 * KiB, gpu_ms=1.0)
    group.small_calls, group.small_bytes, group.small_gpu_ms = 104, 104 * 16 * KiB, 1.0
    return [group]


MEASURED = SmallCopyFigures(
    how="cached in ~/.cache/memprof/small_copies.json, measured 2026-01-01",
    copies=128,
    costs=[  # SYNTHETIC per-copy costs
        SmallCopyCost(4 * KiB, pinned_ms=0.003, pageable_ms=0.010, gathered_ms=0.001),
        SmallCopyCost(
            32 * KiB, pinned_ms=0.004, pageable_ms=0.020, gathered_ms=0.005, batched_ms=0.006
        ),
    ],
    clock="wall",
)


def test_the_advice_cites_the_gain_measured_at_the_nearest_size():
    (line,) = trace_summary.small_copy_advice(small_copies_group(), None, MEASURED)
    assert line.endswith(
        "On this GPU 128 copies of 32 KiB from pageable memory cost 20.000us per copy one call "
        "each and 5.0000us gathered into one pinned buffer and copied once (wall clock per "
        "copy): 4.0x faster (`memprof smallcopies`, cached in ~/.cache/memprof/small_copies.json,"
        " measured 2026-01-01)."
    )
    older = dataclasses.replace(MEASURED, clock="gpu")  # a trace saved before the wall clock
    (line,) = trace_summary.small_copy_advice(small_copies_group(), None, older)
    assert "copied once (GPU time per copy): 4.0x faster" in line
    (pinned,) = trace_summary.small_copy_advice(small_copies_group("pinned"), None, MEASURED)
    assert (  # from pinned memory: against the batched call, which did not pay here
        "On this GPU batching did not pay: 128 copies of 32 KiB from pinned memory cost "
        "4.0000us per copy one call each and 6.0000us in one cuMemcpyBatchAsync" in pinned
    )


def test_the_advice_names_the_command_when_nothing_was_measured_and_old_traces_keep_theirs():
    unmeasured = SmallCopyFigures(how="not measured (--bandwidth none)")
    (line,) = trace_summary.small_copy_advice(small_copies_group(), None, unmeasured)
    assert line.endswith(
        "`memprof smallcopies` measures what gathering gains on this GPU (not measured "
        "(--bandwidth none))."
    )
    (old,) = trace_summary.small_copy_advice(small_copies_group(), None, None)
    assert old.endswith("or keep the data on the GPU.")  # as traces saved before said


def test_small_copy_costs_are_measured_once_per_gpu_and_driver(tmp_path):
    calls = []

    def measure(device_index: int) -> dict:
        calls.append(device_index)
        return {"copies": 128, "costs": [MEASURED.costs[0].__dict__], "clock": "wall"}

    cache = tmp_path / "memprof" / "small_copies.json"
    first = collect.small_copy_figures(0, "NVIDIA H200", "580.1", "cache", measure, cache)
    assert first.how.startswith("measured now with memprof smallcopies")
    second = collect.small_copy_figures(0, "NVIDIA H200", "580.1", "cache", measure, cache)
    assert second.costs == first.costs == [MEASURED.costs[0]] and calls == [0]
    assert second.how.startswith(f"cached in {cache}")
    assert collect.small_copy_figures(0, "x", "1", "none", measure, cache).costs == []


def test_a_damaged_cache_or_a_failed_measurement_says_why(tmp_path):
    cache = tmp_path / "small_copies.json"
    cache.write_text(json.dumps({"GPU | driver 1": {"copies": 1, "costs": [{"bytes": "many"}]}}))
    damaged = collect.small_copy_figures(0, "GPU", "1", "cache", lambda index: {}, cache)
    # the damaged entry is not used but measured again (tests/test_caches.py), here to nothing
    assert damaged.costs == []
    assert damaged.how.startswith("not usable: memprof smallcopies measured figures")

    def fail(device_index: int) -> dict:
        raise RuntimeError("memprof: error: PyCUDA is not installed")

    failed = collect.small_copy_figures(0, "GPU", "2", "cache", fail, cache)
    assert failed.how == (
        "not measured: memprof smallcopies failed (memprof: error: PyCUDA is not installed)"
    )


def test_the_cached_costs_come_from_a_smallcopies_result():
    result = synthetic_result({4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(4.0, 2.0)}, copies=10)
    figures = tracing.small_copy_costs(result)
    assert figures["copies"] == 10
    assert figures["costs"][0] == {
        "bytes": 4 * KiB,
        "pinned_ms": pytest.approx(0.003),
        "pageable_ms": pytest.approx(0.012),
        "gathered_ms": pytest.approx(0.002),
        "batched_ms": pytest.approx(0.001),
    }


def test_the_wall_clock_repeats_the_warm_calls_without_warming_them_again(fake_gpu):
    def batched_calls(warmup: int) -> int:
        session = fake_gpu()
        params = SmallCopiesParams(powers=(4,), copies=5, repeat=2, warmup=warmup)
        run_on(session, dataclasses.replace(params, directions=("h2d",)))
        return sum(call.startswith("cuMemcpyBatchAsync") for call in session.gpu.calls)

    assert batched_calls(3) - batched_calls(0) == 3  # the timed loop's warm-ups alone
