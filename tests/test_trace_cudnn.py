"""trace names cuDNN's autotuning as cuDNN's (issue 38, item 5): with
torch.backends.cudnn.benchmark on, the kernels cuDNN launches only while it times its
algorithms on each new convolution shape are counted once, with their share of the GPU's
work and when the setting pays; with it off nothing is said.

The H200's ResNet-18 trace ran with the setting off: every one of cuDNN's kernels recurs in
each step. The autotuning's extra kernels are added to its recording here."""

from __future__ import annotations

import math
import sys

import pytest

from memprof.experiments.trace import (
    RunScale,
    _tuning_cost,
    cudnn_tuning,
    framework_verdicts,
    run_scale,
    steady_start,
    summarize,
)
from memprof.model.formatting import format_ms, format_percent
from memprof.model.results import Measurement, Result
from memprof.model.timeline import GPU_CATEGORIES, NO_LINE
from memprof.trace.collect import Program, run_program
from tests.conftest import load_fixture, load_trace

# a candidate cuDNN times and rejects (the H200 ran its neighbours of other tile sizes)
CANDIDATE = (
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
    "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn"
)
KERNEL = GPU_CATEGORIES.index("kernel")


def cudnn_launches(result: Result) -> dict[str, list[int]]:
    """Each of cuDNN's kernels' launch times, as the trace's timeline holds them."""
    timeline = result.extra.timeline
    starts: dict[str, list[int]] = {}
    for category, name, start_ns, *_ in timeline.gpu:
        if category == KERNEL and "cudnn" in timeline.names[name]:
            starts.setdefault(timeline.names[name], []).append(start_ns)
    return starts


def launch_times_ns(result: Result) -> list[int]:
    """cuDNN's launches' times, in order."""
    return sorted(at for starts in cudnn_launches(result).values() for at in starts)


def add_kernel(result: Result, name: str, starts_ns: list[int], ms: float) -> None:
    """The kernel launched at starts_ns, each taking ms: in the profile and the timeline."""
    timeline = result.extra.timeline
    if name not in timeline.names:
        timeline.names.append(name)
    index = timeline.names.index(name)
    device, stream = timeline.gpu[0][4], timeline.gpu[0][5]
    rows = [(KERNEL, index, at, round(ms * 1e6), device, stream, 0, NO_LINE) for at in starts_ns]
    timeline.gpu = sorted([*timeline.gpu, *rows], key=lambda row: row[2])
    samples = [ms] * len(starts_ns)
    for m in result.measurements:
        if m.group == "gpu" and m.name == name:
            m.samples_ms = [*m.samples_ms, *samples]
            return
    result.measurements.append(Measurement("gpu", name, "kernel", None, 0, samples, "cupti"))


def tuned(benchmark: bool | None) -> Result:
    """The ResNet trace with cuDNN's timing of CANDIDATE: four launches in its first pass."""
    result = load_trace("resnet_train")
    first_ns = min(starts[0] for starts in cudnn_launches(result).values())
    add_kernel(result, CANDIDATE, [first_ns + i * 1000 for i in range(4)], 0.25)
    result.extra.cudnn_benchmark = benchmark
    return result


def said(result: Result) -> list[str]:
    return [line for line in summarize(result).conclusions if line.startswith("cuDNN's")]


def test_the_resnet_trace_ran_with_benchmark_off_and_every_cudnn_kernel_recurs():
    result = load_trace("resnet_train")
    assert result.extra.cudnn_benchmark is None  # recorded before memprof read it
    assert not said(result)
    result.extra.cudnn_benchmark = True  # even so: no kernel of cuDNN's is one-time
    assert not cudnn_tuning(result)
    assert not said(result)


