"""On the GPU: `memprof trace` of each example, end to end through the real CLI.

Each example prints what it did (`memprof-example: {json}`); the trace must hold exactly
those copies. The time and overhead targets are benchmarks/trace_check.py's, not tests.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memprof.experiments import load as load_result
from memprof.model.results import Result
from memprof.trace.stacks import base_name, call_kind, is_work_call

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


def unfolded_advice(result: Result) -> str:
    """A trace's advice with none folded: what a short run (start-up dominating) folds into
    one line as under 1% of the run, told line by line, as a longer run tells it; and every
    line of a finding named, not the LINES_ADVISED costliest: ResNet's three steps wait 3
    times at each of three lines for about 50 us each, whose order moves run to run (one
    H200 run's advice lacked one of the two wait lines a test reads, two more held both)."""
    from memprof.experiments import trace as trace_summary

    saved = trace_summary.FOLD_SHARE, trace_summary.LINES_ADVISED
    trace_summary.FOLD_SHARE, trace_summary.LINES_ADVISED = 0.0, 1000
    try:
        return "\n".join(trace_summary.summarize(result).conclusions)
    finally:
        trace_summary.FOLD_SHARE, trace_summary.LINES_ADVISED = saved


def program_report(completed: subprocess.CompletedProcess) -> dict:
    (line,) = [line for line in completed.stdout.splitlines() if line.startswith(PREFIX)]
    return json.loads(line[len(PREFIX) :])


@pytest.mark.parametrize(
    ("example", "library", "arguments"),
    [
        ("examples/pycuda_copies.py", "pycuda", ()),
        ("examples/torch_copies.py", "torch", ()),
        ("examples/small_copies.py", "pycuda", ("2000",)),
        ("examples/torch_dataloader.py", "torch", ("--steps", "12", "--log-every", "4")),
    ],
)
def test_trace_holds_exactly_the_copies_the_program_made(tmp_path, example, library, arguments):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed here")
    completed, result = trace(tmp_path, example, *arguments)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = program_report(completed)
    left_out = tuple(f"[CUDA memcpy {kind}]" for kind in report.get("not_counted", ()))
    traced = {
        (m.name, m.bytes): len(m.samples_ms)
        for m in result.measurements
        if m.name.startswith("[CUDA memcpy") and not m.name.startswith(left_out or "\0")
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


def test_the_advice_figures_are_measured_after_the_program_in_its_process(tmp_path, monkeypatch):
    """No cache: memprof's sweep and smallcopies run in trace's own process once the program
    has ended (memprof.run, after the program's context and CUPTI's tracing of it), give
    figures the cache takes, and add no copy of theirs to the program's profile."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    completed, result = trace(tmp_path, "examples/small_copies.py", "2000")
    assert completed.returncode == 0, completed.stderr[-3000:]
    bandwidth, small = result.extra.pinned_bandwidth, result.extra.small_copies
    assert bandwidth["how"] == "measured now with memprof sweep (then cached)", bandwidth
    assert small.how == "measured now with memprof smallcopies (then cached)", small.how
    assert small.costs and bandwidth["bytes"] == 4 << 24
    made = sum(c["count"] for c in program_report(completed)["copies"])
    assert sum(group.calls for group in result.extra.copies) == made


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


def test_a_jax_program_traced_saves_a_file_memprofs_loader_reads(tmp_path, monkeypatch):
    """XLA's host-to-host copies once made `trace --json` save a file report, plot and diff
    refused: the trace of examples/jax_mlp.py is saved and loads (trace() loads it), and
    `memprof report` reads it again in a process of its own."""
    pytest.importorskip("jax", reason="jax is not importable here")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    completed, result = trace(tmp_path, "--bandwidth", "none", "examples/jax_mlp.py", "20")
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = program_report(completed)
    assert report["correct"]
    if report["backend"] == "gpu":
        uploads = [m for m in result.measurements if m.name.startswith("[CUDA memcpy HtoD]")]
        assert sum(len(m.samples_ms) for m in uploads) >= 2 * report["steps"]  # x and y
    print({(g.direction, g.source, g.destination): g.blocking_copies for g in result.extra.copies})
    reread = subprocess.run(
        [sys.executable, "-m", "memprof", "report", "--quiet", str(tmp_path / "trace.json")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert reread.returncode == 0, reread.stderr


# -- the lines behind the copies ---------------------------------------------------------------

MARK = "# memprof-line: "


def marked_lines(script: Path) -> dict[str, tuple[str, int]]:
    """Each `# memprof-line: NAME` comment of the program's files (the script's folder for
    a program of several files), as (file relative to the script's folder, line), by name."""
    folder = script.parent
    files = sorted(folder.glob("*.py")) if folder.name == "lines" else [script]
    marks = {}
    for path in files:
        for number, text in enumerate(path.read_text().splitlines(), 1):
            found = re.search(MARK + r"(\w+)\s*$", text)  # ends a line of code, not prose
            if found:
                marks[found[1]] = (path.relative_to(folder).as_posix(), number)
    return marks


def copy_lines(result: Result) -> dict[tuple[str, int], int]:
    """The trace's copies by the line that made them (every copy activity summed)."""
    found: dict[tuple[str, int], int] = {}
    for line in result.extra.lines:
        if "->" in line.activity:
            key = (line.file, line.line) if line.origin == "program" else ("(none)", 0)
            found[key] = found.get(key, 0) + line.calls
    return found


@pytest.mark.parametrize(
    ("example", "library"),
    [
        ("examples/lines/main.py", "pycuda"),
        ("examples/torch_lines.py", "torch"),
        ("examples/cupy_copies.py", "cupy"),
        ("examples/numba_copies.py", "numba"),
    ],
)
def test_the_trace_names_exactly_the_lines_that_made_the_copies(tmp_path, example, library):
    """A program of two files whose copies come from three lines shows exactly those three,
    with their counts (examples/lines); each library's example likewise."""
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed here")
    completed, result = trace(tmp_path, "--bandwidth", "none", example)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = program_report(completed)
    assert report["correct"]
    marks = marked_lines(ROOT / example)
    expected = {marks[name]: count for name, count in report["lines"].items()}
    assert copy_lines(result) == expected
    assert "Where: copies" in completed.stderr


def test_the_lines_of_a_pytorch_programs_copies_are_torch_profilers(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    example = "examples/torch_lines.py"
    completed, result = trace(tmp_path, "--bandwidth", "none", example)
    assert completed.returncode == 0, completed.stderr[-3000:]
    seen = tmp_path / "profiler.json"
    profiled = subprocess.run(
        [sys.executable, "benchmarks/torch_profiler_run.py", "--out", str(seen), example],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert profiled.returncode == 0, profiled.stderr[-3000:]
    profiler = json.loads(seen.read_text())
    # by function: torch's tracer gives a frame its function's first line, memprof the line
    traced: dict[str, int] = {}
    for line in result.extra.lines:
        if "->" in line.activity:
            key = f"{line.file}:{line.function}" if line.origin == "program" else "(none)"
            traced[key] = traced.get(key, 0) + line.calls
    print(json.dumps(profiler, indent=1))  # what torch saw, shown where they differ
    assert traced == profiler["copy_functions"]
    marks = marked_lines(ROOT / example)  # and the lines are the ones each copy is made on
    assert {(file, number) for file, number in marks.values()} <= set(copy_lines(result))
    assert sum(traced.values()) == sum(profiler["copies"].values())


def test_resnet_training_names_its_copy_lines_and_counts_as_without_them(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    arguments = ("examples/resnet_train.py", "--steps", "3", "--batch", "8", "--size", "32")
    completed, result = trace(tmp_path, "--bandwidth", "none", *arguments)
    assert completed.returncode == 0, completed.stderr[-3000:]
    (tmp_path / "flat").mkdir()
    flat_run, flat = trace(
        tmp_path / "flat", "--bandwidth", "none", "--stack-depth", "0", *arguments
    )
    assert flat_run.returncode == 0, flat_run.stderr[-3000:]
    marks = marked_lines(ROOT / "examples/resnet_train.py")
    found = copy_lines(result)
    assert {name: found.get(place) for name, place in marks.items()} == {
        "images": 3,
        "labels": 3,
        "item": 3,
    }

    def counted(traced_result: Result) -> dict:
        return {
            (m.name, m.bytes): len(m.samples_ms)
            for m in traced_result.measurements
            if m.group == "gpu"
        }

    assert counted(result) == counted(flat)  # the lines change no count
    images = f"resnet_train.py:{marks['images'][1]}: 3 pageable HtoD copies"
    text = " ".join(unfolded_advice(result).split())
    assert images in text and "pin_memory=True" in text


def test_resnet_training_names_cudnns_autotuning_only_with_benchmark_on(tmp_path):
    """With --cudnn-benchmark cuDNN times its algorithms in the first step: the trace records
    the setting and names its one-time kernels as cuDNN's autotuning; without, nothing is
    said, and every one of cuDNN's kernels recurs in the later steps."""
    from memprof.experiments import trace as trace_summary

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    # the example as it runs by default (30 steps of 64 images): 6 steps of 8 32-pixel images
    # ran no cuDNN kernel only while timing on the H200, so nothing was one-time there
    arguments = ("examples/resnet_train.py",)
    said = {}
    for benchmark in (False, True):
        folder = tmp_path / str(benchmark)
        folder.mkdir()
        on = ("--cudnn-benchmark",) if benchmark else ()
        completed, result = trace(folder, "--bandwidth", "none", *arguments, *on)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert program_report(completed)["cudnn_benchmark"] is benchmark
        assert result.extra.cudnn_benchmark is benchmark
        conclusions = trace_summary.summarize(result).conclusions
        said[benchmark] = [c for c in conclusions if c.startswith("cuDNN's autotuning")]
        if not benchmark:
            result.extra.cudnn_benchmark = True  # the kernels alone: none is one-time
            assert trace_summary.cudnn_tuning(result) == []
        else:
            tuning = trace_summary.cudnn_tuning(result)
            print(f"benchmark on: {len(tuning)} one-time kernels of cuDNN's: {said[True]}")
            assert tuning and all("cudnn" in name for name in tuning)
    assert said[False] == []
    assert len(said[True]) == 1 and "torch.backends.cudnn.benchmark = False" in said[True][0]


CALLS_RECORDED = """
import ctypes, json
import numpy as np
from memprof.core.activity import ActivityLog
from memprof.trace.stacks import CallRecorder
ctypes.CDLL("libcuda.so.1").cuInit(0)
log, why_not = ActivityLog.start(0, keep_all=True)
assert log is not None, why_not
calls = CallRecorder(None, 0)
assert calls.start(log.cupti) is None
import pycuda.driver as cuda
context = cuda.Device(0).make_context()  # cuCtxCreate: not a work call
buffer = cuda.mem_alloc(64 << 20)
host = np.ones(16 << 20, np.float32)
cuda.memcpy_htod(buffer, host)
cuda.memcpy_dtoh(host, buffer)  # to pageable memory, 64 MiB: returns once it is done
cuda.Context.get_current()
context.synchronize()
calls.stop()
log.flush()
copies = [r for r in log.all_gpu_records() if r.category == "memcpy"]
print("calls: " + json.dumps([[c.name, c.duration_ms, c.start_ns] for c in calls.api_records()]))
print("copy: " + json.dumps([copies[-1].start_ns, copies[-1].end_ns]))
buffer.free()
context.pop()
"""


def test_the_callbacks_time_the_work_calls_alone_around_their_gpu_work():
    """Only the work calls are called back (no cuCtxCreate, no launch), each timed on CUPTI's
    clock: a 64 MiB copy to pageable memory's call holds its DMA record's whole interval."""
    completed = subprocess.run(
        [sys.executable, "-c", CALLS_RECORDED],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        ),
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    (calls,) = [
        json.loads(line.removeprefix("calls: ")) for line in lines if line.startswith("calls: ")
    ]
    (copy,) = [
        json.loads(line.removeprefix("copy: ")) for line in lines if line.startswith("copy: ")
    ]
    names = [name for name, _, _ in calls]
    print("calls:", calls, "copy:", copy)
    assert [name for name in names if call_kind(name) is None] == []
    assert {"cuMemAlloc", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuCtxSynchronize"} <= {
        base_name(n) for n in names
    }
    (held,) = [(start, start + ms * 1e6) for name, ms, start in calls if "cuMemcpyDtoH" in name]
    assert held[0] <= copy[0] and copy[1] <= held[1]  # the call waited for its DMA


def test_all_calls_records_the_calls_a_default_trace_leaves_out(tmp_path):
    """--all-calls holds calls that ask for no work, and the same work calls as a default
    trace of the same program."""
    default, work = trace(tmp_path, "--bandwidth", "none", "examples/pycuda_copies.py")
    assert default.returncode == 0, default.stderr[-3000:]
    every_run, every = trace(
        tmp_path, "--bandwidth", "none", "--all-calls", "examples/pycuda_copies.py"
    )
    assert every_run.returncode == 0, every_run.stderr[-3000:]

    def calls(result: Result) -> dict[str, int]:
        return {m.name: len(m.samples_ms) for m in result.measurements if m.group == "api"}

    assert work.parameters.all_calls is False and every.parameters.all_calls is True
    assert any(not is_work_call(name) for name in calls(every))
    copies = {n: c for n, c in calls(every).items() if n.startswith("cuMemcpy")}
    assert copies and copies == {n: c for n, c in calls(work).items() if n.startswith("cuMemcpy")}


def test_the_timeline_puts_each_copy_on_its_stream_as_long_as_the_profile_says(tmp_path):
    """--timeline of a real program: Chrome trace JSON whose durations are the profile's,
    the synchronous copies and the pinned ones on a stream each, never two at once on one
    stream, each copy with its line, all within the program's wall time."""
    from tests.test_trace_timeline import assert_durations_are_the_profiles, complete

    if importlib.util.find_spec("pycuda") is None:
        pytest.skip("pycuda is not installed here")
    drawn = tmp_path / "timeline.json"
    completed, result = trace(tmp_path, "--timeline", str(drawn), "examples/pycuda_copies.py")
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = json.loads(drawn.read_text())
    for event in document["traceEvents"]:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= event.keys(), event
    assert_durations_are_the_profiles(document, result)
    copies = [e for e in complete(document) if e["cat"] == "memcpy"]
    streams = {e["tid"] for e in copies}
    assert len(streams) >= 2, streams  # the synchronous copies' and the pinned ones' stream
    for stream in streams:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in copies if e["tid"] == stream)
        assert all(end <= start + 1e-3 for (_, end), (start, _) in itertools.pairwise(spans))
    assert all(e["args"]["line"].startswith("pycuda_copies.py:") for e in copies)
    gpu = [e for e in complete(document) if e["cat"] != "api"]
    span_us = max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)
    assert span_us <= result.extra.wall_s * 1e6  # the program waits for its own copies


def test_resnet_trainings_first_verdict_is_what_its_own_timing_allows(tmp_path):
    """The run's breakdown against the program's own clock: its GPU can have been busy at
    most the sum of its operations' durations (the profile's rows); where that is under half
    the wall time the program measured itself, the first verdict must be that it sat idle."""
    from memprof.experiments import trace as trace_summary
    from memprof.model.formatting import format_ms
    from memprof.model.timeline import breakdown

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    arguments = ("examples/resnet_train.py", "--steps", "3", "--batch", "8", "--size", "32")
    completed, result = trace(tmp_path, "--bandwidth", "none", *arguments)
    assert completed.returncode == 0, completed.stderr[-3000:]
    own = program_report(completed)
    (share,) = breakdown(result.extra.timeline, round(result.extra.wall_s * 1e9))
    busy_ns = share.wall_ns - share.idle_ns
    summed_ns = sum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms) * 1e6
    assert 0 < busy_ns <= summed_ns + 1
    assert share.wall_ns >= own["wall_s"] * 1e9  # memprof's clock encloses the program's
    verdict = trace_summary.summarize(result).conclusions[1]
    print(verdict)  # for the lead: which part this GPU's run had most of
    if summed_ns < own["wall_s"] * 1e9 / 2:
        assert verdict.startswith("GPU 0 sat idle ")
        # its GPU works only while the program runs: the idle time before its first work
        # and after its last holds at least what memprof's clock ran beyond the program's
        assert share.outside_ns >= share.wall_ns - own["wall_s"] * 1e9 - 1e5  # 0.1 ms: rounding
        assert f"Of the run, {format_ms(share.outside_ns / 1e6)} (" in verdict
        assert "came before its first piece of work or after its last" in verdict
    assert f"GPU {share.device} " in verdict
    # the waits of .item() and of the pageable .to() copies, each told its own cause; three
    # steps cost under 1% of a run that start-up dominates, so the advice is read unfolded
    marks = marked_lines(ROOT / "examples/resnet_train.py")
    text = " ".join(unfolded_advice(result).split())
    item = f"resnet_train.py:{marks['item'][1]}: 3 waits (cudaStreamSynchronize)"
    images = f"resnet_train.py:{marks['images'][1]}: 3 waits (cudaStreamSynchronize)"
    assert item in text and images in text
    assert "each reads one value back" in text[text.index(item) :].split(". ")[0]
    assert "waits of blocking copies" in text[text.index(images) :].split(". ")[0]


def test_a_helpers_pageable_copies_are_advised_at_the_caller_that_chose_them(tmp_path):
    """examples/torch_helper.py copies pageable and pinned memory through one helper line:
    the advice on its pageable copies names the caller that passed pageable memory."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    example = "examples/torch_helper.py"
    completed, result = trace(tmp_path, "--bandwidth", "none", example)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert program_report(completed)["correct"]
    marks = marked_lines(ROOT / example)
    helper, chose, pinned = (
        f"{file}:{number}" for file, number in (marks["helper"], marks["chose"], marks["pinned"])
    )
    advice = unfolded_advice(result)
    print(advice)
    (said,) = [s for s in advice.splitlines() if s.startswith(f"{helper}: ") and "pageable" in s]
    assert f"came from {chose} (4 copies): the line to change" in said
    assert pinned not in said
