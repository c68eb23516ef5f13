"""GPU state from NVML (nvidia-ml-py), sampled when a run starts, before memprof's contexts
exist, and when its work is done: one GpuState per GPU, recorded in every Result.

- Throttling: the clock-event reasons of both samples OR-ed, plus each of the driver's
  cumulative clock-event counters that grew between them (an event neither sample caught);
  `clock_reasons_basis` says whether the counters were there.
- Other processes: those NVML lists at both samples but memprof. Where memprof is not in the
  last, NVML's pids are not ours (a container's namespace): the first sample alone counts.
- The PCIe link: the fastest generation and widest width sampled (an idle link slows down).
- What does not change (the limits, NVLinks, ECC, persistence and MIG modes): read once, with
  the first samples; the current clocks, with the last.

Every NVML failure leaves its field unknown (None), never raises. NVML is started once per
process (`opened`): nvmlInit enumerates every GPU, which `--device all` must not pay again.
The first samples may be taken on a thread of their own (Watch.start_in_background).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memprof.errors import error_words
from memprof.model.gpustate import GpuState, NvLink, OtherProcess, normalize_bus_id, reasons_in

NOT_INSTALLED = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"

# NVML's constants, by value: an older binding may lack the names (nvml.h keeps the values).
NVML_ERROR_NOT_SUPPORTED = 3
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
FIELD_NVLINK_LINK_COUNT = 91
FIELD_NVLINK_SPEED_COMMON = 90  # MBps shared by the active links (older drivers)
FIELD_NVLINK_GET_SPEED = 164  # MBps of one link (scopeId = the link)
# Cumulative time spent in a clock-event reason, by NVML field id (nanoseconds).
EVENT_COUNTERS = {
    74: "sw_power_cap",
    269: "sw_thermal_slowdown",
    270: "hw_thermal_slowdown",
    271: "hw_power_brake_slowdown",
}
NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
NVLINK_REMOTE_KINDS = {0: "gpu", 1: "npu", 2: "switch"}
MAX_NVLINKS = 18  # where neither the driver's link count nor the binding's maximum is known
_NOT_SUPPORTED = object()


def import_nvml() -> tuple[Any, str]:
    """The pynvml module, or None and why not."""
    try:
        import pynvml
    except ImportError:
        return None, NOT_INSTALLED
    except Exception as error:  # a broken install: say so, measure on
        return None, f"nvidia-ml-py cannot be imported ({type(error).__name__}: {error})"
    return pynvml, ""


# NVML as started in this process, by binding (a stand-in's too): (binding, Nvml or None, why not)
_OPENED: dict[int, tuple[Any, Nvml | None, str]] = {}


def opened(module: Any = None) -> tuple[Nvml | None, str]:
    """NVML started once per process through `module` (pynvml where None), or None and why."""
    if module is None:
        module, why = import_nvml()
        if module is None:
            return None, why
    if id(module) not in _OPENED:
        try:
            module.nvmlInit()
        except Exception as error:
            why = f"NVML: {error_words(error)}"
            _OPENED[id(module)] = (module, None, why)
        else:
            _shut_down_at_exit()
            _OPENED[id(module)] = (module, Nvml(module), "")
    _, nvml, why = _OPENED[id(module)]
    return nvml, why


# The first looks under way on threads of their own: NVML is not shut down under them
_SAMPLING: set[threading.Event] = set()
_at_exit = False  # shut_down registered to run at exit, and not run since


def _shut_down_at_exit() -> None:
    """shut_down registered to run at exit, once while NVML is (or is being) started."""
    global _at_exit
    if not _at_exit:
        _at_exit = True
        atexit.register(shut_down)


def shut_down() -> None:
    """nvmlShutdown, once for each NVML started (at exit), after any first look under way."""
    global _at_exit
    _at_exit = False
    for sampled in list(_SAMPLING):
        sampled.wait()
    opened_now = list(_OPENED.values())
    _OPENED.clear()
    for _, nvml, _ in opened_now:
        if nvml is not None:
            nvml.call("nvmlShutdown")


class Nvml:
    """Calls into the binding, each failure turned into None (unknown)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def call(self, name: str, *args: Any, not_supported: Any = None) -> Any:
        """`module.name(*args)`; `not_supported` where NVML says NOT_SUPPORTED, else None."""
        function = getattr(self.module, name, None)
        if function is None:
            return None
        try:
            return function(*args)
        except Exception as error:  # NVMLError and whatever a binding raises: unknown
            if getattr(error, "value", None) == NVML_ERROR_NOT_SUPPORTED:
                return not_supported
            return None

    def fields(self, handle: Any, wanted: list[tuple[int, int]]) -> list[float | None]:
        """NVML field values, (field id, scope id) each; None for every one not answered."""
        if not wanted:
            return []
        values = self.call("nvmlDeviceGetFieldValues", handle, wanted)
        if values is None:
            return [None] * len(wanted)
        try:
            return [_field_number(value) for value in values][: len(wanted)]
        except Exception:
            return [None] * len(wanted)


