"""The GPU state a Result records: its JSON round trip, older files without it, and what info
and every run's header say about it.

The states here are recorded fixtures edited in the test (as a run beside a throttled GPU or
another process would record them): the fixtures themselves predate the GPU state.
"""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from memprof.errors import InvalidArgument
from memprof.experiments import load, shape_of, summarize
from memprof.model.gpustate import GpuState, NvLink, OtherProcess, state_warnings
from memprof.model.results import Result
from memprof.output.render import render_result
from tests.conftest import FIXTURES, load_fixture, load_legacy, plain, replace


def healthy(index: int = 0, **changes) -> GpuState:
    """A state as NVML reports a healthy H200 (edited per test)."""
    state = GpuState(
        index=index,
        pci_bus_id=f"0000:00:0{6 + index}.0",
        sm_clock_mhz=1980,
        sm_clock_max_mhz=1980,
        memory_clock_mhz=3201,
        memory_clock_max_mhz=3201,
        clock_reasons=[],
        clock_reasons_basis="sampled when the run started and when it ended",
        pcie_generation=5,
        pcie_width=16,
        pcie_max_generation=5,
        pcie_max_width=16,
        pcie_gpu_max_generation=5,
        nvlinks=[],
        ecc_enabled=True,
        persistence_mode=True,
        mig_enabled=False,
        other_processes=[],
    )
    return replace(state, **changes)


def rendered(result: Result, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    render_result(result, summarize(result), console)
    return console.export_text()


def test_a_result_with_gpu_states_round_trips_through_json():
    result = load_fixture("pinned_p20")
    result.gpu_states = [
        healthy(
            nvlinks=[NvLink(0, True, "4.0", 26562, "0000:ff:00.0", "switch")],
            other_processes=[OtherProcess(77, "compute", 1 << 30)],
            clock_reasons=["sw_power_cap"],
        )
    ]
    again = Result.from_json(result.to_json(), shape_of)
    assert again.gpu_states == result.gpu_states
    assert isinstance(again.gpu_states[0].nvlinks[0], NvLink)


def test_every_fixture_without_gpu_states_still_loads():
    older = [p for p in FIXTURES.glob("*.json") if "gpu_states" not in json.loads(p.read_text())]
    assert len(older) >= 20  # every legacy_ fixture, and the two-GPU ones not yet re-recorded
    for path in older:
        assert load(path).gpu_states is None, path.name


def test_every_fixture_with_gpu_states_loads_them():
    newer = [p for p in FIXTURES.glob("h200_*.json") if json.loads(p.read_text()).get("gpu_states")]
    assert len(newer) >= 15  # every run of an experiment (a trace records none)
    for path in newer:
        states = load(path).gpu_states
        assert states and all(state.pci_bus_id for state in states), path.name


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("pcie_width", -1, "gpu_states[0].pcie_width"),
        ("clock_reasons", "sw_power_cap", "gpu_states[0].clock_reasons"),
        ("nvlinks", [{"link": 0, "active": True}], "gpu_states[0].nvlinks[0].version"),
    ],
)
def test_a_bad_gpu_state_is_refused_naming_the_field(tmp_path, field, value, where):
    data = json.loads(load_fixture("pinned_p20").to_json())
    data["gpu_states"] = [plain(healthy())]
    data["gpu_states"][0][field] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as refused:
        load(path)
    assert str(refused.value).startswith(f"{path}: {where} ")


def test_a_healthy_gpu_gives_one_line_and_no_warning():
    result = load_fixture("pinned_p20")
    result.gpu_states = [healthy()]
    text = rendered(result)
    assert (
        "NVML: GPU 0 PCIe Gen5 x16 (max Gen5 x16), SM 1980/1980 MHz, memory 3201/3201 MHz" in text
    )
    assert "warning:" not in text


