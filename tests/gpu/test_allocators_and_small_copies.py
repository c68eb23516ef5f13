"""On the GPU: alloc's pools and virtual memory, compare's allocator rows, smallcopies' five
ways and the trace's small-copy advice, end to end through cuda-bindings, every check
verified. Figures are never asserted (benchmarks/allocators_and_small_copies.py compares
them with a C++ reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import memprof
from memprof.core import memory
from memprof.experiments import load, pools, summarize
from memprof.experiments.smallcopies import WAYS
from tests.conftest import render_text

pytestmark = pytest.mark.gpu


def passed(result):
    assert result.passed, [f"{c.name}: {c.detail}" for c in result.checks if not c.passed]
    return result


def test_alloc_measures_both_pools_and_virtual_memory_with_cuptis_records():
    result = passed(memprof.run("alloc", powers=(18, 20), repeat=2, warmup=1))
    record = result.extra.allocators
    assert record is not None, result.extra.skipped
    assert record.pools == ["pool", "pool_kept"] and record.vmm
    assert record.granularity_bytes and record.default_pool_threshold_bytes is not None
    for kind in ("device", "pool", "pool_kept"):
        assert result.find("alloc_new", kind, "api", 4 << 20).source == "cupti"
    assert result.find("map", "vmm", "api", 4 << 20).source == "cupti"
    # the floor: CUPTI keeps a record of cuCtxGetDevice as of the calls, so it is shown
    assert result.find("call_floor", "vmm", "api", 4 << 20).source == "cupti"
    assert pools.call_floor_ms(result) is not None
    assert len(result.find("loop", "pool", "host", 4 << 18).samples_ms) == 50
    text = render_text(result, 80)
    assert "Stream-ordered allocation" in text and "Allocate, use, free, sync" in text
    assert "Floor: " in text


def test_alloc_with_events_times_the_calls_on_the_host_clock():
    result = passed(memprof.run("alloc", powers=(18,), repeat=1, warmup=0, timing="events"))
    assert result.find("alloc_reused", "pool", "api", 4 << 18).source == "host"


def test_compare_has_a_row_per_allocator():
    result = passed(memprof.run("compare", power=18, repeat=2, warmup=1))
    labels = [row[0] for row in summarize(result).tables[0].rows]
    for kind in ("device", "pool", "pool_kept", "vmm"):
        assert memory.label(kind) in labels


def test_smallcopies_does_all_five_ways_both_directions_and_verifies():
    result = passed(memprof.run("smallcopies", powers=(10, 12), copies=32, repeat=3, warmup=1))
    assert result.extra.ways == list(WAYS), result.extra.skipped  # driver 580: batch copies
    assert len(result.checks) == 2 * len(WAYS)
    assert result.find("h2d", "batched", "span", 4 << 10).samples_ms
    assert result.find("d2h_calls", "pageable", "api", 4 << 12).source == "cupti"
    assert result.extra.arguments_prebuilt  # the batch through ctypes, its arrays built once


def test_the_command_line_saves_and_reports_a_smallcopies_run(tmp_path):
    path = tmp_path / "small.json"
    command = [sys.executable, "-m", "memprof", "smallcopies", "--from", "10", "--to", "11"]
    command += ["--copies", "16", "--repeat", "2", "--json", str(path), "--quiet"]
    subprocess.run(command, check=True)
    report = subprocess.run(
        [sys.executable, "-m", "memprof", "report", str(path)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert "16 copies host → device: GPU time per copy" in report.stdout


PROGRAM = textwrap.dedent(
    """
    import numpy as np
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda

    pieces = [np.full(4096, i, np.float32) for i in range(104)]  # 16 KiB each, pageable
    device = cuda.mem_alloc(16384)
    for piece in pieces:
        cuda.memcpy_htod(device, piece)
    """
)


def test_the_trace_advice_cites_this_gpus_measured_gain_and_caches_it(tmp_path, unfolded_advice):
    """The advice's words, however little of this short program the copies cost (they fold
    under 1% of the run otherwise: 1.5 ms of host time in 0.2 s on the H200)."""
    program = tmp_path / "small_copies_program.py"
    program.write_text(PROGRAM)
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for run in ("first", "second"):
        path = tmp_path / f"{run}.json"
        command = [sys.executable, "-m", "memprof", "trace", "--json", str(path), str(program)]
        subprocess.run(command, check=True, env=environment, capture_output=True)
        result = load(path)
        figures = result.extra.small_copies
        assert figures is not None and figures.costs, figures
        advice = " ".join(summarize(result).conclusions)
        assert "128 copies of 16 KiB from pageable memory cost" in advice
    assert figures.how.startswith("cached in")  # the second trace measured nothing
    cached = json.loads((tmp_path / "cache" / "memprof" / "small_copies.json").read_text())
    assert len(cached) == 1
