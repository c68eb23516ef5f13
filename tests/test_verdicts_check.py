"""`memprof check` and `check-pairs`: every line's PASS / WARN / FAIL on each side of its
threshold, from the recorded H200 check (tests/fixtures/h200_check.json and
h200x2_check_pairs.json) with one figure moved just above or just below it.

Each figure is moved to a share of its ceiling computed here from the recorded facts (the
link's generation and width, HBM's clock and bus), not by memprof's own arithmetic, so a
wrong figure or ceiling in memprof moves the verdict and fails the test.
"""

from __future__ import annotations

import pytest

from memprof.experiments import check, summarize
from memprof.model.device import pcie_bandwidth_gb_per_s
from memprof.model.formatting import format_gb_per_s
from memprof.model.gpustate import NvLink, OtherProcess
from memprof.model.results import Result
from tests.conftest import array_bytes, replace
from tests.verdict_tools import (
    cell_where,
    fixture,
    gb_per_s,
    per_operation_ms,
    scaled,
    table,
    the,
    with_states,
)


@pytest.fixture(autouse=True)
def no_shipped_references(tmp_path, monkeypatch):
    """An empty reference folder unless a test fills it."""
    folder = tmp_path / "references"
    folder.mkdir()
    monkeypatch.setattr(check, "REFERENCE_FOLDER", folder)
    check._references.cache_clear()
    yield folder
    check._references.cache_clear()


def recorded() -> Result:
    return fixture("h200_check")


def moved(result: Result, operation: str) -> float:
    """GB/s of a check figure, computed here: bytes moved (a device copy reads and writes
    each byte) over the median batch's time per copy."""
    m = the(result, group="gpu", operation=operation)
    factor = 2 if operation == "d2d" else 1
    return gb_per_s(factor * m.bytes, per_operation_ms(m))


def pcie_gb_per_s(result: Result) -> float:
    state = result.gpu_states[0]
    return pcie_bandwidth_gb_per_s(state.pcie_generation, state.pcie_width)


def ceiling_of(result: Result, operation: str) -> float:
    if operation == "d2d":
        facts = result.device
        return 2 * facts.memory_clock_khz * 1e3 * facts.memory_bus_width_bits / 8 / 1e9
    return pcie_gb_per_s(result)


def at_share(result: Result, operation: str, share: float) -> Result:
    """The result with one figure moved to `share` of its ceiling."""
    target = share * ceiling_of(result, operation)
    return scaled(result, moved(result, operation) / target, group="gpu", operation=operation)


def verdict(result: Result, what: str) -> str:
    return cell_where(table(summarize(result), "Health of"), "Check", what, "Verdict")


def measured(result: Result, what: str) -> str:
    return cell_where(table(summarize(result), "Health of"), "Check", what, "Measured")


WHAT = {
    "h2d": "Pinned host → device",
    "d2h": "Pinned device → host",
    "d2d": "Device copy (read + write)",
}


def test_the_recorded_h200_passes_every_line_with_its_figures_computed_here():
    result = recorded()
    summary = summarize(result)
    assert set(row[0] for row in table(summary, "Health of").rows) == {"PASS"}
    assert summary.failed == []
    for operation, what in WHAT.items():
        share = moved(result, operation) / ceiling_of(result, operation)
        assert (
            measured(result, what)
            == f"{format_gb_per_s(moved(result, operation))} GB/s ({share:.0%})"
        )


@pytest.mark.parametrize("operation", ["h2d", "d2h", "d2d"])
@pytest.mark.parametrize(
    ("share_of_floor", "expected"),
    [
        (1.005, "PASS"),  # just above the floor
        (0.995, "WARN"),  # just below it
        (0.905, "WARN"),  # just above 90% of it
        (0.895, "FAIL"),  # just below 90% of it
    ],
)
def test_each_throughput_line_turns_at_its_floor_and_at_ninety_percent_of_it(
    operation, share_of_floor, expected
):
    floor = check.HBM_FLOOR if operation == "d2d" else check.PCIE_FLOOR
    expected_floor = 0.80 if operation == "d2d" else 0.85  # docs/check.md's figures
    assert floor == expected_floor
    result = at_share(recorded(), operation, share_of_floor * floor)
    assert verdict(result, WHAT[operation]) == expected
    others = {v for what, v in lines_of(result).items() if what != WHAT[operation]}
    assert others == {"PASS"}
    assert (summarize(result).failed != []) == (expected == "FAIL")


