"""`memprof report --fleet`: many runs of one command side by side, each GPU's figures against
the fleet's median, a slow GPU named and gated (--fail-outliers) on both sides of its
threshold, a noisy figure not taken for a slow one. A recorded check, saved again in tmp_path
as other nodes would have recorded it, one of them made slow here."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from memprof.api import declared
from memprof.cli import app
from memprof.errors import ExitCode
from memprof.experiments import load
from memprof.output.diff import measurement_label
from memprof.output.fleet import fleet, run_names
from tests.conftest import FIXTURES

CHECK = FIXTURES / "h200_check.json"


def node(tmp_path: Path, host: str, slower: float = 1.0, which: int | None = None) -> Path:
    """The recorded check as node `host` saved it, measurement `which` (every one where None)
    taking `slower` times as long."""
    data = json.loads(CHECK.read_text())
    data["host"] = host
    data["parameters"]["d2d_floor_pct"] = 10  # the fleet judges it, not check's floor
    for index, m in enumerate(data["measurements"]):
        if which is None or index == which:
            for field in ("samples_ms", "throughput_ms", "events_ms"):
                m[field] = [t * slower for t in m.get(field) or []]
    path = tmp_path / f"{host}.json"
    path.write_text(json.dumps(data))
    return path


def report(*arguments: object) -> object:
    return CliRunner().invoke(app, ["report", *map(str, arguments)], env={"COLUMNS": "100"})


@pytest.fixture
def four(tmp_path):
    """Four nodes, node-c's device-to-device copy (the fifth figure) 1.3x as slow."""
    return [node(tmp_path, f"node-{n}") for n in "abd"] + [node(tmp_path, "node-c", 1.3, 4)]


def test_a_slow_gpu_is_named_among_four(four):
    ran = report("--fleet", *four)
    assert ran.exit_code == 0, ran.output
    assert "Slower than the fleet beyond 10% and their noise: node-c GPU 0." in ran.stdout
    assert "node-c GPU 0: " in ran.stdout and "(+30%)" in ran.stdout
    assert "Profiling result" not in ran.stdout  # one table, not each run's report


@pytest.mark.parametrize(("percent", "fails"), [(20, True), (29, True), (31, False), (50, False)])
def test_fail_outliers_gates_on_both_sides_of_its_threshold(four, percent, fails):
    ran = report("--fail-outliers", percent, *four)
    assert ran.exit_code == (ExitCode.CHECK_FAILED if fails else 0), ran.output
    if fails:
        assert "memprof: outlier: node-c GPU 0: [CUDA memcpy DtoD]" in ran.stderr
        assert ran.stderr.strip().endswith(
            f"1 run slower than the fleet beyond --fail-outliers {percent}%: node-c GPU 0"
        )
    else:
        assert "outlier" not in ran.stderr


def test_the_gate_names_each_slow_run_its_figure_and_limit_in_red_then_all_of_them(
    tmp_path, monkeypatch
):
    from memprof.output import console

    notes = []
    monkeypatch.setattr(console, "print_note", lambda *said: notes.append(said))
    runs = [node(tmp_path, f"node-{n}") for n in "abe"]
    runs += [node(tmp_path, "node-c", 1.3, 4), node(tmp_path, "node-d", 1.25, 4)]
    ran = report("--fail-outliers", 20, "--no-color", *runs)
    assert ran.exit_code == ExitCode.CHECK_FAILED, ran.output
    copy = "[CUDA memcpy DtoD] (device) [gpu], 1 GiB"
    assert [said for said in notes if said[0].startswith("memprof: outlier: ")] == [
        (
            f"memprof: outlier: node-c GPU 0: {copy}: 3264 GB/s, +30.0% against the fleet's "
            "median (limit 20.0%)",
            True,
            "bold red",
        ),
        (
            f"memprof: outlier: node-d GPU 0: {copy}: 3395 GB/s, +25.0% against the fleet's "
            "median (limit 20.0%)",
            True,
            "bold red",
        ),
    ]
    assert notes[-1][0] == (  # the error line, last
        "memprof: error: 2 runs slower than the fleet beyond --fail-outliers 20%: node-c GPU 0, "
        "node-d GPU 0"
    )


