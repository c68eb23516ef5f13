"""Every throughput figure against its ceiling (memprof.model.ceilings) and where summaries
show it. Recorded fixtures, edited in the test where a run would record more than they hold
(a host memcpy ceiling, the GPU state from NVML)."""

from __future__ import annotations

import math

import pytest

from memprof.experiments import load, summarize
from memprof.experiments.base import HOST_MEMCPY, HOST_STAGING, Measure
from memprof.experiments.common import HOST_STAGING_NAMES
from memprof.model.ceilings import (
    UNKNOWN_LINK,
    Ceiling,
    ceiling_remark,
    detail_of,
    hbm_ceiling,
    host_ceiling,
    link_of,
    nvlink_ceiling,
    pcie_ceiling,
    pcie_formula,
    peer_ceiling,
)
from memprof.model.device import pcie_bandwidth_gb_per_s
from memprof.model.gpustate import GpuState, NvLink
from memprof.model.results import Measurement, Result
from tests.conftest import FIXTURES, load_legacy, replace
from tests.test_gpu_state import healthy

NVLINK4_MBPS = 26562  # what NVML reports per NVLink 4 link


def switch_links(count: int, active: bool = True, speed: int | None = NVLINK4_MBPS) -> list:
    return [NvLink(i, active, "4.0", speed, "0000:ff:00.0", "switch") for i in range(count)]


def host_measurement(measure: Measure, name: str, nbytes: int, gb_per_s: float) -> Measurement:
    per_copy_ms = nbytes / (gb_per_s * 1e9) * 1e3
    return Measurement(
        measure.group,
        name,
        measure.operation,
        "pageable",
        nbytes,
        samples_ms=[per_copy_ms] * 5,
        source="host",
        throughput_ms=[per_copy_ms] * 5,
        batch=40,
    )


def with_staging(result: Result, nbytes: int, h2d_gb_per_s: float, d2h_gb_per_s: float):
    """An older fixture as a run of today's memprof records it: with the host side of its
    pageable copies, staged, per direction."""
    for direction, rate in (("h2d", h2d_gb_per_s), ("d2h", d2h_gb_per_s)):
        measure = HOST_STAGING[direction]
        name = HOST_STAGING_NAMES[direction]
        result.measurements.append(host_measurement(measure, name, nbytes, rate))
    return result


def with_memcpy(result: Result, nbytes: int, gb_per_s: float) -> Result:
    """An older fixture as memprof recorded it between issue 16 and the staging model: one
    memcpy between two pageable buffers."""
    name = "host memcpy (pageable → pageable)"
    result.measurements.append(host_measurement(HOST_MEMCPY, name, nbytes, gb_per_s))
    return result


# -- the arithmetic ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("generation", "width", "gb_per_s"),
    [(5, 16, 63.015), (4, 16, 31.508), (4, 8, 15.754), (3, 16, 15.754), (2, 16, 8.0), (1, 1, 0.25)],
)
def test_pcie_per_direction_counts_the_line_encoding(generation, width, gb_per_s):
    assert pcie_bandwidth_gb_per_s(generation, width) == pytest.approx(gb_per_s, abs=1e-3)


def test_the_link_of_an_older_file_comes_from_its_device_facts():
    result = load_legacy("pinned_p20")
    link = link_of(result)
    assert (link.now, link.most, link.source) == ((5, 16), (5, 16), "sysfs")
    ceiling = pcie_ceiling(result)
    assert ceiling.gb_per_s == pytest.approx(63.015, abs=1e-3)
    assert ceiling.detail == (
        "PCIe Gen5 x16 as negotiated, 32 GT/s x 16 lanes x 128b/130b / 8 = 63.0 GB/s per "
        "direction (its maximum) [sysfs]"
    )


def test_nvmls_link_during_the_run_wins_over_the_facts_read_at_its_start():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(pcie_generation=4, pcie_width=8)]
    ceiling = pcie_ceiling(result)
    assert ceiling.gb_per_s == pytest.approx(15.754, abs=1e-3)
    assert "below what the link can do (Gen5 x16: 63.0 GB/s) [NVML]" in ceiling.detail


