"""NVML's view of a run and the warnings made from it, each on both sides of its edge: the
widest link of the samples kept (generation and width apart), a clock reason seen at either
sample or by a counter that grew (not one that stayed), which reasons hold clocks down and
which are severe, a link or memory clock below its maximum, memprof's own pid never another
process. The GPU is tests/fake_nvml.py's stand-in pynvml; the states' words are read back
from a recorded run's header (memprof.model.gpustate.state_warnings) and `memprof check`.
"""

from __future__ import annotations

import pytest

from memprof.core.nvml import Watch
from memprof.model.gpustate import CLOCK_REASONS, GpuState, state_warnings
from tests.conftest import replace
from tests.fake_nvml import FakeGpu, FakePynvml
from tests.verdict_tools import fixture

BUS = "0000:00:06.0"
OWN_PID = 4000
POWER_CAP, HW_SLOWDOWN, IDLE = 0x4, 0x8, 0x1
SW_POWER_CAP_COUNTER = 74  # NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP


def watched(gpu: FakeGpu) -> GpuState:
    with Watch({0: BUS}, FakePynvml(gpu), own_pid=OWN_PID) as watch:
        (state,) = watch.finish()
    return state


# -- the link: the widest sample, generation and width each ---------------------------------


@pytest.mark.parametrize(
    ("samples", "kept"),
    [
        ([(5, 16), (5, 16)], (5, 16)),
        ([(5, 16), (2, 16)], (5, 16)),  # idled down by the end
        ([(2, 16), (5, 16)], (5, 16)),  # idle at the start
        ([(5, 16), (5, 4)], (5, 16)),  # narrower at the end only
        ([(5, 4), (5, 16)], (5, 16)),
        ([(4, 8), (4, 8)], (4, 8)),  # narrow throughout: kept as it was
    ],
)
def test_the_link_kept_is_the_fastest_generation_and_widest_width_sampled(samples, kept):
    state = watched(FakeGpu(link=samples))
    assert (state.pcie_generation, state.pcie_width) == kept
    assert state.link_below_max is (kept != (5, 16))


@pytest.mark.parametrize(
    ("link", "below"),
    [((5, 16), False), ((4, 16), True), ((5, 8), True), ((4, 8), True)],
)
def test_a_link_below_its_maximum_in_generation_or_width_is_warned(link, below):
    state = replace(
        fixture("h200_check").gpu_states[0], pcie_generation=link[0], pcie_width=link[1]
    )
    assert state.link_below_max is below
    warned = [line for line in state_warnings(state) if "PCIe link ran at" in line]
    assert bool(warned) is below


# -- clock reasons -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("masks", "seen"),
    [
        ([0, 0], []),
        ([POWER_CAP, 0], ["sw_power_cap"]),  # only when the run started
        ([0, POWER_CAP], ["sw_power_cap"]),  # only when it ended
        ([HW_SLOWDOWN, POWER_CAP], ["sw_power_cap", "hw_slowdown"]),
    ],
)
def test_a_reason_at_either_sample_is_seen(masks, seen):
    assert watched(FakeGpu(reasons=masks)).clock_reasons == seen


@pytest.mark.parametrize(
    ("counters", "seen"),
    [
        ([{SW_POWER_CAP_COUNTER: 500}, {SW_POWER_CAP_COUNTER: 500}], []),  # stayed: nothing
        ([{SW_POWER_CAP_COUNTER: 500}, {SW_POWER_CAP_COUNTER: 501}], ["sw_power_cap"]),
        ([{}, {SW_POWER_CAP_COUNTER: 501}], []),  # no first value: nothing to compare
    ],
)
def test_a_counter_counts_only_when_it_grew_between_the_samples(counters, seen):
    assert watched(FakeGpu(counters=counters)).clock_reasons == seen


def test_which_reasons_hold_clocks_down_and_which_are_severe():
    everything = [reason.name for reason in CLOCK_REASONS]
    state = GpuState(0, BUS, clock_reasons=everything)
    assert state.limiting_reasons == [
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert state.severe_reasons == [
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]


@pytest.mark.parametrize(
    ("reasons", "warned"),
    [([], False), (["gpu_idle", "sync_boost"], False), (["sw_power_cap"], True)],
)
def test_clocks_held_down_are_warned_in_the_header(reasons, warned):
    state = replace(fixture("h200_check").gpu_states[0], clock_reasons=reasons)
    lines = [line for line in state_warnings(state) if "clocks were held down" in line]
    assert bool(lines) is warned


@pytest.mark.parametrize(("now", "warned"), [(3201, False), (3200, True), (1593, True)])
def test_a_memory_clock_below_its_maximum_is_warned_and_one_at_it_is_not(now, warned):
    state = replace(fixture("h200_check").gpu_states[0], memory_clock_mhz=now)
    assert state.memory_clock_below_max is warned
    lines = [line for line in state_warnings(state) if "memory clock was" in line]
    assert bool(lines) is warned


# -- other processes --------------------------------------------------------------------------


def test_processes_of_both_samples_count_and_memprof_itself_never():
    gpu = FakeGpu(compute=[[(77, 1 << 20)], [(OWN_PID, 1 << 30), (78, None)]])
    state = watched(gpu)
    assert [p.pid for p in state.other_processes] == [77, 78]
    assert state.processes_note == ""


def test_where_memprof_is_not_in_the_last_sample_only_the_first_counts():
    gpu = FakeGpu(compute=[[(77, None)], [(12, None), (78, None)]])  # another pid namespace
    state = watched(gpu)
    assert [p.pid for p in state.other_processes] == [77]
    assert "not this process's" in state.processes_note


def test_memprof_in_the_first_sample_is_not_another_process_either():
    """A second session of one process (`--device all` runs each GPU in turn) may find its
    own context already there when the first sample is taken."""
    gpu = FakeGpu(compute=[[(OWN_PID, 1 << 30), (77, None)], [(OWN_PID, 1 << 30)]])
    assert [p.pid for p in watched(gpu).other_processes] == [77]
