"""memprof trace without a GPU: records -> nvprof rows, copy groups, advice, rendering, cache.

The records are small unit inputs built here (what CUPTI would deliver for a few copies),
not recordings: they pin down the arithmetic and the names, not any GPU's figures.
"""

from __future__ import annotations

import json

import pytest

from memprof.cli_trace import pinned_bandwidth_of
from memprof.core.activity import ApiRecord, GpuRecord
from memprof.errors import InvalidArgument
from memprof.experiments import load as load_result
from memprof.experiments import parse as parse_result
from memprof.experiments import summarize
from memprof.experiments import trace as trace_summary
from memprof.model.formatting import format_ms
from memprof.output.export import csv_rows
from memprof.output.profile import profile_rows
from memprof.trace.collect import (
    CopyGroup,
    Outcome,
    Program,
    Recording,
    SmallCopyFigures,
    copy_direction,
    copy_groups,
    measurements_from_records,
    pinned_bandwidth,
    trace_result,
)
from tests.conftest import FIXTURES, render_text

MiB, KiB = 1 << 20, 1 << 10


def copy(
    direction: str,
    source: str,
    destination: str,
    nbytes: int,
    duration_us: float,
    start_us: float = 0.0,
    asynchronous: bool = True,
    correlation: int = 0,
) -> GpuRecord:
    start_ns = int(start_us * 1000)
    return GpuRecord(
        "memcpy",
        direction,
        start_ns,
        start_ns + int(duration_us * 1000),
        nbytes,
        source,
        destination,
        asynchronous,
        correlation,
    )


def program_records() -> tuple[list[GpuRecord], list[ApiRecord]]:
    """3 blocking pageable HtoD of 4 MiB, 2 async pinned HtoD of 4 MiB, 4 pageable DtoH of
    4 KiB, a memset, two kernel launches: and the driver calls that issued the copies."""
    gpu = [
        copy("HTOD", "pageable", "device", 4 * MiB, 250, i * 1000, False, 10 + i) for i in range(3)
    ]
    gpu += [
        copy("HTOD", "pinned", "device", 4 * MiB, 80, 5000 + i * 100, True, 20 + i)
        for i in range(2)
    ]
    gpu += [
        copy("DTOH", "device", "pageable", 4 * KiB, 5, 6000 + i * 10, False, 30 + i)
        for i in range(4)
    ]
    gpu.append(GpuRecord("memset", "memset", 7_000_000, 7_010_000, 32 * MiB))
    gpu += [GpuRecord("kernel", "sumArrays", 8_000_000 + i, 8_020_000 + i) for i in range(2)]
    api = [ApiRecord("cuMemcpyHtoD_v2", 0.3, 10 + i) for i in range(3)]
    api += [ApiRecord("cuMemcpyHtoDAsync_v2", 0.004, 20 + i) for i in range(2)]
    api += [ApiRecord("cuMemcpyDtoH_v2", 0.012, 30 + i) for i in range(4)]
    api.append(ApiRecord("cuCtxCreate_v2", 100.0, 99))
    return gpu, api


def test_copy_directions_are_spelled_as_nvprof_did():
    assert [copy_direction(k) for k in ("HTOD", "DTOH", "DTOD", "PTOP", "HTOH")] == [
        "HtoD",
        "DtoH",
        "DtoD",
        "PtoP",
        "HtoH",
    ]


def test_profile_rows_name_both_memory_kinds_and_count_every_record():
    gpu, api = program_records()
    rows = {row.name: row for row in profile_rows(measurements_from_records(gpu, api))}
    pageable = rows["[CUDA memcpy HtoD] pageable -> device"]
    assert pageable.group == "GPU activities"
    assert pageable.stats.count == 3
    assert pageable.stats.total_ms == pytest.approx(0.75)
    assert rows["[CUDA memcpy HtoD] pinned -> device"].stats.count == 2
    assert rows["[CUDA memcpy DtoH] device -> pageable"].stats.count == 4
    assert rows["[CUDA memset]"].stats.total_ms == pytest.approx(0.01)
    assert rows["sumArrays"].stats.count == 2
    assert rows["cuMemcpyHtoD_v2"].group == "API calls"
    assert rows["cuMemcpyDtoH_v2"].stats.count == 4
    gpu_total = 0.75 + 0.16 + 0.02 + 0.01 + 0.04
    assert pageable.time_fraction == pytest.approx(0.75 / gpu_total)