def test_a_gpu_with_no_recorded_link_has_no_ceiling():
    result = load_legacy("pinned_p20")
    result.device = replace(result.device, pcie_generation=None, pcie_width=None)
    assert pcie_ceiling(result) is None
    # a state without link figures does not hide the facts
    result = load_legacy("pinned_p20")
    result.gpu_states = [GpuState(0, "0000:00:06.0")]
    assert pcie_ceiling(result).gb_per_s == pytest.approx(63.015, abs=1e-3)
    # another GPU than the facts' has no link without its state
    assert pcie_ceiling(result, 1) is None


def test_a_summary_without_link_figures_says_so_in_words_and_shows_no_share():
    """A file with neither NVML's link nor the device facts': no share, and the note says why
    in UNKNOWN_LINK's words (not a bare 'unknown' that reads as a broken link)."""
    result = load_legacy("pinned_p20")
    result.device = replace(result.device, pcie_generation=None, pcie_width=None)
    result.gpu_states = []
    transfers = table_named(result, "Transfers of")
    assert column(transfers, "Of ceiling") == ["-"] * 4
    assert "Of ceiling: pinned copies against the link: unknown (no link figures recorded)." in (
        transfers.notes
    )


def test_hbm_is_two_transfers_per_clock_over_the_bus():
    ceiling = hbm_ceiling(load_legacy("device").device)
    assert ceiling.gb_per_s == pytest.approx(2 * 3201e6 * 6016 / 8 / 1e9)
    assert ceiling.limiter == "HBM"


def test_nvlink_through_a_switch_counts_every_active_link():
    a = healthy(0, nvlinks=[*switch_links(16), *switch_links(2, active=False)])
    b = healthy(1, nvlinks=switch_links(18))
    ceiling = nvlink_ceiling(a, b)
    assert ceiling.gb_per_s == pytest.approx(16 * 26.562)
    assert "16 active links to the other GPU through NVSwitch, 16 x 26.56 GB/s" in (ceiling.detail)


def test_direct_nvlinks_count_only_those_reaching_the_other_gpu():
    links = [
        *(NvLink(i, True, "4.0", 25000, "0000:00:07.0", "gpu") for i in range(4)),
        *(NvLink(i, True, "4.0", 25000, "0000:00:08.0", "gpu") for i in range(4, 6)),
    ]
    a = healthy(0, nvlinks=links)
    to_b = nvlink_ceiling(a, healthy(1, pci_bus_id="0000:00:07.0"))
    to_c = nvlink_ceiling(a, healthy(2, pci_bus_id="0000:00:08.0"))
    assert (to_b.gb_per_s, to_c.gb_per_s) == (100.0, 50.0)
    assert nvlink_ceiling(a, healthy(3, pci_bus_id="0000:00:09.0")) is None


def test_a_link_without_a_rate_leaves_nvlink_unknown():
    a = healthy(0, nvlinks=switch_links(18, speed=None))
    assert nvlink_ceiling(a, healthy(1)) is None


def test_peers_without_nvlink_are_bounded_by_the_slower_pcie_link():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(0), healthy(1, pcie_generation=4)]
    ceiling = peer_ceiling(result, 0, 1)
    assert (ceiling.limiter, round(ceiling.gb_per_s, 1)) == ("PCIe", 31.5)
    assert ceiling.detail.startswith("no NVLink between the two: the slower PCIe link")


def test_peers_whose_nvlink_is_unknown_have_no_ceiling_rather_than_a_pcie_guess():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(0, nvlinks=None), healthy(1)]
    assert peer_ceiling(result, 0, 1) is None
    assert peer_ceiling(load_legacy("pinned_p20"), 0, 1) is None  # no state at all


def test_pageable_copies_are_bounded_by_the_lower_of_their_host_side_and_the_link():
    link = Ceiling(63.0, "PCIe", "the link")
    assert host_ceiling(20.0, link).limiter == "staging"
    assert host_ceiling(20.0, link).gb_per_s == 20.0
    assert host_ceiling(20.0, link, staged=False).limiter == "memcpy"  # an older file
    assert host_ceiling(80.0, link) is link
    assert host_ceiling(None, link) is link
    assert host_ceiling(math.nan, link) is link
    assert host_ceiling(20.0, None).gb_per_s == 20.0


