"""Direct calls into the CUDA driver (libcuda) for what PyCUDA lacks or gets wrong.

They act on the current context, which is PyCUDA's: the GpuSession makes it current.
Every CUresult is checked and turned into an exception naming the call.
"""

from __future__ import annotations

import ctypes
import functools

# CUdevice_attribute numbers from cuda.h for attributes PyCUDA 2026.1 does not name.
DEVICE_ATTRIBUTE_NUMBERS = {"HOST_REGISTER_SUPPORTED": 99}


class DriverCallFailed(RuntimeError):
    """A libcuda call returned an error code."""


@functools.cache
def libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def error_text(code: int) -> str:
    name = ctypes.c_char_p()
    libcuda().cuGetErrorName(code, ctypes.byref(name))
    return name.value.decode() if name.value else f"CUresult {code}"


def check(call: str, code: int) -> None:
    if code != 0:
        raise DriverCallFailed(f"{call} failed: {error_text(code)}")


def device_attribute(attribute_number: int, device_ordinal: int) -> int:
    """cuDeviceGetAttribute for an attribute given by its number in cuda.h."""
    device = ctypes.c_int()
    check("cuDeviceGet", libcuda().cuDeviceGet(ctypes.byref(device), device_ordinal))
    value = ctypes.c_int()
    check(
        "cuDeviceGetAttribute",
        libcuda().cuDeviceGetAttribute(ctypes.byref(value), attribute_number, device),
    )
    return value.value
