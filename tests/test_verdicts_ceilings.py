"""Ceilings and the remarks made from them (memprof.model.ceilings), read back from the pinned
summary of a recorded H200 run (tests/fixtures/h200_pinned_p20.json) with one copy moved:
a figure under half its ceiling is named, one within 5% above it is noise and one further
above is named; pageable copies are held against the lower of their staging memcpy and the
link; pinned ones against the link as negotiated.
"""

from __future__ import annotations

import pytest

from memprof.experiments import summarize
from memprof.model.ceilings import ABOVE, FAR_BELOW, Ceiling, ceiling_remark, host_ceiling
from memprof.model.device import pcie_bandwidth_gb_per_s
from memprof.model.results import Result
from tests.verdict_tools import (
    cell,
    fixture,
    gb_per_s,
    per_operation_ms,
    scaled,
    table,
    the,
    with_states,
)

DIRECTIONS = {"h2d": "host → device", "d2h": "device → host"}


def recorded() -> Result:
    return fixture("h200_pinned_p20")


def copy_gb_per_s(result: Result, kind: str, direction: str) -> float:
    m = the(result, group="gpu", operation=direction, kind=kind)
    return gb_per_s(m.bytes, per_operation_ms(m))


def staging_gb_per_s(result: Result, direction: str) -> float:
    m = the(result, group="host", operation=f"staging_{direction}")
    return gb_per_s(m.bytes, per_operation_ms(m))


def link_gb_per_s(result: Result) -> float:
    state = result.gpu_states[0]
    return pcie_bandwidth_gb_per_s(state.pcie_generation, state.pcie_width)


def at(result: Result, kind: str, direction: str, gb: float) -> Result:
    factor = copy_gb_per_s(result, kind, direction) / gb
    return scaled(result, factor, group="gpu", operation=direction, kind=kind)


def of_ceiling(result: Result, kind: str, direction: str) -> str:
    return cell(table(summarize(result), "Transfers of"), "Of ceiling", kind, DIRECTIONS[direction])


def remarks(result: Result) -> list[str]:
    return [line for line in summarize(result).conclusions if "ceiling" in line]


def test_the_thresholds_are_half_and_five_percent_above():
    assert (FAR_BELOW, ABOVE) == (0.5, 1.05)  # docs/ceilings.md


@pytest.mark.parametrize(("share", "named"), [(0.51, False), (0.49, True), (0.45, True)])
def test_a_pageable_copy_under_half_its_staging_ceiling_is_named(share, named):
    result = recorded()
    result = at(result, "pageable", "d2h", share * staging_gb_per_s(result, "d2h"))
    found = [line for line in remarks(result) if line.startswith("Pageable device → host")]
    assert bool(found) is named
    if named:
        assert f"only {share:.0%} of its staging ceiling" in found[0]
        assert "something other than the staging held it back" in found[0]
    assert of_ceiling(result, "pageable", "d2h") == f"{share:.0%} staging"


@pytest.mark.parametrize(("share", "named"), [(1.04, False), (1.06, True), (0.99, False)])
def test_a_pinned_copy_above_its_link_is_named_beyond_five_percent(share, named):
    result = recorded()
    result = at(result, "pinned", "h2d", share * link_gb_per_s(result))
    found = [line for line in remarks(result) if line.startswith("Pinned host → device")]
    assert bool(found) is named
    if named:
        assert f"{share:.0%} of its PCIe ceiling" in found[0]
        assert "the ceiling's model does not hold here" in found[0]


def test_a_pinned_copy_under_half_its_link_is_named_and_one_above_is_not():
    result = recorded()
    slow = at(result, "pinned", "d2h", 0.45 * link_gb_per_s(result))
    assert any(line.startswith("Pinned device → host") for line in remarks(slow))
    fine = at(result, "pinned", "d2h", 0.55 * link_gb_per_s(result))
    assert not any(line.startswith("Pinned device → host") for line in remarks(fine))


def test_pageable_copies_are_held_against_the_lower_of_staging_and_the_link():
    result = recorded()
    staging = staging_gb_per_s(result, "h2d")
    assert staging < link_gb_per_s(result)  # on the H200 the host thread is the limit
    share = copy_gb_per_s(result, "pageable", "h2d") / staging
    assert of_ceiling(result, "pageable", "h2d") == f"{share:.0%} staging"
    # a staging memcpy faster than the link: the link is the lower ceiling
    fast_host = scaled(result, staging / 100.0, group="host", operation="staging_h2d")
    share = copy_gb_per_s(result, "pageable", "h2d") / link_gb_per_s(result)
    assert of_ceiling(fast_host, "pageable", "h2d") == f"{share:.0%} PCIe"


def test_host_ceiling_takes_the_lower_figure_and_a_missing_host_figure_leaves_the_link():
    link = Ceiling(63.0, "PCIe", "the link")
    assert host_ceiling(21.0, link).limiter == "staging"
    assert host_ceiling(21.0, link).gb_per_s == 21.0
    assert host_ceiling(80.0, link) is link
    assert host_ceiling(None, link) is link
    assert host_ceiling(0.0, link) is link
    assert host_ceiling(21.0, None).gb_per_s == 21.0


def test_pinned_copies_on_a_slower_link_are_held_against_the_link_as_negotiated():
    result = with_states(recorded(), pcie_generation=4)
    share = copy_gb_per_s(result, "pinned", "h2d") / pcie_bandwidth_gb_per_s(4, 16)
    assert share > 1.05  # the copies beat a Gen4 link: it does not bound them
    assert of_ceiling(result, "pinned", "h2d") == "over PCIe"
    gen5 = with_states(recorded(), pcie_generation=5)
    share = copy_gb_per_s(gen5, "pinned", "h2d") / pcie_bandwidth_gb_per_s(5, 16)
    assert of_ceiling(gen5, "pinned", "h2d") == f"{share:.0%} PCIe"


@pytest.mark.parametrize(
    ("share", "shown"),
    [
        (0.994, "99% PCIe"),
        (1.004, "100% PCIe"),
        (1.006, "~100% PCIe"),  # within noise above it: about its ceiling, never "101%"
        (1.05, "~100% PCIe"),
        (1.0501, "over PCIe"),  # beyond noise: the ceiling does not hold, in words
    ],
)
def test_a_table_never_shows_a_share_above_100_percent(share, shown):
    assert Ceiling(100.0, "PCIe", "the link").cell(100.0 * share) == shown


@pytest.mark.parametrize(
    ("share", "words"),
    [
        (0.4999, "only 50% of its"),  # under half, even where the share rounds to 50%
        (0.5, None),
        (1.05, None),
        (1.0501, "105% of its"),
    ],
)
def test_ceiling_remark_edges(share, words):
    remark = ceiling_remark("A copy", 100.0 * share, Ceiling(100.0, "PCIe", "the link"))
    if words is None:
        assert remark is None
    else:
        assert words in remark