def test_a_figure_above_its_ceiling_is_named_and_one_within_noise_is_not():
    staging = Ceiling(10.0, "staging", "")
    assert ceiling_remark("Pageable host → device", 10.4, staging) is None
    assert ceiling_remark("Pageable host → device", 12.3, staging) == (
        "Pageable host → device reached 12.3 GB/s, 123% of its staging ceiling of 10.0 GB/s: "
        "above it, so the ceiling's model does not hold here (docs/ceilings.md)."
    )
    assert ceiling_remark("x", 4.9, staging).endswith(
        "something other than the staging held it back."
    )
    assert ceiling_remark("x", 5.1, staging) is None
    assert ceiling_remark("x", 99.0, None) is None
    # the edges themselves: exactly half is not far below, exactly 105% is not above
    assert ceiling_remark("x", 5.0, staging) is None and not staging.far_below(5.0)
    assert ceiling_remark("x", 10.5, staging) is None


def test_a_cell_names_the_share_and_the_limiter():
    ceiling = Ceiling(63.0, "PCIe", "")
    assert ceiling.cell(53.55) == "85% PCIe"
    assert ceiling.far_below(31.4) and not ceiling.far_below(31.6)
    assert Ceiling(0.0, "PCIe", "").cell(1.0) == "-"


# -- where summaries show it --------------------------------------------------------------------


def table_named(result: Result, title: str):
    return next(table for table in summarize(result).tables if table.title.startswith(title))


def column(table, header: str) -> list[str]:
    index = table.headers.index(header)
    return [row[index] for row in table.rows]


def test_pinned_shows_each_copy_against_its_ceiling_and_memcpy_beside_pageable():
    result = with_memcpy(load_legacy("pinned_p20"), 4 << 20, 20.0)
    transfers = table_named(result, "Transfers of")
    # pageable 15.0 and 12.5 GB/s of memcpy's 20.0; pinned 53.4 and 53.9 of the link's 63.0
    assert column(transfers, "Of ceiling") == [
        "75% memcpy",
        "63% memcpy",
        "85% PCIe",
        "86% PCIe",
        "-",
    ]
    assert transfers.rows[-1][:2] == ["memcpy", "host → host"]
    assert transfers.rows[-1][4] == "20.0"
    conclusions = summarize(result).conclusions
    assert len(conclusions) == 1  # nothing far below its ceiling


def test_pinned_names_a_pageable_copy_far_below_its_host_ceiling():
    # host → device at 15.0 GB/s is 56% of 27.0, device → host at 12.5 only 46%
    result = with_memcpy(load_legacy("pinned_p20"), 4 << 20, 27.0)
    conclusions = summarize(result).conclusions
    assert conclusions[1:] == [
        "Pageable device → host reached 12.5 GB/s, only 46% of its memcpy ceiling of 27.0 "
        "GB/s: something other than the memcpy held it back."
    ]


def test_pinned_of_an_older_file_is_shown_against_the_link_and_says_its_host_side_is_missing():
    summary = summarize(load_legacy("pinned_p20"))
    transfers = summary.tables[0]
    assert column(transfers, "Of ceiling") == ["24% PCIe", "20% PCIe", "85% PCIe", "86% PCIe"]
    assert any("host side of pageable copies was not recorded" in n for n in transfers.notes)
    assert len(summary.conclusions) == 1  # half a ceiling names nothing


def test_pinned_sets_each_pageable_direction_against_its_own_staging():
    # pageable 15.0 GB/s host → device of staging's 20.0 in, 12.5 device → host of 25.0 out
    result = with_staging(load_legacy("pinned_p20"), 4 << 20, 20.0, 25.0)
    summary = summarize(result)
    transfers = summary.tables[0]
    assert column(transfers, "Of ceiling") == [
        "75% staging",
        "50% staging",
        "85% PCIe",
        "86% PCIe",
        "-",
        "-",
    ]
    assert [row[:2] + row[4:5] for row in transfers.rows[-2:]] == [
        ["staging", "host → device", "20.0"],
        ["staging", "device → host", "25.0"],
    ]
    assert any("256 KiB buffer" in note for note in transfers.notes)
    assert len(summary.conclusions) == 1  # 50% is not far below