def _field_number(value: Any) -> float | None:
    """One nvmlFieldValue_t's number, by its value type; None where NVML refused it."""
    if value.nvmlReturn != 0:
        return None
    member = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")[value.valueType]
    return getattr(value.value, member)


@dataclass
class _Sample:
    """What changes during a run, read at its start and at its end."""

    reasons: int | None
    counters: dict[str, float]
    processes: list[OtherProcess] | None  # everything NVML lists, memprof included
    link: tuple[int, int] | None


class Watch:
    """NVML's view of one run's GPUs: sampled on entering (before the contexts exist);
    finish(), after the work, returns each GPU's state."""

    def __init__(self, bus_ids: dict[int, str], module: Any = None, own_pid: int | None = None):
        self.bus_ids = dict(bus_ids)
        self._module = module
        self._own_pid = os.getpid() if own_pid is None else own_pid
        self._nvml: Nvml | None = None
        self._handles: dict[int, Any] = {}
        self._first: dict[int, _Sample] = {}
        self._fixed: dict[int, dict[str, Any]] = {}  # what does not change, read with _first
        self._broken: dict[int, str] = {}  # GPUs whose first sample failed, and why
        self.unavailable = ""
        self._sampled: threading.Event | None = None  # set when start() ended on its thread
        self._failed: BaseException | None = None  # what it raised there

    def __enter__(self) -> Watch:
        if self._sampled is None:
            self.start()
            return self
        self._sampled.wait()  # Ctrl-C ends the wait; the process waits for it at exit
        if self._failed is not None:
            raise self._failed
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Take the first samples (NVML started if this is its first use: `opened`)."""
        nvml, why = opened(self._module)
        if nvml is None:
            self.unavailable = why
            return
        self._nvml = nvml
        for index, bus_id in self.bus_ids.items():
            handle = nvml.call("nvmlDeviceGetHandleByPciBusId", bus_id)
            if handle is None:
                continue
            try:
                self._first[index] = self._sample(handle)
                self._fixed[index] = self._fixed_facts(handle)
            except Exception as error:  # a binding answering in a shape it never should
                self._broken[index] = _unexpected(error)
                continue
            self._handles[index] = handle

    def start_in_background(self, bus_ids: Callable[[], dict[int, str]]) -> Watch:
        """start() on a thread of its own, watching the GPUs bus_ids() names (NVML started
        first, as bus_ids() may wait for cuInit): NVML's start and samples are tens of ms of
        foreign calls, which release Python's lock, so they overlap PyCUDA's import. Entering
        waits for them, so they are still taken before memprof's contexts exist; what they
        raised is raised there."""
        sampled = self._sampled = threading.Event()
        begun = threading.Lock()  # taken by the thread as it begins, or by a start given up

        def sample() -> None:
            if not begun.acquire(blocking=False):
                return  # Thread.start was interrupted and gave this look up
            try:
                with contextlib.suppress(Exception):  # Ctrl-C goes to the main thread, at once
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                opened(self._module)  # nvmlInit needs no bus id: begun while cuInit runs
                self.bus_ids = dict(bus_ids())
                self.start()
            except BaseException as error:
                self._failed = error
            finally:
                _SAMPLING.discard(sampled)
                sampled.set()

        _SAMPLING.add(sampled)
        try:
            threading.Thread(target=sample, name="memprof-nvml", daemon=True).start()
        except RuntimeError:  # no thread to be had: entering samples here
            _SAMPLING.discard(sampled)
            self._sampled = None
            self.bus_ids = dict(bus_ids())
            return self
        except BaseException:  # a Ctrl-C in Thread.start: a thread not begun may never begin,
            if begun.acquire(blocking=False):  # and shut_down at exit would wait for it for ever
                _SAMPLING.discard(sampled)
                sampled.set()
            raise
        _shut_down_at_exit()  # from here: the process then never ends mid-sample
        return self

    def finish(self) -> list[GpuState]:
        """The last samples and what does not change, as one state per GPU; closes NVML."""
        states = []
        for index, bus_id in self.bus_ids.items():
            try:
                states.append(self._state(index, bus_id))
            except Exception as error:  # as in start(): that GPU's state is unknown
                states.append(GpuState(index, bus_id, unavailable=_unexpected(error)))
        self.close()
        return states

    def close(self) -> None:
        """Done sampling (NVML itself stays started for the process: `opened`)."""
        self._nvml = None

    # -- reading ---------------------------------------------------------------------------

    def _sample(self, handle: Any) -> _Sample:
        nvml = self._nvml
        assert nvml is not None
        reasons = nvml.call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None:  # its older name
            reasons = nvml.call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        counted = nvml.fields(handle, [(field_id, 0) for field_id in EVENT_COUNTERS])
        counters = {
            name: value
            for name, value in zip(EVENT_COUNTERS.values(), counted, strict=True)
            if value is not None
        }
        generation = nvml.call("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        width = nvml.call("nvmlDeviceGetCurrPcieLinkWidth", handle)
        link = (int(generation), int(width)) if generation and width else None
        return _Sample(reasons, counters, self._processes(handle), link)

    def _processes(self, handle: Any) -> list[OtherProcess] | None:
        nvml = self._nvml
        assert nvml is not None
        found: dict[int, OtherProcess] = {}
        for kind in ("compute", "graphics"):
            call = f"nvmlDeviceGet{kind.capitalize()}RunningProcesses"
            # a GPU without graphics says NOT_SUPPORTED: no graphics process there
            listed = nvml.call(call, handle, not_supported=[] if kind == "graphics" else None)
            if listed is None:
                if kind == "compute":
                    return None  # without the compute list nothing can be said
                continue
            for entry in listed:
                pid = int(getattr(entry, "pid", -1))
                memory = getattr(entry, "usedGpuMemory", None)
                if pid >= 0 and pid not in found:
                    found[pid] = OtherProcess(pid, kind, int(memory) if memory else None)
        return list(found.values())

    def _state(self, index: int, bus_id: str) -> GpuState:
        handle = self._handles.get(index)
        if self._nvml is None or handle is None:
            unknown = f"NVML does not know bus id {bus_id}"
            why = self.unavailable or self._broken.get(index) or unknown
            return GpuState(index=index, pci_bus_id=bus_id, unavailable=why)
        nvml = self._nvml
        first, last = self._first[index], self._sample(handle)
        state = GpuState(index=index, pci_bus_id=bus_id, **self._fixed[index])
        state.sm_clock_mhz = nvml.call("nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM)
        state.memory_clock_mhz = nvml.call("nvmlDeviceGetClockInfo", handle, NVML_CLOCK_MEM)
        state.clock_reasons, state.clock_reasons_basis = seen_reasons(first, last)
        links = [link for link in (first.link, last.link) if link is not None]
        if links:
            state.pcie_generation = max(link[0] for link in links)
            state.pcie_width = max(link[1] for link in links)
        state.other_processes, state.processes_note = others(
            first.processes, last.processes, self._own_pid
        )
        return state

    def _fixed_facts(self, handle: Any) -> dict[str, Any]:
        """What does not change during a run (most limits, links, modes), read with the first
        samples: on the first look's own thread where it has one, not after the work."""
        nvml = self._nvml
        assert nvml is not None
        return {
            "sm_clock_max_mhz": nvml.call("nvmlDeviceGetMaxClockInfo", handle, NVML_CLOCK_SM),
            "memory_clock_max_mhz": nvml.call("nvmlDeviceGetMaxClockInfo", handle, NVML_CLOCK_MEM),
            "pcie_max_generation": nvml.call("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "pcie_max_width": nvml.call("nvmlDeviceGetMaxPcieLinkWidth", handle),
            "pcie_gpu_max_generation": nvml.call("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
            "nvlinks": self._nvlinks(handle),
            "ecc_enabled": _enabled(nvml.call("nvmlDeviceGetEccMode", handle, not_supported=[0])),
            "persistence_mode": _enabled(nvml.call("nvmlDeviceGetPersistenceMode", handle)),
            "mig_enabled": _enabled(nvml.call("nvmlDeviceGetMigMode", handle, not_supported=[0])),
        }

    def _nvlinks(self, handle: Any) -> list[NvLink] | None:
        """Every NVLink: state, then version, rate and the far end of the active ones."""
        nvml = self._nvml
        assert nvml is not None
        count = nvml.fields(handle, [(FIELD_NVLINK_LINK_COUNT, 0)])[0]
        count = int(count) if count is not None else None
        if count == 0:
            return []
        most = count if count is not None else getattr(nvml.module, "NVML_NVLINK_MAX_LINKS", 0)
        links = []
        for link in range(most or MAX_NVLINKS):
            active = nvml.call(
                "nvmlDeviceGetNvLinkState", handle, link, not_supported=_NOT_SUPPORTED
            )
            if active is _NOT_SUPPORTED and link == 0 and count is None:
                return []  # no NVLink on this GPU
            if active is _NOT_SUPPORTED or active is None:
                if count is None:
                    break  # past the last link
                links.append(NvLink(link, None, None, None, None, None))
                continue
            links.append(NvLink(link, bool(active), None, None, None, None))
        if not links:
            return None
        active = [link.link for link in links if link.active]
        speeds = nvml.fields(handle, [(FIELD_NVLINK_GET_SPEED, link) for link in active])
        if active and all(speed is None for speed in speeds):
            common = nvml.fields(handle, [(FIELD_NVLINK_SPEED_COMMON, 0)])[0]
            speeds = [common] * len(active)
        speed_of = dict(zip(active, speeds, strict=True))
        return [
            self._nvlink(handle, link, speed_of.get(link.link)) if link.active else link
            for link in links
        ]

    def _nvlink(self, handle: Any, link: NvLink, speed: float | None) -> NvLink:
        nvml = self._nvml
        assert nvml is not None
        version = nvml.call("nvmlDeviceGetNvLinkVersion", handle, link.link)
        remote = nvml.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link.link)
        remote_bus = getattr(remote, "busId", None) if remote is not None else None
        if isinstance(remote_bus, bytes):
            remote_bus = remote_bus.decode(errors="replace")
        kind = nvml.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link.link)
        return NvLink(
            link.link,
            True,
            NVLINK_VERSIONS.get(version) if version is not None else None,
            int(speed) if speed else None,
            normalize_bus_id(remote_bus) if remote_bus else None,
            NVLINK_REMOTE_KINDS.get(kind, "unknown") if kind is not None else None,
        )


