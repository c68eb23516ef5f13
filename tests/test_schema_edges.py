"""The validation helper at the edges its other tests never reach: each rule's bounds, the
words of every kind of value, and where a refusal deep inside a type says it is."""

import datetime
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict

import msgspec
import pytest

from memprof.model.schema import (
    DISTINCT,
    NON_EMPTY,
    Range,
    SchemaError,
    allows,
    check,
    describe,
    from_msgspec,
    is_range,
    phrase,
    refusal,
    totals_possible,
)

Distinct = Annotated[list[int], DISTINCT]


def refused(value, hint, *where: str) -> str:
    with pytest.raises(SchemaError) as caught:
        check(value, hint, *where)
    return str(caught.value)


def test_a_schema_error_reads_without_a_place_or_an_expectation():
    assert str(SchemaError("", "is bad")) == "is bad"
    assert str(SchemaError("x", "is bad")) == "x is bad"
    assert str(SchemaError("x", "is 1", "2")) == "x is 1: expected 2"
    assert str(SchemaError("", "is bad").within("rows[2]")) == "rows[2] is bad"
    assert str(SchemaError("a", "is bad").within("")) == "a is bad"
    assert str(SchemaError("a", "is 1", "2").within("row")) == "row.a is 1: expected 2"


def test_a_range_built_now_keeps_its_bounds_its_unit_and_its_openness():
    closed, opened = Range(0, 10), Range(1, 10, low_open=True, unit="ms")
    assert (closed.ge, closed.gt, closed.le, closed.extra) == (0, None, 10, {})
    assert (opened.ge, opened.gt, opened.le, opened.extra) == (None, 1, 10, {"unit": "ms"})
    assert check(0, Annotated[float, closed]) == 0
    assert check(10, Annotated[float, closed]) == 10
    assert refused(10.5, Annotated[float, closed], "x") == "x is 10.5: expected a number 0 to 10"
    assert refused(1, Annotated[float, opened], "x") == "x is 1: expected a number (1, 10] ms"
    assert allows(closed, 0) and not allows(opened, 1) and allows(opened, 1.5)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (Range(0.5, 10), "0.5 to 10"),  # not a whole number: never rounded to 0
        (Range(0, 1e16), "0 to 1e+16"),  # a whole number too long to write out
        (Range(0, 9999999999999998), "0 to 9999999999999998"),
        (Range(0, (1 << 20) + 2), "0 to 1048578"),
    ],
)
def test_a_bound_is_written_as_a_person_reads_it(rule, words):
    assert phrase(rule) == words


def test_a_refusal_of_a_range_shows_an_integer_whole_and_a_float_briefly():
    assert refusal(Range(0, 10), 1234567) == "1234567 is outside the allowed range 0 to 10"
    assert refusal(Range(0, 0.25), 0.1 + 0.2) == "0.3 is outside the allowed range 0 to 0.25"


def test_only_a_rule_with_a_top_is_a_range():
    assert is_range(Range(0, 1))
    assert not is_range(NON_EMPTY)
    assert not is_range("0 to 1")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
        (2**63, "9223372036854775808"),  # 64 bits: still shown
        (2**64, "an integer of about 20 digits"),
        (-(2**64), "a negative integer of about 20 digits"),
        (2**200, "an integer of about 61 digits"),
        (0.5, "0.5"),
        ("a" * 40, "the string '" + "a" * 40 + "'"),
        ("a" * 41, "the string '" + "a" * 37 + "...'"),
        ([], "an empty list"),
        ([1], "a list of 1 item"),
        ([1, 2], "a list of 2 items"),
        ((1, 2), "a list of 2 items"),
        ({}, "an object"),
        (b"x", "bytes"),
    ],
)
def test_each_kind_of_value_is_described_in_its_words(value, words):
    assert describe(value) == words


def test_distinct_refuses_an_item_seen_before_and_allows_any_order():
    assert check([3, 1, 2], Distinct) == [3, 1, 2]
    assert refused([1, 2, 1], Distinct, "x") == "x[2] is 1 again"
    assert refused([None, None], Annotated[list[int | None], DISTINCT], "x") == (
        "x[1] is null again"
    )