def test_pinned_says_where_pageable_copies_beat_their_staging():
    result = with_staging(load_legacy("pinned_p20"), 4 << 20, 10.0, 30.0)
    transfers, conclusions = summarize(result).tables[0], summarize(result).conclusions
    assert column(transfers, "Of ceiling")[:2] == ["over staging", "42% staging"]  # no 150%
    assert conclusions[1:] == [
        "Pageable host → device reached 15.0 GB/s, 150% of its staging ceiling of 10.0 GB/s: "
        "above it, so the ceiling's model does not hold here (docs/ceilings.md).",
        "Pageable device → host reached 12.5 GB/s, only 42% of its staging ceiling of 30.0 "
        "GB/s: something other than the staging held it back.",
    ]


def test_zerocopy_reads_against_the_link():
    table = summarize(load_legacy("zerocopy_sweep")).tables[0]
    assert column(table, "Of ceiling")[-1] == "82% PCIe"


def test_compare_bounds_kernel_reads_of_device_memory_by_hbm_and_of_host_memory_by_the_link():
    result = with_memcpy(load_legacy("compare"), 64 << 20, 12.0)
    table = table_named(result, "Against each figure's ceiling")
    rows = {row[0]: row[1:] for row in table.rows}
    # a pageable copy's GB/s is its call's: 8.81 and 10.3 GB/s (its DMA alone: 8.96, 10.6)
    assert rows["pageable (numpy)"] == ["73% memcpy", "86% memcpy", "-"]
    assert rows["pinned (cuMemHostAlloc)"][:2] == ["88% PCIe", "88% PCIe"]
    assert rows["mapped, zero-copy"][2] == "81% PCIe"
    assert rows["device (cuMemAlloc)"][2] == "81% HBM"
    assert rows["managed, resident"][2] == "80% HBM"
    assert rows["managed, first touch"][2] == "9% PCIe"
    assert table.notes[-1] == (
        "Pageable copies against the lower of the link and one host thread's memcpy between "
        "two pageable buffers of this size, this run: 12.0 GB/s (a file from an older "
        "memprof: pageable copies can beat it, docs/ceilings.md)."
    )


def test_compare_without_the_hbm_clock_says_its_ceiling_is_unknown():
    result = load_legacy("compare")
    result = replace(result, device=replace(result.device, memory_clock_khz=0))
    table = table_named(result, "Against each figure's ceiling")
    assert table.notes[1] == (
        "Kernels reading device memory (device, managed once resident) against HBM: unknown."
    )
    assert [row[1:] for row in table.rows if row[0] == "device (cuMemAlloc)"] == [["-"] * 3]


def test_sweep_puts_memcpy_beside_pageable_and_each_peak_against_its_ceiling():
    result = load_legacy("sweep")
    for power in result.parameters.powers:
        with_memcpy(result, 4 << power, 20.0)
    bandwidth = table_named(result, "Bandwidth host → device")
    assert bandwidth.headers[:3] == ["Size", "pageable", "memcpy"]
    against = table_named(result, "Each kind's peak against its ceiling")
    rows = {row[0]: row[1:] for row in against.rows}
    assert rows["pageable"] == ["71% memcpy", "79% memcpy"]  # 14.2 and 15.9 of 20.0
    assert rows["pinned"] == ["88% PCIe", "88% PCIe"]


def test_compare_sets_each_pageable_direction_against_its_own_staging():
    result = with_staging(load_legacy("compare"), 64 << 20, 18.0, 12.0)
    table = table_named(result, "Against each figure's ceiling")
    rows = {row[0]: row[1:] for row in table.rows}
    assert rows["pageable (numpy)"] == ["49% staging", "86% staging", "-"]  # 8.81, 10.3 GB/s
    assert table.notes[-1].endswith("this run: 18.0 GB/s in, 12.0 GB/s out.")


