"""A sweep verifies every copy bit for bit (memprof.experiments.sweep.differs_at)."""

from __future__ import annotations

import numpy as np
import pytest

from memprof.core import verify
from memprof.experiments.sweep import differs_at


@pytest.mark.parametrize("n", [8, 9])  # eight bytes at a time, and an odd count of floats
def test_the_first_element_that_differs_is_named_and_none_where_all_agree(n):
    sent = np.arange(n, dtype=np.float32) + 1
    assert differs_at(sent.copy(), sent) is None
    for place in (0, n // 2, n - 1):
        got = sent.copy()
        got[place] = -got[place]
        assert differs_at(got, sent) == place


def test_zero_and_minus_zero_are_different_bits():
    got, sent = np.zeros(4, np.float32), np.zeros(4, np.float32)
    got[2] = -0.0
    assert differs_at(got, sent) == 2


@pytest.mark.parametrize("n", [64, 65])
def test_large_arrays_compared_in_parts_name_a_difference_in_any_part(monkeypatch, n):
    monkeypatch.setattr(verify, "PARALLEL_BYTES", 8)  # every array here is large
    monkeypatch.setattr(verify, "THREADS", 3)
    sent = np.arange(n, dtype=np.float32) + 1
    assert differs_at(sent.copy(), sent) is None
    for place in range(n):  # each part's first and last element among them
        got = sent.copy()
        got[place] = -got[place]
        assert differs_at(got, sent) == place, place
