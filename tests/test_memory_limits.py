"""Sizes that cannot fit are refused before anything is allocated."""

from pathlib import Path

import pytest

from memprof.core import hostlimits
from memprof.core.hostlimits import meminfo_bytes
from memprof.core.memory import MEMORY_KINDS, check_fits, host_available_bytes
from memprof.errors import ExitCode, OutOfMemory


def test_a_size_that_fits_passes():
    check_fits("device memory", 1 << 30, 8 << 30, 256 << 20)


def test_a_size_that_does_not_fit_says_what_was_asked_and_what_is_free():
    with pytest.raises(OutOfMemory) as raised:
        check_fits("device memory", 12 << 30, 8 << 30, 256 << 20)
    assert str(raised.value) == (
        "this size needs 12 GiB of device memory but only 8 GiB is free "
        "(memprof keeps 256 MiB spare): choose a smaller size"
    )
    assert raised.value.exit_code == ExitCode.OUT_OF_MEMORY


def test_the_safety_margin_counts():
    with pytest.raises(OutOfMemory):
        check_fits("host memory", (8 << 30) - (100 << 20), 8 << 30, 1 << 30)


def test_unknown_free_memory_is_not_a_refusal():
    check_fits("host memory", 1 << 40, None, 1 << 30)


def test_host_available_memory_comes_from_meminfo(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       32000000 kB\nMemFree:  100 kB\nMemAvailable:   16000000 kB\n"
    )
    assert meminfo_bytes(tmp_path, "MemAvailable") == 16_000_000 * 1024
    assert meminfo_bytes(tmp_path / "missing", "MemAvailable") is None
    meminfo.write_text("MemTotal: 1 kB\n")
    assert meminfo_bytes(tmp_path, "MemAvailable") is None
    # what memory's refusals read: /proc's MemAvailable, by the same reading
    seen = []
    monkeypatch.setattr(hostlimits, "meminfo_bytes", lambda *where: seen.append(where) or 7)
    assert host_available_bytes() == 7 and seen == [(Path("/proc"), "MemAvailable")]


def test_memory_kinds_are_registered_once_each():
    assert list(MEMORY_KINDS) == [
        "pageable",
        "pinned",
        "portable",
        "writecombined",
        "mapped",
        "registered",
        "managed",
        "device",
        "pool",
        "pool_kept",
        "vmm",
        "peer",
    ]
    assert [k.name for k in MEMORY_KINDS.values() if k.on_device] == [
        "device",
        "pool",
        "pool_kept",
        "vmm",
        "peer",
    ]
    assert MEMORY_KINDS["mapped"].required_attribute == "CAN_MAP_HOST_MEMORY"
    assert MEMORY_KINDS["managed"].required_attribute == "MANAGED_MEMORY"
    assert MEMORY_KINDS["registered"].required_attribute == "HOST_REGISTER_SUPPORTED"
    for kind in MEMORY_KINDS.values():
        assert type(kind).__doc__ and kind.alloc_call and kind.free_call


class SessionWithout:
    """A stand-in session whose device lacks every optional capability."""

    class device:
        @staticmethod
        def name() -> str:
            return "Test GPU"

    @staticmethod
    def attribute(name: str) -> int:
        return 0


@pytest.mark.parametrize(
    ("kind", "flag"),
    [
        ("mapped", "CAN_MAP_HOST_MEMORY"),
        ("writecombined", "CAN_MAP_HOST_MEMORY"),
        ("managed", "MANAGED_MEMORY"),
        ("registered", "HOST_REGISTER_SUPPORTED"),
    ],
)
def test_a_missing_capability_is_a_clear_environment_error(kind, flag):
    from memprof.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem) as raised:
        MEMORY_KINDS[kind].check_supported(SessionWithout())
    assert (
        str(raised.value) == f"{kind} memory needs {flag}, which this GPU (Test GPU) does not have"
    )
    assert raised.value.exit_code == ExitCode.ENVIRONMENT


def test_kinds_needing_nothing_are_always_supported():
    for kind in ("pageable", "pinned", "portable", "device"):
        MEMORY_KINDS[kind].check_supported(SessionWithout())
