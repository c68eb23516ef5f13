"""The rules a Params field declares, as the CLI applies them, called directly."""

import pytest
import typer

from memprof.cli_options import within
from memprof.errors import InvalidArgument
from memprof.experiments.sweep import SWEEP_KINDS
from memprof.model.params import CommaList, Range
from memprof.model.schema import allows, refusal


def test_a_range_accepts_both_ends_and_refuses_beyond():
    check = within(Range(2, 5))
    assert [check(value) for value in (2, 3, 5)] == [2, 3, 5]
    assert check(None) is None
    for value in (1, 6, -2):
        with pytest.raises(
            typer.BadParameter, match=f"{value} is outside the allowed range 2 to 5"
        ):
            check(value)


def test_an_open_range_refuses_its_low_end_and_nan():
    rule = Range(0, 10, low_open=True, unit="milliseconds")
    assert [allows(rule, v) for v in (0, 1e-9, 10, 10.0001, float("nan"))] == [
        False,
        True,
        True,
        False,
        False,
    ]
    assert refusal(rule, 0) == "0 is outside the allowed range (0, 10] milliseconds"


def kinds(text: str) -> tuple[str, ...]:
    return CommaList.value(text, "--kinds", SWEEP_KINDS)


def test_a_comma_list_keeps_the_order_given_without_repeats():
    assert kinds("pinned, pageable,pinned") == ("pinned", "pageable")
    assert kinds(",".join(SWEEP_KINDS)) == SWEEP_KINDS
    assert kinds(" zerocopy ,") == ("zerocopy",)


@pytest.mark.parametrize("text", ["pinned,managed", "Pinned", "", " , ", "device"])
def test_a_comma_list_refuses_unknown_or_no_names(text):
    with pytest.raises(InvalidArgument, match="choose from pageable, pinned"):
        kinds(text)
