"""memprof peer without a GPU: pairs, keys, the latency chain, the GB/s matrix, one GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from memprof.cli import app
from memprof.cli_options import device_choice
from memprof.experiments import peer
from memprof.experiments.peer import ordered_pairs, unordered_pairs
from memprof.model.device import DeviceRecord
from memprof.model.results import Measurement, Result


def test_ordered_pairs_are_every_distinct_pair_source_major():
    assert ordered_pairs([0, 1, 2]) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert ordered_pairs([0]) == []
    assert unordered_pairs([0, 1, 2]) == [(0, 1), (0, 2), (1, 2)]


def test_device_choice_is_an_index_or_all():
    assert device_choice("all") is None
    assert device_choice(" ALL ") is None
    assert device_choice("1") == 1
    with pytest.raises(typer.BadParameter, match="is not a device index"):
        device_choice("both")
    with pytest.raises(typer.BadParameter, match="outside the allowed range 0 to 63"):
        device_choice("64")


def test_a_version_2_peer_key_loads_as_its_method_and_gpus():
    from memprof.model.upgrade import _gpus_apart

    upgraded = _gpus_apart({"operation": "latency 12->3", "kind": "peer"})
    assert (upgraded["operation"], upgraded["gpus"]) == ("latency", [12, 3])
    assert _gpus_apart({"operation": "h2d"}) == {"operation": "h2d"}
    assert _gpus_apart({"operation": "driver_call"}) == {"operation": "driver_call"}


def test_a_version_2_peer_file_reads_as_the_same_run_in_version_3_keys():
    from pathlib import Path

    from memprof.experiments import load

    fixtures = Path(__file__).parent / "fixtures"
    older = load(fixtures / "legacy_v2_h200x2_peer.json")
    newer = load(fixtures / "h200x2_peer.json")

    def keys(result):
        return {(m.operation, m.gpus) for m in result.measurements if m.group == "gpu"}

    assert keys(older) == keys(newer)  # same methods and pairs, each with its two GPUs
    assert all(len(gpus) == 2 for _, gpus in keys(older))


def test_the_latency_chain_visits_every_hop_once_and_ends_where_predicted():
    chain, order = peer.pointer_chain(1024, 64)
    assert order[0] == 0 and sorted(order.tolist()) == list(range(0, 1024, 64))
    index, visited = 0, []
    for _ in range(order.size):
        visited.append(index)
        index = int(chain[index])
    assert index == 0 and sorted(visited) == sorted(order.tolist())  # one cycle through all
    for steps in (1, 5, 16, 37):
        index = 0
        for _ in range(steps):
            index = int(chain[index])
        assert peer.chain_end(order, steps) == index
    assert not np.array_equal(order, np.sort(order))  # not a predictable stride


def _measurement(key: str, nbytes: int, per_op_ms: float, kind: str = "peer") -> Measurement:
    """A peer measurement from its key: "ce_on 0->1" is ce_on from GPU 0 to GPU 1."""
    operation, _, pair = key.partition(" ")
    gpus = tuple(int(index) for index in pair.split("->"))
    return Measurement(
        "gpu",
        peer.COPY_NAME,
        operation,
        kind,
        nbytes,
        [per_op_ms],
        throughput_ms=[per_op_ms],
        gpus=gpus,
    )


def _result(measurements: list[Measurement]) -> Result:
    return Result(
        command="peer",
        parameters=peer.PeerParams(power=20, repeat=1, warmup=0, latency_steps=1000),
        device=None,
        measurements=measurements,
        extra=peer.PeerExtra(
            devices=[DeviceRecord(0, "A", "x"), DeviceRecord(1, "B", "y")],
            peer_access=[[True, True], [True, True]],
            skipped=[],
        ),
    )


def test_the_matrix_puts_sources_in_rows_and_destinations_in_columns():
    nbytes = 4 << 20
    result = _result(
        [
            _measurement("ce_on 0->1", nbytes, nbytes / 400e9 * 1e3),  # 400 GB/s
            _measurement("ce_on 1->0", nbytes, nbytes / 300e9 * 1e3),  # 300 GB/s
            _measurement("ce_off 0->1", nbytes, nbytes / 20e9 * 1e3),
            _measurement("ce_off 1->0", nbytes, nbytes / 20e9 * 1e3),
        ]
    )
    summary = peer.summarize(result)
    titles = [table.title for table in summary.tables]
    assert titles[0].startswith("Copy engine, peer access off")
    on = summary.tables[1]
    assert on.headers == ["from \\ to", "GPU 0", "GPU 1"]
    assert on.rows == [["GPU 0", "-", "400"], ["GPU 1", "300", "-"]]
    assert "GPU 0 → GPU 1: 400 GB/s with peer access, 20.0 GB/s without (20.0x)." in (
        summary.conclusions
    )


def test_both_directions_are_summed_and_latency_is_per_read():
    nbytes = 4 << 20
    result = _result(
        [
            _measurement("ce_on 0->1", nbytes, nbytes / 400e9 * 1e3),
            _measurement("ce_on 1->0", nbytes, nbytes / 400e9 * 1e3),
            _measurement("ce_bidir 0->1", nbytes, nbytes / 380e9 * 1e3),
            _measurement("ce_bidir 1->0", nbytes, nbytes / 370e9 * 1e3),
            _measurement("latency 0->1", 4000, 2.0),
            _measurement("latency 1->1", 4000, 0.5, kind="device"),
        ]
    )
    summary = peer.summarize(result)
    bidir = next(t for t in summary.tables if t.title.startswith("Copy engine, both"))
    assert "GPU 0 ↔ GPU 1: 750 GB/s in total." in bidir.notes
    latency = summary.tables[-1]
    assert latency.rows == [["GPU 0", "-", "2.00"], ["GPU 1", "-", "0.50"]]
    assert any("carries both directions in full" in line for line in summary.conclusions)
    assert any("takes 2.00 µs, 4.0x a read of its own (0.50 µs)" in c for c in summary.conclusions)


@pytest.mark.parametrize(
    ("bidir_gb_per_s", "words"),
    [(30e9, "60.0 GB/s in total, 1.50x one direction: the link is shared."),
     (37e9, "74.0 GB/s in total, 1.85x one direction: the link carries both directions in full.")],
)  # fmt: skip
def test_both_at_once_is_set_against_the_faster_direction_alone(bidir_gb_per_s, words):
    nbytes = 4 << 20
    result = _result(
        [
            _measurement("ce_on 0->1", nbytes, nbytes / 40e9 * 1e3),
            _measurement("ce_on 1->0", nbytes, nbytes / 20e9 * 1e3),
            _measurement("ce_bidir 0->1", nbytes, nbytes / bidir_gb_per_s * 1e3),
            _measurement("ce_bidir 1->0", nbytes, nbytes / bidir_gb_per_s * 1e3),
        ]
    )
    assert f"GPU 0 ↔ GPU 1 at once: {words}" in peer.summarize(result).conclusions


def test_peer_on_one_gpu_says_so_in_one_line_and_exits_3(monkeypatch):
    import memprof.core.session

    monkeypatch.setattr(memprof.core.session, "device_count", lambda: 1)
    outcome = CliRunner().invoke(app, ["peer"])
    assert outcome.exit_code == 3
    lines = outcome.output.strip().splitlines()
    assert lines == [
        "memprof: error: memprof peer needs two GPUs: this machine has one, so there is "
        "nothing to measure"
    ]


# -- the bidirectional verdict at its boundary: 1.8x the faster direction alone is "in full" --


def _both_ways(bidir_ms: float) -> Result:
    """GPU 0 → 1 alone in 0.125 ms (the faster), 1 → 0 in twice that, both at once in bidir_ms."""
    nbytes = 4 << 20
    return _result(
        [
            _measurement("ce_on 0->1", nbytes, 0.125),
            _measurement("ce_on 1->0", nbytes, 0.25),
            _measurement("ce_bidir 0->1", nbytes, bidir_ms),
            _measurement("ce_bidir 1->0", nbytes, bidir_ms),
        ]
    )


@pytest.mark.parametrize(
    ("bidir_ms", "total_vs_limit", "words"),
    [
        (0.1388888888888889, 0, "carries both directions in full."),  # exactly 1.8x
        (np.nextafter(0.1388888888888889, 1), -1, "is shared."),  # just under
        (np.nextafter(0.1388888888888889, 0), 1, "carries both directions in full."),
    ],
)
def test_both_ways_at_exactly_one_point_eight_times_one_way_carry_in_full(
    bidir_ms, total_vs_limit, words
):
    result = _both_ways(float(bidir_ms))
    bidir, on = peer.figures(result, "ce_bidir"), peer.figures(result, "ce_on")
    total, limit = bidir[0, 1] + bidir[1, 0], 1.8 * max(on.values())
    assert (total > limit) - (total < limit) == total_vs_limit  # where the data lies
    lines = [line for line in peer.summarize(result).conclusions if "at once" in line]
    assert lines == [
        f"GPU 0 ↔ GPU 1 at once: 60.4 GB/s in total, 1.80x one direction: the link {words}"
    ]


# -- the loader: a peer figure only where its GPUs and peer access allow it ------------------


def _saved_peer() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "fixtures" / "h200x2_peer.json").read_text())


def _at(document: dict, operation: str, gpus: list[int]) -> dict:
    found = [
        m for m in document["measurements"] if (m["operation"], m["gpus"]) == (operation, gpus)
    ]
    assert len(found) == 1
    return found[0]


def _refusal(document: dict) -> str | None:
    import json

    from memprof.errors import InvalidArgument
    from memprof.experiments import parse

    try:
        parse(json.dumps(document))
    except InvalidArgument as error:
        return str(error)
    return None


LOADS_MAKE = "4-byte loads of parameters.latency_steps make"


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"bytes": 16384}, None),  # 4096 loads of 4 bytes
        ({"bytes": 16388}, f"bytes is 16388, but {LOADS_MAKE} 16384"),
        ({"bytes": 16380}, f"bytes is 16380, but {LOADS_MAKE} 16384"),
        ({"kind": "device"}, "kind is 'device', but a latency between these GPUs is 'peer'"),
    ],
)
def test_a_latency_chain_across_gpus_moves_four_bytes_a_load_of_peer_memory(change, refusal):
    document = _saved_peer()
    _at(document, "latency", [1, 0]).update(change)
    found = _refusal(document)
    assert found == refusal if refusal is None else refusal in found
    if refusal is not None:
        index = document["measurements"].index(_at(document, "latency", [1, 0]))
        assert f"measurements[{index}].{next(iter(change))} is" in found


def test_a_latency_chain_in_a_gpus_own_memory_is_device_memory():
    document = _saved_peer()
    _at(document, "latency", [0, 0])["kind"] = "peer"
    assert "kind is 'peer', but a latency between these GPUs is 'device'" in _refusal(document)


@pytest.mark.parametrize("method", ["ce_off", "ce_on", "kernel_read", "kernel_write", "ce_bidir"])
def test_a_method_from_a_gpu_to_itself_is_refused(method):
    document = _saved_peer()
    _at(document, method, [0, 1])["gpus"] = [1, 1]
    assert f"gpus is GPU 1 to itself: {method} is between two" in _refusal(document)


def _one_way(document: dict) -> dict:
    """GPU 0 cannot access GPU 1's memory; GPU 1 can access GPU 0's."""
    document["extra"]["peer_access"] = [[True, False], [True, True]]
    return document


# (operation, gpus) each needing GPU 0 to access GPU 1's memory: a copy over the link both
# ways, GPU 0 reading GPU 1 (kernel_read and latency 1 -> 0), GPU 0 writing GPU 1
NEEDS_0_TO_1 = [
    ("ce_on", [0, 1]),
    ("ce_on", [1, 0]),
    ("ce_bidir", [0, 1]),
    ("ce_bidir", [1, 0]),
    ("kernel_read", [1, 0]),
    ("latency", [1, 0]),
    ("kernel_write", [0, 1]),
]


def test_one_way_peer_access_keeps_the_figures_that_need_only_the_other_way():
    document = _one_way(_saved_peer())
    refused = [_at(document, *key) for key in NEEDS_0_TO_1]
    document["measurements"] = [m for m in document["measurements"] if m not in refused]
    assert _refusal(document) is None  # kernel_read 0 -> 1, kernel_write 1 -> 0, latency 0 -> 1


@pytest.mark.parametrize(("operation", "gpus"), NEEDS_0_TO_1)
def test_one_way_peer_access_refuses_each_figure_that_needs_the_missing_way(operation, gpus):
    document = _one_way(_saved_peer())
    kept = _at(document, operation, gpus)
    others = [_at(document, *key) for key in NEEDS_0_TO_1 if key != (operation, gpus)]
    document["measurements"] = [m for m in document["measurements"] if m not in others]
    index = document["measurements"].index(kept)
    a, b = gpus
    assert _refusal(document) == (
        f"result: measurements[{index}].gpus is GPU {a} → GPU {b} by {operation}, but "
        "extra.peer_access says GPU 0 cannot access GPU 1"
    )


# -- the summary of files with figures missing, and of more than two GPUs ---------------------


def _loaded(document: dict) -> Result:
    import json

    from memprof.experiments import parse

    return parse(json.dumps(document))


def _without(document: dict, *keys: tuple[str, list[int]]) -> dict:
    document["measurements"] = [
        m for m in document["measurements"] if (m["operation"], m["gpus"]) not in keys
    ]
    return document


def test_one_way_peer_access_is_said_with_what_was_skipped():
    document = _without(_one_way(_saved_peer()), *NEEDS_0_TO_1)
    skipped = "GPU 0 cannot access GPU 1's memory (cuDeviceCanAccessPeer = 0)"
    document["extra"]["skipped"] = [skipped]
    notes = peer.summarize(_loaded(document)).tables[0].notes
    assert (
        "Peer access possible between every pair (cuDeviceCanAccessPeer): not for every pair."
        in notes
    )
    assert f"Skipped: {skipped}." in notes
    every = peer.summarize(_loaded(_saved_peer())).tables[0].notes
    assert "Peer access possible between every pair (cuDeviceCanAccessPeer): yes." in every


def test_both_ways_at_once_need_both_directions_to_say_a_total():
    summary = peer.summarize(_loaded(_without(_saved_peer(), ("ce_bidir", [1, 0]))))
    bidir = next(t for t in summary.tables if t.title.startswith("Copy engine, both"))
    assert not any("in total" in note for note in bidir.notes)
    assert not any("at once" in line for line in summary.conclusions)


def test_a_read_of_another_gpus_memory_needs_the_readers_own_to_compare():
    summary = peer.summarize(_loaded(_without(_saved_peer(), ("latency", [1, 1]))))
    assert not any(line.startswith("One read") for line in summary.conclusions)
    latency = summary.tables[-1]
    assert latency.rows[1][2] == "-"  # GPU 1's own memory, read by GPU 1


def _saved_four() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parent / "fixtures" / "h200x4_peer.json").read_text())


def _three_of_four() -> dict:
    """The H200 x4 run as if GPU 3 had not been there."""
    document = _saved_four()
    document["measurements"] = [m for m in document["measurements"] if 3 not in m["gpus"]]
    document["extra"]["devices"] = document["extra"]["devices"][:3]
    document["extra"]["peer_access"] = [row[:3] for row in document["extra"]["peer_access"][:3]]
    document["gpu_states"] = [state for state in document["gpu_states"] if state["index"] != 3]
    return document


def test_past_two_gpus_a_line_per_finding_says_its_range_over_every_pair():
    result = _loaded(_three_of_four())
    copies, at_once, reads = peer.summarize(result).conclusions
    on = peer.figures(result, "ce_on")
    slowest, fastest = min(on, key=on.get), max(on, key=on.get)
    assert copies.startswith("Every pair, each way: 392-393 GB/s with peer access (82% of its ")
    assert f"slowest GPU {slowest[0]} → GPU {slowest[1]} (392 GB/s)" in copies
    assert f"fastest GPU {fastest[0]} → GPU {fastest[1]} (393 GB/s)." in copies
    assert at_once.startswith("Every pair at once: 780 GB/s in total")
    assert reads.startswith("One read of another GPU's memory takes 0.80-0.86 µs")


def test_the_slowest_pair_is_the_slowest_with_peer_access_not_without():
    document = _saved_four()
    result = _loaded(document)
    on = peer.figures(result, "ce_on")
    fastest = max(on, key=on.get)
    for m in document["measurements"]:  # the fastest pair with access, the slowest without
        if (m["operation"], tuple(m["gpus"])) == ("ce_off", fastest):
            for field in ("samples_ms", "throughput_ms", "events_ms"):
                m[field] = [3 * ms for ms in m[field]]
    result = _loaded(document)
    assert min(peer.figures(result, "ce_off").items(), key=lambda item: item[1])[0] == fastest
    slowest = min(on, key=on.get)
    line = peer.summarize(result).conclusions[0]
    assert f"slowest GPU {slowest[0]} → GPU {slowest[1]} ({on[slowest]:.0f} GB/s)" in line
    assert f"fastest GPU {fastest[0]} → GPU {fastest[1]}" in line


def test_pairs_without_a_ceiling_are_said_apart_from_those_with_one():
    document = _saved_four()
    document["gpu_states"] = [state for state in document["gpu_states"] if state["index"] != 3]
    with_ceiling, without, *_ = peer.summarize(_loaded(document)).conclusions
    assert with_ceiling.startswith("6 pairs, each way: 392-393 GB/s with peer access (82% of its")
    assert without.startswith("6 pairs, each way: 392-394 GB/s with peer access, 33.6")
    document["gpu_states"] = []
    (every, *_) = peer.summarize(_loaded(document)).conclusions
    assert every.startswith("Every pair, each way: 392-394 GB/s with peer access, 33.6")


def test_past_two_gpus_a_single_read_across_gpus_is_said_of_its_pair():
    document = _saved_four()
    document["measurements"] = [
        m
        for m in document["measurements"]
        if m["operation"] != "latency" or m["gpus"] in ([0, 1], [1, 1]) or m["kind"] == "device"
    ]
    copies, at_once, read = peer.summarize(_loaded(document)).conclusions  # said after the rest
    assert copies.startswith("Every pair, each way: ") and at_once.startswith("Every pair at once")
    assert read.startswith("One read of GPU 0's memory from GPU 1 takes 0.")


def test_a_link_ceiling_said_of_every_pair_is_said_only_where_every_pair_has_one():
    document = _saved_four()
    every = next(t for t in peer.summarize(_loaded(document)).tables if "access on" in t.title)
    assert every.notes[0].startswith("every pair, each way: 82% of its ceiling, NVLink")
    document["gpu_states"] = [state for state in document["gpu_states"] if state["index"] != 3]
    summary = peer.summarize(_loaded(document))
    (note,) = next(t for t in summary.tables if "access on" in t.title).notes
    named = ", ".join(f"GPU {a} → GPU {b}" for a, b in peer.ordered_pairs([0, 1, 2]))
    assert note.startswith(f"{named}: 82% of its ceiling, NVLink")  # GPU 3's pairs: none


ONE_NS_MS = 1e-6  # the step of CUPTI's clock: a chain timed at all takes at least this


@pytest.mark.parametrize("gpus", [[1, 1], [1, 0]])  # in its own memory, in the other's
@pytest.mark.parametrize(
    ("ms", "refused"),
    [
        (0.0, "samples_ms has a median of 0 ms, but moving 16384 bytes takes time"),
        (1e-300, "samples_ms[0] is 1e-300 ms, but a clock reads 0 or at least 1e-06 ms"),
        (
            math.nextafter(ONE_NS_MS, 0),
            "samples_ms[0] is 9.999999999999997e-07 ms, but a clock reads 0 or at least 1e-06 ms",
        ),
        (ONE_NS_MS, None),
    ],
)
def test_a_latency_chain_is_refused_where_no_clock_could_have_timed_it(gpus, ms, refused):
    """A median of 0 would divide by zero in the summary; 1e-300 ms printed a ratio of 1e299
    against the other chain: the loader refuses both, and a chain of one ns loads."""
    document = _saved_peer()
    chain = _at(document, "latency", gpus)
    chain["samples_ms"] = [ms] * len(chain["samples_ms"])
    index = document["measurements"].index(chain)
    assert _refusal(document) == (f"result: measurements[{index}].{refused}" if refused else None)


def test_a_launch_call_timed_at_0_ms_still_loads():
    """The host clock can read 0 around one cuLaunchKernel: only latencies are held to > 0."""
    document = _saved_peer()
    for m in document["measurements"]:
        if m["operation"] == "launch":
            m["samples_ms"] = [0.0] * len(m["samples_ms"])
    assert _refusal(document) is None


def _four_one_way() -> dict:
    """The H200 x4 run as if GPU 0 could not access GPU 1's memory: 2 of its 12 copies over the
    link, and 1 of its 6 pairs both ways at once, unmeasured."""
    document = _without(_saved_four(), *NEEDS_0_TO_1)
    document["extra"]["peer_access"][0][1] = False
    return document


WAYS = ("access on", "both directions")  # the tables with a note said of every pair


def test_past_two_gpus_every_pair_is_said_only_where_every_pair_was_measured():
    summary = peer.summarize(_loaded(_saved_four()))
    on, bidir = (next(t for t in summary.tables if words in t.title) for words in WAYS)
    assert on.notes[0].startswith("every pair, each way: 82% of its ceiling, NVLink")
    assert bidir.notes[0] == "every pair: 780 GB/s in total."
    copies, at_once, _ = summary.conclusions
    assert copies.startswith("Every pair, each way: ") and at_once.startswith("Every pair at once")

    summary = peer.summarize(_loaded(_four_one_way()))
    on, bidir = (next(t for t in summary.tables if words in t.title) for words in WAYS)
    measured = [pair for pair in ordered_pairs([0, 1, 2, 3]) if pair not in ((0, 1), (1, 0))]
    named = ", ".join(f"GPU {a} → GPU {b}" for a, b in measured)
    assert on.notes[0].startswith(f"{named}: 82% of its ceiling, NVLink")
    both = ", ".join(f"GPU {a} ↔ GPU {b}" for a, b in unordered_pairs([0, 1, 2, 3])[1:])
    assert bidir.notes[0] == f"{both}: 780 GB/s in total."
    copies, at_once, _ = summary.conclusions
    assert copies.startswith("10 pairs, each way: 392-394 GB/s with peer access (82% of its")
    assert at_once.startswith(f"{both} at once: 780 GB/s in total")