def lines_of(result: Result) -> dict[str, str]:
    t = table(summarize(result), "Health of")
    return {row[1]: row[0] for row in t.rows}


# -- both directions at once ---------------------------------------------------------------------


def at_once_share(result: Result, direction: str, share: float) -> Result:
    """The result with one direction's copies at once moved to `share` of its rate alone."""
    alone = moved(result, direction)
    together = moved(result, f"{direction}_at_once")
    return scaled(result, together / (share * alone), group="gpu", operation=f"{direction}_at_once")


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
@pytest.mark.parametrize(
    ("share", "expected"), [(0.805, "PASS"), (0.795, "WARN"), (0.725, "WARN"), (0.715, "FAIL")]
)
def test_both_at_once_turns_at_eighty_percent_of_each_direction_alone(direction, share, expected):
    result = at_once_share(recorded(), direction, share)
    assert verdict(result, "Both directions at once") == expected


def test_both_at_once_is_judged_on_the_worse_direction_not_the_better():
    # host → device keeps 99% of its rate, device → host 60%: the line fails
    result = at_once_share(at_once_share(recorded(), "h2d", 0.99), "d2h", 0.60)
    assert verdict(result, "Both directions at once") == "FAIL"
    assert measured(result, "Both directions at once").endswith("(99%, 60%)")
    result = at_once_share(at_once_share(recorded(), "h2d", 0.60), "d2h", 0.99)
    assert verdict(result, "Both directions at once") == "FAIL"


# -- the link, clocks and processes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, "PASS"),
        ({"pcie_width": 8}, "FAIL"),  # narrower than it can be: a card half out of its slot
        ({"pcie_generation": 4}, "FAIL"),
        ({"pcie_gpu_max_generation": 6}, "WARN"),  # the GPU could do more than its slot
    ],
)
def test_the_link_line_fails_below_its_maximum_in_generation_or_width(changes, expected):
    result = with_states(recorded(), **changes)
    assert verdict(result, "PCIe link trained to its capability") == expected


def test_copies_on_a_link_below_its_maximum_are_judged_against_the_link_they_had():
    result = with_states(recorded(), pcie_generation=4)
    share = moved(result, "h2d") / pcie_bandwidth_gb_per_s(4, 16)
    assert measured(result, "Pinned host → device").endswith(f"({share:.0%})")


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        ([], "PASS"),
        (["gpu_idle"], "PASS"),  # idle and sync boost hold nothing down
        (["sync_boost", "gpu_idle"], "PASS"),
        (["display_clock_setting"], "PASS"),
        (["sw_power_cap"], "WARN"),  # a cap: figures may be low, the hardware is fine
        (["applications_clocks_setting"], "WARN"),
        (["sw_thermal_slowdown"], "FAIL"),
        (["hw_slowdown"], "FAIL"),
        (["hw_power_brake_slowdown"], "FAIL"),
        (["sw_power_cap", "hw_thermal_slowdown"], "FAIL"),
    ],
)
def test_clock_reasons_pass_warn_or_fail_by_what_they_mean(reasons, expected):
    result = with_states(recorded(), clock_reasons=reasons)
    assert verdict(result, "No clock held down during the run") == expected
    assert (summarize(result).failed != []) == (expected == "FAIL")


def test_another_process_warns_and_none_passes():
    other = OtherProcess(4242, "graphics", None)
    assert (
        verdict(with_states(recorded(), other_processes=[other]), "No other process on the GPU")
        == "WARN"
    )
    assert (
        verdict(with_states(recorded(), other_processes=[]), "No other process on the GPU")
        == "PASS"
    )


