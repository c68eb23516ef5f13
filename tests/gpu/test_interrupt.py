"""On the GPU: Ctrl-C at many moments of `memprof pinned --power 16`, from the first import
through cuInit, context creation, compiling, measuring and freeing to the exit.

Every ending must be exit 130 with one "interrupted" line (or 0 if the run had finished):
no traceback, no "context stack was not empty", no abort (exit 134 / -6), no PyCUDA warning.
"""

from __future__ import annotations

import pytest

from tests.interrupting import interpreter_start_s, interrupt, run_time_s

pytestmark = pytest.mark.gpu

COMMAND = ["pinned", "--power", "16"]


def spread(start_s: float, end_s: float, count: int) -> list[float]:
    return [start_s + (end_s - start_s) * i / (count - 1) for i in range(count)]


def test_ctrl_c_at_any_moment_of_a_gpu_run_is_one_line_and_130():
    whole_s = run_time_s(COMMAND)  # also fills PyCUDA's kernel cache: later runs are alike
    start_s = 2 * interpreter_start_s()
    # The whole run evenly, and the first 60% (imports, cuInit, CUPTI, context) densely.
    moments = spread(start_s, whole_s + 0.2, 30) + spread(start_s, 0.6 * whole_s, 40)
    endings = [interrupt(COMMAND, delay) for delay in sorted(moments)]
    bad = [
        (e.delay_s, e.returncode, e.problems(), e.stderr[-800:]) for e in endings if e.problems()
    ]
    assert bad == [], f"run takes {whole_s:.2f}s"
    interrupted = sum(e.returncode == 130 for e in endings)
    assert interrupted >= len(endings) // 2, f"only {interrupted} presses landed mid-run"
