"""On the GPU: every run records its GPU's state from NVML, pinned its host memcpy ceiling,
and memprof check / check-pairs run and judge every line. Structure only: the figures are
targets the benchmarks print (benchmarks/run_all.sh), never asserted here."""

from __future__ import annotations

import os

import pytest

import memprof
from memprof.experiments import parse, summarize
from memprof.experiments.check import lines, pair_lines
from memprof.model.ceilings import pcie_ceiling, peer_ceiling
from memprof.model.figures import host_side
from tests.test_check import WHATS as CHECK_LINES

pytestmark = pytest.mark.gpu


def gpu_count() -> int:
    """How many GPUs the driver sees (0 where there is none, so CPU runs skip cleanly)."""
    from memprof.core.session import device_count

    try:
        return device_count()
    except Exception:
        return 0


def test_every_run_records_its_gpus_state_from_nvml():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is part of the cuda extra")
    result = memprof.run("info")
    (state,) = result.gpu_states
    print(state)
    assert state.unavailable is None, state.unavailable
    assert state.index == 0 and state.pci_bus_id == result.device.pci_bus_id
    assert state.sm_clock_max_mhz and state.memory_clock_max_mhz
    assert state.memory_clock_mhz and state.sm_clock_mhz
    assert state.link is not None and state.link_max is not None
    assert state.clock_reasons is not None and state.clock_reasons_basis
    assert state.ecc_enabled is not None and state.mig_enabled is not None
    assert state.nvlinks is not None
    assert state.other_processes is not None
    assert all(process.pid != os.getpid() for process in state.other_processes)
    rows = {row[0]: row[1] for row in summarize(result).tables[0].rows}
    assert rows["PCIe link during the run"].endswith("[NVML]")


def test_pinned_records_the_host_side_of_its_pageable_copies_at_their_size():
    result = memprof.run("pinned", power=20, repeat=3, warmup=1)
    sides = {d: host_side(result, 4 << 20, d) for d in ("h2d", "d2h")}
    for direction, side in sides.items():
        print(f"staging {direction} at 4 MiB: {side.gb_per_s:.1f} GB/s")
        assert side.staged and side.gb_per_s > 0.5
    transfers = summarize(result).tables[0]
    assert [row[:2] for row in transfers.rows[-2:]] == [
        ["staging", "host → device"],
        ["staging", "device → host"],
    ]
    for row, direction in zip(transfers.rows[:2], ("h2d", "d2h"), strict=True):
        expected = (
            "PCIe" if sides[direction].gb_per_s > pcie_ceiling(result).gb_per_s else "staging"
        )
        assert row[-1].endswith(expected)  # the lower of the two, per direction
    assert [row[-1].split()[-1] for row in transfers.rows[2:4]] == ["PCIe", "PCIe"]


def test_check_runs_every_line_and_verifies_every_copy():
    result = memprof.run("check", repeat=2)
    found = lines(result, None)
    for line in found:
        print(line)
    assert [line.what for line in found] == CHECK_LINES
    assert result.checks and all(check.passed for check in result.checks), result.checks
    assert {m.operation for m in result.measurements} == {
        "h2d",
        "d2h",
        "h2d_at_once",
        "d2h_at_once",
        "d2d",
    }


@pytest.mark.skipif("gpu_count() < 2")
def test_check_pairs_judges_every_pair_against_its_link():
    result = memprof.run("check-pairs", power=24, repeat=2)
    for line in pair_lines(result):
        print(line)
    assert result.checks and all(check.passed for check in result.checks), result.checks
    assert len(result.gpu_states) == gpu_count()
    ceiling = peer_ceiling(result, 0, 1)
    print(ceiling)
    assert ceiling is not None, "NVML gave no link between GPU 0 and GPU 1"
    parse(result.to_json(), "check-pairs.json")  # the loader's checks accept a real run
