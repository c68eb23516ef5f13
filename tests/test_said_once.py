"""Lines that repeat for every GPU or pair are said once (issue 39, item 4): twelve pairs'
identical ceiling notes on four GPUs are one line naming them, a pair unlike the others keeps
its own line, and peer's tables and notes on four and eight GPUs read at 80 columns."""

from __future__ import annotations

import pytest
from rich.console import Console

from memprof.experiments import peer
from memprof.model.device import DeviceRecord
from memprof.model.formatting import format_gb_per_s, gpu_names, said_once
from memprof.model.results import Result
from memprof.output.render import render_result
from tests.conftest import FIXTURES
from tests.test_ceilings import switch_links
from tests.test_gpu_state import healthy
from tests.test_peer import _measurement

NBYTES = 256 << 20


@pytest.mark.parametrize(
    ("indices", "named"),
    [
        ([2], "GPU 2"),
        ([1, 0], "GPUs 0, 1"),
        ([0, 1, 2, 3], "GPUs 0-3"),
        ([2, 1, 0], "GPUs 0-2"),  # exactly three: the shortest range
        ([0, 1, 3], "GPUs 0, 1, 3"),
        ([5, 0, 1, 2, 3], "GPUs 0-3, 5"),
    ],
)
def test_gpus_are_named_with_ranges_of_three_or_more(indices, named):
    assert gpu_names(indices) == named


def pairs(count: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(count) for b in range(count) if a != b]


def names(found: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}>{b}" for a, b in found)


def test_what_every_one_says_is_one_line():
    said = [(pair, "82%") for pair in pairs(4)]
    assert said_once(said, names, "every pair", "pairs") == ["every pair: 82%"]
    assert said_once([(i, "x") for i in range(4)], gpu_names) == ["GPUs 0-3: x"]


def test_what_one_says_otherwise_stays_its_own_line():
    said = [(pair, "80%" if pair == (2, 3) else "82%") for pair in pairs(4)]
    assert said_once(said, names, "every pair", "pairs") == ["2>3: 80%", "the other 11 pairs: 82%"]
    gpus = [(i, "Gen4" if i == 2 else "Gen5") for i in range(4)]
    assert said_once(gpus, gpu_names) == ["GPUs 0, 1, 3: Gen5", "GPU 2: Gen4"]


def test_nothing_said_is_no_line_and_one_sentence_of_several_is_not_of_the_others():
    assert said_once([], gpu_names, "every GPU", "GPUs") == []
    alike = [(0, "a"), (1, "a")]  # one sentence, no `every`: named, never "the other 2"
    assert said_once(alike, gpu_names, others="GPUs") == ["GPUs 0, 1: a"]


def test_only_more_than_half_is_said_of_the_others():
    half = [(0, "a"), (1, "a"), (2, "b"), (3, "b")]  # two and two: each named
    assert said_once(half, gpu_names, "every GPU", "GPUs") == ["GPUs 0, 1: a", "GPUs 2, 3: b"]
    most = [(0, "a"), (1, "a"), (2, "a"), (3, "b")]
    assert said_once(most, gpu_names, "every GPU", "GPUs") == ["GPU 3: b", "the other 3 GPUs: a"]


def peer_run(count: int, slow: tuple[int, int] | None = None) -> Result:
    """Peer copies between `count` H200s on one NVSwitch (18 links each), 393 GB/s each way;
    the `slow` pair at 380."""
    measurements = []
    for a, b in pairs(count):
        gb_per_s = 380e9 if (a, b) == slow else 393e9
        measurements.append(_measurement(f"ce_on {a}->{b}", NBYTES, NBYTES / gb_per_s * 1e3))
        measurements.append(_measurement(f"ce_off {a}->{b}", NBYTES, NBYTES / 38e9 * 1e3))
    bus = [f"0000:{i + 0x18:02X}:00.0" for i in range(count)]
    return Result(
        command="peer",
        parameters=peer.PeerParams(power=20, repeat=1, warmup=0, latency_steps=1000),
        device=None,
        measurements=measurements,
        extra=peer.PeerExtra(
            devices=[DeviceRecord(i, "NVIDIA H200", bus[i]) for i in range(count)],
            peer_access=[[True] * count for _ in range(count)],
            skipped=[],
        ),
        gpu_states=[healthy(i, pci_bus_id=bus[i], nvlinks=switch_links(18)) for i in range(count)],
    )


def ceiling_notes(result: Result) -> list[str]:
    on = next(t for t in peer.summarize(result).tables if "peer access on" in t.title)
    return [note for note in on.notes if "of its ceiling" in note]