def test_a_faster_gpu_is_marked_but_never_fails_the_gate(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "abc"] + [node(tmp_path, "node-d", 0.9, 4)]
    ran = report("--fail-outliers", 5, *runs)
    assert ran.exit_code == 0, ran.output
    assert "node-d GPU 0: 4715 GB/s (-10%)" in ran.stdout
    assert "their noise: none." in ran.stdout


def test_a_noisy_figure_is_not_taken_for_a_slow_gpu(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "abc"]
    data = json.loads(CHECK.read_text())
    data["host"] = "node-d"
    data["parameters"]["d2d_floor_pct"] = 10
    m = data["measurements"][4]
    spread = [0.6, 0.8, 1.15, 1.6, 2.2]  # a median 15% slow, within its own noise
    for field in ("samples_ms", "throughput_ms"):
        m[field] = [t * s for t, s in zip(m[field], spread, strict=True)]
    (tmp_path / "node-d.json").write_text(json.dumps(data))
    results = [load(path) for path in [*runs, tmp_path / "node-d.json"]]
    found = fleet(results, declared, 0.10)
    mine = [d for d in found.deviations if d.run == 3 and "DtoD" in d.label]
    assert mine[0].ratio > 1.10 and mine[0].limit > mine[0].ratio - 1
    assert found.slower == []


def test_two_runs_are_shown_but_never_judged(tmp_path):
    runs = [node(tmp_path, "node-a"), node(tmp_path, "node-b", 1.3, 4)]
    ran = report("--fleet", *runs)
    assert ran.exit_code == 0, ran.output
    assert "A median of 2 runs cannot single one out: give 3 or more." in ran.stdout
    one = report("--fleet", runs[0])
    assert one.exit_code == 0, one.output
    assert "5 figures in the one run." in one.stdout
    assert "A median of 1 run cannot single one out: give 3 or more." in one.stdout


@pytest.mark.parametrize("given", [1, 2])
def test_a_gate_over_fewer_runs_than_a_median_can_judge_is_refused(tmp_path, given):
    """Under three runs --fail-outliers could never fail (node-b 1.3x as slow passed, exit 0):
    refused, as a gate over runs of different commands is; three are judged."""
    runs = [node(tmp_path, "node-a"), node(tmp_path, "node-b", 1.3, 4), node(tmp_path, "node-c")]
    gated = report("--fail-outliers", 10, *runs[:given])
    assert gated.exit_code == ExitCode.USAGE and gated.stdout == "", gated.output
    assert gated.stderr.strip().splitlines() == [
        "memprof: error: --fail-outliers judges each run against the median of 3 or more, and "
        f"{given} run{'s were' if given == 2 else ' was'} given: a gate that could judge none "
        "(--fleet shows them)"
    ]
    assert report("--fail-outliers", 10, *runs).exit_code == ExitCode.CHECK_FAILED


def test_one_run_in_two_files_is_refused_it_would_be_the_fleets_median(tmp_path):
    """node-a copied twice beside node-b 1.3x as slow: a median of a, a, b is a's, and b was
    named an outlier of a fleet of two GPUs. A file given twice is refused as well."""
    a, b = node(tmp_path, "node-a"), node(tmp_path, "node-b", 1.3, 4)
    copy = tmp_path / "copy-of-a.json"
    copy.write_bytes(a.read_bytes())
    for options in (["--fleet"], ["--fail-outliers", 10]):
        ran = report(*options, a, copy, b)
        assert ran.exit_code == ExitCode.USAGE and ran.stdout == "", ran.output
        assert ran.stderr.strip().splitlines() == [
            f"memprof: error: {a} and {copy} hold one run (node-a, GPU 0, "
            f"{load(a).created_at}): give each run once"
        ]
        twice = report(*options, a, b, a)
        assert twice.exit_code == ExitCode.USAGE and twice.stdout == "", twice.output
        assert twice.stderr.strip().splitlines() == [
            f"memprof: error: {a} is given twice: give each file once"
        ]


