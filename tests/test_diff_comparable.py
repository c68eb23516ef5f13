"""`memprof diff` says when two runs are not comparable: one line per difference, above the
table. Recorded fixtures, edited here in tmp_path as a second machine or run would record them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.experiments import load
from memprof.model.gpustate import OtherProcess
from memprof.output.diff import compare, differences
from tests.conftest import FIXTURES, plain
from tests.test_gpu_state import healthy

PINNED = FIXTURES / "legacy_v2_pinned_p20.json"  # recorded before NVML


def timed_with_events(data: dict) -> None:
    """The same run as --timing events records it: no CUPTI rows, no events beside them."""
    for record in [data["timing"], *data["measurements"]]:
        if record.get("source") == "cupti":
            record.update(source="events")
            record.pop("events_ms", None)


def edited(tmp_path: Path, name: str, edit, stem: str = "") -> Path:
    """The pinned fixture (or FIXTURES/stem.json) with `edit(data)` applied to its JSON,
    saved as tmp_path/name."""
    data = json.loads((FIXTURES / f"{stem}.json" if stem else PINNED).read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def with_state(**changes):
    def edit(data):
        data["gpu_states"] = [plain(healthy(**changes))]
        if "pcie_width" in changes:  # its copies as fast as such a link allows
            on_a_slower_link(data)

    return edit


def on_a_slower_link(data: dict) -> None:
    """The copies a quarter as fast, as a narrower or older link carries them (faster than
    their link, a file is refused)."""
    for m in data["measurements"]:
        if m["group"] == "gpu" and m["operation"] in ("h2d", "d2h"):
            for field in ("samples_ms", "throughput_ms", "events_ms"):
                m[field] = [4 * t for t in m.get(field, [])]


def test_a_run_against_itself_is_comparable():
    result = load(PINNED)
    assert differences(result, load(PINNED)) == []
    assert diff(result, load(PINNED)).header == []


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (
            lambda data: data["device"].update(name="NVIDIA H100 80GB HBM3"),
            "GPU model: A NVIDIA H200, B NVIDIA H100 80GB HBM3.",
        ),
        (
            lambda data: data["device"].update(driver_version="570.86.15"),
            "driver: A 580.159.04 (CUDA 13.0), B 570.86.15 (CUDA 13.0).",
        ),
        (
            lambda data: on_a_slower_link(data) or data["device"].update(pcie_generation=4),
            "PCIe link: A Gen5 x16, B Gen4 x16.",
        ),
        (
            lambda data: data["timing"].update(host_affinity="affinity: left where the OS put it"),
            "host affinity: A host thread on CPUs 0-15, local to the GPU (no NUMA node), "
            "B left where the OS put it.",
        ),
        (
            timed_with_events,
            "timing source: A CUPTI's records, B gated CUDA events.",
        ),
        (
            lambda data: data["parameters"].update(host_buffer="hugepages"),
            "host buffer: A numpy, B hugepages.",
        ),
        (
            lambda data: data["timing"].pop("host_affinity"),  # a run that did not record it
            "host affinity: A host thread on CPUs 0-15, local to the GPU (no NUMA node), "
            "B not recorded.",
        ),
    ],
)
def test_each_difference_is_one_line(tmp_path, edit, line):
    b = load(edited(tmp_path, "b.json", edit))
    assert differences(load(PINNED), b) == [line]


def diff(first, second, *options, **named):
    """What `memprof diff` shows of two runs."""
    return compare(first, second, *options, **named).summary


def test_clocks_held_down_in_one_run_are_a_difference(tmp_path):
    a = load(edited(tmp_path, "a.json", with_state()))
    b = load(edited(tmp_path, "b.json", with_state(clock_reasons=["sw_power_cap"])))
    assert differences(a, b) == [
        "clocks: A SM max 1980 MHz, memory 3201 of 3201 MHz, B SM max 1980 MHz, memory 3201 "
        "of 3201 MHz, held down (software power cap)."
    ]
    both = with_state(clock_reasons=["sw_power_cap", "hw_slowdown"])
    assert differences(a, load(edited(tmp_path, "both.json", both)))[0].endswith(
        "held down (software power cap, hardware slowdown)."
    )
    idle = load(edited(tmp_path, "idle.json", with_state(clock_reasons=["gpu_idle"])))
    assert differences(a, idle) == []  # idle holds nothing down


def test_the_link_during_the_run_comes_from_nvml_where_recorded(tmp_path):
    a = load(edited(tmp_path, "a.json", with_state()))
    b = load(edited(tmp_path, "b.json", with_state(pcie_width=8)))
    assert differences(a, b) == ["PCIe link: A Gen5 x16, B Gen5 x8."]


def test_a_state_recorded_in_one_run_only_is_said_once(tmp_path):
    b = load(edited(tmp_path, "b.json", with_state()))
    assert differences(load(PINNED), b) == [
        "clocks and link during the run: not recorded in A (an older memprof)."
    ]
    assert differences(b, load(PINNED)) == [
        "clocks and link during the run: not recorded in B (an older memprof)."
    ]


def test_a_run_whose_nvml_could_not_be_read_is_said_to_be(tmp_path):
    """Its clocks are unknown, not equal: one run's GPU may have been held down."""
    a = load(edited(tmp_path, "a.json", with_state()))
    unknown = load(edited(tmp_path, "b.json", with_state(unavailable="NVML not found")))
    line = "clocks and link during the run: unknown in {} (NVML: NVML not found)."
    assert differences(a, unknown) == [line.format("B")]
    assert differences(unknown, a) == [line.format("A")]
    assert differences(unknown, unknown) == []