def test_sweep_puts_staging_beside_pageable_per_direction():
    result = load_legacy("sweep")
    for power in result.parameters.powers:
        with_staging(result, 4 << power, 20.0, 30.0)
    for direction, rate in (("host → device", "20.0"), ("device → host", "30.0")):
        bandwidth = table_named(result, f"Bandwidth {direction}")
        assert bandwidth.headers[:3] == ["Size", "pageable", "staging"]
        assert {row[2] for row in bandwidth.rows} == {rate}
    against = table_named(result, "Each kind's peak against its ceiling")
    rows = {row[0]: row[1:] for row in against.rows}
    assert rows["pageable"] == ["71% staging", "53% staging"]  # 14.2 of 20.0, 15.9 of 30.0


def test_sweep_missing_the_host_side_at_one_size_shows_no_column():
    result = load_legacy("sweep")
    for power in result.parameters.powers[1:]:
        with_staging(result, 4 << power, 20.0, 30.0)
    assert table_named(result, "Bandwidth host → device").headers[:3] == [
        "Size",
        "pageable",
        "pinned",
    ]


def test_peer_copies_against_nvlink_from_the_recorded_state():
    result = load(FIXTURES / "legacy_v2_h200x2_peer.json")
    result.gpu_states = [
        healthy(0, nvlinks=switch_links(18)),
        healthy(1, pci_bus_id="0000:00:07.0", nvlinks=switch_links(18)),
    ]
    summary = summarize(result)
    on = next(t for t in summary.tables if t.title.startswith("Copy engine, peer access on"))
    # both ways alike: one line for them (issue 39: twelve identical lines on four GPUs)
    assert [n for n in on.notes if "of its ceiling" in n] == [
        "every pair, each way: 82% of its ceiling, NVLink, 18 active links to the other GPU "
        "through NVSwitch, 18 x 26.56 GB/s = 478 GB/s per direction (NVML's raw link rate, "
        "protocol overhead included) [NVML]."
    ]
    assert summary.conclusions[0].startswith(
        "GPU 0 → GPU 1: 393 GB/s with peer access (82% of its NVLink ceiling), 38.0 GB/s"
    )
    result = load(FIXTURES / "legacy_v2_h200x2_peer.json")
    result.gpu_states = [
        healthy(0, nvlinks=switch_links(18)),
        healthy(1, pci_bus_id="0000:00:07.0", nvlinks=switch_links(16)),
    ]
    tables = summarize(result).tables
    on = next(t for t in tables if t.title.startswith("Copy engine, peer access on"))
    differ = [n for n in on.notes if "of its ceiling" in n]  # a pair unlike the other: its own
    assert [n[: n.index(" active")] for n in differ] == [
        "GPU 0 → GPU 1: 82% of its ceiling, NVLink, 18",
        "GPU 1 → GPU 0: 92% of its ceiling, NVLink, 16",
    ]


def test_hostlink_shows_each_gpu_against_its_own_link():
    result = load(FIXTURES / "legacy_v2_h200x2_hostlink.json")
    result.gpu_states = [healthy(0), healthy(1, pci_bus_id="0000:00:07.0", pcie_generation=4)]
    table = summarize(result).tables[0]
    # GPU 1's copies beat its Gen4 link by 76%: that link does not bound them, and no share says so
    assert column(table, "Of ceiling") == [
        "88% PCIe",
        "over PCIe",
        "-",
        "88% PCIe",
        "over PCIe",
        "-",
    ]


def test_device_memorys_percent_of_peak_is_hbms_ceiling():
    table = summarize(load_legacy("device")).tables[0]
    assert column(table, "% of peak")[0] == "89.2%"


def test_one_link_of_several_without_a_rate_leaves_nvlink_unknown():
    """Summing the links that have a rate would understate the ceiling: none is better."""
    links = [*switch_links(17), *switch_links(1, speed=None)]
    assert nvlink_ceiling(healthy(0, nvlinks=links), healthy(1)) is None
    assert nvlink_ceiling(healthy(0, nvlinks=switch_links(18)), healthy(1)).gb_per_s == (
        pytest.approx(18 * 26.562)
    )


