"""Several GPUs in one process: a context per device, peer access, and the driver calls for it.

A GpuSession is one context, current from __enter__ to close. Peer copies need two
contexts alive at once, and a driver call acts on whichever is current, so a PeerSession
makes one GpuSession per device, leaves none current, and `active(i)` pushes device i's
context around the work done there. Closing pushes each context again before its session
frees what it owns and pops it, so every context stack ends empty, on Ctrl-C too.

Peer sessions time with gated CUDA events (CUPTI records one process, not one context:
the bandwidth figures are throughput batches anyway).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
from collections.abc import Iterator
from typing import Any

from memprof.core import driver
from memprof.core.session import GpuSession, _sigint_deferred, import_driver
from memprof.errors import EnvironmentProblem, InvalidArgument
from memprof.model.results import Count

ALL_DEVICES = "all"


DEVICE_RECORD = {"index": Count, "name": str, "pci_bus_id": str}  # extra["devices"] items


def device_records(facts: dict[int, Any], devices: list[int]) -> list[dict[str, Any]]:
    """extra["devices"] of a multi-GPU Result: each GPU's index, name and PCI bus id."""
    return [{"index": i, "name": facts[i].name, "pci_bus_id": facts[i].pci_bus_id} for i in devices]


def parse_device_choice(text: str) -> int | None:
    """--device: an index, or `all` (None): one clear error otherwise."""
    if text.strip().lower() == ALL_DEVICES:
        return None
    try:
        index = int(text)
    except ValueError:
        raise InvalidArgument(
            f"--device {text!r}: give a device index (0, 1, ...) or 'all'"
        ) from None
    if not 0 <= index <= 63:
        raise InvalidArgument(f"--device {index} is outside the allowed range 0 to 63")
    return index


def ordered_pairs(devices: list[int]) -> list[tuple[int, int]]:
    """Every (source, destination) pair of distinct devices, source-major as matrices read."""
    return [(a, b) for a, b in itertools.product(devices, devices) if a != b]


def unordered_pairs(devices: list[int]) -> list[tuple[int, int]]:
    """Each pair once (for measurements in both directions at once)."""
    return list(itertools.combinations(devices, 2))


def device_count() -> int:
    """How many GPUs the driver sees (an EnvironmentProblem where it sees none or fails)."""
    cuda = import_driver()
    try:
        cuda.init()
        count = cuda.Device.count()
    except cuda.Error as error:
        raise EnvironmentProblem(f"no usable CUDA device: {str(error).strip()}") from error
    if count == 0:
        raise EnvironmentProblem("no CUDA device found: the driver sees no GPU")
    return count


class PeerSession:
    """One GpuSession per device, none current between uses; `active(i)` makes i's current."""

    def __init__(self, devices: list[int], timing: str = "events") -> None:
        self.devices = list(devices)
        self.timing = timing
        self.sessions: dict[int, GpuSession] = {}
        self.peer_enabled: set[tuple[int, int]] = set()  # (accessor, owner)
        self.cleanup_failures: list[str] = []

    def __enter__(self) -> PeerSession:
        try:
            for index in self.devices:
                session = GpuSession(index, self.timing)
                session.__enter__()  # its context is now current: put it aside
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

    @contextlib.contextmanager
    def active(self, index: int) -> Iterator[GpuSession]:
        """Device `index`'s context current for the work inside."""
        session = self.sessions[index]
        with _sigint_deferred():
            session.context.push()
        try:
            yield session
        finally:
            with _sigint_deferred():
                session.cuda.Context.pop()

    def can_access_peer(self, accessor: int, owner: int) -> bool:
        return can_access_peer(accessor, owner)

    def enable_peer_access(self, accessor: int, owner: int) -> None:
        """Let `accessor`'s context read and write `owner`'s memory directly (once)."""
        if (accessor, owner) in self.peer_enabled:
            return
        with self.active(accessor):
            enable_peer_access(self.sessions[owner].context.handle)
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
                session.close()  # frees what it owns, then pops and detaches its context
                self.cleanup_failures += session.cleanup_failures


# -- driver calls PyCUDA lacks (its memcpy_peer crashes with default arguments) -------------


def _device(ordinal: int) -> int:
    device = ctypes.c_int()
    driver.check("cuDeviceGet", driver.libcuda().cuDeviceGet(ctypes.byref(device), ordinal))
    return device.value


def can_access_peer(accessor: int, owner: int) -> bool:
    """cuDeviceCanAccessPeer: can `accessor` map `owner`'s memory (NVLink or PCIe P2P)?"""
    result = ctypes.c_int()
    driver.check(
        "cuDeviceCanAccessPeer",
        driver.libcuda().cuDeviceCanAccessPeer(
            ctypes.byref(result), _device(accessor), _device(owner)
        ),
    )
    return bool(result.value)


def enable_peer_access(peer_context_handle: int) -> None:
    """cuCtxEnablePeerAccess from the current context to the peer's (already on: fine)."""
    function = driver.libcuda().cuCtxEnablePeerAccess
    function.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    code = function(ctypes.c_void_p(peer_context_handle), 0)
    if code != 0 and driver.error_text(code) != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
        driver.check("cuCtxEnablePeerAccess", code)


def memcpy_peer_async(
    destination: int,
    destination_context: int,
    source: int,
    source_context: int,
    nbytes: int,
    stream_handle: int,
) -> None:
    """cuMemcpyPeerAsync: direct over the link with peer access on, staged by the driver off."""
    function = driver.libcuda().cuMemcpyPeerAsync
    function.argtypes = [
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    driver.check(
        "cuMemcpyPeerAsync",
        function(
            destination,
            ctypes.c_void_p(destination_context),
            source,
            ctypes.c_void_p(source_context),
            nbytes,
            ctypes.c_void_p(stream_handle),
        ),
    )
