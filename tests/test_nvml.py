"""memprof.core.nvml against a stand-in pynvml: every field read, every failure an unknown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprof.core import nvml
from memprof.core.nvml import Watch
from memprof.model.gpustate import NvLink, OtherProcess
from tests.fake_nvml import (
    NOT_SUPPORTED,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    FakeGpu,
    FakePynvml,
    NVMLError,
    without,
)

ROOT = Path(__file__).resolve().parents[1]
BUS = "0000:00:06.0"  # as CUDA writes it; the fake GPU says 00000000:00:06.0
OWN_PID = 4000


def watch(*gpus: FakeGpu, module=None, buses=None) -> list:
    module = module or FakePynvml(*gpus)
    with Watch(buses or {0: BUS}, module, own_pid=OWN_PID) as seen:
        return seen.finish()


def test_a_healthy_gpu_is_read_field_by_field():
    links = [(1, 6, 26562, "00000000:ff:00.0", 2)] * 18
    (state,) = watch(FakeGpu(nvlinks=links, link_count_field=18))
    assert state.unavailable is None
    assert (state.sm_clock_mhz, state.sm_clock_max_mhz) == (1980, 1980)
    assert (state.memory_clock_mhz, state.memory_clock_max_mhz) == (3201, 3201)
    assert state.clock_reasons == []
    assert (state.pcie_generation, state.pcie_width) == (5, 16)
    assert (state.pcie_max_generation, state.pcie_max_width, state.pcie_gpu_max_generation) == (
        5,
        16,
        5,
    )
    assert (state.ecc_enabled, state.persistence_mode, state.mig_enabled) == (True, True, False)
    assert state.other_processes == []
    assert len(state.nvlinks) == 18
    first = state.nvlinks[0]
    assert (first.active, first.version, first.speed_mb_per_s) == (True, "4.0", 26562)
    assert (first.remote_pci_bus_id, first.remote_kind) == ("0000:ff:00.0", "switch")


def test_nvml_starts_once_per_process_also_after_a_failed_run_and_shuts_down_once():
    module = FakePynvml(FakeGpu())
    with pytest.raises(RuntimeError), Watch({0: BUS}, module, own_pid=OWN_PID):
        assert module.initialized == 1
        raise RuntimeError("the experiment failed")
    (state,) = watch(module=module)  # the next run reads it without starting it again
    assert state.unavailable is None and module.initialized == 1
    nvml.shut_down()  # at exit
    assert module.initialized == 0
    (state,) = watch(module=module)  # asked again after that: started again
    assert state.unavailable is None and module.initialized == 1
    nvml.shut_down()


def test_the_device_facts_read_the_link_from_the_nvml_already_started():
    from memprof.core.devicefacts import _nvml_link

    module = FakePynvml(FakeGpu())
    watch(module=module)
    assert _nvml_link(BUS, module) == {
        "generation": 5,
        "width": 16,
        "max_generation": 5,
        "max_width": 16,
    }
    assert module.initialized == 1
    assert _nvml_link("0000:00:09.0", module) is None  # NVML knows no such GPU
    nvml.shut_down()


def test_a_reason_seen_at_either_sample_is_kept():
    # software power cap only when the run started, hardware slowdown only when it ended
    (state,) = watch(FakeGpu(reasons=[0x4, 0x8 | 0x1]))
    assert state.clock_reasons == ["gpu_idle", "sw_power_cap", "hw_slowdown"]
    assert state.limiting_reasons == ["sw_power_cap", "hw_slowdown"]
    assert state.severe_reasons == ["hw_slowdown"]


def test_a_counter_that_grew_between_the_samples_reveals_an_event_neither_saw():
    counters = [{74: 5, 269: 0, 270: 100, 271: 0}, {74: 5, 269: 0, 270: 900, 271: 0}]
    (state,) = watch(FakeGpu(reasons=[0, 0], counters=counters))
    assert state.clock_reasons == ["hw_thermal_slowdown"]
    assert "counters" in state.clock_reasons_basis


def test_a_reason_both_sampled_and_counted_is_named_once():
    # hardware thermal slowdown (0x40) seen when the run ended, and its counter grew too
    counters = [{74: 5, 269: 0, 270: 100, 271: 0}, {74: 5, 269: 0, 270: 900, 271: 0}]
    (state,) = watch(FakeGpu(reasons=[0, 0x40], counters=counters))
    assert state.clock_reasons == ["hw_thermal_slowdown"]


def test_without_counters_the_basis_says_only_samples():
    (state,) = watch(FakeGpu(reasons=[0, 0], counters=[{}, {}]))
    assert state.clock_reasons == []
    assert "counters" not in state.clock_reasons_basis


class OlderBinding(FakePynvml):
    """nvidia-ml-py before the clock-event names: throttle reasons only."""

    nvmlDeviceGetCurrentClocksThrottleReasons = FakePynvml.nvmlDeviceGetCurrentClocksEventReasons


def test_an_older_binding_without_event_reasons_uses_throttle_reasons():
    module = without(
        OlderBinding(FakeGpu(reasons=[0x20, 0])),
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    )
    (state,) = watch(module=module)
    assert state.clock_reasons == ["sw_thermal_slowdown"]
    assert state.pcie_gpu_max_generation is None  # the call is missing: unknown
    assert state.pcie_max_generation == 5


def test_memprof_itself_is_never_another_process():
    gpu = FakeGpu(compute=[[(77, 1 << 30)], [(77, 1 << 30), (OWN_PID, 500 << 20), (88, None)]])
    (state,) = watch(gpu)
    assert [(p.pid, p.kind, p.memory_bytes) for p in state.other_processes] == [
        (77, "compute", 1 << 30),
        (88, "compute", None),
    ]
    assert state.processes_note == ""


def test_a_graphics_process_counts_and_one_pid_in_both_lists_counts_once():
    gpu = FakeGpu(compute=[[], [(OWN_PID, 1), (99, 2)]], graphics=[[], [(99, 2), (55, None)]])
    (state,) = watch(gpu)
    assert [(p.pid, p.kind) for p in state.other_processes] == [(99, "compute"), (55, "graphics")]


def test_in_another_pid_namespace_only_the_first_sample_counts():
    # memprof is not in the last list under its own pid: every pid there may be memprof
    gpu = FakeGpu(compute=[[(77, None)], [(77, None), (123456, 1)]])
    (state,) = watch(gpu)
    assert [p.pid for p in state.other_processes] == [77]
    assert "not this process's" in state.processes_note


def test_the_fastest_link_of_the_samples_is_kept():
    # idle at the start (Gen1), full speed after the run's copies
    (state,) = watch(FakeGpu(link=[(1, 16), (5, 16)]))
    assert state.link == (5, 16)
    assert state.link_below_max is False
    # at full speed when the run started, idled down by the time it ended
    (state,) = watch(FakeGpu(link=[(5, 16), (3, 16)]))
    assert state.link == (5, 16)
    (state,) = watch(FakeGpu(link=[(4, 8), (4, 8)]))
    assert state.link == (4, 8)
    assert state.link_below_max is True


def test_not_supported_means_off_for_ecc_and_mig_and_none_for_nvlink():
    gpu = FakeGpu(ecc=NOT_SUPPORTED, mig=NOT_SUPPORTED, persistence=NOT_SUPPORTED, nvlinks=None)
    (state,) = watch(gpu)
    assert (state.ecc_enabled, state.mig_enabled) == (False, False)
    assert state.persistence_mode is None  # NOT_SUPPORTED there says nothing about the mode
    assert state.nvlinks == []


def test_every_failure_is_an_unknown_never_a_traceback():
    broken = NVMLError(999)
    gpu = FakeGpu(
        reasons=[broken, broken],
        counters=[broken, broken],
        compute=[broken, broken],
        link=[broken, broken],
        link_max=RuntimeError("a binding's own bug"),
        gpu_max_generation=broken,
        clocks={1: broken, 2: broken},
        max_clocks={1: broken, 2: broken},
        ecc=broken,
        persistence=broken,
        mig=broken,
    )
    (state,) = watch(gpu)
    assert state.unavailable is None
    for name in (
        "sm_clock_mhz",
        "memory_clock_max_mhz",
        "clock_reasons",
        "pcie_generation",
        "pcie_max_generation",
        "pcie_gpu_max_generation",
        "ecc_enabled",
        "persistence_mode",
        "mig_enabled",
        "other_processes",
    ):
        assert getattr(state, name) is None, name
    assert state.nvlinks == []  # the fake says NOT_SUPPORTED: no NVLink


def test_nvlink_state_is_read_until_the_last_link_without_a_count():
    links = [(1, 6, 26562, "00000000:00:07.0", 0), (0, 6, 26562, "00000000:00:07.0", 0)]
    (state,) = watch(FakeGpu(nvlinks=links, link_count_field=None))
    assert [link.active for link in state.nvlinks] == [True, False]
    assert state.nvlinks[0].remote_kind == "gpu"
    assert state.nvlinks[1].speed_mb_per_s is None  # an inactive link's rate is not asked


def test_nvml_not_installed_leaves_the_whole_state_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with Watch({0: BUS, 1: "0000:00:07.0"}, own_pid=OWN_PID) as seen:
        states = seen.finish()
    assert [state.index for state in states] == [0, 1]
    assert all(state.unavailable == nvml.NOT_INSTALLED for state in states)
    assert all(state.clock_reasons is None for state in states)


def test_nvml_that_cannot_start_says_why():
    module = FakePynvml(init_error=NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND))
    (state,) = watch(module=module)
    assert state.unavailable == "NVML: NVML Shared Library Not Found"


def test_a_gpu_nvml_does_not_know_is_unknown_alone():
    (known, unknown) = watch(FakeGpu(), buses={0: BUS, 1: "0000:00:09.0"})
    assert known.unavailable is None
    assert unknown.unavailable == "NVML does not know bus id 0000:00:09.0"


def test_an_answer_in_a_shape_no_binding_gives_is_that_gpus_unknown_not_a_traceback():
    # a process entry without a pid where the last sample is read
    (state,) = watch(FakeGpu(compute=[[], [(None, 1)]]))
    assert state.unavailable.startswith("NVML answered unexpectedly (TypeError")
    # ... and where the first is
    (state,) = watch(FakeGpu(compute=[[(None, 1)], []]))
    assert state.unavailable.startswith("NVML answered unexpectedly (TypeError")


def test_a_field_value_is_read_from_the_member_its_type_names():
    # NVML's union holds one number; each type's member differs here, so a wrong one shows
    members = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
    union = SimpleNamespace(**{member: index * 10 + 1 for index, member in enumerate(members)})
    for value_type in range(len(members)):
        value = SimpleNamespace(nvmlReturn=0, valueType=value_type, value=union)
        assert nvml._field_number(value) == value_type * 10 + 1, members[value_type]
    refused = SimpleNamespace(nvmlReturn=NVML_ERROR_NOT_SUPPORTED, valueType=3, value=union)
    assert nvml._field_number(refused) is None


def test_a_reason_read_at_only_one_of_the_samples_is_still_seen():
    broken = NVMLError(999)
    for reasons in ([broken, 0x4], [0x4, broken]):
        (state,) = watch(FakeGpu(reasons=reasons, counters=[{}, {}]))
        assert state.clock_reasons == ["sw_power_cap"], reasons
        assert state.clock_reasons_basis == "sampled when the run started and when it ended"
    (state,) = watch(FakeGpu(reasons=[broken, broken]))
    assert (state.clock_reasons, state.clock_reasons_basis) == (None, "")


def test_the_counters_are_named_as_a_basis_only_where_both_samples_had_them():
    samples = "sampled when the run started and when it ended"
    (state,) = watch(FakeGpu(reasons=[0, 0], counters=[{74: 5}, {}]))
    assert state.clock_reasons_basis == samples
    (state,) = watch(FakeGpu(reasons=[0, 0], counters=[{}, {74: 5}]))
    assert state.clock_reasons_basis == samples
    (state,) = watch(FakeGpu(reasons=[0, 0], counters=[{74: 5}, {74: 5}]))
    assert state.clock_reasons_basis == (
        samples + ", and NVML's cumulative clock-event counters compared between them"
    )
    assert state.clock_reasons == []  # a counter that did not grow adds nothing


def test_each_way_the_process_lists_fall_short_says_so_in_its_own_words():
    other = OtherProcess(77, "compute", None)
    assert nvml.others(None, None, OWN_PID) == (None, "")
    assert nvml.others([other], None, OWN_PID) == ([other], "listed when the run started only")
    assert nvml.others(None, [other], OWN_PID) == (
        None,
        "NVML's process ids are not this process's",
    )
    assert nvml.others([other], [other], OWN_PID) == (
        [other],
        "NVML's process ids are not this process's (a container?): processes that "
        "started during the run are not counted",
    )


def test_ecc_and_mig_are_their_current_mode_not_the_pending_one():
    (state,) = watch(FakeGpu(ecc=(0, 1), mig=(1, 0)))
    assert (state.ecc_enabled, state.mig_enabled) == (False, True)
    (state,) = watch(FakeGpu(ecc=(1, 0), mig=(0, 1)))
    assert (state.ecc_enabled, state.mig_enabled) == (True, False)
    assert nvml._enabled([]) is None  # an empty answer is unknown, not an IndexError


def test_the_link_count_bounds_the_links_read_and_a_link_it_counts_unread_is_unknown():
    up = (1, 6, 26562, "00000000:00:07.0", 0)
    # NVML counts 3 links: link 1's state fails, link 2 is not there to ask
    gpu = FakeGpu(nvlinks=[up, (NVMLError(999), 6, 26562, "", 0)], link_count_field=3)
    (state,) = watch(gpu)
    assert [link.link for link in state.nvlinks] == [0, 1, 2]
    assert [link.active for link in state.nvlinks] == [True, None, None]
    assert state.nvlinks[1] == NvLink(1, None, None, None, None, None)
    assert state.nvlinks[2] == NvLink(2, None, None, None, None, None)
    (state,) = watch(FakeGpu(nvlinks=[up] * 4, link_count_field=2))
    assert [link.link for link in state.nvlinks] == [0, 1]
    (state,) = watch(FakeGpu(nvlinks=[up], link_count_field=1))  # one link is not none
    assert [(link.link, link.active) for link in state.nvlinks] == [(0, True)]
    (state,) = watch(FakeGpu(nvlinks=[up], link_count_field=0))
    assert state.nvlinks == []


def test_without_a_link_count_the_bindings_maximum_bounds_the_links_read():
    up = (1, 6, 26562, "00000000:00:07.0", 0)
    module = FakePynvml(FakeGpu(nvlinks=[up] * 4))
    module.NVML_NVLINK_MAX_LINKS = 2  # an older binding's maximum
    (state,) = watch(module=module)
    assert [link.link for link in state.nvlinks] == [0, 1]
    module = FakePynvml(FakeGpu(nvlinks=[up] * 20))
    module.NVML_NVLINK_MAX_LINKS = None  # no maximum known: memprof's own
    (state,) = watch(module=module)
    assert len(state.nvlinks) == nvml.MAX_NVLINKS


def test_a_driver_without_per_link_rates_gives_every_active_link_the_common_rate():
    up = (1, 6, None, "00000000:00:07.0", 0)
    gpu = FakeGpu(nvlinks=[up, (0, 6, None, "", 0), up], link_count_field=3)
    gpu.speed_common_field = 25000
    (state,) = watch(gpu)
    assert [link.speed_mb_per_s for link in state.nvlinks] == [25000, None, 25000]
    (state,) = watch(FakeGpu(nvlinks=[up], link_count_field=1))  # no rate at all: unknown
    assert state.unavailable is None
    assert state.nvlinks[0].speed_mb_per_s is None


def test_an_active_link_whose_far_end_nvml_cannot_name_is_unknown_there():
    broken = NVMLError(999)
    gpu = FakeGpu(nvlinks=[(1, broken, 26562, broken, broken)], link_count_field=1)
    (state,) = watch(gpu)
    assert state.unavailable is None
    assert state.nvlinks == [NvLink(0, True, None, 26562, None, None)]
    gpu = FakeGpu(nvlinks=[(1, 6, 26562, b"0000:00:07.\xff", 7)], link_count_field=1)
    (state,) = watch(gpu)  # a type NVML adds later; a bus id that is not UTF-8
    assert state.nvlinks[0].remote_kind == "unknown"
    assert state.nvlinks[0].remote_pci_bus_id == "0000:00:07.\ufffd"


def test_a_gpu_without_graphics_lists_its_compute_processes_and_without_compute_none():
    gpu = FakeGpu(compute=[[(77, None)], [(77, None), (OWN_PID, 1)]], graphics=[NOT_SUPPORTED])
    (state,) = watch(gpu)
    assert [p.pid for p in state.other_processes] == [77]
    gpu = FakeGpu(compute=[NOT_SUPPORTED], graphics=[[(55, None)], [(55, None)]])
    (state,) = watch(gpu)
    assert state.other_processes is None


def test_pid_0_is_a_process_and_an_entry_without_a_pid_is_skipped_not_fatal():
    class Odd(FakePynvml):
        def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
            return [SimpleNamespace(usedGpuMemory=5), SimpleNamespace(pid=0)]

    gpu = FakeGpu(compute=[[], [(OWN_PID, 1)]])
    (state,) = watch(module=Odd(gpu))
    assert state.unavailable is None
    assert [(p.pid, p.kind, p.memory_bytes) for p in state.other_processes] == [
        (0, "graphics", None)
    ]


def test_memprof_is_recognised_by_its_own_pid_when_none_is_given():
    gpu = FakeGpu(compute=[[], [(os.getpid(), 1)]])
    with Watch({0: BUS}, FakePynvml(gpu)) as seen:
        (state,) = seen.finish()
    assert (state.other_processes, state.processes_note) == ([], "")


def test_a_gpu_nvml_cannot_read_first_leaves_the_next_one_read():
    other = FakeGpu(bus_id="00000000:00:07.0")
    states = watch(other, buses={0: "0000:00:09.0", 1: "0000:00:07.0"})
    assert [(s.index, s.pci_bus_id, s.unavailable) for s in states] == [
        (0, "0000:00:09.0", "NVML does not know bus id 0000:00:09.0"),
        (1, "0000:00:07.0", None),
    ]
    odd = FakeGpu(compute=[[(None, 1)], []])
    states = watch(odd, other, buses={0: BUS, 1: "0000:00:07.0"})
    assert [(s.index, s.pci_bus_id) for s in states] == [(0, BUS), (1, "0000:00:07.0")]
    assert states[0].unavailable.startswith("NVML answered unexpectedly")
    assert states[1].unavailable is None
    odd = FakeGpu(compute=[[], [(None, 1)]])  # fails at its last sample
    (state,) = watch(odd)
    assert (state.index, state.pci_bus_id) == (0, BUS)


def test_nvml_that_cannot_start_without_words_is_named_by_its_error():
    (state,) = watch(module=FakePynvml(init_error=RuntimeError()))
    assert state.unavailable == "NVML: RuntimeError"


def test_nvml_registers_its_shut_down_at_exit_once_whatever_number_of_bindings_start(
    monkeypatch,
):
    registered = []
    monkeypatch.setattr(nvml.atexit, "register", registered.append)
    nvml.shut_down()  # nothing started yet in this process
    watch(FakeGpu())
    assert registered == [nvml.shut_down]
    watch(FakeGpu())  # another binding: NVML already has its shut-down
    assert registered == [nvml.shut_down]
    nvml.shut_down()


def test_a_binding_that_breaks_on_import_says_how(monkeypatch):
    real_import = __import__

    def broken(name, *args, **kwargs):
        if name == "pynvml":
            raise OSError("libnvidia-ml.so: bad ELF")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", broken)
    assert nvml.import_nvml() == (
        None,
        "nvidia-ml-py cannot be imported (OSError: libnvidia-ml.so: bad ELF)",
    )


def test_field_values_of_a_type_no_binding_gives_are_unknown_not_fatal():
    class Odd(FakePynvml):
        def nvmlDeviceGetFieldValues(self, handle, field_ids):
            union = SimpleNamespace(uiVal=1, ullVal=1)
            return [SimpleNamespace(nvmlReturn=0, valueType=99, value=union) for _ in field_ids]

    (state,) = watch(module=Odd(FakeGpu(counters=[{74: 5}, {74: 9}])))
    assert state.unavailable is None
    assert state.clock_reasons == []
    assert "counters" not in state.clock_reasons_basis


def test_a_link_read_without_its_width_or_generation_is_unknown_not_fatal():
    for link in ((5, None), (None, 16)):
        (state,) = watch(FakeGpu(link=[link, link]))
        assert state.unavailable is None, link
        assert (state.pcie_generation, state.pcie_width) == (None, None), link


def test_a_binding_without_a_maximum_link_count_reads_memprofs_own_maximum():
    up = (1, 6, 26562, "00000000:00:07.0", 0)
    module = without(FakePynvml(FakeGpu(nvlinks=[up] * 20)), "NVML_NVLINK_MAX_LINKS")
    (state,) = watch(module=module)
    assert len(state.nvlinks) == nvml.MAX_NVLINKS


class ShortAnswers(FakePynvml):
    """A binding answering fewer field values than asked, where `short` are among them."""

    short = (74,)

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        values = super().nvmlDeviceGetFieldValues(handle, field_ids)
        return values[:-1] if any(i in self.short for i, _ in field_ids) else values


def test_field_values_fewer_than_asked_make_that_gpu_unknown_not_a_partial_state():
    (state,) = watch(module=ShortAnswers(FakeGpu(counters=[{74: 5}, {74: 9}])))
    assert state.unavailable.startswith("NVML answered unexpectedly (ValueError")
    up = (1, 6, 26562, "00000000:00:07.0", 0)
    module = ShortAnswers(FakeGpu(nvlinks=[up, up], link_count_field=2))
    module.short = (164,)  # the links' rates
    (state,) = watch(module=module)
    assert state.unavailable.startswith("NVML answered unexpectedly (ValueError")


def test_what_does_not_change_is_read_with_the_first_samples_not_after_the_work():
    gpu = FakeGpu(nvlinks=[(1, 6, 26562, "00000000:ff:00.0", 2)] * 2, link_count_field=2)
    with Watch({0: BUS}, FakePynvml(gpu), own_pid=OWN_PID) as looking:
        gpu.persistence, gpu.max_clocks, gpu.nvlinks = 0, {1: 1, 2: 2}, None  # read no more
        gpu.clocks = {1: 1755, 2: 3201}  # the current clocks are the work's end's
        (state,) = looking.finish()
    assert (state.persistence_mode, state.sm_clock_max_mhz, len(state.nvlinks)) == (True, 1980, 2)
    assert state.sm_clock_mhz == 1755


# -- the first look on a thread of its own (Watch.start_in_background) -------------------------


def test_a_first_look_on_a_thread_of_its_own_reads_what_one_on_the_main_thread_reads():
    gpu = dict(reasons=[0, 8], compute=[[(77, 1 << 30)], [(77, 1 << 30), (OWN_PID, 1)]])
    here = watch(FakeGpu(**gpu))
    module = FakePynvml(FakeGpu(**gpu))
    threads = []
    init = module.nvmlInit
    module.nvmlInit = lambda: (threads.append(threading.current_thread()), init())[1]
    looking = Watch({}, module, own_pid=OWN_PID).start_in_background(lambda: {0: BUS})
    with looking as seen:
        assert module.initialized == 1  # entering waited for the first samples
        assert seen.finish() == here
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    nvml.shut_down()


def test_the_first_look_starts_nvml_before_asking_for_the_bus_ids_which_wait_for_cuinit():
    module = FakePynvml(FakeGpu())
    started = []

    def bus_ids() -> dict[int, str]:
        started.append(module.initialized)
        return {0: BUS}

    with Watch({}, module, own_pid=OWN_PID).start_in_background(bus_ids) as looking:
        (state,) = looking.finish()
    assert started == [1] and state.unavailable is None
    nvml.shut_down()


def test_the_first_look_leaves_ctrl_c_to_the_main_thread_and_nothing_for_shut_down_to_wait_on():
    """Its thread blocks SIGINT (a press interrupts the main thread's wait, at once), and once
    it has ended shut_down has no look under way to wait for."""
    masks, threads = [], []

    def bus_ids() -> dict[int, str]:
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        threads.append(threading.current_thread())
        return {0: BUS}

    with Watch({}, FakePynvml(FakeGpu()), own_pid=OWN_PID).start_in_background(bus_ids) as seen:
        seen.finish()
    assert signal.SIGINT in masks[0]
    assert threads[0].name == "memprof-nvml" and threads[0].daemon  # as docs/python-api.md says
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert not nvml._SAMPLING
    nvml.shut_down()


def test_what_the_first_look_raised_on_its_thread_is_raised_on_entering():
    def bus_ids() -> dict[int, str]:
        raise RuntimeError("no bus ids")

    looking = Watch({}, FakePynvml(FakeGpu()), own_pid=OWN_PID).start_in_background(bus_ids)
    with pytest.raises(RuntimeError, match="no bus ids"), looking:
        pass


def test_without_a_thread_to_be_had_the_first_look_is_taken_on_entering(monkeypatch):
    class NoThreads:
        def __init__(self, **options: object) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(nvml.threading, "Thread", NoThreads)
    module = FakePynvml(FakeGpu())
    looking = Watch({}, module, own_pid=OWN_PID).start_in_background(lambda: {0: BUS})
    assert module.initialized == 0  # nothing started yet
    with looking as seen:
        (state,) = seen.finish()
    assert state.unavailable is None and module.initialized == 1
    nvml.shut_down()


def test_a_ctrl_c_before_the_first_looks_thread_began_leaves_nothing_for_the_exit_to_wait_for(
    monkeypatch,
):
    """A KeyboardInterrupt in Thread.start before the thread exists: no thread will ever say
    its look ended, so shut_down (at exit, where Ctrl-C is ignored) must not wait for one."""

    class InterruptedBeforeStarting:
        def __init__(self, **options: object) -> None:
            pass

        def start(self) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(nvml.threading, "Thread", InterruptedBeforeStarting)
    module = FakePynvml(FakeGpu())
    with pytest.raises(KeyboardInterrupt):
        Watch({}, module, own_pid=OWN_PID).start_in_background(lambda: {0: BUS})
    monkeypatch.undo()
    ended = threading.Event()
    threading.Thread(target=lambda: (nvml.shut_down(), ended.set()), daemon=True).start()
    assert ended.wait(10), "shut_down waits for a first look that never began"
    assert module.initialized == 0


def test_a_ctrl_c_after_the_first_looks_thread_began_still_leaves_the_exit_waiting_for_it(
    monkeypatch,
):
    """The thread began before Thread.start was interrupted: its look goes on, and NVML is
    still not shut down under it."""
    real_thread, release = threading.Thread, threading.Event()

    class InterruptedAfterStarting:
        def __init__(self, **options: object) -> None:
            self.thread = real_thread(**options)

        def start(self) -> None:
            self.thread.start()
            raise KeyboardInterrupt

    monkeypatch.setattr(nvml.threading, "Thread", InterruptedAfterStarting)
    module = FakePynvml(FakeGpu())
    looking = Watch({}, module, own_pid=OWN_PID)
    with pytest.raises(KeyboardInterrupt):
        looking.start_in_background(lambda: (release.wait(10), {0: BUS})[1])
    monkeypatch.undo()
    threading.Timer(0.05, release.set).start()
    nvml.shut_down()
    assert release.is_set() and module.initialized == 0


def test_nvml_is_not_shut_down_under_a_first_look_still_under_way():
    release = threading.Event()
    module = FakePynvml(FakeGpu())
    looking = Watch({}, module, own_pid=OWN_PID)
    looking.start_in_background(lambda: (release.wait(10), {0: BUS})[1])
    threading.Timer(0.05, release.set).start()
    nvml.shut_down()  # at exit, the look begun but not entered (the run failed before)
    assert module.initialized == 0  # started by the look, then shut down after it
    assert release.is_set()


def test_a_first_look_has_shut_down_registered_before_nvml_starts(monkeypatch):
    """Registered as the look begins, not once its thread has started NVML: the process then
    waits at exit for a look whose nvmlInit is still under way."""
    registered, release = [], threading.Event()
    monkeypatch.setattr(nvml.atexit, "register", registered.append)
    nvml.shut_down()  # nothing started yet in this process
    module = FakePynvml(FakeGpu())
    init = module.nvmlInit
    module.nvmlInit = lambda: (release.wait(10), init())[1]
    looking = Watch({}, module, own_pid=OWN_PID).start_in_background(lambda: {0: BUS})
    assert registered == [nvml.shut_down]
    release.set()
    with looking:
        pass
    assert registered == [nvml.shut_down]  # once
    nvml.shut_down()


CTRL_C_WHILE_LOOKING = """
import os, signal, sys, threading, time
from memprof.core.nvml import Watch
from tests.fake_nvml import FakeGpu, FakePynvml

def bus_ids():
    time.sleep(0.6)
    return {0: "0000:00:06.0"}

class Module(FakePynvml):
    def nvmlShutdown(self):
        os.write(1, b"shut down\\n")
        super().nvmlShutdown()

looking = Watch({}, Module(FakeGpu())).start_in_background(bus_ids)
main = threading.main_thread().ident
threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
try:
    with looking:
        os.write(1, b"entered\\n")
except KeyboardInterrupt:
    os.write(1, b"interrupted\\n")
"""


def test_a_ctrl_c_while_waiting_for_the_first_look_ends_the_wait_and_the_process_after_it():
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_LOOKING],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.splitlines() == ["interrupted", "shut down"], done.stderr
