"""`memprof smallcopies`, and the trace's small-copy advice that cites it.

The five ways run on tests/fakegpu.py (real bytes, the driver's rules): every way moves every
piece to where the check looks, and a way that drops one fails. Summaries and advice are
tested on Results and cached figures built here from SYNTHETIC per-copy costs, not recorded
on any GPU, shaped to put the crossover where each test wants it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.core import bindings
from memprof.experiments import shape_of, summarize
from memprof.experiments import smallcopies as small
from memprof.experiments import trace as trace_summary
from memprof.experiments.base import RunContext
from memprof.experiments.smallcopies import SmallCopies, SmallCopiesExtra, SmallCopiesParams
from memprof.model import params as declared
from memprof.model.results import Measurement, Result
from memprof.output.profile import profile_rows
from memprof.trace import collect
from memprof.trace.collect import CopyGroup, SmallCopyCost, SmallCopyFigures
from tests.conftest import load_fixture, render_text
from tests.fakegpu import FakeBindings, FakeFunction, FakeSession

MAPPING = {"canMapHostMemory": 1, "unifiedAddressing": 1}
KiB = 1 << 10


@pytest.fixture
def fake_gpu(monkeypatch):
    def make(attributes=MAPPING, **options):
        session = FakeSession(attributes, SmallCopies.declared_keys())
        fake = FakeBindings(session.gpu, **options)
        monkeypatch.setattr(bindings, "_import", lambda: (fake, None))
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
        assert "5 copies host → device: per copy" in text
        assert "5 copies device → host: wall clock per copy" in text
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


def test_one_call_per_copy_stops_losing_where_it_comes_within_5_percent():
    result = synthetic_result(
        {4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(4.0, 2.0), 1024 * KiB: costs(20.0, 19.5)}
    )
    per_copy = small.per_copy_costs(result)
    assert per_copy[64 * KiB]["gathered"] == pytest.approx(0.004)  # numpy's half counted
    assert small.stops_losing(per_copy) == 1024 * KiB
    conclusions = summarize(result).conclusions
    assert conclusions[0] == (
        "Host → device, 100 copies of 4 KiB: the fastest was one cuMemcpyBatchAsync, 1.0000us "
        "per copy, against 3.0000us one call per copy from pinned memory (3.0x) and 12.000us "
        "one call per copy from pageable memory (12.0x)."
    )
    assert conclusions[2] == (
        "Host → device: one call per copy from pinned memory stops losing at 1 MiB (20.000us "
        "per copy against 19.500us one cuMemcpyBatchAsync): batch copies smaller than that."
    )


def test_one_call_per_copy_losing_everywhere_or_nowhere_is_said_so():
    losing = synthetic_result({4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(9.0, 2.0)})
    assert (
        summarize(losing)
        .conclusions[-1]
        .startswith(
            "Host → device: one call per copy from pinned memory lost at every size up to 64 KiB"
        )
    )
    never = synthetic_result({4 * KiB: costs(1.0, 1.0), 64 * KiB: costs(2.0, 2.05)})
    assert "never lost by more than 5%" in summarize(never).conclusions[-1]


def test_the_best_way_of_each_size_is_highlighted_in_every_table():
    result = synthetic_result({4 * KiB: costs(3.0, 1.0), 64 * KiB: costs(1.0, 2.0)})
    tables = summarize(result).tables
    assert [t.title for t in tables] == [
        "100 copies host → device: total",
        "100 copies host → device: per copy",
        "100 copies host → device: wall clock per copy",
    ]
    batched, pinned = small.WAYS.index("batched") + 1, small.WAYS.index("pinned") + 1
    assert tables[1].highlighted == [(0, batched), (1, pinned)]
    assert tables[1].rows[0][batched] == "1.0000us" and tables[0].rows[0][batched] == "100.00us"


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
)


def test_the_advice_cites_the_gain_measured_at_the_nearest_size():
    (line,) = trace_summary.small_copy_advice(small_copies_group(), None, MEASURED)
    assert line.endswith(
        "On this GPU 128 copies of 32 KiB from pageable memory cost 20.000us per copy one call "
        "each and 5.0000us gathered into one pinned buffer and copied once: 4.0x faster "
        "(`memprof smallcopies`, cached in ~/.cache/memprof/small_copies.json, measured "
        "2026-01-01)."
    )
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
        return {"copies": 128, "costs": [MEASURED.costs[0].__dict__]}

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
    figures = trace_summary.small_copy_costs(result)
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
