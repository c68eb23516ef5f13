"""A trace's saved timeline names only what its names hold: a GPU row's name (its 2nd value) and
a call's (its 1st) at the last name are kept, one past it refused naming the row and the value
(issue 37: the mutation round on memprof/model/timeline.py found the refusal's words and
which value each row's name is untested)."""

from __future__ import annotations

import pytest

from memprof.model.schema import SchemaError
from memprof.model.timeline import Timeline

NAMES = ["sumArrays", "[CUDA memcpy HtoD] pinned -> device", "cudaMemcpy"]


def gpu_row(name: int, device: int = 0) -> tuple:
    # category, name, start_ns, duration_ns, device, stream, bytes, line
    return (0, name, 0, 10, device, 7, 0, -1)


def api_row(name: int, thread: int = 0) -> tuple:
    # name, start_ns, duration_ns, thread, line
    return (name, 0, 10, thread, -1)


def refusal(gpu: list, api: list) -> str:
    try:
        Timeline(1, 0, list(NAMES), gpu, api).check_consistency()
    except SchemaError as refused:
        return str(refused)
    return ""


def test_rows_naming_the_first_and_last_name_are_kept():
    assert refusal([gpu_row(0), gpu_row(2)], [api_row(0), api_row(2)]) == ""


def test_a_gpu_row_naming_past_the_names_is_refused_naming_it():
    assert refusal([gpu_row(0), gpu_row(3)], [api_row(2)]) == (
        "gpu[1][1] is 3, but there are 3 names"
    )


def test_a_call_naming_past_the_names_is_refused_naming_it():
    assert refusal([gpu_row(2)], [api_row(1), api_row(3)]) == (
        "api[1][0] is 3, but there are 3 names"
    )


@pytest.mark.parametrize(
    ("gpu", "api"),
    [
        ([gpu_row(0, device=9)], [api_row(0)]),  # a device id past the names: no name
        ([gpu_row(0)], [api_row(0, thread=9)]),  # a thread id past the names: no name
    ],
)
def test_only_the_name_of_a_row_is_held_to_the_names(gpu, api):
    assert refusal(gpu, api) == ""
