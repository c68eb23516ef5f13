"""trace names the framework's own work as the framework's (issue 38, item 5): XLA's
autotuning, half and more of the GPU's work in the H200's JAX trace, is told apart from the
program's steps, with the settings that change it, and the calls XLA's runtime threads make
are said to be XLA's, never advised as the program's lines."""

from __future__ import annotations

import math
import sys

import pytest

from memprof.experiments.trace import framework_verdicts, run_scale, runtime_lines, summarize
from memprof.model.formatting import format_ms, format_percent
from memprof.model.results import Measurement
from memprof.trace.collect import Program, run_program
from tests.conftest import load_fixture, load_trace

# As the H200's JAX trace named them (CUPTI's demangled names)
REDZONE = (
    "stream_executor::gpu::RedzoneAllocatorKernelImpl(unsigned char*, unsigned char, "
    "unsigned long, unsigned int*)"
)
DELAY = (
    "stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::"
    "GpuSemaphoreState volatile*, stream_executor::GpuSemaphoreState)"
)
COMPARISON = (
    "void stream_executor::gpu::xla_fp_comparison<float>(float*, float*, float, "
    "unsigned long, int*)"
)
REPEAT = "stream_executor::gpu::RepeatBufferKernelImpl(char*, long, long)"


def kernel(name: str, *samples_ms: float) -> Measurement:
    return Measurement("gpu", name, "kernel", None, 0, list(samples_ms), "cupti")


def test_the_jax_trace_says_xla_autotuning_took_most_of_the_gpus_work():
    result = load_trace("jax_mlp")
    conclusions = summarize(result).conclusions
    tuning = [m for m in result.measurements if m.name in (REDZONE, DELAY, COMPARISON, REPEAT)]
    assert len(tuning) == 4  # the four kinds the H200 ran, each its own profile row
    tuning_ms = math.fsum(s for m in tuning for s in m.samples_ms)
    gpu_ms = math.fsum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms)
    assert tuning_ms / gpu_ms > 0.5  # the "half of the GPU time"
    said = [line for line in conclusions if line.startswith("XLA's autotuning")]
    assert len(said) == 1
    assert "at least 761 kernels" in said[0]  # 616 + 72 + 65 + 8, the profile's calls
    assert f"{format_ms(tuning_ms)}, {format_percent(tuning_ms / gpu_ms)} of the GPU's" in said[0]
    assert f"GPU's {format_ms(gpu_ms)} of work" in said[0]
    assert said[0] == (
        "XLA's autotuning ran at least 761 kernels while it compiled the program "
        "(stream_executor's redzone checks, result comparisons, buffer fills and timing "
        f"delays): {format_ms(tuning_ms)}, {format_percent(tuning_ms / gpu_ms)} of the GPU's "
        f"{format_ms(gpu_ms)} of work (kernels, copies and memsets summed), done once per "
        "compiled program, not per step. JAX's persistent compilation cache "
        "(jax_compilation_cache_dir) keeps it out of later runs; "
        "XLA_FLAGS=--xla_gpu_autotune_level=0 skips it, at the risk of slower kernels."
    )
    # the first verdict stays what the run's own timing shows: the GPU sat idle
    assert conclusions[1].startswith("GPU 0 sat idle 99.51%")
    assert conclusions.index(said[0]) == 2


def test_a_torch_trace_has_no_xla_autotuning():
    result = load_fixture("trace_torch")
    assert not framework_verdicts(result, run_scale(result))


@pytest.mark.parametrize(
    ("name", "counted"),
    [
        (REDZONE, True),
        (DELAY, True),
        (COMPARISON, True),
        (REPEAT, True),
        ("DelayKernel(int)", False),  # a program's own kernel of that name
        ("my::RedzoneAllocatorKernelImpl(char*)", False),
        ("stream_executor::gpu::GemmKernel(float*)", False),  # XLA's, but not tuning
        ("gemm_fusion_dot_1", False),  # XLA's fused step: the program's work
    ],
)
def test_only_stream_executors_tuning_kernels_are_counted(name, counted):
    result = load_fixture("trace_torch")
    result.measurements = [*result.measurements, kernel(name, 2.0, 1.0)]
    said = framework_verdicts(result, run_scale(result))
    assert bool(said) == counted
    if counted:
        assert "at least 2 kernels" in said[0]
        assert f"{format_ms(3.0)}, " in said[0]


