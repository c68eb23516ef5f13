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
from memprof.model import gpustate
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


def nvlink(link: int, speed_mb_per_s: int) -> dict:
    return {
        "link": link,
        "active": True,
        "version": "4.0",
        "speed_mb_per_s": speed_mb_per_s,
        "remote_pci_bus_id": None,
        "remote_kind": "gpu",
    }


@pytest.mark.parametrize(
    ("links", "refused"),
    [
        ([nvlink(63, 1_000_000), nvlink(0, 0)], None),  # the edges: a peer ceiling's rates
        ([nvlink(64, 26_562)], "gpu_states[0].nvlinks[0].link is 64"),
        ([nvlink(0, 1_000_001)], "gpu_states[0].nvlinks[0].speed_mb_per_s is 1000001"),
        ([nvlink(3, 26_562), nvlink(3, 53_124)], "gpu_states[0].nvlinks[1].link is 3 again"),
    ],
)
def test_nvlinks_are_numbered_once_each_and_held_to_a_links_rates(tmp_path, links, refused):
    data = json.loads(load_fixture("pinned_p20").to_json())
    data["gpu_states"] = [plain(healthy())]
    data["gpu_states"][0]["nvlinks"] = links
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    if refused is None:
        assert len(load(path).gpu_states[0].nvlinks) == len(links)
        return
    with pytest.raises(InvalidArgument) as error:
        load(path)
    assert str(error.value).startswith(f"{path}: {refused}")


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


# -- a state's figures and words at their edges ---------------------------------------------------


@pytest.mark.parametrize(("generation", "width"), [(5, None), (None, 16)])
def test_a_link_or_maximum_half_known_is_unknown(generation, width):
    state = healthy(pcie_generation=generation, pcie_width=width)
    assert state.link is None and state.link_below_max is None
    assert gpustate.pcie_words(state) == "unknown"
    top = healthy(pcie_max_generation=generation, pcie_max_width=width)
    assert top.link_max is None and top.link_below_max is None
    assert gpustate.pcie_words(top) == "Gen5 x16 (maximum unknown): 63.0 GB/s per direction"


def test_the_link_at_its_maximum_below_it_and_in_a_slower_slot_read_so():
    assert gpustate.pcie_words(healthy()) == "Gen5 x16 (its maximum): 63.0 GB/s per direction"
    assert gpustate.pcie_words(healthy(pcie_width=8)) == (
        "Gen5 x8, below its Gen5 x16 maximum: 31.5 GB/s per direction instead of 63.0 GB/s"
    )
    slot = healthy(pcie_generation=4, pcie_max_generation=4)  # the GPU can do Gen5
    assert gpustate.pcie_words(slot).endswith("; the GPU could do Gen5, its slot allows Gen4")
    older = healthy(pcie_gpu_max_generation=4)  # a GPU slower than its slot: nothing to say
    assert gpustate.pcie_words(older) == "Gen5 x16 (its maximum): 63.0 GB/s per direction"


@pytest.mark.parametrize(
    ("now", "most", "words"),
    [(None, None, "SM unknown"), (None, 1980, "SM ? of 1980 MHz"), (345, None, "SM 345 of ? MHz"),
     (345, 1980, "SM 345 of 1980 MHz")],
)  # fmt: skip
def test_clocks_say_what_is_known_of_each(now, most, words):
    shown = gpustate.clocks_words(healthy(sm_clock_mhz=now, sm_clock_max_mhz=most))
    assert shown == f"{words}, memory 3201 of 3201 MHz"


@pytest.mark.parametrize(("now", "most"), [(None, 3201), (3201, None), (0, 3201)])
def test_a_memory_clock_without_both_figures_is_not_said_to_be_below_its_maximum(now, most):
    assert healthy(memory_clock_mhz=now, memory_clock_max_mhz=most).memory_clock_below_max is None
    assert healthy(memory_clock_mhz=3000).memory_clock_below_max is True


def test_nvlinks_total_their_rate_only_where_every_active_link_has_one():
    links = [NvLink(i, True, "4.0", 25000, "0000:00:07.0", "gpu") for i in range(4)]
    assert gpustate.nvlink_words(healthy(nvlinks=links)) == (
        "4 of 4 links active, NVLink 4.0, 25.0 GB/s each = 100 GB/s per direction"
    )
    partly = [*links[:3], NvLink(3, True, "4.0", None, "0000:00:07.0", "gpu")]
    assert gpustate.nvlink_words(healthy(nvlinks=partly)) == "4 of 4 links active, NVLink 4.0"


