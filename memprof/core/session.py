"""The GPU session: PyCUDA import guard and the one place a CUDA context is made and undone.

Everything a command allocates, compiles or records goes through a GpuSession, which frees it
and pops the context on success, any exception and Ctrl-C ("context stack was not empty").
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from memprof.core.measure import Profiler
from memprof.errors import EnvironmentProblem, InvalidArgument, error_words, install_command


def install_hint() -> str:
    """The line a GPU command ends with where PyCUDA is missing: a command that installs it."""
    return (
        f"PyCUDA is not installed: {install_command()} (PyCUDA builds against the CUDA "
        "toolkit: nvcc on PATH, cuda.h and curand.h under CUDA_ROOT; README.md, "
        "Troubleshooting)"
    )


def no_driver_line() -> str:
    """A GPU command's last line on a machine with no NVIDIA driver: what still works here,
    and what to install on a GPU machine."""
    return (
        "this machine has no NVIDIA driver (no libcuda.so.1, no /dev/nvidia*): measuring needs "
        "an NVIDIA GPU; here memprof report, diff and plot read saved results. On a GPU "
        f"machine: {install_command()}"
    )


def driver_installed() -> bool:
    """Whether this machine has NVIDIA's driver: its library loads or its devices exist."""
    import glob

    from memprof.core import driver

    try:
        driver.libcuda()
    except OSError:
        return bool(glob.glob("/dev/nvidia*"))
    return True


def import_driver() -> ModuleType:
    """Import pycuda.driver, turning each way that fails into one clear line."""
    try:
        import pycuda.driver as cuda
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in {"pycuda", "pytools"}:
            if not driver_installed():
                raise EnvironmentProblem(no_driver_line()) from error
            raise EnvironmentProblem(install_hint()) from error
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
    """One CUDA context on one device, and everything owned inside it. declared: the (group,
    operation) pairs the experiment records; activity: CUPTI's log shared by Devices;
    ends_process: the process ends with the session (the gc.freeze in __enter__)."""

    def __init__(
        self,
        device_index: int = 0,
        timing: str = "auto",
        declared: frozenset[tuple[str, str]] | None = None,
        activity: tuple[Any, str] | None = None,
        ends_process: bool = False,
    ) -> None:
        if timing not in TIMING_MODES:
            raise InvalidArgument(f"--timing {timing!r}: choose from {', '.join(TIMING_MODES)}")
        self.device_index = device_index
        self.ends_process = ends_process
        self.timing = timing
        self.declared = declared
        self._shared_activity = activity  # (log or None, why not), started by Devices
        self.detached = False  # Devices keeps contexts off the stack between uses
        self.activity: Any = None
        self.cuda: Any = None
        self.device: Any = None
        self.context: Any = None
        self.profiler: Profiler | None = None
        self._owned: dict[int, Callable[[], None]] = {}
        self._next_handle = 0
        self._modules: dict[str, Any] = {}
        self.cleanup_failures: list[str] = []
        self._unfreeze_at_close = False

    def __enter__(self) -> GpuSession:
        self.cuda = cuda = import_driver()
        count = device_count()
        if not 0 <= self.device_index < count:
            raise InvalidArgument(
                f"--device {self.device_index} does not exist: this machine has {count} "
                f"CUDA device{'s' if count > 1 else ''} (0 to {count - 1})"
            )
        self.device = cuda.Device(self.device_index)
        self.activity, fallback_reason = self._shared_activity or start_activity(
            self.timing, self.device_index
        )
        # Older objects hold no GPU memory: frozen, close()'s collection skips them (15 ms of
        # 53,000). Where the process froze some already (Python 3.12's), unfreezing would undo
        # theirs too: frozen then only where the process ends.
        try:
            self._unfreeze_at_close = gc.get_freeze_count() == 0
            if self._unfreeze_at_close or self.ends_process:
                gc.freeze()
            with _sigint_deferred():  # Ctrl-C waits until the context is ours to pop
                self.context = self.device.make_context()
            self.profiler = Profiler(self, self.activity, fallback_reason, declared=self.declared)
        except BaseException as error:
            self.close()  # __exit__ does not run when __enter__ fails
            self._stop_activity()
            if isinstance(error, cuda.Error):
                raise EnvironmentProblem(
                    f"cannot create a CUDA context on device {self.device_index}: "
                    f"{error_words(error)}"
                ) from error
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
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
        """A compiled module, built once per session (kernels.py caches cubins on disk too)."""
        return self.once(key, build)

    def once(self, key: str, build: Callable[[], Any]) -> Any:
        """Something made once per session; what must be released registers with own()."""
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
        from memprof.core import bindings  # PyCUDA does not name every attribute

        return bindings.device_attribute(name, self.device_index)

    def synchronize(self) -> None:
        """Wait for all GPU work (a gate held closed is released first: it would never end)."""
        if self.profiler is not None:
            self.profiler.release_gate()
        self.context.synchronize()

    def close(self) -> None:
        """Free everything owned, newest first, then pop and destroy the context."""
        try:
            self._close()
        finally:
            if self._unfreeze_at_close:
                self._unfreeze_at_close = False
                gc.unfreeze()

    def _close(self) -> None:
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
            gc.collect()  # what cycles hold is freed while the context lives
            self._stop_activity()
            context, self.context = self.context, None
            with contextlib.suppress(Exception):
                context.pop()
            with contextlib.suppress(Exception):
                context.detach()

    @contextlib.contextmanager
    def active(self) -> Iterator[GpuSession]:
        """This session's context current inside (pushed and popped where Devices keeps it)."""
        if not self.detached:
            yield self
            return
        with _sigint_deferred():
            self.context.push()
        try:
            yield self
        finally:
            with _sigint_deferred():
                self.cuda.Context.pop()

    def _stop_activity(self) -> None:
        if self.activity is not None and self._shared_activity is None:  # Devices stops its own
            activity, self.activity = self.activity, None
            with contextlib.suppress(Exception):
                activity.stop()