def test_copies_of_one_name_stay_apart_by_size_for_diff():
    gpu = [copy("HTOD", "pinned", "device", size, 10) for size in (4 * KiB, 4 * MiB, 4 * MiB)]
    measurements = measurements_from_records(gpu, [])
    assert sorted((m.bytes, len(m.samples_ms)) for m in measurements) == [
        (4 * KiB, 1),
        (4 * MiB, 2),
    ]
    assert {m.operation for m in measurements} == {"htod"}


def test_copy_groups_join_each_copy_with_the_call_that_issued_it():
    gpu, api = program_records()
    groups = {(g.direction, g.source, g.destination): g for g in copy_groups(gpu, api)}
    pageable = groups["HtoD", "pageable", "device"]
    assert (pageable.calls, pageable.bytes, pageable.blocking_calls) == (3, 12 * MiB, 3)
    assert pageable.gpu_ms == pytest.approx(0.75)
    assert pageable.call_ms == pytest.approx(0.9)
    assert pageable.small_calls == 0
    pinned = groups["HtoD", "pinned", "device"]
    assert pinned.blocking_calls == 0
    small = groups["DtoH", "device", "pageable"]
    assert (small.small_calls, small.small_bytes) == (4, 16 * KiB)
    assert small.small_gpu_ms == pytest.approx(0.02)
    assert small.host_kind == "pageable"
    assert next(iter(groups)) == ("HtoD", "pageable", "device")  # largest GPU time first


def test_a_copy_of_exactly_64_kib_is_not_small():
    gpu = [copy("HTOD", "pinned", "device", size, 2) for size in (64 * KiB - 1, 64 * KiB)]
    (group,) = copy_groups(gpu, [])
    assert (group.calls, group.small_calls, group.small_bytes) == (2, 1, 64 * KiB - 1)


BANDWIDTH = {"h2d_gb_per_s": 50.0, "d2h_gb_per_s": 40.0, "bytes": 64 * MiB, "how": "test"}


@pytest.mark.parametrize(
    ("measured", "rate"), [(0.5, 0.5), (7, 7.0), (0, None), (-1.0, None), ("50", None)]
)
def test_a_pinned_bandwidth_is_a_positive_number_for_its_own_direction(measured, rate):
    """A saved file's figure: zero, negative or not a number is unknown, never a rate."""
    bandwidth = {"h2d_gb_per_s": measured, "d2h_gb_per_s": 40.0}
    assert trace_summary.pinned_gb_per_s(bandwidth, "HtoD") == rate
    assert trace_summary.pinned_gb_per_s(bandwidth, "DtoH") == 40.0
    assert trace_summary.pinned_gb_per_s(bandwidth, "DtoD") is None
    assert trace_summary.pinned_gb_per_s(None, "HtoD") is None


def test_pageable_advice_estimates_pinned_time_at_the_measured_bandwidth():
    group = CopyGroup("HtoD", "pageable", "device", 10, 1_000_000_000, 60.0, 70.0, 10)
    (line,) = trace_summary.pageable_advice([group], BANDWIDTH)
    assert line.startswith("10 pageable HtoD copies moved 953.7 MiB in 60.000ms on the GPU")
    assert "their calls held the host 70.000ms" in line
    assert f"about {format_ms(20.0)} at this GPU's 50.0 GB/s" in line  # 1e9 B / 50e9 B/s
    dtoh = CopyGroup("DtoH", "device", "pageable", 1, 1_000_000_000, 60.0)
    assert (
        f"about {format_ms(25.0)} at this GPU's 40.0 GB/s"
        in (trace_summary.pageable_advice([dtoh], BANDWIDTH)[0])
    )


def test_pageable_advice_does_not_promise_what_pinned_memory_cannot_give():
    fast = CopyGroup("HtoD", "pageable", "device", 1, 1_000_000_000, 19.0)
    (line,) = trace_summary.pageable_advice([fast], BANDWIDTH)
    assert "would not speed them up" in line
    assert "would take" not in line
    (unknown,) = trace_summary.pageable_advice([fast], {"how": "not measured (--bandwidth none)"})
    assert "unknown (not measured (--bandwidth none))" in unknown
    pinned = CopyGroup("HtoD", "pinned", "device", 1, MiB, 1.0)
    device = CopyGroup("DtoD", "device", "device", 1, MiB, 1.0)
    assert trace_summary.pageable_advice([pinned, device], BANDWIDTH) == []