@pytest.mark.parametrize("count", [4, 8])
def test_every_pair_alike_is_one_note_and_one_unlike_them_its_own(count):
    alike = ceiling_notes(peer_run(count))
    assert len(alike) == 1 and alike[0].startswith("every pair, each way: 82% of its ceiling")
    others = count * (count - 1) - 1
    unlike = ceiling_notes(peer_run(count, slow=(2, 3)))
    assert len(unlike) == 2
    assert unlike[0].startswith("GPU 2 → GPU 3: 79% of its ceiling, NVLink, 18 active")
    assert unlike[1].startswith(f"the other {others} pairs: 82% of its ceiling, NVLink, 18")


@pytest.mark.parametrize("count", [4, 8])
def test_peer_on_many_gpus_reads_at_80_columns(count):
    console = Console(width=80, record=True, color_system=None)
    result = peer_run(count)
    render_result(result, peer.summarize(result), console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    on = lines.index(next(line for line in lines if "peer access on (" in line))
    table = lines[on : lines.index("", on)]  # title, header, rule, a row per GPU, notes
    assert len(table) <= 3 + count + 4  # the ceiling notes: one sentence of three lines


def test_gpus_whose_state_reads_alike_share_one_header_line():
    from memprof.model.gpustate import describe_all

    alike = describe_all([healthy(i) for i in range(4)])
    assert alike == [
        ("NVML: GPUs 0-3 PCIe Gen5 x16 (max Gen5 x16), SM 1980/1980 MHz, memory 3201/3201 MHz", [])
    ]
    assert describe_all([healthy(0)])[0][0].startswith("NVML: GPU 0 PCIe Gen5 x16")  # as before
    slower = [healthy(0), healthy(1, pcie_generation=4), healthy(2), healthy(3, sm_clock_mhz=990)]
    lines = describe_all(slower)
    assert [line[:20] for line, _ in lines] == [
        "NVML: GPUs 0, 2 PCIe",
        "NVML: GPU 1 PCIe Gen",
        "NVML: GPU 3 PCIe Gen",
    ]
    assert lines[1][1] and not lines[2][1]  # GPU 1 with its warning; GPU 3's clock differs


def test_peer_on_four_recorded_gpus_concludes_once_per_finding_with_its_range():
    """The four H200s recorded on one NVSwitch: 12 copy, 6 at-once and 12 read sentences
    become one each, their ranges those of the tables (the slowest pair named)."""
    result = load_fixture_file("h200x4_peer.json")
    lines = peer.summarize(result).conclusions
    assert len(lines) == 3
    on = {
        pair: one.gb_per_s
        for pair, one in peer.pair_figures(result, peer.METHOD_MEASURES["ce_on"]).items()
    }
    slowest = min(on, key=on.get)
    low, high = format_gb_per_s(min(on.values())), format_gb_per_s(max(on.values()))
    assert lines[0].startswith(f"Every pair, each way: {low}-{high} GB/s with peer access (82%")
    assert f"slowest GPU {slowest[0]} → GPU {slowest[1]} ({low} GB/s)" in lines[0]
    assert lines[1].startswith("Every pair at once: 780 GB/s in total")
    assert lines[1].endswith("the link carries both directions in full.")
    reads = peer.latencies_us(result)
    across = [us for (a, b), us in reads.items() if a != b]
    assert f"takes {min(across):.2f}-{max(across):.2f} µs" in lines[2]  # every read, both ways


def test_two_gpus_conclude_pair_by_pair_as_before():
    lines = peer.summarize(load_fixture_file("h200x2_peer.json")).conclusions
    assert lines[0].startswith("GPU 0 → GPU 1: ") and lines[1].startswith("GPU 1 → GPU 0: ")
    assert not any(line.startswith("Every pair") for line in lines)


def test_a_pair_whose_link_is_shared_keeps_its_own_sentence_beside_the_range():
    full = [((0, 1), True, 780e0, 1.98), ((0, 2), True, 781e0, 1.99)]
    shared = [((1, 2), False, 400e0, 1.02)]
    lines = peer._range_conclusions([], full + shared, [], [0, 1, 2])
    assert lines == [
        "GPU 0 ↔ GPU 1, GPU 0 ↔ GPU 2 at once: 780-781 GB/s in total, 1.98-1.99x one "
        "direction: the link carries both directions in full.",
        "GPU 1 ↔ GPU 2 at once: 400 GB/s in total, 1.02x one direction: the link is shared.",
    ]
    copies = [((0, 1), "NVLink ceiling", 0.82, 393.0, 34.0), ((1, 0), None, None, 30.0, 20.0)]
    mixed = peer._range_conclusions(copies, [], [], [0, 1, 2])  # a pair without a ceiling: alone
    assert mixed == [
        "GPU 0 → GPU 1: 393 GB/s with peer access (82% of its NVLink ceiling), 34.0 GB/s "
        "without (11.6x).",
        "GPU 1 → GPU 0: 30.0 GB/s with peer access, 20.0 GB/s without (1.5x).",
    ]


def load_fixture_file(name: str) -> Result:
    from memprof.experiments import load

    return load(FIXTURES / name)
