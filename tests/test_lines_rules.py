"""What a trace's saved source line may claim (memprof.model.lines.SourceLine.check_consistency),
each rule just inside and just outside its edge, refused in its own words naming its field
(issue 37: the mutation round on lines.py found its words and edges untested)."""

from __future__ import annotations

import dataclasses

import pytest

from memprof.model.lines import SourceLine
from memprof.model.schema import SchemaError

LINE = SourceLine(
    activity="HtoD pageable -> device",
    file="train.py",
    line=7,
    function="step",
    origin="program",
    calls=2,
    api=["cuMemcpyHtoD"],
    bytes=10,
    smallest_bytes=5,
    largest_bytes=5,
    gpu_ms_each=[0.5, 0.5],
    host_ms_each=[0.5, 0.5],
)


def refusal(**changes) -> str:
    """'' where the line with these changes is kept, else its refusal."""
    try:
        dataclasses.replace(LINE, **changes).check_consistency()
    except SchemaError as refused:
        return str(refused)
    return ""


@pytest.mark.parametrize("activity", ["copy", "wait", "memset", "DtoD device -> device"])
def test_each_activity_memprof_names_is_kept(activity):
    assert refusal(activity=activity) == ""


@pytest.mark.parametrize("activity", ["teleport", "HtoD pageable", "HtoD -> device", "Copy"])
def test_an_activity_memprof_never_names_is_refused(activity):
    assert refusal(activity=activity) == (
        f"activity is {activity!r}, not an activity memprof names"
    )


@pytest.mark.parametrize(
    ("origin", "file", "said"),
    [
        ("none", "", ""),
        ("program", "train.py", ""),
        ("library", "torch/cuda.py", ""),
        ("none", "train.py", "file is 'train.py' on a line of origin 'none'"),
        ("program", "", "file is '' on a line of origin 'program'"),
        ("thread", "", "file is '' on a line of origin 'thread'"),
    ],
)
def test_a_file_is_named_exactly_where_the_line_has_an_origin(origin, file, said):
    assert refusal(origin=origin, file=file) == said


@pytest.mark.parametrize("field", ["gpu_ms_each", "host_ms_each"])
def test_a_line_has_at_most_one_sample_per_call(field):
    assert refusal(**{field: [0.5]}) == ""
    assert refusal(**{field: [0.5] * 2}) == ""
    assert refusal(**{field: [0.5] * 3}) == f"{field} has 3 samples for 2 calls"


def test_its_callers_hold_at_most_its_calls():
    def chains(*calls: int) -> list:
        from memprof.model.lines import CallChain

        return [CallChain(count, []) for count in calls]

    assert refusal(chains=chains(1, 1)) == ""
    assert refusal(chains=chains(2, 1)) == "chains hold 3 calls, more than the line's 2"


def test_its_smallest_call_is_at_most_its_largest():
    assert refusal(smallest_bytes=5, largest_bytes=5) == ""
    assert refusal(smallest_bytes=6, largest_bytes=5, bytes=11) == (
        "smallest_bytes is 6, more than largest_bytes"
    )


@pytest.mark.parametrize(("total", "kept"), [(15, False), (16, True), (23, True), (24, False)])
def test_its_bytes_are_what_its_calls_can_make(total, kept):
    """3 calls of 3 to 10 bytes: one of the largest and two of the smallest at least, one of
    the smallest and two of the largest at most."""
    said = refusal(calls=3, smallest_bytes=3, largest_bytes=10, bytes=total)
    assert said == ("" if kept else f"bytes is {total}, but 3 calls of 3 to 10 bytes make 16 to 23")
