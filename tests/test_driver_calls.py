"""The driver calls PyCUDA lacks, through cuda-bindings (memprof.core.bindings), on the driver
double of tests/fakegpu.py: registered memory, managed prefetch and advice, device attributes
by name, peer access and copies, and the trace collector's start. What each call is given
is held (the CUmemLocation forms of cuda-bindings 12 and 13, a context as a CUcontext),
every failure is one line, and whatever is registered is unregistered again."""

from __future__ import annotations

import numpy as np
import pytest

from memprof.core import bindings, devicefacts, driver, memory, session
from memprof.errors import EnvironmentProblem, ExitCode, MemprofError, OutOfMemory
from memprof.trace import collect
from tests.fakegpu import CUresult, FakeBindings, FakeSession

DEVICE, HOST = 1, 2  # CUmemLocationType


@pytest.fixture
def fake(monkeypatch):
    """make(**FakeBindings options) -> (FakeSession, FakeBindings), cuda-bindings faked."""

    def make(**options):
        gpu_session = FakeSession({})
        fake_bindings = FakeBindings(gpu_session.gpu, **options)
        monkeypatch.setattr(bindings, "_import", lambda: (fake_bindings, None))
        return gpu_session, fake_bindings

    return make


def test_registered_memory_is_registered_mapped_and_unregistered_through_the_bindings(fake):
    gpu_session, _ = fake()
    buffer = memory.allocate(gpu_session, "registered", 1 << 16, "uint8")
    address = buffer.array.ctypes.data
    assert gpu_session.gpu.registered == {address: (1 << 16, 0x03)}  # mapped and portable
    assert buffer.device_pointer == address
    buffer.free()
    assert gpu_session.gpu.leaks() == {}


def test_a_registration_out_of_memory_is_memprofs_out_of_memory(fake, monkeypatch):
    gpu_session, _ = fake()
    refused = lambda *a: (CUresult.CUDA_ERROR_OUT_OF_MEMORY,)  # noqa: E731
    monkeypatch.setattr(FakeBindings, "cuMemHostRegister", refused)
    with pytest.raises(OutOfMemory) as raised:
        memory.allocate(gpu_session, "registered", 1 << 16, "uint8")
    assert raised.value.exit_code == ExitCode.OUT_OF_MEMORY


def test_registering_twice_is_the_drivers_error_in_one_line(fake):
    gpu_session, _ = fake()
    array = np.zeros(1 << 12, np.uint8)
    bindings.host_register(array.ctypes.data, array.nbytes, bindings.HOST_REGISTER_PORTABLE)
    with pytest.raises(MemprofError, match="CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"):
        bindings.host_register(array.ctypes.data, array.nbytes, bindings.HOST_REGISTER_PORTABLE)
    with pytest.raises(MemprofError, match="cuMemHostGetDevicePointer failed"):
        bindings.host_device_pointer(array.ctypes.data)  # not mapped: no device address
    bindings.host_unregister(array.ctypes.data)
    assert gpu_session.gpu.leaks() == {}


@pytest.mark.parametrize("major", [12, 13])
@pytest.mark.parametrize(("ordinal", "where"), [(0, (DEVICE, 0)), (3, (DEVICE, 3)), (None, HOST)])
def test_prefetch_names_its_target_as_a_location_in_either_cuda_bindings(
    fake, major, ordinal, where
):
    gpu_session, _ = fake(major=major)
    bindings.prefetch(0x1000, 4096, ordinal, stream_handle=7)
    place = where if isinstance(where, tuple) else (where, 0)
    assert gpu_session.gpu.prefetched == [(0x1000, 4096, *place)]


@pytest.mark.parametrize("major", [12, 13])
@pytest.mark.parametrize(
    ("advice", "unset", "value"),
    [
        ("read-mostly", False, 1),
        ("read-mostly", True, 2),
        ("preferred-location", False, 3),
        ("preferred-location", True, 4),
        ("accessed-by", False, 5),
        ("accessed-by", True, 6),
    ],
)
def test_advice_and_its_undoing_are_cudas_numbers(fake, major, advice, unset, value):
    gpu_session, _ = fake(major=major)
    bindings.advise(0x2000, 8192, advice, 1, unset=unset)
    assert gpu_session.gpu.advised == [(0x2000, 8192, value, DEVICE, 1)]