@pytest.mark.parametrize(
    ("gpu_ms", "said"),
    [
        (20.0, "in 20.000ms on the GPU, at 50.0 GB/s: no slower than pinned copies"),  # equal
        (0.5, "in 500.00us on the GPU, at 2000 GB/s: no slower than pinned copies"),
        (20.001, "in 20.001ms on the GPU; from pinned memory they would take about 20.000ms"),
    ],
)
def test_pinning_is_advised_only_where_pinned_copies_would_take_less_time(gpu_ms, said):
    """1e9 bytes at 50 GB/s take 20 ms exactly: as fast as pinned is no reason to pin."""
    group = CopyGroup("HtoD", "pageable", "device", 1, 1_000_000_000, gpu_ms)
    (line,) = trace_summary.pageable_advice([group], BANDWIDTH)
    assert said in line


def test_copies_without_gpu_time_are_not_said_to_be_as_fast_as_pinned():
    """0 ns is no speed: neither 'no slower than pinned' nor a saving can follow from it."""
    group = CopyGroup("HtoD", "pageable", "device", 2, 1_000_000_000, 0.0)
    assert trace_summary.pageable_advice([group], BANDWIDTH) == [
        "2 pageable HtoD copies moved 953.7 MiB in 0ns on the GPU: with no GPU time, how "
        "pinned copies compare is not known."
    ]
    least = CopyGroup("HtoD", "pageable", "device", 2, 1_000_000_000, 1e-6)  # 1 ns
    assert "no slower than pinned copies" in trace_summary.pageable_advice([least], BANDWIDTH)[0]


def test_each_direction_is_advised_on_whether_its_own_bandwidth_is_known():
    back = CopyGroup("DtoH", "device", "pageable", 1, 1_000_000_000, 30.0)
    to_gpu = CopyGroup("HtoD", "pageable", "device", 1, 1_000_000_000, 30.0)
    only_h2d = {"h2d_gb_per_s": 50.0, "how": "test"}
    assert trace_summary.pageable_advice([back, to_gpu], only_h2d) == [
        "1 pageable DtoH copy moved 953.7 MiB in 30.000ms on the GPU. This GPU's pinned "
        "bandwidth is unknown (test): pinned memory is often 2-3x faster; `memprof pinned` "
        "measures it.",
        "1 pageable HtoD copy moved 953.7 MiB in 30.000ms on the GPU; from pinned memory they "
        "would take about 20.000ms at this GPU's 50.0 GB/s. Allocate those host buffers "
        "pinned (cuMemHostAlloc, torch pin_memory=True) once, and reuse them.",
    ]


def test_pageable_advice_leaves_small_copies_to_the_latency_advice():
    only_small = CopyGroup(
        "DtoH", "device", "pageable", 4, 16 * KiB, 0.02, 0.05, 4, 4, 16 * KiB, 0.02
    )
    assert trace_summary.pageable_advice([only_small], BANDWIDTH) == []
    mixed = CopyGroup(
        "HtoD",
        "pageable",
        "device",
        12,
        1_000_000_000 + 40 * KiB,
        60.05,
        80.0,
        12,
        10,
        40 * KiB,
        0.05,
    )
    (line,) = trace_summary.pageable_advice([mixed], BANDWIDTH)
    assert line.startswith("2 pageable HtoD copies of 64 KiB or more moved 953.7 MiB in 60.000ms")
    assert f"about {format_ms(20.0)}" in line
    assert "held the host" not in line  # the call time is not split by size


def test_small_copy_advice_counts_only_copies_under_64_kib():
    gpu, api = program_records()
    (line,) = trace_summary.small_copy_advice(copy_groups(gpu, api), BANDWIDTH)
    assert line.startswith("4 copies under 64 KiB (4 DtoH device -> pageable) moved 16 KiB")
    assert f"in {format_ms(0.02)} on the GPU, {format_ms(0.005)} each" in line
    assert "against 50.0 GB/s for large pinned copies" in line
    large = [CopyGroup("HtoD", "pinned", "device", 1, MiB, 1.0)]
    assert trace_summary.small_copy_advice(large, BANDWIDTH) == []


