"""On the GPU: each command end to end, in process and through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from memprof import api
from memprof.experiments import info, zerocopy
from memprof.experiments import parse as parse_result
from tests.conftest import render_text

pytestmark = pytest.mark.gpu


def memprof(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memprof", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, COLUMNS="200"),  # wide enough that no name folds
    )


def test_info_reads_sane_device_facts():
    result = api.run("info")
    device = result.device
    assert device.compute_capability >= (3, 0)
    assert device.multiprocessors > 0
    assert 0 < device.memory_free_bytes <= device.memory_total_bytes
    assert device.theoretical_memory_bandwidth_gb_per_s > 100
    assert set(device.attributes) >= {"canMapHostMemory", "asyncEngineCount", "concurrentKernels"}
    info.summarize(result)


def test_pinned_verifies_and_measures_every_operation():
    result = api.run("pinned", power=13, repeat=3, warmup=1)
    assert result.passed, [c.detail for c in result.checks]
    assert len(result.checks) == 2
    for kind in ("pageable", "pinned"):
        assert len(result.find("h2d", kind, "gpu").samples_ms) == 6  # a and b, 3 runs
        assert len(result.find("d2h", kind, "gpu").samples_ms) == 3
        assert len(result.find("alloc", kind).samples_ms) == 3  # timed cycles only, no set-up
    assert result.find("kernel", None, "gpu").samples_ms
    round_tripped = parse_result(result.to_json())
    assert render_text(round_tripped) == render_text(result)  # the summary, charts drawn


@pytest.mark.parametrize("powers", [(0, 5, 10, 13), (17,)])
def test_zerocopy_verifies_any_size(powers):
    result = api.run("zerocopy", powers=powers, repeat=2, warmup=1)
    assert result.passed, [c.detail for c in result.checks]
    assert len(result.checks) == 3 * len(powers)  # device, zero-copy and pageable paths
    zerocopy.summarize(result)


def test_cli_pinned_prints_nvprof_profile_and_saves_json(tmp_path):
    path = tmp_path / "pinned.json"
    completed = memprof("pinned", "--power", "12", "--repeat", "3", "--json", str(path))
    assert completed.returncode == 0, completed.stderr
    assert f"=={completed.stdout.split('==')[1]}== Profiling result:" in completed.stdout
    for text in (
        "GPU activities:",
        "API calls:",
        "[CUDA memcpy HtoD] (pinned)",
        "[CUDA memcpy DtoH] (pageable)",
        "cuMemHostAlloc",
        "sumArraysGPU(float*, float*, float*, int)",
        "Verified against numpy: ",
    ):
        assert text in completed.stdout
    verbose = memprof("report", "--verbose", str(path))  # every verification on its own line
    assert "Check result success!" in verbose.stdout
    assert json.loads(path.read_text())["command"] == "pinned"
    assert memprof("report", str(path)).returncode == 0


def test_cli_zerocopy_single_size_and_info():
    completed = memprof("zerocopy", "--power", "11", "--repeat", "2")
    assert completed.returncode == 0, completed.stderr
    assert "sumArraysGPU(float*, float*, float*, int) (mapped)" in completed.stdout
    completed = memprof("info")
    assert completed.returncode == 0, completed.stderr
    assert "canMapHostMemory" in completed.stdout


def test_cli_refuses_a_device_that_does_not_exist():
    completed = memprof("pinned", "--device", "63")
    assert completed.returncode == 2
    assert "does not exist" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_ctrl_c_frees_everything_and_exits_130():
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memprof",
            "zerocopy",
            "--from",
            "20",
            "--to",
            "24",
            "--repeat",
            "2000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "context stack was not empty" not in stderr
    assert "PyCUDA WARNING" not in stderr
    assert "Traceback" not in stderr


def test_missing_nvcc_is_one_line(tmp_path):
    # no nvcc on PATH, and an empty kernel cache: memprof must compile, and cannot
    environment = dict(os.environ, PATH=str(tmp_path), XDG_CACHE_HOME=str(tmp_path))
    completed = subprocess.run(
        [sys.executable, "-m", "memprof", "pinned", "--power", "10"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert completed.returncode == 3
    assert "nvcc was not found on PATH" in completed.stderr