def test_the_autotunings_kernels_are_named_with_their_share_and_the_setting():
    result = tuned(True)
    assert cudnn_tuning(result) == [CANDIDATE]
    (line,) = said(result)
    gpu_ms = math.fsum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms)
    assert "ran at least 4 kernels of 1 kind that the program's later steps never ran" in line
    assert f": {format_ms(1.0)}, {format_percent(1.0 / gpu_ms)} of the GPU's" in line
    assert f"GPU's {format_ms(gpu_ms)} of work" in line
    assert line == (
        "cuDNN's autotuning (torch.backends.cudnn.benchmark on) ran at least 4 kernels of 1 "
        f"kind that the program's later steps never ran: {format_ms(1.0)}, "
        f"{format_percent(1.0 / gpu_ms)} of the GPU's {format_ms(gpu_ms)} of work (kernels, "
        "copies and memsets summed), spent timing each new convolution shape's algorithms, "
        "once per shape, not per step. It pays when shapes stay fixed (each step then runs "
        "the fastest algorithm); where batch or image sizes vary, each new shape is timed "
        "again: set torch.backends.cudnn.benchmark = False there."
    )
    assert line in framework_verdicts(result, run_scale(result))


@pytest.mark.parametrize("benchmark", [False, None])
def test_nothing_is_said_with_benchmark_off_or_unknown(benchmark):
    assert not said(tuned(benchmark))


@pytest.mark.parametrize("steady", [False, True])
def test_a_kernel_launched_in_the_steps_is_the_programs(steady):
    result = tuned(True)
    first_ns = launch_times_ns(result)[0]
    name = max(cudnn_launches(result).items(), key=lambda item: len(item[1]))[0]
    name = name if steady else CANDIDATE + "_2"  # one each step, or timed twice at first
    add_kernel(result, name, [first_ns + 5000, first_ns + 6000], 0.5)
    expected = [CANDIDATE] if steady else [CANDIDATE, CANDIDATE + "_2"]
    assert cudnn_tuning(result) == expected


def test_a_shape_met_in_the_last_step_says_nothing():
    """A smaller last batch: timed in the last step, after which the earlier steps'
    kernels never run; no steps follow it, so nothing is told apart (none overcounted)."""
    result = tuned(True)
    last_step_ns = launch_times_ns(result)[-100]
    add_kernel(result, CANDIDATE + "_late", [last_step_ns + 1], 0.25)
    assert not cudnn_tuning(result)
    assert not said(result)


def test_a_kernel_run_over_several_steps_mid_run_says_nothing():
    """A phase in mid-run (an evaluation's shapes) whose kernel ran over several steps and
    then stopped: the steps that follow begin long after cuDNN's last new kernel, so that
    kernel is not told from timing (without the bound it was counted as tuning)."""
    result = tuned(True)
    times = launch_times_ns(result)
    middle = len(times) // 2
    add_kernel(result, CANDIDATE + "_eval", [times[middle + i] + 1 for i in (0, 500, 1000)], 0.25)
    assert not cudnn_tuning(result)


def test_a_kernel_not_cudnns_is_never_counted():
    result = tuned(True)
    first_ns = launch_times_ns(result)[0]
    add_kernel(result, CANDIDATE.replace("cudnn", "cublas"), [first_ns + 5000], 0.25)
    assert cudnn_tuning(result) == [CANDIDATE]


@pytest.mark.parametrize("after_last_new", [0, 3, 40])
def test_convolutions_run_once_tell_no_tuning_apart(after_last_new):
    """Only the first step kept, up to a few launches after its last new kernel: without
    the steps repeating, the chosen kernels are not told from the timed ones."""
    result = tuned(True)
    times = launch_times_ns(result)
    last_new_ns = max(starts[0] for starts in cudnn_launches(result).values())
    end_ns = times[times.index(last_new_ns) + after_last_new]
    timeline = result.extra.timeline
    timeline.gpu = [row for row in timeline.gpu if row[2] <= end_ns]
    assert not cudnn_tuning(result)


@pytest.mark.parametrize(
    ("launches", "last_new", "start"),
    [
        ([5, 7, 7], 1, 1),  # a step of one kernel, run twice
        ([1, 2, 1, 2], 1, 0),  # a step of two, twice, from the first launch
        ([3, 1, 2, 1, 2, 1], 2, 1),  # the steps may end within one
        ([1, 2, 1], 1, None),  # fewer than two steps
        ([9, 1, 2, 3, 1, 2, 3], 3, 1),  # a step of len // 2 kernels: the longest tried
        ([1, 2, 2, 1, 1], 2, 3),  # the steps begin one step after the last new kernel
        ([1, 2, 2, 1, 1], 1, None),  # ... and more than one step after it
    ],
)
def test_the_steps_begin_where_the_shortest_sequence_repeating_to_the_end_does(
    launches, last_new, start
):
    """steady_start's periods, its walk back to the first launch, its two repetitions and
    its bound of one step after the last new kernel, each on both sides."""
    assert steady_start(launches, last_new) == start