def test_a_gate_over_runs_of_different_commands_is_refused_a_fleet_view_says_so(four):
    """Runs of another command share no figure: the gate could never judge them."""
    gated = report("--fail-outliers", 10, *four, ALLOC)
    assert gated.exit_code == ExitCode.USAGE and gated.stdout == ""
    assert gated.stderr.strip().splitlines() == [
        "memprof: error: --fail-outliers gates runs of one command; these are of alloc, check"
    ]
    assert report("--fail-outliers", 10, *four).exit_code == ExitCode.CHECK_FAILED
    shown = report("--fleet", *four, ALLOC)
    assert shown.exit_code == 0 and "different commands (alloc, check)" in shown.stdout


def test_runs_of_different_models_are_said(tmp_path):
    runs = [node(tmp_path, f"node-{n}") for n in "ab"] + [FIXTURES / "h100_check.json"]
    ran = report("--fleet", *runs)
    assert ran.exit_code == 0, ran.output
    assert "different GPU models (NVIDIA H100 80GB HBM3, NVIDIA H200)" in " ".join(
        ran.stdout.split()
    )


def test_runs_are_named_apart_by_host_then_bus_then_order():
    result = load(CHECK)
    other_bus = load(CHECK)
    other_bus.device.pci_bus_id = "0000:00:07.0"
    assert run_names([result]) == ["vm GPU 0"]
    assert run_names([result, other_bus]) == ["vm GPU 0 (0000:00:06.0)", "vm GPU 0 (0000:00:07.0)"]
    assert run_names([result, result]) == ["vm GPU 0 #1", "vm GPU 0 #2"]


def test_a_run_without_a_gpu_index_or_a_device_is_named_without_inventing_them():
    result, unindexed = load(CHECK), load(CHECK)
    unindexed.device = None  # neither its index nor its bus known
    trace = load(FIXTURES / "h200_trace_pycuda.json")  # GPU 0 as asked, no device facts
    assert run_names([unindexed, result]) == ["vm GPU ?", "vm GPU 0"]
    assert run_names([trace, result]) == ["vm GPU 0 #1", "vm GPU 0 (0000:00:06.0)"]


@pytest.mark.parametrize("percent", ["0", "-5", "101", "100.5", "x"])
def test_a_threshold_outside_its_range_is_refused(percent):
    ran = report("--fail-outliers", percent, CHECK, CHECK, CHECK)
    assert ran.exit_code == ExitCode.USAGE
    if percent != "x":
        assert ran.stderr == (
            f"memprof: error: Invalid value for '--fail-outliers': {percent} is outside the "
            "allowed range 0 to 100 (percent) (see 'memprof report --help')\n"
        )


@pytest.mark.parametrize("percent", ["0.01", "100"])
def test_a_threshold_just_above_0_and_of_100_is_taken(percent):
    assert report("--fail-outliers", percent, *RECORDED[:3], "-q").exit_code == 0


RECORDED = sorted((FIXTURES / "fleet").glob("h200x4_check_gpu*.json"))  # one H200 each


def test_four_recorded_gpus_are_one_fleet_and_a_planted_slow_one_is_found(tmp_path):
    assert len(RECORDED) == 4
    ran = report("--fail-outliers", 10, *RECORDED)
    assert ran.exit_code == 0, ran.output  # four healthy H200s of one machine
    assert [f"vm GPU {n}" in ran.stdout for n in range(4)] == [True] * 4
    data = json.loads(RECORDED[2].read_text())
    m = data["measurements"][0]  # pinned host to device, 64 MiB
    for field in ("samples_ms", "throughput_ms", "events_ms"):
        m[field] = [t * 1.25 for t in m.get(field) or []]
    data["parameters"]["h2d_floor_pct"] = 10  # the fleet judges it, not check's floor
    slow = tmp_path / "gpu2.json"
    slow.write_text(json.dumps(data))
    planted = [*RECORDED[:2], slow, RECORDED[3]]
    ran = report("--fail-outliers", 10, *planted)
    assert ran.exit_code == ExitCode.CHECK_FAILED, ran.output
    assert "memprof: outlier: vm GPU 2: [CUDA memcpy HtoD] (pinned) [gpu], 64 MiB" in ran.stderr
    assert ran.stderr.strip().endswith("beyond --fail-outliers 10%: vm GPU 2")
    assert report("--fail-outliers", 30, *planted).exit_code == 0