def test_direct_links_are_not_said_to_go_through_a_switch():
    links = [NvLink(i, True, "4.0", 25000, "0000:00:07.0", "gpu") for i in range(2)]
    detail = nvlink_ceiling(healthy(0, nvlinks=links), healthy(1, pci_bus_id="0000:00:07.0")).detail
    assert "2 active links to the other GPU, 2 x 25.00 GB/s" in detail and "NVSwitch" not in detail


@pytest.mark.parametrize(("generation", "width"), [(5, None), (None, 16), (None, None)])
def test_a_maximum_link_half_known_from_the_facts_is_no_maximum(generation, width):
    result = load_legacy("pinned_p20")
    result.device = replace(result.device, pcie_max_generation=generation, pcie_max_width=width)
    link = link_of(result)
    assert (link.now, link.most) == ((5, 16), None)


@pytest.mark.parametrize(
    ("clock_khz", "bus_bits"), [(0, 6016), (3201000, 0), (0, 0)]
)  # fmt: skip
def test_hbm_without_its_clock_or_its_bus_has_no_ceiling(clock_khz, bus_bits):
    facts = replace(
        load_legacy("device").device, memory_clock_khz=clock_khz, memory_bus_width_bits=bus_bits
    )
    assert hbm_ceiling(facts) is None
    assert hbm_ceiling(None) is None


def test_hbms_detail_gives_its_clock_in_mhz():
    assert hbm_ceiling(load_legacy("device").device).detail.startswith("HBM, 2 x 3201 MHz x 6016")


def test_pageable_copies_at_a_tie_of_staging_and_link_name_the_staging():
    link = Ceiling(30.0, "PCIe", "the link")
    assert host_ceiling(30.0, link).limiter == "staging"
    assert host_ceiling(30.1, link).limiter == "PCIe"
    assert host_ceiling(29.9, link).limiter == "staging"


@pytest.mark.parametrize(
    ("generation", "formula"),
    [(1, "2.5 GT/s x 16 lanes x 8b/10b / 8"), (2, "5 GT/s x 16 lanes x 8b/10b / 8"),
     (3, "8 GT/s x 16 lanes x 128b/130b / 8"), (4, "16 GT/s x 16 lanes x 128b/130b / 8"),
     (5, "32 GT/s x 16 lanes x 128b/130b / 8")],
)  # fmt: skip
def test_each_pcie_generation_names_its_own_line_encoding(generation, formula):
    assert pcie_formula(generation, 16) == formula


def test_a_slow_ceiling_still_gives_a_share_and_a_slow_host_side_still_bounds():
    assert Ceiling(0.5, "PCIe", "").fraction(0.25) == 0.5
    assert Ceiling(0.0, "PCIe", "").fraction(0.25) == math.inf
    link = Ceiling(30.0, "PCIe", "the link")
    assert host_ceiling(0.5, link).gb_per_s == 0.5  # a staging thread at 0.5 GB/s bounds
    assert host_ceiling(0.0, link) is link and host_ceiling(None, link) is link


def test_peers_are_bounded_by_the_slower_link_whichever_gpu_copies():
    """GPU 1's link is the slower: it bounds copies from GPU 1 too, not the run's own GPU 0's."""
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(0), healthy(1, pcie_generation=4)]
    assert round(peer_ceiling(result, 1, 0).gb_per_s, 1) == 31.5


def test_a_peer_without_recorded_state_has_no_ceiling_from_either_side():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(1, pcie_generation=4)]  # GPU 0's state is missing
    assert peer_ceiling(result, 0, 1) is None
    assert nvlink_ceiling(None, healthy(1)) is None
    assert nvlink_ceiling(healthy(0, nvlinks=switch_links(18)), None) is None


