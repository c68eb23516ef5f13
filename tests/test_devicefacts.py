"""PCIe and memory arithmetic, and reading the link from sysfs."""

import json
from pathlib import Path

import pytest

from memprof.core.devicefacts import _kernel_driver_version, _sysfs_link
from memprof.experiments import load as load_result
from memprof.model.device import parse_link_speed, pcie_bandwidth_gb_per_s

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("generation", "width", "gb_per_s"),
    [(5, 16, 63.015), (4, 16, 31.508), (3, 16, 15.754), (2, 16, 8.0), (1, 1, 0.25), (6, 16, 121.0)],
)
def test_pcie_bandwidth_per_direction(generation, width, gb_per_s):
    assert pcie_bandwidth_gb_per_s(generation, width) == pytest.approx(gb_per_s, rel=1e-3)


def test_unknown_links_have_no_bandwidth():
    assert pcie_bandwidth_gb_per_s(None, 16) is None
    assert pcie_bandwidth_gb_per_s(5, 0) is None
    assert pcie_bandwidth_gb_per_s(9, 16) is None


@pytest.mark.parametrize(
    ("text", "generation"),
    [
        ("32.0 GT/s PCIe\n", 5),
        ("16.0 GT/s PCIe", 4),
        ("8.0 GT/s PCIe", 3),
        ("2.5 GT/s", 1),
        ("Unknown", None),
        ("", None),
    ],
)
def test_link_speed_text(text, generation):
    assert parse_link_speed(text) == generation


def test_sysfs_link_is_read_by_bus_id(tmp_path):
    device = tmp_path / "0000:1b:00.0"
    device.mkdir()
    (device / "current_link_speed").write_text("2.5 GT/s PCIe\n")  # idle links slow down
    (device / "current_link_width").write_text("16\n")
    (device / "max_link_speed").write_text("32.0 GT/s PCIe\n")
    (device / "max_link_width").write_text("16\n")
    link = _sysfs_link("00000000:1B:00.0", root=tmp_path)
    assert link == {"generation": 1, "width": 16, "max_generation": 5, "max_width": 16}
    assert _sysfs_link("0000:99:00.0", root=tmp_path) is None


def test_driver_version_from_proc(tmp_path):
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  9 2025\n"
        "GCC version:  gcc version 12.3.0 (Ubuntu)\n"
    )
    assert _kernel_driver_version(version) == "580.159.04"
    assert _kernel_driver_version(tmp_path / "missing") is None


def test_theoretical_memory_bandwidth_of_the_recorded_h200():
    device = load_result(FIXTURES / "h200_info.json").device
    # 3201 MHz x 6016-bit HBM3e, double data rate: the datasheet's 4.8 TB/s
    assert device.theoretical_memory_bandwidth_gb_per_s == pytest.approx(4814.5, rel=1e-3)
    assert json.loads((FIXTURES / "h200_info.json").read_text())["device"]["pcie_source"] == "sysfs"