@pytest.mark.parametrize(
    ("changes", "warned"),
    [
        ({"pcie_generation": 4}, "PCIe link ran at Gen4 x16, below its Gen5 x16 maximum"),
        ({"pcie_width": 8}, "PCIe link ran at Gen5 x8, below its Gen5 x16 maximum"),
        ({"memory_clock_mhz": 1593}, "memory clock was 1593 MHz, below its 3201 MHz"),
        ({"clock_reasons": ["hw_slowdown"]}, "clocks were held down during the run (hardware"),
        (
            {"other_processes": [OtherProcess(4242, "graphics", None)]},
            "another process used GPU 0 during the run: pid 4242 (graphics)",
        ),
    ],
)
def test_each_thing_that_makes_figures_suspect_is_one_warning(changes, warned):
    state = healthy(**changes)
    assert len(state_warnings(state)) == 1
    result = load_fixture("pinned_p20")
    result.gpu_states = [state]
    text = rendered(result, width=200)
    assert f"warning: GPU 0's {warned}" in text or f"warning: {warned}" in text
    assert all(len(line) <= 80 for line in rendered(result).splitlines()[:8])


def test_idle_and_sync_boost_are_no_warning_and_unknown_is_no_warning():
    assert state_warnings(healthy(clock_reasons=["gpu_idle", "sync_boost"])) == []
    unknown = GpuState(index=0, pci_bus_id="0000:00:06.0")
    assert state_warnings(unknown) == []
    assert state_warnings(healthy(unavailable="NVML: Driver Not Loaded")) == []


def test_a_run_without_nvml_says_so_in_its_header():
    result = load_fixture("pinned_p20")
    result.gpu_states = [GpuState(0, "0000:00:06.0", unavailable="nvidia-ml-py is not installed")]
    assert "NVML: GPU 0 state unknown (nvidia-ml-py is not installed)" in rendered(result)


def test_an_older_file_has_no_state_lines_in_its_header():
    text = rendered(load_legacy("pinned_p20"))
    assert "NVML" not in text and "warning:" not in text


def info_rows(result: Result) -> dict[str, str]:
    table = summarize(result).tables[0]
    return {row[0]: row[1] for row in table.rows}


def test_info_lists_the_state_row_by_row():
    result = load_fixture("info")
    result.gpu_states = [
        healthy(
            pcie_generation=4,
            clock_reasons=["gpu_idle", "sw_power_cap"],
            nvlinks=[NvLink(i, True, "4.0", 26562, "0000:ff:00.0", "switch") for i in range(18)],
            other_processes=[OtherProcess(77, "compute", 2 << 30)],
        )
    ]
    rows = info_rows(result)
    assert rows["PCIe link during the run"] == (
        "Gen4 x16, below its Gen5 x16 maximum: 31.5 GB/s per direction instead of 63.0 GB/s [NVML]"
    )
    assert rows["Clocks: when the run ended, of maximum"] == (
        "SM 1980 of 1980 MHz, memory 3201 of 3201 MHz"
    )
    assert rows["Clock events during the run"] == "software power cap"
    assert rows["NVLink"] == (
        "18 of 18 links active, NVLink 4.0, 26.6 GB/s each = 478 GB/s per direction"
    )
    assert rows["ECC, persistence, MIG"] == "ECC on, persistence on, MIG off"
    assert rows["Other processes on the GPU"] == "pid 77 (compute, 2 GiB)"


def test_info_of_an_older_file_says_not_recorded_and_of_no_nvml_says_why():
    assert info_rows(load_legacy("info"))["GPU state (NVML)"] == (
        "not recorded (a file from an older memprof)"
    )
    result = load_fixture("info")
    result.gpu_states = [GpuState(0, "0000:00:06.0", unavailable="NVML: Driver Not Loaded")]
    assert info_rows(result)["GPU state (NVML)"] == "unknown: NVML: Driver Not Loaded"


def test_unknown_fields_read_unknown_in_info():
    result = load_fixture("info")
    result.gpu_states = [GpuState(0, "0000:00:06.0")]
    rows = info_rows(result)
    assert rows["PCIe link during the run"] == "unknown [NVML]"
    assert rows["Clock events during the run"] == "unknown"
    assert rows["NVLink"] == "unknown"
    assert rows["ECC, persistence, MIG"] == "ECC unknown, persistence unknown, MIG unknown"
    assert rows["Other processes on the GPU"] == "unknown"