# -- the fleet view's words and figures, whole (mutation testing: tests/README_verdicts.md) -------


def saved(tmp_path: Path, fixture: Path, name: str, slower: dict[int, float]) -> object:
    """`fixture` as another node saved it, measurement i taking slower[i] times as long."""
    data = json.loads(fixture.read_text())
    for index, factor in slower.items():
        m = data["measurements"][index]
        for field in ("samples_ms", "throughput_ms", "events_ms"):
            m[field] = [t * factor for t in m.get(field) or []]
    for key in ("h2d_floor_pct", "d2h_floor_pct", "d2d_floor_pct", "at_once_floor_pct"):
        if key in data["parameters"]:
            data["parameters"][key] = 10  # the fleet judges it, not check's floors
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return load(path)


def rows(summary) -> list[list]:
    return [[table.title, table.headers, table.rows, table.notes] for table in summary.tables]


def test_five_recorded_gpus_two_slow_in_one_figure_read_as_these_words(tmp_path):
    """GPU 2's and GPU 3's host to device copies 1.25x and 1.3x as slow, GPU 1's device copy
    0.92x (faster, within 10%), GPU 0 given twice: each cell and sentence, whole."""
    results = [
        load(RECORDED[0]),
        saved(tmp_path, RECORDED[1], "g1", {4: 0.92}),
        saved(tmp_path, RECORDED[2], "g2", {0: 1.25}),
        saved(tmp_path, RECORDED[3], "g3", {0: 1.3}),
        load(RECORDED[0]),
    ]
    found = fleet(results, declared)
    dtoh, dtod = "[CUDA memcpy DtoH] (pinned) [gpu], 64 MiB", "[CUDA memcpy DtoD] (device) [gpu]"
    htod = "[CUDA memcpy HtoD] (pinned) [gpu], 64 MiB"
    assert rows(found.summary) == [
        [
            "memprof check: 5 runs against the fleet's median",
            ["Run", "GPU", "Outliers", "Furthest from the median"],
            [
                ["vm GPU 0 #1", "NVIDIA H200", "0", f"{dtoh}: 50.5 GB/s (+0.1%)"],
                ["vm GPU 1", "NVIDIA H200", "0", f"{dtod}, 1 GiB: 4612 GB/s (-8.0%)"],
                ["vm GPU 2", "NVIDIA H200", "1", f"{htod}: 44.2 GB/s (+25.0%)"],
                ["vm GPU 3", "NVIDIA H200", "1", f"{htod}: 42.6 GB/s (+29.9%)"],
                ["vm GPU 0 #5", "NVIDIA H200", "0", f"{dtoh}: 50.5 GB/s (+0.1%)"],
            ],
            [
                "Outlier: a figure's time per operation more than 10% from the median of the "
                "fleet's and beyond 3x its run's own noise; GB/s where it moves bytes. Furthest: "
                "the run's figure furthest from the median, and by how much (+: slower)."
            ],
        ],
        [
            "Figures with an outlier: the fleet's median and the runs beyond it",
            ["Figure", "Fleet median", "Outliers"],
            [[htod, "55.3 GB/s", "vm GPU 2: 44.2 GB/s (+25%); vm GPU 3: 42.6 GB/s (+30%)"]],
            [],
        ],
    ]
    assert found.summary.conclusions == [
        "5 figures in all 5 runs.",
        "Slower than the fleet beyond 10% and their noise: vm GPU 2, vm GPU 3.",
    ]


ALLOC = FIXTURES / "h200_alloc.json"


