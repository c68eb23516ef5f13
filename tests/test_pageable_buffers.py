"""Where pageable memory comes from (--host-buffer): each buffer is usable and released."""

import numpy as np
import pytest

from memprof.core import memory


@pytest.mark.parametrize("name", ["numpy", "malloc", "hugepages"])
def test_every_pageable_buffer_holds_what_is_written(name):
    kind = memory.PAGEABLE_BUFFERS[name]
    array, device_pointer, release = kind.allocate_in(None, 5000, np.dtype(np.float32))
    assert kind.name == "pageable" and kind.synchronous_copies
    assert device_pointer is None and array.dtype == np.float32 and array.size == 5000
    array[:] = np.arange(5000, dtype=np.float32)
    assert float(array.sum()) == pytest.approx(5000 * 4999 / 2)
    release()


def test_the_buffers_are_different_allocators():
    calls = {name: kind.alloc_call for name, kind in memory.PAGEABLE_BUFFERS.items()}
    assert calls["numpy"].startswith("numpy.empty")
    assert calls["malloc"].startswith("malloc")
    assert "HUGEPAGE" in calls["hugepages"]
