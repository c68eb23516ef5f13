"""The CLI's own checks of what the user typed, called directly."""

import pytest
import typer

from memprof.cli import in_range, sweep_kinds
from memprof.errors import InvalidArgument
from memprof.experiments.sweep import SWEEP_KINDS


def test_in_range_accepts_both_ends_and_refuses_beyond():
    check = in_range(2, 5)
    assert [check(value) for value in (2, 3, 5)] == [2, 3, 5]
    assert check(None) is None
    for value in (1, 6, -2):
        with pytest.raises(
            typer.BadParameter, match=f"{value} is outside the allowed range 2 to 5"
        ):
            check(value)


def test_sweep_kinds_keeps_the_order_given_without_repeats():
    assert sweep_kinds("pinned, pageable,pinned") == ("pinned", "pageable")
    assert sweep_kinds(",".join(SWEEP_KINDS)) == SWEEP_KINDS
    assert sweep_kinds(" zerocopy ,") == ("zerocopy",)


@pytest.mark.parametrize("text", ["pinned,managed", "Pinned", "", " , ", "device"])
def test_sweep_kinds_refuses_unknown_or_no_kinds(text):
    with pytest.raises(InvalidArgument, match="choose from pageable, pinned"):
        sweep_kinds(text)
