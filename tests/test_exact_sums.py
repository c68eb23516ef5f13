"""A saved Result renders the same on every Python: its totals are exact sums (math.fsum).

Python 3.12's sum() of floats compensates its rounding and 3.11's does not, so a plain sum
printed a trace line's wait as 184.98 us on one and 184.97 us on the other (the fixture
h200_trace_pycuda). Ten samples of 0.1 ms add up to 0.9999999999999999 with 3.11's sum().
The tests of figures fail with sum() on 3.11 only (CI's), where the two differ; the source
scan fails on any Python where a sum() is added that is not over integers.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path
from types import SimpleNamespace

from memprof.model.figures import ideal_overlapped_ms
from memprof.model.lines import SourceLine
from memprof.model.results import Measurement
from memprof.output.profile import profile_rows

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
    assert ideal_overlapped_ms(list(times.values())) == 1.1  # 1.0999999999999999 with 3.11's sum()


def test_the_profiles_time_shares_are_of_the_exact_total():
    rows = profile_rows(
        [
            Measurement("gpu", "[CUDA memset]", "memset", "device", 4, TENTHS, "cupti"),
            Measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 4, [1.0], "cupti"),
        ]
    )
    assert [row.time_fraction for row in rows] == [0.5, 0.5]  # 0.49999999999999994 with sum()


# Every sum() in memprof adds integers (counts, bytes, widths, flags, NVLink MB/s, CUPTI's
# nanoseconds), exact on every Python; a total of floats goes through math.fsum.
INTEGER_SUMS = {  # (file under memprof/, the call as written)
    ("experiments/common.py", "sum(buffer.nbytes for buffer in buffers)"),
    ("core/activity.py", "sum(values)"),
    ("core/activity.py", "sum(duration for _, duration in records)"),
    ("experiments/check.py", "sum(line.verdict == verdict for line in found)"),
    ("experiments/pinlimit.py", "sum(len(m.samples_ms) for m in found)"),
    ("model/figures.py", "sum(getattr(line, figure) for line in self.parts)"),  # calls, bytes
    ("model/results.py", 'sum("".join(each).count(":") for each in strings)'),  # colons
    ("experiments/trace.py", "sum(g.small_calls for g in small)"),
    ("experiments/trace.py", "sum(g.small_bytes for g in small)"),
    ("experiments/trace.py", "sum(g.blocking_calls for g in copies)"),
    ("experiments/trace.py", "sum(g.staged_calls for g in copies)"),
    ("experiments/trace.py", 'sum(g.small_calls for g in small if g.host_kind == "pageable")'),
    ("experiments/trace.py", "sum(map(mul, map(_BYTES, rows), calls))"),
    ("experiments/trace.py", "sum(m.bytes * len(m.samples_ms) for m in rows)"),
    ("experiments/trace.py", "sum(line.bytes for line in held)"),
    ("experiments/trace.py", "sum(calls)"),
    ("experiments/trace.py", "sum(small_calls)"),
    ("experiments/trace.py", "sum(map(mul, map(_BYTES, small), small_calls))"),
    ("experiments/trace.py", "sum(c.calls for c in copies)"),
    ("experiments/trace.py", "sum(gap.duration_ns for gap in long)"),
    ("experiments/trace.py", "sum(len(m.samples_ms) for m in tuning)"),
    ("experiments/trace.py", "sum(line.calls for line in runtime)"),
    ("model/ceilings.py", "sum(link.speed_mb_per_s or 0 for link in reaching)"),
    ("model/figures.py", "sum(moved)"),
    ("model/gpustate.py", "sum(speeds)"),
    ("model/lines.py", "sum(chain.calls for chain in self.chains)"),
    ("output/diff.py", "sum(figure.worse_beyond(fail_above) for figure in figures)"),
    ("output/export.py", 'sum(p["bytes"] for p in parts)'),  # a streams stage's chunks'
    ("output/junit.py", "sum(len(suite.cases) for suite in suites)"),
    ("output/junit.py", "sum(suite.failures for suite in suites)"),
    ("output/junit.py", "sum(case.failure is not None for case in self.cases)"),
    ("output/render.py", "sum(narrowest)"),
    ("output/render.py", "sum(widths)"),
    ("output/render.py", "sum(self.widths[i] for i in columns)"),
    ("output/render.py", "sum(body[c] for c in candidate)"),
    ("trace/where.py", "sum(record.bytes for record in records)"),
    ("trace/where.py", "sum(sizes)"),
}


# A call of sum() names it, and Python reads a name as its NFKC normal form (ｓｕｍ is sum).
NAMES_SUM = re.compile(r"\bsum\b")


def test_every_sum_in_memprof_adds_integers():
    package = Path(__file__).resolve().parent.parent / "memprof"
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        if not NAMES_SUM.search(unicodedata.normalize("NFKC", source)):
            continue  # most files: parsing and walking them was most of this test's time
        lines = source.splitlines(keepends=True)
        for node in ast.walk(ast.parse(source)):
            called = getattr(node, "func", None)
            if isinstance(node, ast.Call) and getattr(called, "id", None) == "sum":
                segment = written(lines, node)
                if (path.relative_to(package).as_posix(), segment) not in INTEGER_SUMS:
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {segment}")
    assert found == [], "floats: math.fsum; integers: add to INTEGER_SUMS"


def written(lines: list[str], node: ast.expr) -> str:
    """The node as written, from its file's lines split once: ast.get_source_segment splits
    the whole file at each call, which was most of the scan's time. A line split otherwise
    than Python's would give a segment INTEGER_SUMS lacks: a failure, never a pass."""
    first = node.lineno - 1
    within = SimpleNamespace(
        lineno=1,
        end_lineno=node.end_lineno - first,
        col_offset=node.col_offset,
        end_col_offset=node.end_col_offset,
    )
    return ast.get_source_segment("".join(lines[first : node.end_lineno]), within)