def device_count() -> int:
    """How many GPUs the driver sees (an EnvironmentProblem where it sees none or fails)."""
    cuda = import_driver()
    try:
        _init(cuda)
        count = cuda.Device.count()
    except cuda.Error as error:
        raise EnvironmentProblem(f"no usable CUDA device: {error_words(error)}") from error
    if count == 0:
        raise EnvironmentProblem("no CUDA device found: the driver sees no GPU")
    return count


def _init(cuda: ModuleType) -> None:
    """PyCUDA's cuInit, once driver.start_in_background's early start has ended."""
    from memprof.core import driver

    driver.wait_for_start()
    cuda.init()


_BUS_IDS: dict[int, str] = {}  # by GPU index: a GPU keeps its bus id while the process lives


def pci_bus_ids(indices: list[int]) -> dict[int, str]:
    """Each GPU's PCI bus id, once per process, without a context (NVML is asked before
    memprof's shows up there); {} where the driver cannot say."""
    try:
        missing = [index for index in indices if index not in _BUS_IDS]
        if missing:
            cuda = import_driver()
            _init(cuda)
            _BUS_IDS.update({index: cuda.Device(index).pci_bus_id() for index in missing})
        return {index: _BUS_IDS[index] for index in indices}
    except Exception:  # no driver, no such GPU: the session says so in its own words
        return {}


class Devices:
    """Several GPUs in one process: a GpuSession per device, none current between uses
    (`session(i).active()` pushes one around its work), sharing one CUPTI log."""

    def __init__(
        self,
        indices: list[int],
        timing: str = "auto",
        declared: frozenset[tuple[str, str]] | None = None,
        ends_process: bool = False,
    ) -> None:
        if timing not in TIMING_MODES:
            raise InvalidArgument(f"--timing {timing!r}: choose from {', '.join(TIMING_MODES)}")
        self.indices = list(indices)
        self.ends_process = ends_process
        self.timing = timing
        self.declared = declared
        self.sessions: dict[int, GpuSession] = {}
        self.peer_enabled: set[tuple[int, int]] = set()  # (accessor, owner)
        self.cleanup_failures: list[str] = []
        self._activity: Any = None

    def __enter__(self) -> Devices:
        try:
            device_count()  # cuInit, and one clear line where there is no GPU
            activity = start_activity(self.timing, self.indices[0])
            self._activity = activity[0]
            for index in self.indices:
                session = GpuSession(
                    index, self.timing, self.declared, activity, ends_process=self.ends_process
                )
                session.__enter__()  # its context is now current: put it aside
                session.detached = True
                self.sessions[index] = session
                with _sigint_deferred():
                    session.cuda.Context.pop()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def session(self, index: int) -> GpuSession:
        return self.sessions[index]

    def enable_peer_access(self, accessor: int, owner: int) -> None:
        """Let `accessor`'s context read and write `owner`'s memory directly (once)."""
        from memprof.core import bindings

        if (accessor, owner) in self.peer_enabled:
            return
        with self.sessions[accessor].active():
            bindings.enable_peer_access(self.sessions[owner].context.handle)
        self.peer_enabled.add((accessor, owner))

    def close(self) -> None:
        """Close every session, newest first, each with its own context current."""
        with _sigint_deferred():
            for index in reversed(list(self.sessions)):
                session = self.sessions.pop(index)
                if session.context is None:
                    continue
                with contextlib.suppress(Exception):
                    session.context.push()
                session.detached = False
                session.close()  # frees what it owns, then pops and detaches its context
                self.cleanup_failures += session.cleanup_failures
            if self._activity is not None:
                activity, self._activity = self._activity, None
                with contextlib.suppress(Exception):
                    activity.stop()


def start_activity(timing: str, device_index: int) -> tuple[Any, str]:
    """CUPTI's log for this process, or None and why (after cuInit, before any context, for
    unified-memory counters). "cupti" refuses to go on without it."""
    if timing == "events":
        return None, "--timing events"
    from memprof.core.activity import ActivityLog, experiment_call

    activity, why_not = ActivityLog.start(device_index, record_call=experiment_call)
    if activity is None and timing == "cupti":
        raise EnvironmentProblem(
            f"--timing cupti: {why_not} (pip install cupti-python, or --timing events)"
        )
    return activity, why_not or ""


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
