"""Memory kinds as the one place: traits, the kinds a GPU supports, and who iterates them."""

from __future__ import annotations

from memprof.core import memory
from memprof.core.memory import MEMORY_KINDS, supported_kinds
from memprof.experiments import compare, info, sweep
from memprof.model.device import CAPABILITIES, CAPABILITY_ATTRIBUTES, capability_name
from tests.conftest import load_fixture

EVERYTHING = dict.fromkeys(CAPABILITIES, 1)


def test_every_kind_carries_its_traits_and_a_unique_marker():
    markers = [kind.marker for kind in MEMORY_KINDS.values()]
    assert len(set(markers)) == len(markers)
    assert sweep.ZEROCOPY_MARKER not in markers
    assert all(len(marker) == 1 for marker in markers)
    labels = [kind.label for kind in MEMORY_KINDS.values()]
    assert len(set(labels)) == len(labels)
    assert [k.name for k in MEMORY_KINDS.values() if k.synchronous_copies] == ["pageable"]
    assert [k.name for k in MEMORY_KINDS.values() if k.kernel_access] == [
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
    assert [k.name for k in MEMORY_KINDS.values() if k.devices_needed > 1] == ["peer"]


def test_every_required_attribute_is_in_the_one_capability_table():
    for kind in MEMORY_KINDS.values():
        if kind.required_attribute:
            assert kind.required_attribute in CAPABILITY_ATTRIBUTES.values(), kind.name


def test_supported_kinds_come_from_the_recorded_flags():
    everything, skipped = supported_kinds(EVERYTHING, MEMORY_KINDS.values())
    assert [k.name for k in everything] == list(MEMORY_KINDS) and skipped == []
    without_mapping = dict(EVERYTHING, canMapHostMemory=0)
    kinds, skipped = supported_kinds(without_mapping, MEMORY_KINDS.values())
    assert "mapped" not in [k.name for k in kinds]
    assert "writecombined" not in [k.name for k in kinds]
    assert skipped == [
        "writecombined memory needs canMapHostMemory (CAN_MAP_HOST_MEMORY), which is 0 here",
        "mapped memory needs canMapHostMemory (CAN_MAP_HOST_MEMORY), which is 0 here",
    ]


def test_a_flag_the_result_never_recorded_skips_the_kind_instead_of_raising():
    kinds, skipped = supported_kinds({}, [MEMORY_KINDS["managed"], MEMORY_KINDS["pinned"]])
    assert [k.name for k in kinds] == ["pinned"]
    assert skipped == ["managed memory needs managedMemory (MANAGED_MEMORY), which is 0 here"]
    assert capability_name("NOT_A_FLAG") == "NOT_A_FLAG"


def test_alloc_compare_and_sweep_take_their_kinds_from_the_registry():
    assert [k.name for k in memory.single_gpu_kinds()] == [
        name for name, kind in MEMORY_KINDS.items() if kind.devices_needed == 1
    ]
    assert "portable" in compare.ROWS and compare.ROWS["portable"] == memory.label("portable")
    assert list(compare.ROWS)[list(compare.ROWS).index("mapped") + 1] == "uva"
    assert [row for row in compare.ROWS if row.startswith("managed")] == [
        "managed first touch",
        "managed resident",
        "managed prefetched",
    ]
    assert "peer" not in compare.ROWS
    assert sweep.SWEEP_KINDS == (
        "pageable",
        "pinned",
        "portable",
        "writecombined",
        "mapped",
        "registered",
        "zerocopy",
    )


def test_a_kind_the_gpu_lacks_is_skipped_by_sweep_with_its_reason():
    kinds, skipped = sweep._supported(("pinned", "zerocopy", "registered"), {"canMapHostMemory": 0})
    assert kinds == ["pinned"]
    assert skipped[0].startswith("zerocopy: mapped memory needs canMapHostMemory")
    assert skipped[1].startswith("registered: registered memory needs hostRegisterSupported")


def test_chart_markers_of_unknown_kinds_never_raise():
    assert sweep.marker("zerocopy") == "Z"
    assert sweep.marker("portable") == "O"
    assert sweep.marker("a kind from a newer memprof") == "?"
    lines = sweep.chart_lines({"mystery": [(10, 0.01, 1.0), (12, 0.02, 4.0)]}, height=4)
    assert any("?" in line for line in lines)


def test_info_prints_every_recorded_flag_with_what_it_decides():
    result = load_fixture("info")
    result.device.attributes["someNewFlag"] = 1  # a flag this memprof does not describe
    flags = info.summarize(result).tables[1]
    names = [row[0] for row in flags.rows]
    assert names == list(result.device.attributes)
    meanings = {row[0]: row[2] for row in flags.rows}
    assert meanings["canMapHostMemory"] == "mapped (zero-copy) host memory"
    assert meanings["someNewFlag"] == ""


def test_the_flag_a_kind_needs_is_the_one_a_saved_run_is_held_to():
    from memprof.model.device import KIND_NEEDS

    needed = {name: kind.required_attribute for name, kind in MEMORY_KINDS.items()}
    assert {name: flag for name, flag in needed.items() if flag} == KIND_NEEDS


def test_a_kind_this_memprof_does_not_know_is_named_by_itself_with_a_question_mark():
    assert memory.marker("pinned") == "P" and memory.label("pinned") == "pinned (cuMemHostAlloc)"
    assert memory.marker("ancient") == "?" and memory.label("ancient") == "ancient"
