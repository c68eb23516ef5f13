"""GpuVerifier's side on the host (memprof.core.verify), on the fake GPU of tests/fakegpu.py,
whose firstDifferentWord does what kernels/verify.cu says: the index it returns, its "no
difference" sentinel, a memset's byte as the word it repeats, and whole words only. The kernel
itself runs in tests/gpu/test_verify_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from memprof.core import memory
from memprof.core.verify import GpuVerifier
from tests.fakegpu import FakeSession
from tests.test_progress import ATTRIBUTES


@pytest.fixture
def session():
    made = FakeSession(ATTRIBUTES)
    yield made
    made.close()
    assert made.gpu.leaks() == {}


def test_the_first_word_that_differs_or_none(session):
    gpu = GpuVerifier(session)
    expected = memory.allocate(session, "device", 1000, np.uint32)
    got = memory.allocate(session, "device", 1000, np.uint32)
    session.cuda.memcpy_htod(expected.device_pointer, np.arange(1000, dtype=np.uint32))
    session.cuda.memcpy_htod(got.device_pointer, np.arange(1000, dtype=np.uint32))
    assert gpu.first_difference(got.device_pointer, expected.device_pointer, 4000) is None
    session.cuda.memset_d32(got.device_pointer + 4 * 999, 7, 1)
    assert gpu.first_difference(got.device_pointer, expected.device_pointer, 4000) == 999
    assert gpu.first_difference(got.device_pointer, expected.device_pointer, 3996) is None
    assert gpu.first_difference(got.device_pointer, expected.device_pointer, 0) is None


def test_a_memsets_byte_is_the_word_it_repeats(session):
    gpu = GpuVerifier(session)
    buffer = memory.allocate(session, "device", 64, np.uint32)
    session.cuda.memset_d8(buffer.device_pointer, 0xA5, 256)
    assert gpu.first_not_byte(buffer.device_pointer, 256, 0xA5) is None
    assert gpu.first_not_byte(buffer.device_pointer, 256, 0x5A) == 0
    session.cuda.memset_d8(buffer.device_pointer + 4 * 10 + 3, 0xA4, 1)  # a word's last byte
    assert gpu.first_not_byte(buffer.device_pointer, 256, 0xA5) == 10
    assert gpu.first_not_word(buffer.device_pointer, 40, 0xA5A5A5A5) is None


@pytest.mark.parametrize(("offset", "nbytes"), [(0, 255), (2, 252)])
def test_only_whole_aligned_words_are_compared(session, offset, nbytes):
    gpu = GpuVerifier(session)
    buffer = memory.allocate(session, "device", 64, np.uint32)
    with pytest.raises(ValueError, match=f"whole, aligned 32-bit words: {nbytes} bytes at"):
        gpu.first_not_byte(buffer.device_pointer + offset, nbytes, 0)


def test_alloc_leaves_a_range_of_partial_words_to_the_host(session, monkeypatch):
    """The GPU compares aligned, whole words (whole_words); alloc's check of any other range
    reads it back and compares bytes, never asking the GPU (which would refuse)."""
    from memprof.core import bindings
    from memprof.experiments.pools import Allocators
    from tests.fakegpu import FakeBindings

    monkeypatch.setattr(bindings, "_import", lambda: (FakeBindings(session.gpu), None))

    assert GpuVerifier.whole_words(0x1000, 8) and not GpuVerifier.whole_words(0x1001, 8)
    assert not GpuVerifier.whole_words(0x1000, 6)
    buffer = memory.allocate(session, "device", 4, np.uint32)
    session.cuda.memset_d8(buffer.device_pointer, 0x5A, 16)
    allocators = Allocators(session, ["pool"])
    for offset, nbytes in ((1, 8), (0, 6), (0, 16)):
        check = allocators.check_bytes("memset", buffer.device_pointer + offset, nbytes, 0x5A)
        assert check.passed and check.elements == nbytes


def test_a_buffer_longer_than_one_pass_of_the_grid_is_compared_to_its_last_word(session):
    """More words than the launch's threads (the kernel strides over the rest): the fake
    refuses a launch PyCUDA would (a grid or an argument not a whole number, a stride
    other than the array's or the constant's), as the GPU's own test finds on the GPU."""
    gpu = GpuVerifier(session)
    words = 132 * 8 * 256 + 5  # the fake's SMs x BLOCKS_PER_SM x BLOCK_SIZE, and a ragged end
    expected = memory.allocate(session, "device", words, np.uint32)
    got = memory.allocate(session, "device", words, np.uint32)
    session.cuda.memcpy_htod(expected.device_pointer, np.arange(words, dtype=np.uint32))
    session.cuda.memcpy_htod(got.device_pointer, np.arange(words, dtype=np.uint32))
    assert gpu.first_difference(got.device_pointer, expected.device_pointer, 4 * words) is None
    session.cuda.memset_d32(got.device_pointer + 4 * (words - 1), 0, 1)
    found = gpu.first_difference(got.device_pointer, expected.device_pointer, 4 * words)
    assert found == words - 1
    session.cuda.memset_d8(got.device_pointer, 0x77, 4 * words)
    assert gpu.first_not_byte(got.device_pointer, 4 * words, 0x77) is None