def test_three_runs_are_judged_a_time_is_shown_as_one_and_more_than_twelve_are_counted(tmp_path):
    alloc = load(ALLOC)
    cu_mem_alloc = 154  # cuMemAlloc of 256 KiB: a time, no GB/s
    found = fleet([alloc, saved(tmp_path, ALLOC, "b", {cu_mem_alloc: 5.0}), alloc], declared)
    assert found.summary.tables[1].rows == [
        ["cuMemAlloc (device) [api], 256 KiB", "80.301us", "vm GPU 0 #2: 401.50us (+400%)"]
    ]
    assert found.summary.tables[1].notes == []
    assert [d.run for d in found.slower] == [1]
    everything = {index: 1.3 for index in range(len(alloc.measurements))}
    found = fleet([alloc, saved(tmp_path, ALLOC, "c", everything), alloc], declared)
    assert len(found.summary.tables[1].rows) == 12
    assert found.summary.tables[1].notes == ["332 more figures have an outlier."]
    labels = [measurement_label(m) for m in alloc.measurements]
    flagged = [
        d.label
        for d in found.deviations
        if d.run == 1 and d.outlier and labels.count(d.label) == 1  # one measurement each
    ]
    for count, notes in [(12, []), (13, ["1 more figures have an outlier."])]:
        slower = {index: 1.3 for index, label in enumerate(labels) if label in flagged[:count]}
        found = fleet([alloc, saved(tmp_path, ALLOC, f"d{count}", slower), alloc], declared)
        assert len(found.slower) == count and found.summary.tables[1].notes == notes


def test_runs_of_other_commands_and_an_unknown_gpu_are_said_and_share_no_figure():
    nameless = load(RECORDED[1])
    nameless.device = None
    found = fleet([load(RECORDED[0]), load(ALLOC), nameless], declared)
    assert found.summary.tables[0].title == "memprof check: 3 runs against the fleet's median"
    assert [row[1:] for row in found.summary.tables[0].rows] == [
        ["NVIDIA H200", "0", "-"],
        ["NVIDIA H200", "0", "-"],
        ["-", "0", "-"],
    ]
    assert found.summary.conclusions == [
        "0 figures in all 3 runs.",
        "The runs are of different commands (alloc, check).",
        "The runs are of different GPU models (NVIDIA H200, an unknown GPU): an outlier may be "
        "its model, not its GPU.",
        "Slower than the fleet beyond 10% and their noise: none.",
    ]


def test_only_figures_every_run_holds_and_timed_above_zero_are_compared():
    """The first run lacks one figure, the second another, the third timed one at zero: the
    two left are compared, each in the first run's order."""
    runs = [load(RECORDED[n]) for n in range(3)]
    del runs[0].measurements[1]
    del runs[1].measurements[3]
    zero = runs[2].measurements[2]
    runs[2].measurements[2] = msgspec.structs.replace(
        zero, samples_ms=[0.0] * len(zero.samples_ms), throughput_ms=[], events_ms=[]
    )
    found = fleet(runs, declared)
    assert found.summary.conclusions[0] == "2 figures in all 3 runs."
    assert [d.label for d in found.deviations[::3]] == [
        "[CUDA memcpy HtoD] (pinned) [gpu], 64 MiB",
        "[CUDA memcpy DtoD] (device) [gpu], 1 GiB",
    ]


def test_a_figures_noise_is_that_of_the_batches_its_median_is_of(tmp_path):
    """Its back-to-back batches (throughput_ms) noisy, its single copies quiet: 15% slow is
    within the batches' noise, so not an outlier."""
    runs = [load(RECORDED[n]) for n in range(3)]
    data = json.loads(RECORDED[3].read_text())
    m = data["measurements"][4]
    spread = [0.6, 0.8, 1.15, 1.6, 2.2]
    m["throughput_ms"] = [t * s for t, s in zip(m["throughput_ms"], spread, strict=True)]
    m["samples_ms"] = [t * 1.15 for t in m["samples_ms"]]
    m["events_ms"] = [t * 1.15 for t in m.get("events_ms") or []]
    (tmp_path / "gpu3.json").write_text(json.dumps(data))
    found = fleet([*runs, load(tmp_path / "gpu3.json")], declared)
    mine = [d for d in found.deviations if d.run == 3 and "DtoD" in d.label]
    assert mine[0].ratio > 1.10 and not mine[0].outlier


def test_two_runs_name_no_outlier_in_either_table(tmp_path):
    """A median of two cannot single one out: GPU 1 1.3x as slow is neither counted nor listed."""
    found = fleet([load(RECORDED[0]), saved(tmp_path, RECORDED[1], "g1", {0: 1.3})], declared)
    [per_run] = found.summary.tables  # no table of figures with an outlier
    assert [row[2] for row in per_run.rows] == ["0", "0"]
    assert per_run.rows[1][3].endswith("(+13.0%)") and found.slower == []  # 1.3 / 1.15