@pytest.mark.parametrize(
    ("value", "hint", "where", "message"),
    [
        ([1, 1], Distinct | None, "x", "x[1] is 1 again"),
        ([[1, 2], [3, 3]], list[Distinct], "x", "x[1][1] is 3 again"),
        (([1], [2, 2]), tuple[Distinct, ...], "x", "x[1][1] is 2 again"),
        ({"a": [1], "b": [2, 2]}, dict[str, Distinct], "x", "x.b[1] is 2 again"),
        ({"a": [1], "b": [2, 2]}, dict[str, Distinct], "", "b[1] is 2 again"),
    ],
)
def test_a_rule_inside_a_type_is_kept_and_placed(value, hint, where, message):
    assert refused(value, hint, where) == message


@dataclass
class Inner:
    items: Distinct


@dataclass
class Holder:
    inner: Inner
    count: int

    def check_consistency(self) -> None:
        if self.count > len(self.inner.items):
            raise SchemaError("count", f"is {self.count}, more than the items")


def test_a_record_places_its_fields_problems_and_its_own():
    assert refused({"inner": {"items": [1, 1]}, "count": 0}, Holder) == (
        "inner.items[1] is 1 again"
    )
    assert refused({"inner": {"items": [1]}, "count": 2}, Holder) == (
        "count is 2, more than the items"
    )
    assert refused({"inner": {"items": [1]}, "count": 2}, Holder, "rows[2]") == (
        "rows[2].count is 2, more than the items"
    )
    assert check({"inner": {"items": [1]}, "count": 1}, Holder) == Holder(Inner([1]), 1)


class Strict(msgspec.Struct, forbid_unknown_fields=True):
    a: int


def test_a_struct_names_a_field_it_does_not_know_and_one_that_is_missing():
    assert refused({"a": 1, "b": 2}, Strict, "s") == "s.b is not a known field"
    assert refused({}, Strict, "s") == "s.a is missing"


def test_a_refusal_msgspec_words_itself_is_shown_in_its_words():
    assert refused("nope", datetime.datetime, "x") == (
        "x is the string 'nope': invalid RFC3339 encoded datetime"
    )


def error_of(value, hint) -> msgspec.ValidationError:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(value, hint)
    return caught.value


def test_msgspec_refusal_without_a_place_or_a_type_says_what_msgspec_wanted():
    error = error_of({"a": "v"}, dict[str, int])
    assert str(from_msgspec(error, {"a": "v"})) == "a is the string 'v': expected an integer"
    error = error_of([1, "v"], list[int])
    assert str(from_msgspec(error, [], "x")) == "x[1] is not an integer"
    error = error_of(["nope"], list[datetime.datetime])
    assert str(from_msgspec(error, [], "x")) == "x[0] Invalid RFC3339 encoded datetime"


@dataclass
class Row:
    name: str
    size: int = 0


@dataclass
class Empty:
    pass


ROW_FIELDS = "expected only name, size"


@pytest.mark.parametrize(
    ("value", "hint", "where", "message"),
    [
        ({"name": "h", "more": 1}, Row | None, "x", f"x.more is not a known field: {ROW_FIELDS}"),
        ({"a": {"name": "h", "more": 1}}, dict[str, Row], "x", "x.a.more is not a known field"),
        ({"a": {"name": "h", "more": 1}}, dict[str, Row], "", "a.more is not a known field"),
        ([{"name": "h", "more": 1}], list[Row | None], "x", "x[0].more is not a known field"),
        ({"a": 1}, Empty, "x", "x.a is not a known field: expected only no fields"),
        ({"name": "h"}, list[Row], "x", "x is an object: expected a list"),
        ([1], dict[str, Row], "x", "x is a list of 1 item: expected an object"),
        ("v", tuple[Row, int], "x", "x is the string 'v': expected a list"),
        # as many fields as the record, one of them unknown: not a whole record
        ([{"name": "h", "more": 1}], list[Row], "x", "x[0].more is not a known field"),
        (
            [{"inner": {"items": [1], "more": 1}, "count": 1}],
            list[Holder],
            "x",
            "x[0].inner.more is not a known field: expected only items",
        ),
        (
            {"inner": {"items": [1], "more": 1}, "count": 1},
            Holder,
            "",
            "inner.more is not a known field: expected only items",
        ),
    ],
)
def test_an_unknown_field_is_refused_wherever_its_record_is(value, hint, where, message):
    assert refused(value, hint, where).startswith(message)