def test_one_small_copy_is_said_whole_with_what_gathering_gains():
    one = CopyGroup(
        "HtoD", "pinned", "device", calls=1, bytes=4 * KiB, gpu_ms=0.004,
        small_calls=1, small_bytes=4 * KiB, small_gpu_ms=0.004,
    )  # fmt: skip
    unmeasured = SmallCopyFigures("not measured (--bandwidth none)")
    assert trace_summary.small_copy_advice([one], BANDWIDTH, unmeasured) == [
        "1 copy under 64 KiB (1 HtoD pinned -> device) moved 4 KiB in 4.0000us on the GPU, "
        "4.0000us each: 1.02 GB/s against 50.0 GB/s for large pinned copies here. Their time "
        "is latency, not bandwidth (and each call costs the host more than the GPU): gather "
        "them into one buffer and one copy, or keep the data on the GPU. `memprof "
        "smallcopies` measures what gathering gains on this GPU (not measured (--bandwidth "
        "none))."
    ]


def test_small_copies_name_the_kinds_that_made_the_most_first_and_no_rate_without_time():
    """Copies timed at 0 on the GPU (a file that kept no durations) have no GB/s."""
    groups = [
        CopyGroup("HtoD", "pinned", "device", 1, KiB, 0.0, small_calls=1, small_bytes=KiB),
        CopyGroup(
            "DtoH", "device", "pageable", 3, 3 * KiB, 0.0, small_calls=3, small_bytes=3 * KiB
        ),
    ]
    (line,) = trace_summary.small_copy_advice(groups, BANDWIDTH)
    assert line.startswith(
        "4 copies under 64 KiB (3 DtoH device -> pageable, 1 HtoD pinned -> device) moved "
        "4 KiB in 0ns on the GPU, 0ns each. Their time is latency"
    )


@pytest.mark.parametrize(
    ("call_ms", "held"), [(0.5, " (their calls held the host 500.00us)"), (0.0, "")]
)
def test_one_pageable_copy_says_how_long_its_call_held_the_host_if_at_all(call_ms, held):
    group = CopyGroup("HtoD", "pageable", "device", 1, 1 << 30, 100.0, call_ms)
    (line,) = trace_summary.pageable_advice([group], BANDWIDTH)
    assert line.startswith(
        f"1 pageable HtoD copy moved 1 GiB in 100.00ms on the GPU{held}; from pinned"
    )
    (unknown,) = trace_summary.pageable_advice([group], None)
    assert "This GPU's pinned bandwidth is unknown (not measured): pinned memory" in unknown


def test_blocking_advice_counts_synchronous_calls_and_staged_pageable_ones():
    groups = [
        CopyGroup("HtoD", "pageable", "device", calls=5, blocking_calls=2),  # 3 async, staged
        CopyGroup("DtoD", "device", "device", calls=4, blocking_calls=4),
        CopyGroup("HtoD", "pinned", "device", calls=7, blocking_calls=0),
    ]
    (line,) = trace_summary.blocking_advice(groups)
    assert line.startswith("9 copies blocked the host")
    assert "6 made with synchronous calls" in line
    assert "3 asynchronous calls from or to pageable memory" in line
    assert "synchronous calls (cuMemcpyHtoD, cudaMemcpy) and 3 asynchronous calls" in line
    assert trace_summary.blocking_advice(groups[2:]) == []


REMEDY = (
    "A blocked copy overlaps nothing: use the Async calls on a stream (non_blocking=True in "
    "PyTorch) with pinned host memory."
)


@pytest.mark.parametrize(
    ("group", "said"),
    [
        (
            CopyGroup("HtoD", "pinned", "device", calls=1, blocking_calls=1),
            "1 copy blocked the host until it finished: 1 made with a synchronous call "
            "(cuMemcpyHtoD, cudaMemcpy).",
        ),
        (
            CopyGroup("DtoH", "device", "pinned", calls=2, blocking_calls=2),
            "2 copies blocked the host until they finished: 2 made with synchronous calls "
            "(cuMemcpyHtoD, cudaMemcpy).",
        ),
        (
            CopyGroup("HtoD", "pageable", "device", calls=1, blocking_calls=0),
            "1 copy blocked the host until it finished: 1 asynchronous call from or to "
            "pageable memory, which the driver stages synchronously.",
        ),
    ],
)
def test_one_blocked_copy_and_two_are_said_in_their_own_words(group, said):
    assert trace_summary.blocking_advice([group]) == [f"{said} {REMEDY}"]