def test_a_warning_alone_never_fails_the_command_and_the_tally_counts_each_verdict():
    result = with_states(recorded(), clock_reasons=["sw_power_cap"])
    summary = summarize(result)
    assert summary.failed == []
    assert summary.conclusions == ["memprof check, GPU 0 (NVIDIA H200): 6 PASS, 1 WARN, 0 FAIL."]
    failing = at_share(result, "h2d", 0.5)
    summary = summarize(failing)
    assert summary.failed == [
        f"GPU 0 (NVIDIA H200): Pinned host → device: {measured(failing, 'Pinned host → device')}"
    ]
    assert summary.conclusions[0].endswith("5 PASS, 1 WARN, 1 FAIL.")


# -- a reference result of the same GPU model ----------------------------------------------------


def reference_at(folder, share: float, power: int | None = None) -> Result:
    """A known-good check of this GPU model in the reference folder: the recording with its
    host → device copies at `share` of the link, optionally at another copy size."""
    reference = at_share(recorded(), "h2d", share)
    if power is not None:
        nbytes = 4 << power
        factor = nbytes / array_bytes(reference)  # the same GB/s at the new size
        host = ("h2d", "d2h", "h2d_at_once", "d2h_at_once")
        measurements = [
            replace(
                m,
                bytes=nbytes,
                samples_ms=[s * factor for s in m.samples_ms],
                throughput_ms=[s * factor for s in m.throughput_ms],
            )
            if m.operation in host
            else m
            for m in reference.measurements
        ]
        reference = replace(
            reference,
            parameters=replace(reference.parameters, power=power),  # its copies' size
            measurements=measurements,
        )
    (folder / "h200.json").write_text(reference.to_json())
    check._references.cache_clear()
    return reference


@pytest.mark.parametrize(
    ("share_of_reference", "expected"), [(0.905, "PASS"), (0.895, "WARN"), (0.97, "PASS")]
)
def test_a_figure_under_ninety_percent_of_the_reference_warns(
    no_shipped_references, share_of_reference, expected
):
    reference_at(no_shipped_references, 0.99)
    result = at_share(recorded(), "h2d", 0.99 * share_of_reference)  # above the 85% floor
    assert verdict(result, "Pinned host → device") == expected
    notes = table(summarize(result), "Health of").notes
    assert any("Reference: memprof/references/h200.json" in note for note in notes)


def test_a_reference_at_another_size_is_not_held_against_the_figure(no_shipped_references):
    reference_at(no_shipped_references, 0.99, power=23)
    result = at_share(recorded(), "h2d", 0.87)  # under 90% of the reference's figure
    assert verdict(result, "Pinned host → device") == "PASS"
    reference_at(no_shipped_references, 0.99)  # the same size: now it counts
    assert verdict(result, "Pinned host → device") == "WARN"


# -- check-pairs ---------------------------------------------------------------------------------


def pairs() -> Result:
    return fixture("h200x2_check_pairs")


def nvlink_gb_per_s(result: Result, source: int) -> float:
    """The NVLinks of `source` that reach the other GPU, summed (NVML's raw rate)."""
    state = next(s for s in result.gpu_states if s.index == source)
    return sum(link.speed_mb_per_s for link in state.nvlinks if link.active) / 1e3


def peer_at_share(result: Result, source: int, destination: int, share: float) -> Result:
    m = the(result, group="gpu", operation="peer", gpus=(source, destination))
    now = gb_per_s(m.bytes, per_operation_ms(m))
    target = share * nvlink_gb_per_s(result, source)
    return scaled(result, now / target, group="gpu", operation="peer", gpus=(source, destination))


def pair_verdict(result: Result, what: str) -> str:
    return cell_where(table(summarize(result), "every pair"), "Check", what, "Verdict")


def test_the_recorded_pairs_pass_against_every_nvlink_between_them():
    result = pairs()
    for source, destination in ((0, 1), (1, 0)):
        m = the(result, group="gpu", operation="peer", gpus=(source, destination))
        share = gb_per_s(m.bytes, per_operation_ms(m)) / nvlink_gb_per_s(result, source)
        shown = cell_where(
            table(summarize(result), "every pair"),
            "Check",
            f"GPU {source} → GPU {destination}",
            "Measured",
        )
        assert shown.endswith(f"({share:.0%})")
    assert {row[0] for row in table(summarize(result), "every pair").rows} == {"PASS"}


