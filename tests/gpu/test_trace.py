"""On the GPU: `memprof trace` of each example, end to end through the real CLI.

Each example prints what it did (`memprof-example: {json}`); the trace must hold exactly
those copies. The time and overhead targets are benchmarks/trace_check.py's, not tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memprof.experiments import load as load_result
from memprof.model.results import Result

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
PREFIX = "memprof-example: "


def trace(tmp_path: Path, *arguments: str) -> tuple[subprocess.CompletedProcess, Result]:
    saved = tmp_path / "trace.json"
    completed = subprocess.run(
        [sys.executable, "-m", "memprof", "trace", "--json", str(saved), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ, COLUMNS="200"),
    )
    return completed, load_result(saved)


def program_report(completed: subprocess.CompletedProcess) -> dict:
    (line,) = [line for line in completed.stdout.splitlines() if line.startswith(PREFIX)]
    return json.loads(line[len(PREFIX) :])


@pytest.mark.parametrize(
    ("example", "library", "arguments"),
    [
        ("examples/pycuda_copies.py", "pycuda", ()),
        ("examples/torch_copies.py", "torch", ()),
        ("examples/small_copies.py", "pycuda", ("2000",)),
    ],
)
def test_trace_holds_exactly_the_copies_the_program_made(tmp_path, example, library, arguments):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed here")
    completed, result = trace(tmp_path, example, *arguments)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = program_report(completed)
    traced = {
        (m.name, m.bytes): len(m.samples_ms)
        for m in result.measurements
        if m.name.startswith("[CUDA memcpy")
    }
    made = {
        (f"[CUDA memcpy {c['direction']}] {c['source']} -> {c['destination']}", c["bytes"]): c[
            "count"
        ]
        for c in report["copies"]
    }
    assert traced == made
    assert "Profiling result:" in completed.stderr
    assert "[CUDA memcpy HtoD] pageable -> device" in completed.stderr
    assert result.extra.gpu_name
    assert any(m.group == "api" for m in result.measurements)
    pageable = [c for c in result.extra.copies if c.source == "pageable"]
    assert pageable and all(c.calls > 0 for c in pageable)


def test_trace_passes_the_exit_code_through_on_the_gpu(tmp_path):
    program = tmp_path / "exits.py"
    program.write_text(
        "import ctypes, sys\ncuda = ctypes.CDLL('libcuda.so.1')\ncuda.cuInit(0)\nsys.exit(5)\n"
    )
    completed, result = trace(tmp_path, "--bandwidth", "none", str(program))
    assert completed.returncode == 5
    assert result.extra.exit_code == 5


def test_managed_memory_faults_fill_the_unified_memory_section(tmp_path):
    completed, result = trace(tmp_path, "--bandwidth", "none", "examples/managed_touch.py")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert program_report(completed)["correct"]
    counters = result.timing.unified_memory
    assert counters is not None, result.timing.unified_memory_note
    # On the H200 the kernel's reads of host-resident pages recorded no HtoD migration or GPU
    # fault group in this program (the managed experiment records both); the pages' way back
    # to the host is always recorded.
    assert counters["BYTES_TRANSFER_DTOH"]["total"] > 0
    assert counters["CPU_PAGE_FAULT_COUNT"]["count"] > 0
    assert "Unified Memory profiling result" in completed.stderr
    assert "Managed memory migrated" in completed.stderr
