"""The driver's start begun early (memprof.core.driver.start_in_background): on a thread of
its own, once per process, ended before PyCUDA's cuInit runs and before the process ends,
Ctrl-C or not. A stand-in libcuda whose cuInit blocks until the test lets it go (no GPU
here)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from memprof.core import driver, session
from memprof.experiments import base
from memprof.experiments.peer import Peer, PeerParams
from memprof.experiments.pinned import Pinned, PinnedParams

ROOT = Path(__file__).resolve().parents[1]
COUNTING_DRIVER = """
class Error(Exception):
    pass

def init():
    pass

class Device:
    @staticmethod
    def count():
        return 1

    def __init__(self, index):
        self.index = index

    def pci_bus_id(self):
        return f"0000:{self.index:02x}:00.0"
"""


class SlowLibcuda:
    """cuInit that waits for `release`, noting the thread it ran on and when it ended."""

    def __init__(self, fails: bool = False) -> None:
        self.release = threading.Event()
        self.ended = threading.Event()
        self.threads: list[threading.Thread] = []
        self.fails = fails

    def cuInit(self, flags: int) -> int:
        self.threads.append(threading.current_thread())
        self.release.wait(10)
        self.ended.set()
        if self.fails:
            raise OSError("libcuda.so.1: cannot open shared object file")
        return 0


@pytest.fixture
def at_exit(monkeypatch) -> list[object]:
    """What the start registers to run at exit (the real atexit is left alone)."""
    registered: list[object] = []
    monkeypatch.setattr(driver, "atexit", SimpleNamespace(register=registered.append))
    return registered


@pytest.fixture
def libcuda(monkeypatch, at_exit):
    fake = SlowLibcuda()
    monkeypatch.setattr(driver, "libcuda", lambda: fake)
    monkeypatch.setattr(driver, "_start_ended", None)
    yield fake
    fake.release.set()
    driver.wait_for_start()


def test_the_start_runs_on_a_thread_of_its_own_and_returns_at_once(libcuda, at_exit):
    driver.start_in_background()
    assert not libcuda.ended.is_set()  # the caller goes on while cuInit runs
    libcuda.release.set()
    driver.wait_for_start()
    assert libcuda.ended.is_set()
    assert len(libcuda.threads) == 1
    assert libcuda.threads[0] is not threading.main_thread()
    assert at_exit == [driver._start_ended.wait]  # the process never ends mid-start


def test_the_start_is_begun_once_per_process(libcuda):
    libcuda.release.set()
    driver.start_in_background()
    driver.wait_for_start()
    driver.start_in_background()
    driver.wait_for_start()
    assert len(libcuda.threads) == 1


def test_waiting_without_a_start_returns_at_once(monkeypatch):
    monkeypatch.setattr(driver, "_start_ended", None)
    driver.wait_for_start()


def test_a_failing_start_is_left_to_pycuda_to_report(monkeypatch, at_exit):
    fake = SlowLibcuda(fails=True)
    fake.release.set()
    uncaught: list[object] = []
    monkeypatch.setattr(threading, "excepthook", uncaught.append)
    monkeypatch.setattr(driver, "libcuda", lambda: fake)
    monkeypatch.setattr(driver, "_start_ended", None)
    driver.start_in_background()
    driver.wait_for_start()
    assert fake.ended.is_set()
    assert uncaught == []  # nothing printed: PyCUDA's own cuInit says what is wrong


def test_without_a_thread_to_be_had_nothing_waits(monkeypatch, at_exit):
    class NoThreads:
        def __init__(self, **options: object) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(driver.threading, "Thread", NoThreads)
    monkeypatch.setattr(driver, "_start_ended", None)
    driver.start_in_background()
    assert driver._start_ended.wait(timeout=1)


@pytest.mark.parametrize("ask", ["device_count", "pci_bus_ids"])
def test_pycudas_cuinit_waits_for_the_start(libcuda, fake_pycuda, monkeypatch, ask):
    fake_pycuda(COUNTING_DRIVER)
    cuda = session.import_driver()
    seen: list[bool] = []
    monkeypatch.setattr(cuda, "init", lambda: seen.append(libcuda.ended.is_set()))
    monkeypatch.setattr(session, "_BUS_IDS", {})
    driver.start_in_background()
    threading.Timer(0.05, libcuda.release.set).start()
    answer = session.device_count() if ask == "device_count" else session.pci_bus_ids([0])
    assert seen == [True]
    assert answer in (1, {0: "0000:00:00.0"})


def test_a_run_begins_the_start_before_asking_the_driver_anything(
    libcuda, fake_pycuda, monkeypatch
):
    """base.run begins it first: the bus ids (libcuda's, for NVML's first look on a thread of
    its own) come after, PyCUDA's import meanwhile, and what that look raised is raised by
    the run."""
    fake_pycuda(COUNTING_DRIVER)
    order: list[str] = []
    monkeypatch.setattr(driver, "start_in_background", lambda: order.append("start"))
    release = threading.Event()

    def bus_ids(indices: list[int]) -> dict[int, str]:
        release.wait(10)  # until PyCUDA is imported
        order.append(f"bus ids of {indices}")
        raise RuntimeError("stop here")

    def imported() -> object:
        order.append("PyCUDA imported")
        release.set()
        return imports()

    imports = session.import_driver
    monkeypatch.setattr(driver, "pci_bus_ids", bus_ids)
    monkeypatch.setattr(session, "import_driver", imported)
    with pytest.raises(RuntimeError, match="stop here"):
        base.run(Pinned(), PinnedParams(), base.RunOptions(device=2))
    assert order == ["start", "PyCUDA imported", "bus ids of [2]"]


@pytest.mark.parametrize("device", [0, None])
def test_a_run_over_every_gpu_takes_no_first_look_of_one(device):
    """Its GPUs are PyCUDA's to count first: the run's own look then names each of them."""
    assert base._first_look(Peer(), base.RunOptions(device=device)) is None


def test_a_run_over_every_gpu_looks_at_the_bus_ids_pycuda_counted(fake_pycuda, monkeypatch):
    fake_pycuda(COUNTING_DRIVER.replace("return 1", "return 2"))
    monkeypatch.setattr(driver, "start_in_background", lambda: None)
    asked: list[list[int]] = []

    def bus_ids(indices: list[int]) -> dict[int, str]:
        asked.append(indices)
        raise RuntimeError("stop here")

    monkeypatch.setattr(session, "pci_bus_ids", bus_ids)
    with pytest.raises(RuntimeError, match="stop here"):
        base.run(Peer(), PeerParams(), base.RunOptions(device=None))
    assert asked == [[0, 1]]


class BusIds:
    """libcuda's calls behind PyCUDA's Device(i).pci_bus_id(), for `gpus` GPUs."""

    def __init__(self, gpus: int, init_result: int = 0, bus_id_result: int = 0) -> None:
        self.gpus, self.init_result, self.bus_id_result = gpus, init_result, bus_id_result

    def cuInit(self, flags: int) -> int:
        return self.init_result if flags == 0 else 1  # CUDA_ERROR_INVALID_VALUE: flags must be 0

    def cuDeviceGet(self, device, index: int) -> int:
        device._obj.value = 10 + index
        return 0 if index < self.gpus else 101  # CUDA_ERROR_INVALID_DEVICE

    def cuDeviceGetPCIBusId(self, bus_id, length: int, device) -> int:
        if self.bus_id_result == 0:
            bus_id.value = f"0000:{device.value:02X}:00.0".encode()[: length - 1]
        return self.bus_id_result


@pytest.mark.parametrize(
    "libcuda, asked, answer",
    [
        (BusIds(2), [0, 1], {0: "0000:0A:00.0", 1: "0000:0B:00.0"}),
        (BusIds(2), [2], {}),  # no such GPU: the session says so
        (BusIds(2, init_result=100), [0], {}),  # CUDA_ERROR_NO_DEVICE
        (BusIds(2, bus_id_result=999), [0, 1], {}),  # CUDA_ERROR_UNKNOWN: no id, none
        (object(), [0], {}),  # a libcuda without these calls
    ],
)
def test_the_bus_ids_come_from_libcuda_as_pycuda_reads_them(monkeypatch, libcuda, asked, answer):
    monkeypatch.setattr(driver, "libcuda", lambda: libcuda)
    monkeypatch.setattr(driver, "_start_ended", None)
    assert driver.pci_bus_ids(asked) == answer


def test_the_bus_ids_are_asked_once_the_start_has_ended(libcuda):
    """NVML's first look asks for them on a thread of its own: its cuInit waits for the
    start's, as PyCUDA's does."""
    bus_ids, seen = BusIds(1), []
    libcuda.cuDeviceGet, libcuda.cuDeviceGetPCIBusId = (
        bus_ids.cuDeviceGet,
        bus_ids.cuDeviceGetPCIBusId,
    )
    starts_cuinit = libcuda.cuInit

    def cuInit(flags: int) -> int:
        if threading.current_thread() is threading.main_thread():
            seen.append(libcuda.ended.is_set())
        return starts_cuinit(flags)

    libcuda.cuInit = cuInit
    driver.start_in_background()
    threading.Timer(0.05, libcuda.release.set).start()
    assert driver.pci_bus_ids([0]) == {0: "0000:0A:00.0"}
    assert seen == [True]


def test_without_libcuda_there_are_no_bus_ids(monkeypatch):
    def missing() -> None:
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(driver, "libcuda", missing)
    monkeypatch.setattr(driver, "_start_ended", None)
    assert driver.pci_bus_ids([0]) == {}


CTRL_C_WHILE_WAITING = """
import os, signal, sys, threading, time
from memprof.core import driver

class SlowStart:
    def cuInit(self, flags):
        time.sleep(0.6)
        os.write(1, b"cuInit ended\\n")
        return 0

driver.libcuda = lambda: SlowStart()
driver.start_in_background()
main = threading.main_thread().ident
threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT)).start()
try:
    driver.wait_for_start()
except KeyboardInterrupt:
    os.write(1, b"interrupted\\n")
"""


def test_a_ctrl_c_while_waiting_still_lets_the_start_end_before_the_process(tmp_path):
    """A press during the wait ends it; the process then waits at exit for cuInit (it would
    otherwise end, libcuda's exit handlers running, with cuInit still under way)."""
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_WAITING],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.splitlines() == ["interrupted", "cuInit ended"], done.stderr