@pytest.mark.parametrize(
    ("share_of_floor", "expected"),
    [(1.005, "PASS"), (0.995, "WARN"), (0.905, "WARN"), (0.895, "FAIL")],
)
def test_a_peer_copy_turns_at_seventy_percent_of_its_link(share_of_floor, expected):
    assert check.PEER_FLOOR == 0.70
    result = peer_at_share(pairs(), 1, 0, share_of_floor * 0.70)
    assert pair_verdict(result, "GPU 1 → GPU 0") == expected
    assert pair_verdict(result, "GPU 0 → GPU 1") == "PASS"


def pair_at_once(result: Result, source: int, destination: int, share: float) -> Result:
    alone = the(result, group="gpu", operation="peer", gpus=(source, destination))
    together = the(result, group="gpu", operation="peer_at_once", gpus=(source, destination))
    factor = per_operation_ms(alone) / per_operation_ms(together) / share
    return scaled(result, factor, group="gpu", operation="peer_at_once", gpus=(source, destination))


@pytest.mark.parametrize(
    ("share", "expected"), [(0.805, "PASS"), (0.795, "WARN"), (0.725, "WARN"), (0.715, "FAIL")]
)
def test_a_pair_both_at_once_is_judged_on_its_worse_direction(share, expected):
    result = pair_at_once(pair_at_once(pairs(), 0, 1, 0.99), 1, 0, share)
    assert pair_verdict(result, "GPU 0 ↔ GPU 1 both at once") == expected
    result = pair_at_once(pair_at_once(pairs(), 1, 0, 0.99), 0, 1, share)
    assert pair_verdict(result, "GPU 0 ↔ GPU 1 both at once") == expected


def test_a_pair_that_cannot_reach_each_other_both_ways_warns_and_is_not_judged():
    result = pairs()
    one_way = replace(
        result,
        extra=replace(result.extra, peer_access=[[True, True], [False, True]]),
        measurements=[],  # a pair without peer access both ways is not measured
    )
    found = lines_of_pairs(one_way)
    assert found == {"GPU 0 ↔ GPU 1 peer access": "WARN"}
    assert summarize(one_way).failed == []


def lines_of_pairs(result: Result) -> dict[str, str]:
    return {row[1]: row[0] for row in table(summarize(result), "every pair").rows}


@pytest.mark.parametrize(
    ("share", "expected", "remark"),
    [(0.9, "PASS", ""), (1.04, "PASS", ""), (1.06, "FAIL", ", never above the ceiling")],
)
def test_a_pair_without_nvlink_is_judged_against_the_slower_pcie_link(share, expected, remark):
    """Without NVLink a peer copy crosses both GPUs' PCIe links: its ceiling is the slower
    one (GPU 1's, trained at gen 4 here), and a copy more than 5% above it is no figure."""
    result = pairs()
    gen4 = replace(
        result,
        gpu_states=[
            replace(
                s,
                nvlinks=[NvLink(0, False, None, None, None, None)],
                pcie_generation=4 if s.index == 1 else s.pcie_generation,
            )
            for s in result.gpu_states
        ],
    )
    slower = pcie_bandwidth_gb_per_s(4, 16)
    m = the(gen4, group="gpu", operation="peer", gpus=(0, 1))
    factor = gb_per_s(m.bytes, per_operation_ms(m)) / (share * slower)
    gen4 = scaled(gen4, factor, group="gpu", operation="peer", gpus=(0, 1))
    expected_cell = cell_where(
        table(summarize(gen4), "every pair"), "Check", "GPU 0 → GPU 1", "Expected"
    )
    assert expected_cell == (
        f">= {format_gb_per_s(0.7 * slower)} GB/s (70% of PCIe's {format_gb_per_s(slower)})"
        + remark
    )
    assert pair_verdict(gen4, "GPU 0 → GPU 1") == expected
