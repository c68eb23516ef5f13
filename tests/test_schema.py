"""The validation helper on its own: what each declared type accepts and how a refusal reads."""

from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec
import pytest

from memprof.model.schema import (
    DISTINCT,
    INCREASING,
    NON_EMPTY,
    Range,
    SchemaError,
    allows,
    check,
    phrase,
    refusal,
)

Positive = Annotated[float, Range(0, 1e15)]


@dataclass
class Row:
    name: str
    samples_ms: Annotated[list[Positive], NON_EMPTY] = field(default_factory=list)
    size: tuple[int, int] | None = None
    tag: Literal["a", "b"] = "a"  # a field added later: one line, checked at once
    notes: list[str] = field(default_factory=list)
    sizes: Annotated[tuple[int, ...], INCREASING, DISTINCT] = ()


def refused(value, hint, where="x") -> str:
    with pytest.raises(SchemaError) as caught:
        check(value, hint, where)
    return str(caught.value)


def test_a_dataclass_is_built_with_its_defaults_for_fields_added_later():
    row = check({"name": "h2d", "samples_ms": [1, 2.5]}, Row, "row")
    assert row == Row("h2d", [1, 2.5])
    assert check({"name": "h", "samples_ms": [1], "size": [2, 3]}, Row, "r").size == (
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
        ({"samples_ms": [1]}, "row.name is missing"),
        (
            {"name": "h", "samples_ms": [1], "size": [1]},
            "row.size is a list of 1 item: expected a list of 2 items",
        ),
        (
            {"name": "h", "samples_ms": [1], "size": [1, "2"]},
            "row.size[1] is the string '2': expected an integer",
        ),
        (
            {"name": "h", "samples_ms": [1], "more": 1},
            "row.more is not a known field: expected only name, samples_ms",
        ),
        (
            {"name": "h", "samples_ms": [1, -2]},
            "row.samples_ms[1] is -2: expected a number 0 to 1000000000000000",
        ),
        (
            {"name": "h", "samples_ms": []},
            "row.samples_ms is an empty list: expected a list of at least",
        ),
        ({"name": "h", "sizes": [1, 3, 2]}, "row.sizes[2] is 2, after 3"),
        ({"name": "h", "sizes": [1, 1]}, "row.sizes[1] is 1, after 1"),
        ([], "row is an empty list: expected an object"),
    ],
)
def test_a_dataclass_refuses_what_it_does_not_declare(data, message):
    with pytest.raises(SchemaError) as caught:
        check(data, Row, "row")
    assert str(caught.value).startswith(message)


def test_a_field_the_data_left_out_is_saved_again():
    """msgspec leaves a missing field to the class's default, which encoding then skips."""
    row = check({"name": "h", "samples_ms": [1]}, Row, "row")
    assert msgspec.json.decode(msgspec.json.encode(row))["tag"] == "a"


def test_a_list_of_dataclasses_refuses_a_field_one_of_them_does_not_declare():
    rows = [{"name": "a"}, {"name": "b", "more": 1}]  # the quick pass over whole records too
    assert refused(rows, list[Row], "rows").startswith("rows[1].more is not a known field")


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        (True, int, "x is true: expected an integer"),
        (1, bool, "x is 1: expected true or false"),
        (1.0, int, "x is 1.0: expected an integer"),
        (float("-inf"), Positive, "x is -Infinity: expected a number 0 to 1000000000000000"),
        (float("nan"), Positive, "x is NaN: expected a number 0 to 1000000000000000"),
        ("a" * 50, int, "x is the string '" + "a" * 37 + "...': expected an integer"),
        (None, str, "x is null: expected a string"),
        (3.5, int | str, "x is 3.5: expected an integer or a string"),
        (None, int | str, "x is null: expected an integer or a string"),
        ("3", int | None, "x is the string '3': expected an integer or null"),
        ({"k": "v"}, dict[str, int], "x.k is the string 'v': expected an integer"),
        (
            [],
            Annotated[list[int], NON_EMPTY],
            "x is an empty list: expected a list of at least 1 item",
        ),
        (5, Annotated[int, Range(0, 3)], "x is 5: expected an integer 0 to 3"),
        (0, Annotated[float, Range(0, 10, low_open=True)], "x is 0: expected a number (0, 10]"),
    ],
)
def test_a_refusal_says_what_was_found_and_what_was_expected(value, hint, message):
    assert refused(value, hint).startswith(message)


def test_values_that_fit_come_back_as_declared():
    assert check([1, 2, 3], tuple[int, ...], "x") == (1, 2, 3)
    assert check(2, float, "x") == 2  # JSON may write 2.0 as 2
    assert check(0, Positive, "x") == 0
    assert check(None, int | None, "x") is None
    assert check([1, 2], Annotated[tuple[int, ...], INCREASING], "x") == (1, 2)


@pytest.mark.parametrize(
    ("rule", "inside", "outside", "words"),
    [
        (Range(1, 10_000), (1, 10_000), (0, 10_001, float("nan")), "1 to 10000"),
        (Range(0, 10, low_open=True, unit="ms"), (1e-9, 10), (0, -1, 10.5), "(0, 10] ms"),
        (Range(0, 1 << 20), (0, 1 << 20), (-1, (1 << 20) + 1), "0 to 2^20"),
    ],
)
def test_a_range_allows_its_bounds_and_says_them(rule, inside, outside, words):
    assert all(allows(rule, value) for value in inside)
    assert not any(allows(rule, value) for value in outside)
    assert phrase(rule) == words
    assert refusal(rule, outside[0]) == f"{outside[0]:g} is outside the allowed range {words}"