def test_links_of_different_rates_are_said_to_be_summed():
    links = [
        NvLink(0, True, "4.0", 25000, "0000:00:07.0", "gpu"),
        NvLink(1, True, "3.0", 20000, "0000:00:07.0", "gpu"),
    ]
    ceiling = nvlink_ceiling(healthy(0, nvlinks=links), healthy(1, pci_bus_id="0000:00:07.0"))
    assert ceiling.gb_per_s == 45.0
    assert "2 active links to the other GPU, summed = 45.0 GB/s per direction" in ceiling.detail


def test_a_generation_without_named_encoding_shows_its_efficiency():
    assert pcie_formula(6, 16) == "64 GT/s x 16 lanes x 0.945 / 8"  # 242/256 (FLIT)


def test_a_link_below_its_maximum_says_both_whole():
    result = load_legacy("pinned_p20")
    result.gpu_states = [healthy(pcie_generation=4, pcie_width=8)]
    assert pcie_ceiling(result).detail == (
        "PCIe Gen4 x8 as negotiated, 16 GT/s x 8 lanes x 128b/130b / 8 = 15.8 GB/s per "
        "direction, below what the link can do (Gen5 x16: 63.0 GB/s) [NVML]"
    )


def test_a_link_whose_maximum_is_unknown_says_neither_below_nor_its_maximum():
    result = load_legacy("pinned_p20")
    result.device = replace(result.device, pcie_max_generation=None, pcie_max_width=None)
    assert pcie_ceiling(result).detail == (
        "PCIe Gen5 x16 as negotiated, 32 GT/s x 16 lanes x 128b/130b / 8 = 63.0 GB/s per "
        "direction [sysfs]"
    )


@pytest.mark.parametrize(("generation", "width"), [(5, None), (None, 16)])
def test_a_link_half_known_from_the_facts_is_no_link(generation, width):
    result = load_legacy("pinned_p20")
    result.device = replace(result.device, pcie_generation=generation, pcie_width=width)
    assert link_of(result) is None


def test_a_host_ceiling_says_how_it_was_measured():
    assert host_ceiling(10.0, None).detail == (
        "one host thread staging the copy through a 256 KiB buffer, this run: 10.0 GB/s"
    )
    assert host_ceiling(10.0, None, staged=False).detail == (
        "host memcpy, one thread, pageable to pageable, same size, this run: 10.0 GB/s"
    )


def test_a_note_gives_a_ceilings_detail_or_the_words_for_unknown():
    link = Ceiling(63.0, "PCIe", "PCIe Gen5 x16 as negotiated")
    assert detail_of(link) == "PCIe Gen5 x16 as negotiated"
    assert detail_of(link, "unknown") == "PCIe Gen5 x16 as negotiated"
    assert (detail_of(None), detail_of(None, "unknown")) == (UNKNOWN_LINK, "unknown")


def test_a_peer_copy_reads_the_state_of_its_destination_not_the_runs_own_gpu():
    """GPU 1 is not the run's own GPU (0): its links and its NVLink knowledge are its own."""
    result = load_legacy("pinned_p20")
    direct = [NvLink(i, True, "4.0", 25000, "0000:00:07.0", "gpu") for i in range(2)]
    result.gpu_states = [healthy(0, nvlinks=direct), healthy(1)]
    ceiling = peer_ceiling(result, 0, 1)
    assert (ceiling.limiter, ceiling.gb_per_s) == ("NVLink", 50.0)
    result.gpu_states = [healthy(0), healthy(1, nvlinks=None)]  # GPU 1's NVLink unknown
    assert peer_ceiling(result, 0, 1) is None


def test_a_link_whose_far_end_is_unknown_reaches_no_gpu():
    """Not even one whose bus id the file leaves empty: two unknowns are not one GPU."""
    unknown = [NvLink(i, True, "4.0", 25000, None, kind) for i, kind in enumerate(["gpu", None])]
    unknown.append(NvLink(2, True, "4.0", 25000, "", "gpu"))  # as a file may say it
    source = healthy(0, nvlinks=unknown)
    assert nvlink_ceiling(source, healthy(1)) is None
    assert nvlink_ceiling(source, healthy(1, pci_bus_id="")) is None
