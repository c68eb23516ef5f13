"""libcuda through ctypes, for the two uses where cuda-bindings would cost what is being saved
or measured: cuInit begun early (importing cuda-bindings on that thread would hold Python's
lock) and cuMemcpyBatchAsync (bindings.BatchCopy says why).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import signal
import threading


@functools.cache
def libcuda() -> ctypes.CDLL:
    """The driver's library (OSError where this machine has none)."""
    return ctypes.CDLL("libcuda.so.1")


# -- the driver's start, begun early ----------------------------------------------------------
_start_lock = threading.Lock()
_start_ended: threading.Event | None = None  # set once the early cuInit has returned


def start_in_background() -> None:
    """Begin cuInit (0.1 s on an H100) on a daemon thread, once per process, while the run
    imports PyCUDA, numpy and CUPTI; PyCUDA's own cuInit, after wait_for_start(), follows."""
    global _start_ended
    with _start_lock:
        if _start_ended is not None:
            return
        _start_ended = ended = threading.Event()

    def start() -> None:
        try:
            with contextlib.suppress(Exception):  # Ctrl-C goes to the main thread, at once
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            with contextlib.suppress(Exception):  # no libcuda: PyCUDA's import says so
                libcuda().cuInit(0)
        finally:
            ended.set()

    try:
        threading.Thread(target=start, name="memprof-cuinit", daemon=True).start()
    except RuntimeError:  # no thread to be had: PyCUDA's cuInit starts the driver instead
        ended.set()
    # An event, not the thread's join: a Ctrl-C inside Thread.join marks a thread that still
    # runs as ended (Python 3.10 to 3.12), and the process would not wait for it.
    atexit.register(ended.wait)


def wait_for_start() -> None:
    """Until the start begun by start_in_background() (if any) has ended."""
    if _start_ended is not None:
        _start_ended.wait()


def pci_bus_ids(indices: list[int]) -> dict[int, str]:
    """Each GPU's PCI bus id as PyCUDA's Device(i).pci_bus_id() reads it (cuDeviceGet, then
    cuDeviceGetPCIBusId), from any thread and without PyCUDA: NVML's first look asks on a
    thread of its own while the main one imports PyCUDA. {} where the driver cannot say (the
    session then says why in its own words)."""
    wait_for_start()
    try:
        cuda = libcuda()
        if cuda.cuInit(0) != 0:  # already done by the start, where there was one: returns at once
            return {}
        found = {}
        for index in indices:
            device = ctypes.c_int()
            bus_id = ctypes.create_string_buffer(1024)  # PyCUDA's buffer
            if cuda.cuDeviceGet(ctypes.byref(device), index) != 0:
                return {}
            if cuda.cuDeviceGetPCIBusId(bus_id, len(bus_id), device) != 0:
                return {}
            found[index] = bus_id.value.decode()
        return found
    except Exception:  # no libcuda, or one without these calls
        return {}
