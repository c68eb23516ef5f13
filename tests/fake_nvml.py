"""A stand-in for nvidia-ml-py's `pynvml`, so memprof.core.nvml runs on a machine without a GPU.

It has the real binding's names, signatures and error class (an NVMLError carrying `.value`,
field values as objects with nvmlReturn, valueType and a value union), read from
nvidia-ml-py 13.615's pynvml.py. Each GPU is a FakeGpu; what changes during a run (clock
reasons, counters, processes, the link) is given as a list, one entry per sample, read in
turn: the first at the Watch's start, the next at its finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_NVLINK_MAX_LINKS = 18
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {
            NVML_ERROR_NOT_SUPPORTED: "Not Supported",
            NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
            NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        }.get(self.value, f"NVML Error with code {self.value}")


NOT_SUPPORTED = NVMLError(NVML_ERROR_NOT_SUPPORTED)


@dataclass
class FakeGpu:
    """One GPU as NVML would report it. A value that is an NVMLError is raised instead."""

    bus_id: str = "00000000:00:06.0"  # NVML writes the domain with 8 digits
    reasons: list[Any] = field(default_factory=lambda: [0, 0])  # a mask per sample
    counters: list[dict[int, int]] = field(default_factory=lambda: [{}, {}])  # field id -> ns
    compute: list[Any] = field(default_factory=lambda: [[], []])  # [(pid, bytes)] per sample
    graphics: list[Any] = field(default_factory=lambda: [[], []])
    link: list[Any] = field(default_factory=lambda: [(5, 16), (5, 16)])  # (gen, width)
    link_max: Any = (5, 16)
    gpu_max_generation: Any = 5
    clocks: dict[int, Any] = field(default_factory=lambda: {1: 1980, 2: 3201})
    max_clocks: dict[int, Any] = field(default_factory=lambda: {1: 1980, 2: 3201})
    ecc: Any = (1, 1)
    persistence: Any = 1
    mig: Any = (0, 0)
    # NVLink: None = NOT_SUPPORTED everywhere; else one (active, version, MBps, remote bus,
    # remote type) per link
    nvlinks: list[tuple] | None = None
    link_count_field: Any = None  # NVML_FI_DEV_NVLINK_LINK_COUNT; None: not answered
    speed_common_field: Any = None  # NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON; None: not answered


def _raise_or(value: Any) -> Any:
    if isinstance(value, Exception):
        raise value
    return value


class FakePynvml:
    """The module: `FakePynvml(FakeGpu(...), ...)` is passed where pynvml would be."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS

    def __init__(self, *gpus: FakeGpu, init_error: Exception | None = None) -> None:
        self.gpus = {gpu.bus_id: gpu for gpu in gpus}
        self.init_error = init_error
        self.initialized = 0
        self.calls: list[str] = []
        self._samples: dict[tuple[str, str], int] = {}

    # -- library -----------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        self.initialized -= 1

    def _gpu(self, handle: Any) -> FakeGpu:
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        return handle

    def _next(self, handle: FakeGpu, what: str, values: list[Any]) -> Any:
        """The value of this sample: the first call reads values[0], the next values[1]..."""
        key = (handle.bus_id, what)
        index = self._samples.get(key, 0)
        self._samples[key] = index + 1
        return _raise_or(values[min(index, len(values) - 1)])

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> FakeGpu:
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        domain, _, rest = bus_id.lower().partition(":")
        for gpu in self.gpus.values():
            their_domain, _, their_rest = gpu.bus_id.lower().partition(":")
            if int(domain, 16) == int(their_domain, 16) and rest == their_rest:
                return gpu
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    # -- what changes during a run -------------------------------------------------------------

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        return self._next(gpu, "reasons", gpu.reasons)

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list) -> list:
        gpu = self._gpu(handle)
        counted = any(field_id in (74, 269, 270, 271) for field_id, _ in field_ids)
        counters = self._next(gpu, "counters", gpu.counters) if counted else {}
        values = []
        for field_id, scope in field_ids:
            number = None
            if field_id in counters and scope == 0:  # a device's fields have scope 0
                number = counters[field_id]
            elif field_id == 91 and scope == 0:
                number = gpu.link_count_field
            elif field_id == 90 and scope == 0:
                number = gpu.speed_common_field
            elif field_id == 164 and gpu.nvlinks is not None and scope < len(gpu.nvlinks):
                number = gpu.nvlinks[scope][2]
            values.append(_field(number))
        return values

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list:
        gpu = self._gpu(handle)
        return [_process(*entry) for entry in self._next(gpu, "compute", gpu.compute)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list:
        gpu = self._gpu(handle)
        return [_process(*entry) for entry in self._next(gpu, "graphics", gpu.graphics)]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        return _raise_or(self._next(gpu, "generation", gpu.link))[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        return _raise_or(self._next(gpu, "width", gpu.link))[1]

    # -- what does not ---------------------------------------------------------------------------

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return _raise_or(self._gpu(handle).link_max)[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return _raise_or(self._gpu(handle).link_max)[1]

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: Any) -> int:
        return _raise_or(self._gpu(handle).gpu_max_generation)

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int:
        return _raise_or(self._gpu(handle).clocks[clock])

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, clock: int) -> int:
        return _raise_or(self._gpu(handle).max_clocks[clock])

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        return list(_raise_or(self._gpu(handle).ecc))

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return _raise_or(self._gpu(handle).persistence)

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        return list(_raise_or(self._gpu(handle).mig))

    def _nvlink(self, handle: Any, link: int) -> tuple:
        gpu = self._gpu(handle)
        if gpu.nvlinks is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if link >= len(gpu.nvlinks):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        return int(self._nvlink(handle, link)[0])

    def nvmlDeviceGetNvLinkVersion(self, handle: Any, link: int) -> int:
        return _raise_or(self._nvlink(handle, link)[1])

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:
        bus = _raise_or(self._nvlink(handle, link)[3])
        return SimpleNamespace(busId=bus if isinstance(bus, bytes) else bus.encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return _raise_or(self._nvlink(handle, link)[4])


def _field(number: Any) -> Any:
    if number is None or isinstance(number, Exception):
        return SimpleNamespace(
            nvmlReturn=NVML_ERROR_NOT_SUPPORTED,
            valueType=NVML_VALUE_TYPE_UNSIGNED_INT,
            value=SimpleNamespace(uiVal=0, ullVal=0),
        )
    return SimpleNamespace(
        nvmlReturn=NVML_SUCCESS,
        valueType=NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
        value=SimpleNamespace(uiVal=int(number), ullVal=int(number)),
    )


def _process(pid: int, memory: int | None) -> Any:
    return SimpleNamespace(pid=pid, usedGpuMemory=memory)


def without(module: FakePynvml, *names: str) -> Any:
    """The module as an older binding: these functions missing (AttributeError)."""

    class Older:
        def __getattr__(self, name: str) -> Any:
            if name in names:
                raise AttributeError(name)
            return getattr(module, name)

    return Older()