def test_attributes_pycuda_does_not_name_are_asked_by_their_cuda_name(fake):
    fake(attributes={99: 0, 102: 1, 115: 1})
    assert bindings.device_attribute("HOST_REGISTER_SUPPORTED", 0) == 0
    assert bindings.device_attribute("MEMORY_POOLS_SUPPORTED", 0) == 1
    with pytest.raises(MemprofError, match="cuDeviceGetAttribute failed"):
        bindings.device_attribute("MEMORY_POOLS_SUPPORTED", 1)  # no such device


def test_peer_access_enabled_twice_is_fine_and_any_other_failure_is_an_error(fake, monkeypatch):
    gpu_session, _ = fake(devices=2)
    assert bindings.can_access_peer(0, 1)
    bindings.enable_peer_access(0x77)
    bindings.enable_peer_access(0x77)  # already on
    assert gpu_session.gpu.peers == {0x77}
    refused = lambda *a: (CUresult.CUDA_ERROR_INVALID_VALUE,)  # noqa: E731
    monkeypatch.setattr(FakeBindings, "cuCtxEnablePeerAccess", refused)
    with pytest.raises(MemprofError, match="cuCtxEnablePeerAccess failed"):
        bindings.enable_peer_access(0x78)


def test_a_peer_copy_moves_the_bytes(fake):
    fake(devices=2)
    source, target = np.arange(256, dtype=np.uint8), np.zeros(256, np.uint8)
    bindings.memcpy_peer_async(target.ctypes.data, 2, source.ctypes.data, 1, 256, 5)
    assert (target == source).all()


def test_without_cuda_bindings_a_driver_call_says_how_to_install_it(monkeypatch):
    why = "cuda-bindings is not installed (pip install cuda-bindings)"
    monkeypatch.setattr(bindings, "_import", lambda: (None, why))
    with pytest.raises(EnvironmentProblem, match="cuda-bindings is not installed") as raised:
        bindings.host_register(0x1000, 4096, bindings.HOST_REGISTER_MAPPED_PORTABLE)
    assert raised.value.exit_code == ExitCode.ENVIRONMENT


# -- the trace collector's start --------------------------------------------------------------


@pytest.fixture
def libcuda(monkeypatch):
    """libcuda.so.1 loads (set loads False: it does not)."""
    state = {"loads": True}

    def load():
        if not state["loads"]:
            raise OSError("libcuda.so.1: cannot open shared object file")
        return object()

    monkeypatch.setattr(driver, "libcuda", load)
    return state


def test_the_trace_starts_the_driver_and_counts_its_devices(fake, libcuda):
    _, fake_bindings = fake(devices=3)
    assert collect._cuda_init() == 3
    assert fake_bindings.initialized


def test_a_driver_that_sees_no_gpu_is_one_line(fake, libcuda):
    fake(devices=0)
    with pytest.raises(EnvironmentProblem, match="no usable CUDA device: cuInit failed: CUDA_ERR"):
        collect._cuda_init()


def test_no_driver_and_no_bindings_each_say_so(libcuda, monkeypatch):
    libcuda["loads"] = False
    with pytest.raises(EnvironmentProblem, match=r"libcuda.so.1\) was not found"):
        collect._cuda_init()
    libcuda["loads"] = True
    monkeypatch.setattr(bindings, "_import", lambda: (None, "cuda-bindings is not installed"))
    with pytest.raises(EnvironmentProblem, match="cuda-bindings is not installed"):
        collect._cuda_init()


def test_the_driver_is_installed_where_its_library_loads(monkeypatch):
    monkeypatch.setattr(driver, "libcuda", lambda: object())
    assert session.driver_installed()