@pytest.mark.parametrize(
    ("bit", "name"),
    [(0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
     (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
     (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
     (0x100, "display_clock_setting")],
)  # fmt: skip
def test_each_nvml_clock_event_bit_is_the_reason_nvml_documents(bit, name):
    """nvmlClocksEventReason* in nvml.h: a bit read as another reason would PASS a slowdown."""
    assert gpustate.reasons_in(bit) == [name]
    assert gpustate.reasons_in(bit | 0x200) == [name]  # a bit memprof does not know: left out


# -- every word a state's reader sees, where a slip would still read plausibly ------------------


@pytest.mark.parametrize(
    ("recorded", "compared"),
    [("00000000:1A:00.0", "0000:1a:00.0"),  # NVML's 8-digit domain, CUDA's 4
     ("00000010:3b:00.0", "0010:3b:00.0"),  # the domain is hex: 16, not 10
     ("0000000a:3b:00.0", "000a:3b:00.0"),
     (" 0000:1A:00.0 ", "0000:1a:00.0"),
     ("NoDomain", "nodomain"),  # not a bus id: compared as written, in lower case
     ("ZZ:1A:00.0", "zz:1a:00.0")],
)  # fmt: skip
def test_a_bus_id_is_compared_as_cuda_writes_it(recorded, compared):
    """An NVLink's far end matched against a GPU's bus id: a slip names no peer or the wrong one."""
    assert gpustate.normalize_bus_id(recorded) == compared


def test_a_reason_memprof_has_no_words_for_is_shown_by_its_name():
    assert gpustate.reason_words("sw_power_cap") == "software power cap"
    assert gpustate.reason_words("a_reason_from_a_later_nvml") == "a_reason_from_a_later_nvml"


def test_a_state_with_nothing_known_reads_unknown_in_its_header_line():
    assert gpustate.state_line(GpuState(index=3, pci_bus_id="0000:00:06.0")) == (
        "NVML: GPU 3 PCIe unknown (max unknown), SM ?/? MHz, memory ?/? MHz"
    )
    assert gpustate.state_line(healthy(sm_clock_mhz=0, memory_clock_max_mhz=None)) == (
        "NVML: GPU 0 PCIe Gen5 x16 (max Gen5 x16), SM 0/1980 MHz, memory 3201/? MHz"
    )


def test_a_generation_without_a_known_rate_reads_unknown_not_a_figure():
    later = healthy(pcie_generation=7, pcie_max_generation=7, pcie_gpu_max_generation=7)
    assert gpustate.pcie_words(later) == "Gen7 x16 (its maximum): unknown per direction"


def test_a_link_in_a_slower_slot_is_said_after_the_link():
    slot = healthy(pcie_generation=4, pcie_max_generation=4)
    assert gpustate.pcie_words(slot) == (
        "Gen4 x16 (its maximum): 31.5 GB/s per direction; the GPU could do Gen5, its slot "
        "allows Gen4"
    )


def test_the_link_warning_gives_both_rates():
    assert state_warnings(healthy(pcie_width=8)) == [
        "GPU 0's PCIe link ran at Gen5 x8, below its Gen5 x16 maximum: host copies are capped "
        "at 31.5 GB/s per direction instead of 63.0 GB/s."
    ]


def test_two_reasons_and_two_processes_are_listed_apart():
    state = healthy(
        clock_reasons=["gpu_idle", "sw_power_cap", "hw_slowdown"],
        other_processes=[OtherProcess(7, "compute", 1 << 30), OtherProcess(8, "graphics", None)],
    )
    assert state_warnings(state) == [
        "GPU 0's clocks were held down during the run (software power cap, hardware slowdown).",
        "another process used GPU 0 during the run: pid 7 (compute, 1 GiB), pid 8 (graphics).",
    ]
    assert gpustate.reasons_words(state) == "software power cap, hardware slowdown"
    assert gpustate.processes_words(state) == "pid 7 (compute, 1 GiB), pid 8 (graphics)"


def test_no_reason_no_link_and_no_process_read_none():
    idle = healthy(clock_reasons=["gpu_idle"], processes_note="other users' processes unseen")
    assert gpustate.reasons_words(idle) == "none"  # idle is no event worth a word
    assert gpustate.nvlink_words(idle) == "none"
    assert gpustate.processes_words(idle) == "none (other users' processes unseen)"


def test_nvlinks_of_two_versions_and_two_rates_say_so_and_total_exactly():
    links = [NvLink(0, True, "3.0", 25000, None, "gpu"), NvLink(1, True, "4.0", 25520, None, "gpu"),
             NvLink(2, False, "2.0", 90000, None, "gpu")]  # fmt: skip
    assert gpustate.nvlink_words(healthy(nvlinks=links)) == (
        "2 of 3 links active, NVLink 3.0/4.0, various rates each = 51 GB/s per direction"
    )  # 50.52 GB/s: a total a thousandth off would read 50
