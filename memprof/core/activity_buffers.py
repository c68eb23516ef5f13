"""CUPTI's activity buffers, read where CUPTI wrote them.

cupti-python makes a Python object of every record first: about 20 us a record, and a sweep
makes 21,000. Here memprof's own buffer callbacks (ctypes, the libcupti cupti-python loaded)
hand each record's address to ActivityLog. register() answers None where this cannot be done
(no libcupti in the process, or two, a symbol missing, CUPTI refusing): ActivityLog then keeps
cupti-python's callbacks, which still serve a process that loaded a second libcupti (PyTorch's)
or a cupti-python whose dtypes are not plain integers.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

CUPTI_SUCCESS = 0
CUPTI_ERROR_MAX_LIMIT_REACHED = 12  # cuptiActivityGetNextRecord: the buffer has no more
RECORD_ALIGNMENT = 8  # CUPTI's ACTIVITY_RECORD_ALIGNMENT: buffers and records alike

# void (*)(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
_REQUESTED = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
)
# void (*)(CUcontext, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize)
_COMPLETED = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)

# (the buffer's memory, its address, each record's address) -> None
Deliver = Callable[[Any, int, list[int]], None]


class Buffers:
    """The buffers CUPTI fills: one per process, as CUPTI's callbacks are (register()); records
    go to the log that registered last."""

    def __init__(self, library: Any, walker: Any = None) -> None:
        """library: libcupti, called with the GIL let go (CUPTI calls back into Python);
        walker: the same with the GIL held, for cuptiActivityGetNextRecord (never calls back)."""
        int_, size, pointer = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
        self._next_record = c_function(
            walker or library, "cuptiActivityGetNextRecord", int_, pointer, size,
            ctypes.POINTER(pointer),
        )  # fmt: skip
        self._flush_all = c_function(library, "cuptiActivityFlushAll", int_, ctypes.c_uint32)
        self._register = c_function(
            library, "cuptiActivityRegisterCallbacks", int_, _REQUESTED, _COMPLETED
        )
        libc = ctypes.CDLL(None)
        self._allocate = c_function(libc, "aligned_alloc", pointer, size, size)
        self._free = c_function(libc, "free", None, pointer)
        self.buffer_bytes = 4 << 20
        self.deliver: Deliver | None = None
        self.error: BaseException | None = None  # raised by flush(): never into CUPTI
        # CUPTI may call these until the process ends: they are never freed (a reference
        # Python does not count), and the buffers are C memory for the same reason.
        self._callbacks = (_REQUESTED(self._requested), _COMPLETED(self._completed))
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._callbacks))

    def start(self, deliver: Deliver, buffer_bytes: int) -> bool:
        """Records from now on go to `deliver`, in buffers of `buffer_bytes`; False where
        CUPTI refuses. What CUPTI holds at exit is delivered while Python can still take it."""
        self.deliver, self.buffer_bytes, self.error = deliver, buffer_bytes, None
        if self._register(*self._callbacks) != CUPTI_SUCCESS:
            return False
        if not self._at_exit:
            atexit.register(self._deliver_before_exit)
            self._at_exit = True
        return True

    _at_exit = False

    def _deliver_before_exit(self) -> None:
        with contextlib.suppress(Exception):
            self._flush_all(1)
        self.deliver = None

    def flush(self) -> None:
        """Every record CUPTI holds delivered (CUPTI calls _completed meanwhile; ctypes lets
        go of the GIL for it, whichever thread CUPTI calls from)."""
        code = self._flush_all(1)
        error, self.error = self.error, None
        if error is not None:
            raise error
        if code != CUPTI_SUCCESS:
            raise RuntimeError(f"cuptiActivityFlushAll failed: CUPTI error {code}")

    def _requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        bytes_ = self.buffer_bytes - self.buffer_bytes % RECORD_ALIGNMENT
        address = self._allocate(RECORD_ALIGNMENT, bytes_)
        buffer[0] = address
        size[0] = bytes_ if address else 0  # none: CUPTI drops records and says so
        max_records[0] = 0  # as many as fit

    def _completed(self, context: int, stream: int, buffer: int, size: int, valid: int) -> None:
        if not buffer:
            return
        try:
            addresses, record, code = [], ctypes.c_void_p(), CUPTI_ERROR_MAX_LIMIT_REACHED
            while valid:
                code = self._next_record(buffer, valid, ctypes.byref(record))
                if code != CUPTI_SUCCESS:
                    break
                addresses.append(record.value)
            if addresses and self.deliver is not None:
                self.deliver((ctypes.c_char * valid).from_address(buffer), buffer, addresses)
            if code != CUPTI_ERROR_MAX_LIMIT_REACHED:
                raise RuntimeError(
                    f"CUPTI's activity buffer could not be read past record {len(addresses)} "
                    f"(cuptiActivityGetNextRecord: CUPTI error {code})"
                )
        except BaseException as error:  # an exception cannot go into CUPTI: flush() raises it
            self.error = self.error or error
        finally:
            self._free(buffer)


def c_function(library: Any, name: str, restype: Any, *argtypes: Any) -> Any:
    """A library's C function with its prototype declared, so ctypes converts its arguments."""
    function = getattr(library, name)
    function.argtypes, function.restype = list(argtypes), restype
    return function


_BUFFERS: list[Buffers] = []  # the process's one, once made


def register(deliver: Deliver, buffer_bytes: int) -> Buffers | None:
    """CUPTI's records delivered to `deliver` from its buffers' memory, or None where this
    process's libcupti cannot be reached (call after cupti-python has loaded it)."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        if not _BUFFERS:
            found = libcupti()
            if found is None:
                return None
            _BUFFERS.append(Buffers(*found))
        buffers = _BUFFERS[0]
        return buffers if buffers.start(deliver, buffer_bytes) else None
    return None


def libcupti() -> tuple[ctypes.CDLL, ctypes.PyDLL] | None:
    """The libcupti this process loaded (cupti-python's), memprof's one loading site of it:
    called with the GIL let go (CDLL) and held (PyDLL); None where none, or several, is."""
    path = loaded_library("libcupti.so")
    return None if path is None else (ctypes.CDLL(path), ctypes.PyDLL(path))


def loaded_library(prefix: str, maps: Path = Path("/proc/self/maps")) -> str | None:
    """The one shared library named `prefix`... this process loaded; None where none or
    several (which one cupti-python enabled cannot be told)."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return None
    found = set()
    for line in lines:
        path = line.split(maxsplit=5)[5:]
        if path and Path(path[0]).name.startswith(prefix):
            found.add(path[0])
    return found.pop() if len(found) == 1 else None
