"""On the GPU: verification by the GPU itself (memprof.core.verify.GpuVerifier) finds the first
word that differs wherever it is, and a sweep reports a copy that left one element out."""

from __future__ import annotations

import numpy as np
import pytest

from memprof import api
from memprof.core import memory
from memprof.core.session import GpuSession
from memprof.core.verify import GpuVerifier
from memprof.experiments.common import size_label

pytestmark = pytest.mark.gpu


def test_the_first_different_word_is_found_wherever_it_is_and_none_where_all_agree():
    words = 3 * 256 * 1024 + 5  # more than one pass of the grid, and a ragged end
    values = np.arange(words, dtype=np.uint32)
    with GpuSession(0) as session:
        gpu = GpuVerifier(session)
        expected = memory.allocate(session, "device", words, np.uint32)
        got = memory.allocate(session, "device", words, np.uint32)
        cuda = session.cuda
        cuda.memcpy_htod(expected.device_pointer, values)
        for wrong in ([], [0], [1], [words // 2], [words - 1], [words - 1, 700, 70_000]):
            changed = values.copy()
            changed[wrong] += 1
            cuda.memcpy_htod(got.device_pointer, changed)
            found = gpu.first_difference(got.device_pointer, expected.device_pointer, 4 * words)
            assert found == (min(wrong) if wrong else None), wrong
        # a shorter range stops before a difference after it
        assert gpu.first_difference(got.device_pointer, expected.device_pointer, 4 * 700) is None
        with pytest.raises(ValueError, match="whole, aligned 32-bit words: 3145747 bytes"):
            gpu.first_difference(got.device_pointer, expected.device_pointer, 4 * words - 1)


def test_a_memsets_byte_is_checked_in_every_byte_of_a_word_on_device_and_mapped_memory():
    words = 100_003
    with GpuSession(0) as session:
        gpu = GpuVerifier(session)
        for kind in ("device", "mapped"):
            buffer = memory.allocate(session, kind, words, np.uint32)
            session.cuda.memset_d8(buffer.device_pointer, 0x5A, 4 * words)
            session.synchronize()
            assert gpu.first_not_byte(buffer.device_pointer, 4 * words, 0x5A) is None
            assert gpu.first_not_byte(buffer.device_pointer, 4 * words, 0x5B) == 0
            for byte in (0, 3, 4 * 777 + 2, 4 * words - 1):  # each place in a word
                session.cuda.memset_d8(buffer.device_pointer + byte, 0x00, 1)
                session.synchronize()
                assert gpu.first_not_byte(buffer.device_pointer, 4 * words, 0x5A) == byte // 4
                session.cuda.memset_d8(buffer.device_pointer + byte, 0x5A, 1)
            buffer.free()


@pytest.mark.parametrize(
    ("kind", "direction"),
    [("pinned", "h2d"), ("writecombined", "d2h"), ("pageable", "d2h"), ("pinned", "d2h")],
)
def test_a_sweep_reports_a_copy_that_left_the_last_element_out(monkeypatch, kind, direction):
    """pinned and pageable device → host: compared on the host; the others on the GPU."""
    real = memory.host_copy

    def short(cuda, copy_direction, host, device_pointer, elements=None):
        if host.kind.name == kind and copy_direction == direction and elements:
            elements -= 1
        return real(cuda, copy_direction, host, device_pointer, elements)

    monkeypatch.setattr(memory, "host_copy", short)
    result = api.run("sweep", powers=(4, 10), kinds=(kind,), repeat=3, warmup=1)
    by_name = {check.name: check for check in result.checks}
    label = {"h2d": "host → device", "d2h": "device → host"}
    failed = by_name[f"{kind} {label[direction]}"]
    assert not failed.passed and failed.detail == f"{size_label(4)}: element 15 differs", failed
    other = "d2h" if direction == "h2d" else "h2d"
    assert by_name[f"{kind} {label[other]}"].passed


@pytest.mark.parametrize("nbytes", [1 << 20, (1 << 20) + 3])  # whole words: on the GPU; else host
def test_alloc_checks_device_memory_on_the_gpu_and_explains_a_difference_as_before(nbytes):
    from memprof.core.verify import compare_constant
    from memprof.experiments.pools import Allocators

    with GpuSession(0) as session:
        allocators = Allocators(session, ["pool"])
        buffer = memory.allocate(session, "device", nbytes, np.uint8)
        session.cuda.memset_d8(buffer.device_pointer, 0x5A, nbytes)
        check = allocators.check_bytes("memset", buffer.device_pointer, nbytes, 0x5A)
        assert check.passed and check.elements == nbytes
        session.cuda.memset_d8(buffer.device_pointer + nbytes - 1, 0x00, 1)
        check = allocators.check_bytes("memset", buffer.device_pointer, nbytes, 0x5A)
        host = np.full(nbytes, 0x5A, np.uint8)
        host[-1] = 0
        assert not check.passed and check == compare_constant("memset", host, 0x5A)