def counters(**values: tuple[int, int]) -> dict[str, dict[str, float]]:
    """ActivityLog.unified_memory_totals' shape: counter -> (records, total value)."""
    names = ("BYTES_TRANSFER_HTOD", "BYTES_TRANSFER_DTOH", "GPU_PAGE_FAULT", "CPU_PAGE_FAULT_COUNT")
    shaped = {}
    for name in names:
        count, total = values.get(name, (0, 0))
        largest = total // count if count else 0  # every record the same size
        shaped[name] = {
            "count": count,
            "total": total,
            "min": largest,
            "max": largest,
            "time_ms": 0.1 * count,
        }
    return shaped


def test_unified_memory_advice_only_when_pages_moved():
    assert trace_summary.unified_memory_advice(None) == []
    assert trace_summary.unified_memory_advice(counters()) == []
    moved = counters(
        BYTES_TRANSFER_HTOD=(2, 4 * MiB), GPU_PAGE_FAULT=(12, 40), CPU_PAGE_FAULT_COUNT=(3, 3)
    )
    (line,) = trace_summary.unified_memory_advice(moved)
    assert "at least 4 MiB to the GPU and at least 0 B back, on at least 12 GPU page-fault " in line
    prefetched = counters(BYTES_TRANSFER_DTOH=(1, MiB))  # migrated back without a GPU fault
    (back,) = trace_summary.unified_memory_advice(prefetched)
    assert "at least 1 MiB back, on at least 0 GPU" in back


def test_nothing_to_advise_is_said_once():
    pinned = [CopyGroup("HtoD", "pinned", "device", 1, MiB, 0.02)]
    (line,) = trace_summary.advice(pinned, BANDWIDTH, None)
    assert line == (
        "No copy from pageable memory, none under 64 KiB, none blocking the host and no "
        "managed-memory fault recorded: nothing to advise on memory."
    )


def test_the_advice_on_small_copies_sets_them_against_this_gpus_bandwidth():
    gpu, api = program_records()
    said = trace_summary.advice(copy_groups(gpu, api), BANDWIDTH, None)
    small = next(line for line in said if "under 64 KiB" in line)
    assert "against 50.0 GB/s for large pinned copies here" in small


def recorded_trace(unified_memory: dict | None = None, error: BaseException | None = None):
    gpu, api = program_records()
    recording = Recording(gpu, api, unified_memory, None, "NVIDIA H200", "580.159.04")
    outcome = Outcome(3 if error is None else 1, error, 1.25)
    program = Program("examples/program.py", None, ("--size", "4"))
    return trace_result(program, outcome, recording, 0, BANDWIDTH)


def test_trace_renders_as_nvprof_with_the_copies_and_advice(unfolded_advice):
    text = render_text(recorded_trace())
    assert "Profiling result:" in text
    lines = text.splitlines()
    first_gpu = next(line for line in lines if line.startswith("GPU activities:"))
    assert first_gpu.endswith("[CUDA memcpy HtoD] pageable -> device")
    assert any(line.startswith("API calls:") and "cuCtxCreate_v2" in line for line in lines)
    assert "HtoD pageable -> device" in text  # the copies table
    assert "examples/program.py exited with code 3 after 1.250 s on NVIDIA H200" in text
    assert "3 pageable HtoD copies moved 12 MiB" in text
    assert "Unified Memory" not in text  # no counters: no section
    assert "Unified Memory" not in render_text(recorded_trace(counters()))  # all zero


def test_unified_memory_section_appears_when_counters_are_non_zero():
    moved = counters(BYTES_TRANSFER_HTOD=(4, 8 * MiB), GPU_PAGE_FAULT=(7, 30))
    text = render_text(recorded_trace(moved))
    assert "Unified Memory profiling result" in text
    row = next(line for line in text.splitlines() if "Gpu page fault groups" in line)
    assert row.split()[0] == "7"
    assert "Total CPU Page faults: 0" in text
    assert "Managed memory migrated at least 8 MiB to the GPU" in text
    assert text.count("Unified Memory profiling result") == 1  # the profile's, not twice
    assert "(the whole program: CUPTI's counters are process-wide; lower bounds: " in " ".join(
        text.split()
    )
    assert "warm-ups" not in text  # a trace repeats nothing
    only_cpu = render_text(recorded_trace(counters(CPU_PAGE_FAULT_COUNT=(5, 5))))
    assert "Total CPU Page faults: 5" in only_cpu


