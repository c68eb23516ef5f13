"""The validation helper on its own: what each declared type accepts and how a refusal reads."""

from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest

from memprof.model.schema import NON_EMPTY, AtLeast, SchemaError, check, check_dataclass

Positive = Annotated[float, AtLeast(0)]


@dataclass
class Row:
    name: str
    samples_ms: Annotated[list[Positive], NON_EMPTY] = field(default_factory=list)
    size: tuple[int, int] | None = None
    tag: Literal["a", "b"] = "a"  # a field added later: one line, checked at once
    notes: list[str] = field(default_factory=list)


def refusal(value, hint, where="x") -> str:
    with pytest.raises(SchemaError) as caught:
        check(value, hint, where)
    return str(caught.value)


def test_a_dataclass_is_built_with_its_defaults_for_fields_added_later():
    row = check_dataclass({"name": "h2d", "samples_ms": [1, 2.5]}, Row, "row")
    assert row == Row("h2d", [1, 2.5])
    assert check_dataclass({"name": "h", "samples_ms": [1], "size": [2, 3]}, Row, "r").size == (
        2,
        3,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"name": "h", "samples_ms": [1], "tag": "c"},
            "row.tag is the string 'c': expected one of a, b",
        ),
        ({"name": "h"}, "row.samples_ms is missing"),  # an empty default that is not valid
        ({"samples_ms": [1]}, "row.name is missing"),
        (
            {"name": "h", "samples_ms": [1], "size": [1]},
            "row.size has 1 item: expected a list of 2 items or null",
        ),
        ({"name": "h", "samples_ms": [1], "size": [1, "2"]}, "row.size[1] is the string '2'"),
        (
            {"name": "h", "samples_ms": [1], "more": 1},
            "row.more is not a known field: expected only",
        ),
        (
            {"name": "h", "samples_ms": [1, -2]},
            "row.samples_ms[1] is -2: expected a finite number >= 0",
        ),
        ([], "row is a list: expected an object"),
    ],
)
def test_a_dataclass_refuses_what_it_does_not_declare(data, message):
    with pytest.raises(SchemaError) as caught:
        check_dataclass(data, Row, "row")
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        (True, int, "x is true: expected an integer"),
        (1, bool, "x is 1: expected true or false"),
        (1.0, int, "x is 1.0: expected an integer"),
        (float("nan"), float, "x is NaN: expected a finite number"),
        (float("-inf"), Positive, "x is -Infinity: expected a finite number >= 0"),
        ("a" * 50, int, "x is the string '" + "a" * 37 + "...': expected an integer"),
        (None, str, "x is null: expected a string"),
        (True, Literal[1, 2], "x is true: expected one of 1, 2"),
        (3.5, int | str, "x is 3.5: expected an integer or a string"),
        (None, int | str, "x is null: expected an integer or a string"),
        ("3", int | None, "x is the string '3': expected an integer or null"),
        ({"k": "v"}, dict[str, int], "x.k is the string 'v': expected an integer"),
        ([], Annotated[list[int], NON_EMPTY], "x is an empty list: expected a list with at least"),
    ],
)
def test_a_refusal_says_what_was_found_and_what_was_expected(value, hint, message):
    assert refusal(value, hint).startswith(message)


def test_values_that_fit_come_back_as_declared():
    assert check([1, 2, 3], tuple[int, ...], "x") == (1, 2, 3)
    assert check(2, float, "x") == 2  # JSON may write 2.0 as 2
    assert check(0, Positive, "x") == 0
    assert check(None, int | None, "x") is None
    assert check({"a": {"b": 1}}, {"a": {"b": int}}, "x") == {"a": {"b": 1}}
