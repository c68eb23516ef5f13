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
