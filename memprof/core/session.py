"""The GPU session: PyCUDA import guard and the one place a CUDA context is made and undone.

Everything a command allocates, compiles or records goes through a GpuSession, which
frees it and pops the context on success, on any exception and on Ctrl-C, so
PyCUDA never aborts with "context stack was not empty".
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Callable, Iterator
from types import ModuleType, TracebackType
from typing import Any

from memprof.core.measure import Profiler
from memprof.errors import EnvironmentProblem, InvalidArgument

INSTALL_HINT = (
    'PyCUDA is not installed: pip install "memprof[cuda]" '
    "(it builds against the CUDA toolkit: nvcc on PATH, cuda.h under CUDA_ROOT)"
)


def import_driver() -> ModuleType:
    """Import pycuda.driver, turning each way that fails into one clear line."""
    try:
        import pycuda.driver as cuda
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in {"pycuda", "pytools"}:
            raise EnvironmentProblem(INSTALL_HINT) from error
        raise EnvironmentProblem(f"PyCUDA cannot be imported: {error}") from error
    except ImportError as error:
        if "libcuda" in str(error):
            raise EnvironmentProblem(
                "the CUDA driver (libcuda.so.1) was not found: memprof needs a machine "
                "with an NVIDIA GPU and its driver installed"
            ) from error
        raise EnvironmentProblem(f"PyCUDA cannot be imported: {error}") from error
    return cuda


TIMING_MODES = ("auto", "cupti", "events")


class GpuSession:
    """One CUDA context on one device, and everything owned inside it.

    timing: "cupti" takes GPU activities from CUPTI's records (an error where CUPTI is
    missing), "events" from gated CUDA events, "auto" CUPTI where it works, else events.
    """

    def __init__(self, device_index: int = 0, timing: str = "auto") -> None:
        if timing not in TIMING_MODES:
            raise InvalidArgument(f"--timing {timing!r}: choose from {', '.join(TIMING_MODES)}")
        self.device_index = device_index
        self.timing = timing
        self.activity: Any = None
        self.cuda: Any = None
        self.device: Any = None
        self.context: Any = None
        self.profiler: Profiler | None = None
        self._owned: dict[int, Callable[[], None]] = {}
        self._next_handle = 0
        self._modules: dict[str, Any] = {}
        self.cleanup_failures: list[str] = []

    def __enter__(self) -> GpuSession:
        self.cuda = cuda = import_driver()
        try:
            cuda.init()
            count = cuda.Device.count()
        except cuda.Error as error:
            raise EnvironmentProblem(f"no usable CUDA device: {_driver_message(error)}") from error
        if count == 0:
            raise EnvironmentProblem("no CUDA device found: the driver sees no GPU")
        if not 0 <= self.device_index < count:
            raise InvalidArgument(
                f"--device {self.device_index} does not exist: this machine has {count} "
                f"CUDA device{'s' if count > 1 else ''} (0 to {count - 1})"
            )
        self.device = cuda.Device(self.device_index)
        fallback_reason = "--timing events" if self.timing == "events" else ""
        if self.timing != "events":
            # CUPTI is switched on after cuInit and before the context, as it needs for
            # unified-memory counters.
            from memprof.core.activity import ActivityLog

            self.activity, why_not = ActivityLog.start(self.device_index)
            if self.activity is None:
                if self.timing == "cupti":
                    raise EnvironmentProblem(
                        f"--timing cupti: {why_not} (pip install cupti-python, or --timing events)"
                    )
                fallback_reason = why_not or ""
        try:
            with _sigint_deferred():  # Ctrl-C waits until the context is ours to pop
                self.context = self.device.make_context()
            self.profiler = Profiler(self, self.activity, fallback_reason)
        except BaseException as error:
            self.close()  # __exit__ does not run when __enter__ fails
            self._stop_activity()
            if isinstance(error, cuda.Error):
                raise EnvironmentProblem(
                    f"cannot create a CUDA context on device {self.device_index}: "
                    f"{_driver_message(error)}"
                ) from error
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def own(self, release: Callable[[], None]) -> int:
        """Register something to release at close; returns a handle for `disown`."""
        handle = self._next_handle
        self._next_handle += 1
        self._owned[handle] = release
        return handle

    def disown(self, handle: int) -> None:
        self._owned.pop(handle, None)

    def module(self, key: str, build: Callable[[], Any]) -> Any:
        """A compiled module, built once per session (PyCUDA caches cubins on disk too)."""
        if key not in self._modules:
            self._modules[key] = build()
        return self._modules[key]

    def memory_info(self) -> tuple[int, int]:
        """(free, total) device memory in bytes, as the driver reports it now."""
        free, total = self.cuda.mem_get_info()
        return int(free), int(total)

    def attribute(self, name: str) -> int:
        """A device attribute by its cuda.h name without prefix (CAN_MAP_HOST_MEMORY...)."""
        attribute = getattr(self.cuda.device_attribute, name, None)
        if attribute is not None:
            return int(self.device.get_attribute(attribute))
        from memprof.core import driver  # PyCUDA does not name every attribute: ask libcuda

        return driver.device_attribute(driver.DEVICE_ATTRIBUTE_NUMBERS[name], self.device_index)

    def synchronize(self) -> None:
        """Wait for all GPU work (a gate held closed is released first: it would never end)."""
        if self.profiler is not None:
            self.profiler.release_gate()
        self.context.synchronize()

    def close(self) -> None:
        """Free everything owned, newest first, then pop and destroy the context."""
        with _sigint_deferred():
            if self.context is None:
                return
            if self.profiler is not None:
                self.profiler.discard_pending()
                self.profiler.release()
            with contextlib.suppress(Exception):
                self.context.synchronize()
            for handle in sorted(self._owned, reverse=True):
                release = self._owned.pop(handle)
                try:
                    release()
                except Exception as error:  # a dead context fails every call: keep going
                    self.cleanup_failures.append(str(error))
            self._modules.clear()
            gc.collect()
            self._stop_activity()
            context, self.context = self.context, None
            with contextlib.suppress(Exception):
                context.pop()
            with contextlib.suppress(Exception):
                context.detach()

    def _stop_activity(self) -> None:
        if self.activity is not None:
            activity, self.activity = self.activity, None
            with contextlib.suppress(Exception):
                activity.stop()


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold back a second Ctrl-C while freeing, so cleanup itself cannot be cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            raise KeyboardInterrupt


def _driver_message(error: BaseException) -> str:
    return str(error).strip() or type(error).__name__