def test_a_failed_program_is_named_with_its_exception():
    text = render_text(recorded_trace(error=ValueError("bad input")))
    assert "raised ValueError: bad input (exit code 1)" in text


def test_trace_results_survive_json_and_csv():
    result = recorded_trace()
    loaded = parse_result(result.to_json())
    assert trace_summary.summarize(loaded) == trace_summary.summarize(result)
    rows = csv_rows(loaded, summarize(loaded).figures)
    assert {row["name"] for row in rows} >= {"[CUDA memcpy HtoD] pageable -> device"}
    assert sum(row["calls"] for row in rows if row["group"] == "gpu") == 12


def test_a_malformed_copy_group_is_one_clear_error(tmp_path):
    data = json.loads(recorded_trace().to_json())
    data["extra"]["copies"][0]["calls"] = "many"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=r"extra\.copies\[0\]"):
        load_result(path)


def test_pinned_bandwidth_comes_from_memprof_sweep_at_its_largest_size():
    figures = pinned_bandwidth_of(load_result(FIXTURES / "h200_sweep.json"))
    assert figures["bytes"] == 256 * MiB
    assert 40 < figures["h2d_gb_per_s"] < 70  # the H200's PCIe Gen5 x16 plateau
    assert 40 < figures["d2h_gb_per_s"] < 70


def test_pinned_bandwidth_is_measured_once_per_gpu_and_driver(tmp_path):
    calls = []

    def measure(device_index: int) -> dict:
        calls.append(device_index)
        return {"h2d_gb_per_s": 51.0, "d2h_gb_per_s": 52.0, "bytes": 64 * MiB}

    cache = tmp_path / "memprof" / "pinned_bandwidth.json"
    first = pinned_bandwidth(0, "NVIDIA H200", "580.1", "cache", measure, cache)
    assert first["how"].startswith("measured now")
    second = pinned_bandwidth(0, "NVIDIA H200", "580.1", "cache", measure, cache)
    assert second["h2d_gb_per_s"] == 51.0 and second["how"].startswith("cached in")
    assert len(calls) == 1
    pinned_bandwidth(0, "NVIDIA H200", "590.2", "cache", measure, cache)  # another driver
    pinned_bandwidth(1, "NVIDIA H200", "580.1", "measure", measure, cache)  # asked to measure
    assert calls == [0, 0, 1]
    assert len(json.loads(cache.read_text())) == 2
    assert pinned_bandwidth(0, "NVIDIA H200", "580.1", "none", measure, cache) == {
        "how": "not measured (--bandwidth none)"
    }


def test_a_failed_bandwidth_measurement_says_why(tmp_path):
    def fail(device_index: int) -> dict:
        raise RuntimeError("memprof: error: PyCUDA is not installed")

    figures = pinned_bandwidth(0, "GPU", "1", "cache", fail, tmp_path / "cache.json")
    assert figures == {
        "how": "not measured: memprof sweep failed (memprof: error: PyCUDA is not installed)"
    }
    assert not (tmp_path / "cache.json").exists()


def test_a_trace_whose_counters_were_refused_says_why_in_one_line():
    gpu, api = program_records()
    reason = "CUPTI refused unified-memory counters: ERROR_NOT_SUPPORTED (4)"
    recording = Recording(gpu, api, None, reason, "NVIDIA H200", "580.159.04")
    outcome = Outcome(0, None, 1.0)
    result = trace_result(Program("p.py", None, ()), outcome, recording, 0, BANDWIDTH)
    text = render_text(result)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if "Unified Memory profiling" in line)
    assert lines[header + 1] == reason and text.count(reason) == 1
    assert "Avg Size" not in text  # no counters to print


def test_copy_rows_are_the_gpus_copies_only():
    """An API call named like a copy row (a hand-edited file) is no copy of that row."""
    result = load_result(FIXTURES / "h200_trace_pycuda.json")
    rows = trace_summary.copy_rows(result)
    call = next(m for m in result.measurements if m.group == "api")
    call.name = next(iter(rows))
    assert trace_summary.copy_rows(result) == rows
