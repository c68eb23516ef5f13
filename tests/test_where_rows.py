"""A trace's lines, copy groups and idle gaps as the CSV's rows and the gaps' places
(memprof/output/where.py): an empty cell where a figure was not recorded, never 0 or inf;
callers written as `file:line function < ...`; gaps only of a trace; and `diff`'s pairing of
a trace with lines and one without."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.experiments import load as load_result
from memprof.model.lines import CallChain, Frame, SourceLine
from memprof.model.timeline import NO_LINE, Gap, breakdown_of
from memprof.output.where import (
    copy_gb_per_s,
    copy_group_rows,
    gap_place,
    gap_rows,
    paired_lines,
    where_rows,
)
from memprof.trace.collect import CopyGroup
from tests.conftest import FIXTURES

MiB = 1 << 20


def trace_of(*lines: SourceLine) -> SimpleNamespace:
    return SimpleNamespace(command="trace", extra=SimpleNamespace(lines=list(lines)))


def source_line(activity: str, gpu_ms_each: list, host_ms_each: list, **more) -> SourceLine:
    return SourceLine(
        activity=activity,
        file="train.py",
        line=42,
        function="step",
        origin="program",
        calls=1,
        api=["cuMemcpyHtoD"],
        gpu_ms_each=gpu_ms_each,
        host_ms_each=host_ms_each,
        **more,
    )


def test_a_lines_row_leaves_empty_what_its_calls_did_not_record():
    wait = source_line("wait", [], [3.0])  # a wait: host time, no GPU work
    unlinked = source_line("HtoD pageable -> device", [0.25], [])  # work without a call
    rows = where_rows(trace_of(wait, unlinked))
    assert [(row["gpu_ms"], row["host_ms"]) for row in rows] == [("", 3.0), (0.25, "")]


def test_a_lines_callers_are_written_innermost_first_joined_by_a_less_than_sign():
    frames = [Frame("train.py", 80, "main"), Frame("run.py", 95, "<module>")]
    line = source_line("wait", [], [1.0], chains=[CallChain(3, frames)])
    (row,) = where_rows(trace_of(line))
    assert row["callers"] == "train.py:80 main < run.py:95 <module>"


def test_a_copy_group_without_gpu_time_has_no_bandwidth_and_a_device_copy_no_host_kind():
    timed = CopyGroup("HtoD", "pinned", "device", calls=2, bytes=2 * MiB, gpu_ms=0.5)
    untimed = CopyGroup("DtoD", "device", "device", calls=1, bytes=MiB, gpu_ms=0.0)
    assert copy_gb_per_s(timed) == pytest.approx(2 * MiB / 0.5e-3 / 1e9)
    assert copy_gb_per_s(untimed) is None  # not inf: CUPTI recorded no time
    rows = copy_group_rows([timed, untimed])
    assert [(row["kind"], row["gb_per_s"]) for row in rows] == [
        ("pinned", pytest.approx(4.194304)),
        ("", ""),
    ]


def test_a_gap_is_placed_at_the_line_the_host_was_in_or_after():
    line = source_line("HtoD pageable -> device", [0.25], [0.3])
    during = Gap(start_ns=0, duration_ns=1000, line=0, during=True)
    after = Gap(start_ns=0, duration_ns=1000, line=0, during=False)
    nowhere = Gap(start_ns=0, duration_ns=1000, line=NO_LINE, during=False)
    assert gap_place(during, [line]) == "train.py:42 (HtoD pageable -> device)"
    assert gap_place(after, [line]) == "after train.py:42 (HtoD pageable -> device)"
    assert gap_place(nowhere, [line]) == "(no recorded call)"


def test_gap_rows_are_a_traces_idle_gaps_and_nothing_elses():
    result = load_result(FIXTURES / "h200_trace_pycuda.json")  # recorded on the H200
    (share,) = breakdown_of(result)
    rows = gap_rows(result)
    assert len(rows) == len(share.gaps) == 3
    assert {row["operation"] for row in rows} == {"idle"}
    assert [row["idle_ms"] for row in rows] == [gap.idle_ms for gap in share.gaps]
    # the same timeline under another command, and a thing without one, have no gaps
    assert gap_rows(SimpleNamespace(command="pinned", extra=result.extra)) == []
    assert gap_rows(SimpleNamespace(extra=result.extra)) == []


def test_a_trace_with_lines_and_one_without_pair_no_lines_either_way():
    lines = load_result(FIXTURES / "h200_trace_pycuda.json")
    legacy = load_result(FIXTURES / "legacy_v2_trace_pycuda.json")  # saved before lines
    assert lines.extra.lines and legacy.extra.lines is None
    assert paired_lines(lines, legacy) == paired_lines(legacy, lines) == ([], 0, 0)
    pairs, only_a, only_b = paired_lines(lines, lines)
    assert (len(pairs), only_a, only_b) == (len(lines.extra.lines), 0, 0)