def _unexpected(error: Exception) -> str:
    return f"NVML answered unexpectedly ({type(error).__name__}: {error})"


def _enabled(value: Any) -> bool | None:
    """NVML's enable state (or [current, pending]) as a bool; None unknown."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return None if value is None else bool(value)


def seen_reasons(first: _Sample, last: _Sample) -> tuple[list[str] | None, str]:
    """The clock-event reasons seen during the run, and how they were seen."""
    if first.reasons is None and last.reasons is None:
        return None, ""
    mask = (first.reasons or 0) | (last.reasons or 0)
    seen = reasons_in(mask)
    seen += [
        name
        for name, value in last.counters.items()
        if name in first.counters and value > first.counters[name] and name not in seen
    ]
    basis = "sampled when the run started and when it ended"
    if set(first.counters) & set(last.counters):
        basis += ", and NVML's cumulative clock-event counters compared between them"
    return seen, basis


def others(
    first: list[OtherProcess] | None, last: list[OtherProcess] | None, own_pid: int
) -> tuple[list[OtherProcess] | None, str]:
    """Processes other than memprof on the GPU during the run, and what could not be seen."""
    before = [p for p in first or [] if p.pid != own_pid]
    if last is None:
        if first is None:
            return None, ""
        return before, "listed when the run started only"
    if not any(p.pid == own_pid for p in last):
        if first is None:
            return None, "NVML's process ids are not this process's"
        return before, (
            "NVML's process ids are not this process's (a container?): processes that "
            "started during the run are not counted"
        )
    merged = {p.pid: p for p in before}
    for process in last:
        if process.pid != own_pid:
            merged.setdefault(process.pid, process)
    return list(merged.values()), ""
