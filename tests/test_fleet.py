"""`memprof report --fleet`: many runs of one command side by side, each GPU's figures against
the fleet's median, a slow GPU named and gated (--fail-outliers) on both sides of its
threshold, a noisy figure not taken for a slow one. A recorded check, saved again in tmp_path
as other nodes would have recorded it, one of them made slow here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.api import declared
from memprof.cli import app
from memprof.errors import ExitCode
from memprof.experiments import load
from memprof.output.fleet import fleet, run_names
from tests.conftest import FIXTURES

CHECK = FIXTURES / "h200_check.json"


def node(tmp_path: Path, host: str, slower: float = 1.0, which: int | None = None) -> Path:
    """The recorded check as node `host` saved it, measurement `which` (every one where None)
    taking `slower` times as long."""
    data = json.loads(CHECK.read_text())
    data["host"] = host
    data["parameters"]["d2d_floor_pct"] = 10  # the fleet judges it, not check's floor
    for index, m in enumerate(data["measurements"]):
        if which is None or index == which:
            for field in ("samples_ms", "throughput_ms", "events_ms"):
                m[field] = [t * slower for t in m.get(field) or []]
    path = tmp_path / f"{host}.json"
    path.write_text(json.dumps(data))
    return path


def report(*arguments: object) -> object:
    return CliRunner().invoke(app, ["report", *map(str, arguments)], env={"COLUMNS": "100"})


@pytest.fixture
def four(tmp_path):
    """Four nodes, node-c's device-to-device copy (the fifth figure) 1.3x as slow."""
    return [node(tmp_path, f"node-{n}") for n in "abd"] + [node(tmp_path, "node-c", 1.3, 4)]


def test_a_slow_gpu_is_named_among_four(four):
    ran = report("--fleet", *four)
    assert ran.exit_code == 0, ran.output
    assert "Slower than the fleet beyond 10% and their noise: node-c GPU 0." in ran.stdout
    assert "node-c GPU 0: " in ran.stdout and "(+30%)" in ran.stdout
    assert "Profiling result" not in ran.stdout  # one table, not each run's report


@pytest.mark.parametrize(("percent", "fails"), [(20, True), (29, True), (31, False), (50, False)])
def test_fail_outliers_gates_on_both_sides_of_its_threshold(four, percent, fails):
    ran = report("--fail-outliers", percent, *four)
    assert ran.exit_code == (ExitCode.CHECK_FAILED if fails else 0), ran.output
    if fails:
        assert "memprof: outlier: node-c GPU 0: [CUDA memcpy DtoD]" in ran.stderr
        assert ran.stderr.strip().endswith(
            f"1 run slower than the fleet beyond --fail-outliers {percent}%: node-c GPU 0"
        )
    else:
        assert "outlier" not in ran.stderr


def test_a_faster_gpu_is_marked_but_never_fails_the_gate(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "abc"] + [node(tmp_path, "node-d", 0.9, 4)]
    ran = report("--fail-outliers", 5, *runs)
    assert ran.exit_code == 0, ran.output
    assert "node-d GPU 0: 4715 GB/s (-10%)" in ran.stdout
    assert "their noise: none." in ran.stdout


def test_a_noisy_figure_is_not_taken_for_a_slow_gpu(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "abc"]
    data = json.loads(CHECK.read_text())
    data["host"] = "node-d"
    data["parameters"]["d2d_floor_pct"] = 10
    m = data["measurements"][4]
    spread = [0.6, 0.8, 1.15, 1.6, 2.2]  # a median 15% slow, within its own noise
    for field in ("samples_ms", "throughput_ms"):
        m[field] = [t * s for t, s in zip(m[field], spread, strict=True)]
    (tmp_path / "node-d.json").write_text(json.dumps(data))
    results = [load(path) for path in [*runs, tmp_path / "node-d.json"]]
    found = fleet(results, declared, 0.10)
    mine = [d for d in found.deviations if d.run == 3 and "DtoD" in d.label]
    assert mine[0].ratio > 1.10 and mine[0].limit > mine[0].ratio - 1
    assert found.slower == []


def test_two_runs_are_shown_but_never_judged(tmp_path):
    runs = [node(tmp_path, "node-a"), node(tmp_path, "node-b", 1.3, 4)]
    ran = report("--fail-outliers", 10, *runs)
    assert ran.exit_code == 0, ran.output
    assert "A median of 2 runs cannot single one out: give 3 or more." in ran.stdout


def test_runs_of_different_models_are_said(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "ab"] + [FIXTURES / "h100_check.json"]
    ran = report("--fleet", *runs)
    assert ran.exit_code == 0, ran.output
    assert "different GPU models (NVIDIA H100 80GB HBM3, NVIDIA H200)" in " ".join(
        ran.stdout.split()
    )


def test_runs_are_named_apart_by_host_then_bus_then_order():
    result = load(CHECK)
    other_bus = load(CHECK)
    other_bus.device.pci_bus_id = "0000:00:07.0"
    assert run_names([result]) == ["vm GPU 0"]
    assert run_names([result, other_bus]) == ["vm GPU 0 (0000:00:06.0)", "vm GPU 0 (0000:00:07.0)"]
    assert run_names([result, result]) == ["vm GPU 0 #1", "vm GPU 0 #2"]


@pytest.mark.parametrize("percent", ["0", "-5", "101", "x"])
def test_a_threshold_outside_its_range_is_refused(percent):
    ran = report("--fail-outliers", percent, CHECK, CHECK, CHECK)
    assert ran.exit_code == ExitCode.USAGE


RECORDED = sorted((FIXTURES / "fleet").glob("h200x4_check_gpu*.json"))  # one H200 each


def test_four_recorded_gpus_are_one_fleet_and_a_planted_slow_one_is_found(tmp_path):
    assert len(RECORDED) == 4
    ran = report("--fail-outliers", 10, *RECORDED)
    assert ran.exit_code == 0, ran.output  # four healthy H200s of one machine
    assert [f"vm GPU {n}" in ran.stdout for n in range(4)] == [True] * 4
    data = json.loads(RECORDED[2].read_text())
    m = data["measurements"][0]  # pinned host to device, 64 MiB
    for field in ("samples_ms", "throughput_ms", "events_ms"):
        m[field] = [t * 1.25 for t in m.get(field) or []]
    data["parameters"]["h2d_floor_pct"] = 10  # the fleet judges it, not check's floor
    slow = tmp_path / "gpu2.json"
    slow.write_text(json.dumps(data))
    planted = [*RECORDED[:2], slow, RECORDED[3]]
    ran = report("--fail-outliers", 10, *planted)
    assert ran.exit_code == ExitCode.CHECK_FAILED, ran.output
    assert "memprof: outlier: vm GPU 2: [CUDA memcpy HtoD] (pinned) [gpu], 64 MiB" in ran.stderr
    assert ran.stderr.strip().endswith("beyond --fail-outliers 10%: vm GPU 2")
    assert report("--fail-outliers", 30, *planted).exit_code == 0
