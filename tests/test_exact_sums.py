"""A saved Result renders the same on every Python: its totals are exact sums (math.fsum).

Python 3.12's sum() of floats compensates its rounding and 3.11's does not, so a plain sum
printed a trace line's wait as 184.98 us on one and 184.97 us on the other (the fixture
h200_trace_pycuda). Ten samples of 0.1 ms add up to 0.9999999999999999 with 3.11's sum().
"""

from __future__ import annotations

from memprof.experiments.streams import ideal_overlapped_ms
from memprof.model.lines import SourceLine

TENTHS = [0.1] * 10  # exactly 1.0 in total; 0.9999999999999999 summed one by one


def test_a_lines_gpu_and_host_totals_are_exact():
    line = SourceLine(
        "sync",
        "train.py",
        3,
        "step",
        "program",
        calls=10,
        api=["cuCtxSynchronize"],
        gpu_ms_each=TENTHS,
        host_ms_each=TENTHS,
    )
    assert line.gpu_ms == 1.0
    assert line.host_ms == 1.0


def test_the_ideal_overlap_adds_each_stages_chunk_exactly():
    times = {"h2d": (0.1, 0.1)} | {f"stage{i}": (0.1, 0.1) for i in range(10)}  # h2d first
    assert ideal_overlapped_ms(times) == 1.1  # 1.0999999999999999 with 3.11's sum()