def test_a_trace_without_gpu_work_names_no_share():
    result = load_fixture("trace_torch")
    result.measurements = [kernel(REDZONE, 0.0)]
    said = framework_verdicts(result, run_scale(result))
    assert "at least 1 kernel " in said[0]
    assert ", - of the GPU's" in said[0]


def runtime_said(conclusions: list[str]) -> list[str]:
    return [line for line in conclusions if line.startswith("XLA's runtime made")]


def test_xla_runtime_threads_calls_are_named_as_xlas_and_never_advised(unfolded_advice):
    result = load_trace("jax_mlp")
    thread = [line for line in result.extra.lines if line.origin == "thread"]
    assert len(thread) == 20  # the H200's JAX run: its copies, memsets, allocations, waits
    conclusions = summarize(result).conclusions
    (said,) = runtime_said(conclusions)
    assert f"made {sum(line.calls for line in thread)} calls on its own threads" in said
    assert "(copies, allocations, frees, memsets, waits;" in said
    assert f"{format_ms(math.fsum(line.gpu_ms for line in thread))} of GPU time" in said
    assert f"{format_ms(math.fsum(line.host_ms for line in thread))} of host time" in said
    assert "jax_mlp.py:53" in said and " and 2 more)" in said  # 7 places, 5 named
    # every piece of advice, unfolded, is about the program's own lines
    advised = [line for line in conclusions if line.startswith("jax_mlp.py:")]
    assert advised and not any("(other thread)" in line for line in advised)


def test_a_runtime_call_of_a_kind_without_a_plural_is_named_by_its_kind():
    result = load_trace("jax_mlp")
    wait = next(
        line for line in result.extra.lines if line.origin == "thread" and line.activity == "wait"
    )
    wait.activity = "prefetch"  # no word of RUNTIME_WORDS': its own
    (said,) = runtime_said(summarize(result).conclusions)
    assert "(copies, allocations, frees, memsets, prefetch, waits;" in said


def test_runtime_calls_at_five_places_name_them_all_and_count_none_more():
    result = load_trace("jax_mlp")
    thread = [line for line in result.extra.lines if line.origin == "thread"]
    places = list(dict.fromkeys(f"{line.file}:{line.line}" for line in thread))[:5]
    result.extra.lines = [
        line
        for line in result.extra.lines
        if line.origin != "thread" or f"{line.file}:{line.line}" in places
    ]
    (said,) = runtime_said(summarize(result).conclusions)
    assert f"in the Where tables, at {', '.join(places)}): " in said
    assert said.endswith(
        "of host time on those threads. JAX makes these calls for the program, so no advice "
        "on lines names them (the advice on copies by memory kind counts their copies with "
        "the program's): the program changes them only through what it asks of JAX (the "
        "arrays it moves between host and GPU, and how often it reads a result back)."
    )


def test_the_same_threads_are_the_programs_where_xla_did_not_run(unfolded_advice):
    result = load_trace("jax_mlp")
    result.measurements = [m for m in result.measurements if "stream_executor" not in m.name]
    conclusions = summarize(result).conclusions
    assert not runtime_said(conclusions)  # libraries [] and no autotuning: not XLA's
    assert any(line.startswith("jax_mlp.py:53 (other thread): ") for line in conclusions)
    result.extra.libraries = ["jax"]  # a trace recorded since memprof names jax
    conclusions = summarize(result).conclusions
    assert len(runtime_said(conclusions)) == 1
    assert not any("(other thread): " in line for line in conclusions)


def test_a_program_that_imports_jax_is_recorded_as_jaxs(tmp_path, monkeypatch):
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("")
    (tmp_path / "main.py").write_text("import jax\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    outcome = run_program(Program(str(tmp_path / "main.py"), None))
    sys.modules.pop("jax", None)
    assert outcome.exit_code == 0
    assert outcome.libraries == ("jax",)


def test_a_trace_of_jax_without_source_lines_has_no_runtime_lines():
    """A trace saved before memprof kept source lines (extra.lines None)."""
    result = load_trace("jax_mlp")
    result.extra.lines, result.extra.libraries = None, ["jax"]
    assert runtime_lines(result) == []
