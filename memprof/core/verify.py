"""Verification of GPU results, against numpy or on the GPU where the data is (GpuVerifier):
part of every run, never optional."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from memprof.model.results import Check

SUCCESS = "Check result success!"


def compare_arrays(name: str, actual: np.ndarray, expected: np.ndarray) -> Check:
    """Exact comparison (float32 a+b rounds identically on GPU and CPU); NaN never passes, and
    outputs are poisoned before each run, so an element never written fails. Indexes are flat."""
    if actual.shape != expected.shape:
        return Check(name, False, int(expected.size), f"shape {actual.shape} != {expected.shape}")
    actual, expected = actual.reshape(-1), expected.reshape(-1)
    if _all_equal(actual, expected):
        return Check(name, True, int(expected.size), SUCCESS)
    mismatches = np.flatnonzero(actual != expected)  # never empty: _all_equal found one
    first = int(mismatches[0])
    words = (
        f"Arrays do not match! {mismatches.size} of {expected.size} elements differ; "
        f"first at index {first}: host {expected[first]}, gpu {actual[first]}"
    )
    return Check(name, False, int(expected.size), words)


EQUAL_CHUNK = 1 << 16  # elements compared at a time: their result stays in the CPU's cache


def _all_equal(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Whether two 1-D arrays are equal (NaN never is), in parts at once (in_parts)."""
    return in_parts(_equal_by_chunks, actual, expected)


def _equal_by_chunks(actual: np.ndarray, expected: np.ndarray) -> bool:
    """A chunk at a time: one pass, where a whole comparison wrote and read an array-sized
    result (0.2 s of compare's run)."""
    same = np.empty(min(EQUAL_CHUNK, actual.size), bool)
    for start in range(0, actual.size, EQUAL_CHUNK):
        part = same[: min(EQUAL_CHUNK, actual.size - start)]
        np.equal(actual[start : start + part.size], expected[start : start + part.size], out=part)
        if not part.all():
            return False
    return True


PARALLEL_BYTES = 16 << 20  # smaller arrays: one thread (a pool costs its start)
THREADS = max(1, min(4, os.cpu_count() or 1))


def in_parts(same: Callable[[Any, Any], bool], a: np.ndarray, b: np.ndarray) -> bool:
    """same(a's part, b's part) over THREADS parts at once where the arrays are large (numpy
    releases the GIL): one thread's memory bandwidth made verification a quarter of a sweep
    on the H100 and a tenth of compare's run on the H200."""
    if a.nbytes < PARALLEL_BYTES or THREADS < 2:
        return bool(same(a, b))
    from concurrent.futures import ThreadPoolExecutor

    edges = [a.size * part // THREADS for part in range(THREADS + 1)]
    with ThreadPoolExecutor(THREADS) as pool:
        parts = pool.map(lambda lo, hi: same(a[lo:hi], b[lo:hi]), edges[:-1], edges[1:])
        return all(list(parts))


NAN_BITS = 0x7FC00000  # a float32 NaN: equal to nothing, so an element never written fails

CHUNK_BYTES = 64 << 20  # compared at a time: the temporary it needs stays small


def compare_constant(name: str, actual: np.ndarray, value: int) -> Check:
    """compare_arrays of bytes against one byte value, fast enough for gigabytes: eight bytes
    at a time, a chunk at a time; the first chunk that differs gets compare_arrays' detail."""
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


WORD_BYTES = 4  # the GPU compares 32-bit words (kernels/verify.cu)


class GpuVerifier:
    """Where device-readable memory differs from what it should hold, found by the GPU
    (kernels/verify.cu: a gigabyte in under a millisecond, where the host took a third of
    alloc's run). Device addresses, whole words; never inside a timed operation."""

    def __init__(self, session: Any) -> None:
        from memprof.core import memory
        from memprof.core.access import BLOCK_SIZE, BLOCKS_PER_SM  # grid-stride kernels' launch
        from memprof.core.kernels import load_kernel

        self.session = session
        self.kernel = load_kernel(session, "verify.cu", "firstDifferentWord")
        self.block_size = BLOCK_SIZE
        self.blocks = session.attribute("MULTIPROCESSOR_COUNT") * BLOCKS_PER_SM
        with session.profiler.paused():
            # [0:2]: the first difference (a 64-bit index); [2]: the word a constant repeats
            self.scratch = memory.allocate(session, "device", 4, np.uint32)

    def first_difference(self, address: int, expected_address: int, nbytes: int) -> int | None:
        """The first 32-bit word (a float32's index) at `address` that differs from the one at
        `expected_address`; None where all nbytes are the same."""
        return self._first(address, expected_address, 1, nbytes)

    def first_not_byte(self, address: int, nbytes: int, value: int) -> int | None:
        """The first 32-bit word at `address` whose bytes are not all `value` (what a memset
        of it writes); None where every byte of nbytes is."""
        pattern = np.frombuffer(bytes([value]) * WORD_BYTES, np.uint32)[0]
        return self.first_not_word(address, nbytes, pattern)

    def first_not_word(self, address: int, nbytes: int, word: int | np.uint32) -> int | None:
        """The first 32-bit word at `address` that is not `word`; None where every one is."""
        self.session.cuda.memcpy_htod(
            self.scratch.device_pointer + 2 * WORD_BYTES, np.array([word], np.uint32)
        )
        return self._first(address, self.scratch.device_pointer + 2 * WORD_BYTES, 0, nbytes)

    @staticmethod
    def whole_words(address: int, nbytes: int) -> bool:
        """Whether the GPU can compare these bytes: whole 32-bit words, aligned."""
        return nbytes % WORD_BYTES == 0 and address % WORD_BYTES == 0

    def _first(self, address: int, expected: int, stride: int, nbytes: int) -> int | None:
        if not (self.whole_words(address, nbytes) and self.whole_words(expected, 0)):
            raise ValueError(
                f"the GPU compares whole, aligned 32-bit words: {nbytes} bytes at {address:#x} "
                f"against {expected:#x}"
            )
        words = nbytes // WORD_BYTES
        cuda = self.session.cuda
        first = np.array([words], np.uint64)  # no difference, until the kernel finds one
        cuda.memcpy_htod(self.scratch.device_pointer, first)
        grid = max(1, min(self.blocks, -(-words // self.block_size)))
        # on the default stream (None), which waits for the work of every other
        self.kernel.function.prepared_async_call(
            (grid, 1), (self.block_size, 1, 1), None, address, expected, stride, words,
            self.scratch.device_pointer,
        )  # fmt: skip
        cuda.memcpy_dtoh(first, self.scratch.device_pointer)  # waits for the kernel
        return None if int(first[0]) >= words else int(first[0])

    def free(self) -> None:
        self.scratch.free()