def test_a_function_the_driver_lacks_is_one_line_even_where_the_driver_cannot_say_more(
    fake, monkeypatch
):
    """cuda-bindings raises RuntimeError for a function the driver does not export (or no
    driver at all): one line, with the CUDA version the driver supports where it can say."""
    fake(driver_version=12020)

    def missing(*arguments):
        raise RuntimeError("Function cuMemcpyBatchAsync not found")

    monkeypatch.setattr(FakeBindings, "cuMemcpyBatchAsync", missing)
    with pytest.raises(
        EnvironmentProblem, match=r"not in this CUDA driver \(it supports CUDA 12\.2\)"
    ):
        bindings.call("cuMemcpyBatchAsync")
    monkeypatch.setattr(FakeBindings, "cuDriverGetVersion", missing)
    with pytest.raises(
        EnvironmentProblem, match=r"^cuMemcpyBatchAsync is not in this CUDA driver: "
    ):
        bindings.call("cuMemcpyBatchAsync")


def test_the_gpus_name_ends_at_its_first_nul(fake, monkeypatch):
    monkeypatch.setattr("memprof.core.devicefacts._kernel_driver_version", lambda: "")
    fake(names={0: b"NVIDIA H200"}, driver_version=12080)
    assert collect.device_identity(0) == ("NVIDIA H200", "CUDA 12.8")


def test_finishing_a_trace_synchronizes_only_a_context_that_exists(fake):
    gpu_session, fake_bindings = fake()
    collect._synchronize_current_context()
    assert "synchronized" not in gpu_session.gpu.calls
    fake_bindings.context = 0x55
    collect._synchronize_current_context()
    assert "synchronized" in gpu_session.gpu.calls


def test_a_driver_that_counts_no_device_is_said_in_memprofs_words(fake, libcuda, monkeypatch):
    _, fake_bindings = fake(devices=1)
    assert collect._cuda_init() == 1
    fake_bindings.devices = 0
    monkeypatch.setattr(FakeBindings, "cuInit", lambda self, flags: (CUresult.CUDA_SUCCESS,))
    with pytest.raises(EnvironmentProblem) as raised:
        collect._cuda_init()
    assert str(raised.value) == "no CUDA device found: the driver sees no GPU"


def test_no_driver_is_said_in_one_whole_line(libcuda):
    libcuda["loads"] = False
    with pytest.raises(EnvironmentProblem) as raised:
        collect._cuda_init()
    assert str(raised.value) == (
        "the CUDA driver (libcuda.so.1) was not found: memprof needs a machine with an "
        "NVIDIA GPU and its driver installed"
    )


@pytest.fixture
def kernel_driver(monkeypatch):
    """The kernel module's version as /proc would say it (None: no such file)."""
    state = {"version": None}
    monkeypatch.setattr(devicefacts, "_kernel_driver_version", lambda: state["version"])
    return state


def test_a_gpus_identity_is_its_name_and_the_kernel_modules_version(fake, kernel_driver):
    fake(names={1: b"NVIDIA H200\xff"})
    kernel_driver["version"] = "580.95.05"
    assert collect.device_identity(0) == ("Fake GPU", "580.95.05")
    assert collect.device_identity(1) == ("NVIDIA H200\ufffd", "580.95.05")  # a bad byte


def test_without_the_kernel_modules_version_the_identity_names_cudas(fake, kernel_driver):
    fake(driver_version=12080)
    assert collect.device_identity(0) == ("Fake GPU", "CUDA 12.8")


def test_a_gpu_whose_name_and_versions_cannot_be_read_has_an_empty_identity(
    kernel_driver, monkeypatch
):
    monkeypatch.setattr(bindings, "_import", lambda: (None, "cuda-bindings is not installed"))
    assert collect.device_identity(0) == ("", "")


def test_the_programs_work_is_waited_for_only_in_a_context(fake, monkeypatch):
    gpu_session, fake_bindings = fake()
    collect._synchronize_current_context()
    assert "synchronized" not in gpu_session.gpu.calls  # no context: nothing queued
    fake_bindings.context = 5
    collect._synchronize_current_context()
    assert gpu_session.gpu.calls.count("synchronized") == 1
    monkeypatch.setattr(bindings, "_import", lambda: (None, "cuda-bindings is not installed"))
    collect._synchronize_current_context()  # nothing to wait for is no failure