def test_another_process_on_either_gpu_is_said(tmp_path):
    busy = with_state(other_processes=[OtherProcess(4242, "compute", None)])
    a = load(edited(tmp_path, "a.json", with_state()))
    b = load(edited(tmp_path, "b.json", busy))
    assert differences(a, b) == ["B shared its GPU with another process (pid 4242)."]
    two = [OtherProcess(4242, "compute", None), OtherProcess(4343, "graphics", None)]
    both = load(edited(tmp_path, "both.json", with_state(other_processes=two)))
    assert differences(both, a) == ["A shared its GPU with another process (pid 4242, 4343)."]


def test_diff_prints_the_lines_above_the_table_and_saves_them(tmp_path):
    b = edited(tmp_path, "b.json", lambda data: data["device"].update(name="NVIDIA H100"))
    saved = tmp_path / "diff.json"
    ran = CliRunner().invoke(
        app, ["diff", str(PINNED), str(b), "--json", str(saved)], env={"COLUMNS": "80"}
    )
    assert ran.exit_code == 0, ran.output
    lines = ran.stdout.splitlines()
    assert lines[0] == "Not comparable: GPU model: A NVIDIA H200, B NVIDIA H100."
    assert lines[2].startswith("memprof pinned: A = NVIDIA H200")
    assert json.loads(saved.read_text())["not_comparable"] == [lines[0]]


def test_traces_of_another_program_or_arguments_or_gpu_are_not_comparable(tmp_path):
    torch_trace = load(FIXTURES / "h200_trace_torch.json")
    assert differences(torch_trace, torch_trace) == []
    assert differences(torch_trace, load(FIXTURES / "h200_trace_pycuda.json")) == [
        "program: A torch_copies.py, B pycuda_copies.py."
    ]

    def moved(data):  # the same program traced from another folder: comparable
        data["parameters"]["program"] = "/home/ci/app/examples/torch_copies.py"

    assert (
        differences(torch_trace, load(edited(tmp_path, "moved.json", moved, "h200_trace_torch")))
        == []
    )

    def edit(data):
        data["parameters"]["arguments"] = ["--steps", "3"]
        for part in (data["extra"], data["extra"]["pinned_bandwidth"]):  # the cache's GPU too
            part["gpu_name"] = "NVIDIA H100 80GB HBM3"

    other = load(edited(tmp_path, "other.json", edit, "h200_trace_torch"))
    assert differences(torch_trace, other) == [
        "GPU model: A NVIDIA H200, B NVIDIA H100 80GB HBM3.",
        "arguments: A none, B --steps 3.",
    ]


def test_a_trace_whose_gpu_name_could_not_be_read_is_not_comparable_to_a_named_one(tmp_path):
    """cuDeviceGetName failed in one trace: its GPU is unknown, so the two cannot be said to
    have run on one model (as of a GPU state one run lacks); two unnamed ones are alike."""
    torch_trace = load(FIXTURES / "h200_trace_torch.json")

    def unnamed(data):
        data["extra"]["gpu_name"] = ""

    unknown = load(edited(tmp_path, "unnamed.json", unnamed, "h200_trace_torch"))
    assert unknown.gpu_name is None and torch_trace.gpu_name == "NVIDIA H200"
    assert differences(torch_trace, unknown) == ["GPU model: unknown in B."]
    assert differences(unknown, torch_trace) == ["GPU model: unknown in A."]
    assert differences(unknown, unknown) == []


def test_a_trace_of_every_call_and_one_of_the_work_calls_are_not_comparable(tmp_path):
    work = load(FIXTURES / "h200_trace_torch.json")  # recorded holding the work calls

    def every_call(data):  # as --all-calls records it: the work calls are among every call
        data["parameters"]["all_calls"] = True

    every = load(edited(tmp_path, "every.json", every_call, "h200_trace_torch"))
    assert differences(work, work) == []
    assert differences(every, work) == [
        "API calls recorded: A every call (--all-calls), B the work calls."
    ]
