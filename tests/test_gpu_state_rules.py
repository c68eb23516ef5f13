"""What a saved file's GPU state may hold, each field's rule on both sides of its edge: the
declarations of memprof.model.gpustate, which the mutation round on its functions does not
reach (issue 37: each rule planted away loaded the file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import load
from tests.conftest import load_fixture, plain
from tests.test_gpu_state import healthy

PROCESS = {"pid": 0, "kind": "graphics", "memory_bytes": 0}
LINK = {
    "link": 0,
    "active": True,
    "version": "4.0",
    "speed_mb_per_s": 26_562,
    "remote_pci_bus_id": None,
    "remote_kind": "switch",
}


def saved(tmp_path: Path, **state) -> Path:
    """pinned_p20 with one healthy GPU state, these fields of it replaced."""
    data = json.loads(load_fixture("pinned_p20").to_json())
    data["gpu_states"] = [plain(healthy())]
    data["gpu_states"][0].update(state)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(InvalidArgument) as refused:
        load(path)
    return str(refused.value).removeprefix(f"{path}: ")


@pytest.mark.parametrize("mhz", [0, 100_000])
def test_a_clock_from_0_to_100_000_mhz_loads(tmp_path, mhz):
    """0: what NVML may say of a clock it cannot read (read as unknown, never as slow)."""
    state = load(saved(tmp_path, sm_clock_mhz=mhz, sm_clock_max_mhz=100_000)).gpu_states[0]
    assert state.sm_clock_mhz == mhz


@pytest.mark.parametrize(("mhz", "said"), [(-1, "-1"), (100_001, "100001")])
def test_a_clock_below_0_or_above_100_000_mhz_is_refused(tmp_path, mhz, said):
    assert refusal(saved(tmp_path, sm_clock_max_mhz=mhz)).startswith(
        f"gpu_states[0].sm_clock_max_mhz is {said}"
    )


def test_a_generation_from_0_to_16_loads(tmp_path):
    """0: what a tool may say where it cannot tell; 16: the GPU's own, past its slot's."""
    state = load(saved(tmp_path, pcie_generation=0, pcie_gpu_max_generation=16)).gpu_states[0]
    assert (state.pcie_generation, state.pcie_gpu_max_generation) == (0, 16)


@pytest.mark.parametrize("field", ["pcie_generation", "pcie_gpu_max_generation"])
@pytest.mark.parametrize("value", [-1, 17])
def test_a_generation_past_any_pcie_is_refused(tmp_path, field, value):
    top = {"pcie_generation": 5, "pcie_max_generation": 5, "pcie_gpu_max_generation": 16}
    top[field] = value
    assert refusal(saved(tmp_path, **top)).startswith(f"gpu_states[0].{field} is {value}")


def test_another_process_at_its_edges_loads(tmp_path):
    """pid 0 is a process (a container's view), 0 bytes a context holding none yet."""
    compute = {**PROCESS, "kind": "compute", "memory_bytes": 2**53}
    processes = load(saved(tmp_path, other_processes=[PROCESS, compute])).gpu_states[0]
    assert [(p.pid, p.kind, p.memory_bytes) for p in processes.other_processes] == [
        (0, "graphics", 0),
        (0, "compute", 2**53),
    ]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("pid", -1, "other_processes[0].pid is -1"),
        (
            "kind",
            "mps",
            "other_processes[0].kind is the string 'mps': expected one of compute, graphics",
        ),
        ("memory_bytes", -1, "other_processes[0].memory_bytes is -1"),
        ("memory_bytes", 2**53 + 1, f"other_processes[0].memory_bytes is {2**53 + 1}"),
        ("owner", "root", "other_processes[0].owner is not a known field"),
    ],
)
def test_another_process_past_its_edges_is_refused(tmp_path, field, value, said):
    path = saved(tmp_path, other_processes=[{**PROCESS, field: value}])
    assert refusal(path).startswith(f"gpu_states[0].{said}")


def test_an_nvlink_to_each_kind_of_far_end_loads(tmp_path):
    ends = ["gpu", "switch", "npu", "unknown", None]
    links = [{**LINK, "link": n, "remote_kind": end} for n, end in enumerate(ends)]
    state = load(saved(tmp_path, nvlinks=links)).gpu_states[0]
    assert [link.remote_kind for link in state.nvlinks] == ends


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        (
            "remote_kind",
            "cpu",
            "nvlinks[0].remote_kind is the string 'cpu': expected one of gpu, switch, npu, "
            "unknown or null",
        ),
        ("lanes", 4, "nvlinks[0].lanes is not a known field"),
    ],
)
def test_an_nvlink_past_its_edges_is_refused(tmp_path, field, value, said):
    path = saved(tmp_path, nvlinks=[{**LINK, field: value}])
    assert refusal(path).startswith(f"gpu_states[0].{said}")


def test_a_state_field_no_memprof_writes_is_refused(tmp_path):
    """A misspelt field would read as unknown: never a PASS by omission."""
    assert refusal(saved(tmp_path, sm_clocks_mhz=1980)).startswith(
        "gpu_states[0].sm_clocks_mhz is not a known field"
    )
