"""Verification of GPU results against numpy: part of every run, never optional."""

from __future__ import annotations

import numpy as np

from memprof.model.results import Check

SUCCESS = "Check result success!"


def compare_arrays(name: str, actual: np.ndarray, expected: np.ndarray) -> Check:
    """Exact comparison (float32 a+b rounds identically on GPU and CPU); NaN never passes.

    Outputs are poisoned before each run, so an element the GPU never wrote fails too.
    """
    if actual.shape != expected.shape:
        return Check(name, False, int(expected.size), f"shape {actual.shape} != {expected.shape}")
    mismatches = np.flatnonzero(actual != expected)
    if mismatches.size == 0:
        return Check(name, True, int(expected.size), SUCCESS)
    first = int(mismatches[0])
    return Check(
        name,
        False,
        int(expected.size),
        f"Arrays do not match! {mismatches.size} of {expected.size} elements differ; "
        f"first at index {first}: host {expected[first]}, gpu {actual[first]}",
    )


CHUNK_BYTES = 64 << 20  # compared at a time: the temporary it needs stays small


def compare_constant(name: str, actual: np.ndarray, value: int) -> Check:
    """compare_arrays of bytes against one byte value everywhere, as exact and fast enough
    for gigabytes: eight bytes at a time, a chunk at a time, against the value repeated; the
    first chunk that differs gets compare_arrays' detail (the count over the whole array)."""
    data = actual.reshape(-1).view(np.uint8)
    word = np.uint64(int.from_bytes(bytes([value]) * 8, "little"))
    expected = np.broadcast_to(np.uint8(value), data.shape)
    for start in range(0, data.size, CHUNK_BYTES):
        chunk = data[start : start + CHUNK_BYTES]
        whole = chunk.size // 8 * 8 if chunk.ctypes.data % 8 == 0 else 0
        same = bool(np.all(chunk[:whole].view(np.uint64) == word)) and bool(
            np.all(chunk[whole:] == np.uint8(value))
        )
        if not same:
            return compare_arrays(name, data, expected)
    return Check(name, True, int(data.size), SUCCESS)
