"""CUPTI's API callbacks through libcupti's own functions, their data read where CUPTI wrote it:
memprof's one subscriber of CUPTI's callbacks (memprof.trace.stacks).

Why not cupti-python's subscriber: it makes a Python object of each call's data first. On
the H100, a 4 KiB pageable copy took 7.2 us bare, 13.5 us with a cupti-python subscriber doing
nothing and 22.3 us reading the call site and correlation id; 8.1 and 9.0 us here (medians of
3 processes).

connect() answers None wherever this cannot be done (no libcupti in the process, or two, a
symbol missing): the trace then goes without stacks, and says why.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

from memprof.core import activity_buffers
from memprof.core.activity_buffers import CUPTI_SUCCESS

API_ENTER = 0  # CUpti_ApiCallbackSite: CUPTI_API_ENTER, CUPTI_API_EXIT = 1

# void (*)(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

# CUpti_CallbackData (cupti_callbacks.h), on 64-bit Linux: the call site (an enum) at 0; then
# functionName, functionParams, functionReturnValue, symbolName and the context, 8 bytes
# each from 8; contextUid (uint32) at 48; correlationData (a pointer) at 56; correlationId
# (uint32) at 64
SITE_OFFSET = 0
CORRELATION_OFFSET = 64
_int32_at = ctypes.c_int32.from_address
_uint32_at = ctypes.c_uint32.from_address

# (userdata, domain, callback id, the CUpti_CallbackData's address) -> None
Handler = Callable[[Any, int, int, int], None]

_KEPT: list[Any] = []  # every callback given to CUPTI: a call may still be under way


def callback_site(data_address: int) -> int:
    """API_ENTER or the exit's value, from a CUpti_CallbackData's address."""
    return _int32_at(data_address + SITE_OFFSET).value


def correlation_id(data_address: int) -> int:
    """The call's correlation id (its activity records carry it), from the same address."""
    return _uint32_at(data_address + CORRELATION_OFFSET).value


class Subscription:
    """One subscriber of CUPTI's driver and runtime API callbacks (CUPTI holds one a process)."""

    def __init__(self, library: Any, clock_library: Any = None) -> None:
        """`clock_library`: libcupti as a ctypes.PyDLL (the GIL held across its calls), for the
        clock read twice in every callback; else `library`."""
        int_, uint32, pointer = ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p
        function = functools.partial(activity_buffers.c_function, library)
        self._subscribe = function(
            "cuptiSubscribe", int_, ctypes.POINTER(pointer), CALLBACK, pointer
        )
        self._enable = function("cuptiEnableCallback", int_, uint32, pointer, int_, uint32)
        self._enable_domain = function("cuptiEnableDomain", int_, uint32, pointer, int_)
        self._unsubscribe = function("cuptiUnsubscribe", int_, pointer)
        self._result_string = function(
            "cuptiGetResultString", int_, int_, ctypes.POINTER(ctypes.c_char_p)
        )
        self._timestamp = activity_buffers.c_function(
            clock_library or library, "cuptiGetTimestamp", int_, ctypes.POINTER(ctypes.c_uint64)
        )
        self._stamp = ctypes.c_uint64()
        self._stamp_at = ctypes.byref(self._stamp)
        self._handle = ctypes.c_void_p()

    def timestamp_ns(self) -> int:
        """CUPTI's clock now, as its activity records are stamped (calls and GPU on one axis)."""
        self._timestamp(self._stamp_at)
        return self._stamp.value

    def subscribe(self, handler: Handler) -> None:
        """CUPTI calls `handler` at each enabled call's entry and exit from now on."""
        function = CALLBACK(handler)
        _KEPT.append(function)
        self._check(self._subscribe(ctypes.byref(self._handle), function, None))

    def enable(self, domain: int, callback_id: int) -> None:
        """Switch on one call's callbacks; RuntimeError in CUPTI's words if refused."""
        self._check(self._enable(1, self._handle, int(domain), int(callback_id)))

    def enable_domain(self, domain: int) -> None:
        """enable() for every call of a domain (where cupti-python lists no callback ids)."""
        self._check(self._enable_domain(1, self._handle, int(domain)))

    def unsubscribe(self) -> None:
        """No more callbacks (none from this subscriber once it returns)."""
        if self._handle.value:
            self._unsubscribe(self._handle)
            self._handle = ctypes.c_void_p()

    def _check(self, code: int) -> None:
        if code != CUPTI_SUCCESS:
            raise RuntimeError(self._words(code))

    def _words(self, code: int) -> str:
        """CUPTI's name of an error code (CUPTI_ERROR_...), else its number."""
        text = ctypes.c_char_p()
        if self._result_string(code, ctypes.byref(text)) == CUPTI_SUCCESS and text.value:
            return text.value.decode("utf-8", "replace")
        return f"CUPTI error {code}"


def connect(library: Any = None) -> Subscription | None:
    """A Subscription through `library` (default: this process's libcupti), or None."""
    try:
        if library is not None:
            return Subscription(library)
        found = activity_buffers.libcupti()
        return None if found is None else Subscription(*found)
    except (OSError, AttributeError, ValueError):
        return None