def test_an_autotuners_cost_is_its_kernels_time_and_share_of_all_the_gpus_work():
    tuning = [Measurement("gpu", CANDIDATE, "kernel", None, 0, [0.125, 0.125], "cupti")]
    kernels, cost = _tuning_cost(tuning, RunScale(wall_ms=100.0, gpu_ms=0.5))
    assert kernels == "2 kernels"
    assert cost == (
        f"{format_ms(0.25)}, 50.00% of the GPU's {format_ms(0.5)} of work "
        "(kernels, copies and memsets summed)"
    )  # under a millisecond of GPU work is still a share
    assert ", - of the GPU's" in _tuning_cost(tuning, RunScale(100.0, 0.0))[1]


def test_a_program_without_cudnn_kernels_says_nothing_with_benchmark_on():
    result = load_trace("jax_mlp")
    result.extra.cudnn_benchmark = True
    assert not any("cudnn" in name for name in result.extra.timeline.names)
    assert cudnn_tuning(result) == []


def test_the_runs_scale_is_its_wall_time_in_ms_and_all_the_gpus_work():
    result = load_trace("resnet_train")
    gpu_ms = math.fsum(s for m in result.measurements if m.group == "gpu" for s in m.samples_ms)
    scale = run_scale(result)
    assert scale.gpu_ms == gpu_ms  # every kernel, copy and memset
    assert scale.wall_ms == pytest.approx(result.extra.wall_s * 1000, rel=1e-9)


def test_a_torch_trace_without_a_timeline_says_nothing():
    result = load_fixture("trace_torch")
    result.extra.cudnn_benchmark = True
    result.extra.timeline = None
    assert not cudnn_tuning(result)


@pytest.mark.parametrize("setting", ["True", "False", "'yes'"])
def test_the_programs_setting_is_recorded_at_its_end(tmp_path, monkeypatch, setting):
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import types\n"
        "backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False))\n"
    )
    (tmp_path / "main.py").write_text(f"import torch\ntorch.backends.cudnn.benchmark = {setting}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    outcome = run_program(Program(str(tmp_path / "main.py"), None))
    sys.modules.pop("torch", None)
    assert outcome.exit_code == 0
    assert outcome.libraries == ("torch",)
    assert outcome.cudnn_benchmark == {"True": True, "False": False, "'yes'": None}[setting]


def test_a_program_without_torch_records_no_setting(tmp_path):
    (tmp_path / "main.py").write_text("x = 1\n")
    outcome = run_program(Program(str(tmp_path / "main.py"), None))
    assert outcome.cudnn_benchmark is None


def test_the_h200s_resnet_with_benchmark_on_names_the_kernels_only_its_first_steps_ran():
    """Recorded on the H200 (examples/resnet_train.py --cudnn-benchmark, 30 steps of 64
    images): cuDNN timed candidates it never ran again. Each kernel named ran only before the
    steady steps began, each cuDNN kernel of those steps is left out, and one sentence says
    so with their GPU time."""
    result = load_trace("resnet_benchmark")
    assert result.extra.cudnn_benchmark is True
    named = cudnn_tuning(result)
    launches = cudnn_launches(result)
    assert len(named) >= 10 and set(named) < set(launches)
    last_tuning = max(max(launches[name]) for name in named)
    steady = [name for name, starts in launches.items() if max(starts) > last_tuning]
    assert steady and not set(steady) & set(named)
    said = [c for c in summarize(result).conclusions if c.startswith("cuDNN's autotuning")]
    tuning_ms = math.fsum(
        s for m in result.measurements if m.group == "gpu" and m.name in named for s in m.samples_ms
    )
    assert len(said) == 1 and format_ms(tuning_ms) in said[0]
    result.extra.cudnn_benchmark = False  # the same kernels, the setting off: nothing is said
    assert cudnn_tuning(result) == []