def test_a_record_left_out_of_fields_gets_its_defaults_wherever_it_is():
    assert check({"name": "h"}, Row | None) == Row("h")
    assert check({"a": {"name": "h"}}, dict[str, Row]) == {"a": Row("h")}


class Typed(TypedDict):
    a: Annotated[int, Range(0, 3)]


Low, High = Annotated[int, Range(0, 3)], Annotated[int, Range(5, 9)]


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        ("v", Low | None, "x is the string 'v': expected an integer 0 to 3 or null"),
        ([1, 5], list[Low] | None, "x[1] is 5: expected an integer 0 to 3"),
        ([1, 2], tuple[Low, High], "x[1] is 2: expected an integer 5 to 9"),
        ([1, 5], tuple[Low, ...], "x[1] is 5: expected an integer 0 to 3"),
        ({"a": 5}, dict[str, Low], "x.a is 5: expected an integer 0 to 3"),
        ({"a": 1, "b": "v"}, dict[str, int], "x.b is the string 'v': expected an integer"),
        ({"a": 5}, Typed, "x.a is 5: expected an integer 0 to 3"),
        (5, Annotated[str, msgspec.Meta(description="a date")], "x is 5: expected a date"),
        ([], tuple[int], "x is an empty list: expected a list of 1 item"),
    ],
)
def test_a_refusal_says_what_the_declared_type_allows_where_it_is(value, hint, message):
    assert refused(value, hint, "x") == message


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        (
            "c",
            Literal["a", "b"],
            "x is the string 'c': expected one of the values this field allows",
        ),
        ("v", int | None, "x is the string 'v': expected an integer or null"),
        (5, datetime.datetime, "x is 5: expected datetime"),
        (
            [1, 2, 3],
            Annotated[list[int], msgspec.Meta(max_length=2)],
            "x is a list of 3 items: expected a list of at most 2 items",
        ),
        ([], tuple[int], "x is an empty list: expected a list of 1 item"),
        (
            "b",
            Annotated[str, msgspec.Meta(pattern="^a$")],
            "x is the string 'b': expected a string in its format",
        ),
        (5, Annotated[int, msgspec.Meta(le=3)], "x is 5: expected an integer <= 3"),
        (
            1 << 21,
            Annotated[int, msgspec.Meta(le=1 << 20)],
            "x is 2097152: expected an integer <= 2^20",
        ),
    ],
)
def test_msgspec_refusal_without_a_type_says_what_its_message_wanted(value, hint, message):
    error = error_of(value, hint)
    assert str(from_msgspec(error, value, "x")) == message


def test_a_type_that_leaves_the_path_says_what_msgspec_wanted():
    error = error_of([1, "v"], list[int])
    assert str(from_msgspec(error, [1, "v"], "x", int)) == (
        "x[1] is the string 'v': expected an integer"
    )


@pytest.mark.parametrize(
    ("count", "least", "most", "totals"),
    [
        (1, 5, 5, (5, 5)),  # one call is both the smallest and the largest
        (2, 2, 7, (9, 9)),
        (3, 2, 7, (11, 16)),  # 7+2+2 at least, 2+7+7 at most
        (4, 1, 10, (13, 31)),
    ],
)
def test_the_totals_calls_can_make_with_their_smallest_and_largest(count, least, most, totals):
    assert totals_possible(count, least, most) == totals


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        ({"a": 1, "b": 5}, dict[str, Low], "x.b is 5: expected an integer 0 to 3"),
        ({"a": 1, "b": 5}, dict[str, Low] | None, "x.b is 5: expected an integer 0 to 3"),
        ({"a": [1], "b": "v"}, dict[str, list[int]], "x.b is the string 'v': expected a list"),
        ({"a": 1, "b": 2, "c": 9}, dict[str, Low], "x.c is 9: expected an integer 0 to 3"),
    ],
)
def test_a_mapping_names_the_value_it_refuses_not_its_first(value, hint, message):
    assert refused(value, hint, "x") == message


def test_a_mapping_without_a_declared_type_names_the_value_of_the_wrong_kind():
    data = {"a": 1, "b": "v", "c": "w"}
    error = error_of(data, dict[str, int])
    assert str(from_msgspec(error, data, "x")) == "x.b is the string 'v': expected an integer"
