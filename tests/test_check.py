"""`memprof check` and `check-pairs` on recorded results: every line PASS, WARN and FAIL, the
exit code, the reference results. The results are recorded ones (tests/check_results.py),
edited here to be slow, throttled, on a degraded link or beside another process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from memprof.cli import app
from memprof.experiments import check, load, summarize
from memprof.experiments.check import judge, lines, pair_lines, reference_for
from memprof.model.gpustate import GpuState, NvLink, OtherProcess
from memprof.model.results import Result
from memprof.output.render import render_result
from tests.check_results import check_result, pairs_result, slower
from tests.conftest import FIXTURES, replace
from tests.test_gpu_state import healthy

WHATS = [
    "PCIe link trained to its capability",
    "Pinned host → device",
    "Pinned device → host",
    "Both directions at once",
    "Device copy (read + write)",
    "No clock held down during the run",
    "No other process on the GPU",
]


@pytest.fixture(autouse=True)
def no_shipped_references(tmp_path, monkeypatch):
    """Tests choose their references: an empty folder unless they fill it."""
    folder = tmp_path / "references"
    folder.mkdir()
    monkeypatch.setattr(check, "REFERENCE_FOLDER", folder)
    check._references.cache_clear()
    yield folder
    check._references.cache_clear()


def verdicts(result: Result) -> dict[str, str]:
    return {line.what: line.verdict for line in lines(result, reference_for(result)[0])}


def measured(result: Result, what: str) -> str:
    return next(line.measured for line in lines(result, None) if line.what == what)


def watched(result: Result, **changes) -> Result:
    """The result as a run with NVML records it: a healthy H200, edited."""
    result.gpu_states = [healthy(**changes)]
    return result


def test_a_healthy_h200_passes_every_line():
    result = watched(check_result())
    assert list(verdicts(result)) == WHATS
    assert set(verdicts(result).values()) == {"PASS"}
    assert summarize(result).failed == []
    assert measured(result, "Pinned host → device") == "55.5 GB/s (88%)"
    assert measured(result, "Device copy (read + write)") == "4288 GB/s (89%)"


def test_the_expectation_names_the_ceiling_and_its_share():
    found = {line.what: line.expected for line in lines(watched(check_result()), None)}
    assert found["Pinned host → device"] == ">= 53.6 GB/s (85% of PCIe's 63.0)"
    assert found["Device copy (read + write)"] == ">= 3851 GB/s (80% of HBM's 4814)"
    assert found["Both directions at once"] == "each >= 80% of its rate alone"


@pytest.mark.parametrize(
    ("operation", "gb_per_s", "what", "verdict"),
    [
        ("h2d", 53.7, "Pinned host → device", "PASS"),  # just above 85% of 63.0
        ("h2d", 50.0, "Pinned host → device", "WARN"),  # below 85%, above 90% of it
        ("h2d", 40.0, "Pinned host → device", "FAIL"),  # a run beside another copy
        ("d2h", 47.0, "Pinned device → host", "FAIL"),  # under 90% of 53.6
        ("d2d", 3700.0, "Device copy (read + write)", "WARN"),  # 77% of HBM
        ("d2d", 3000.0, "Device copy (read + write)", "FAIL"),
        ("d2h_at_once", 42.0, "Both directions at once", "WARN"),  # 76% of 55.4 alone
        ("h2d_at_once", 30.0, "Both directions at once", "FAIL"),  # 54% of 55.5 alone
    ],
)
def test_a_slow_figure_warns_or_fails_on_its_own_line(operation, gb_per_s, what, verdict):
    result = slower(watched(check_result()), operation, gb_per_s)
    found = verdicts(result)
    assert found[what] == verdict
    assert {line for line, said in found.items() if said != "PASS"} == (
        {what} if verdict != "PASS" else set()
    )


def test_a_link_trained_below_its_capability_fails_its_line():
    result = watched(check_result(), pcie_generation=4)
    found = verdicts(result)
    assert found["PCIe link trained to its capability"] == "FAIL"
    assert measured(result, "PCIe link trained to its capability") == "Gen4 x16 [NVML]"
    # the copies are then judged against the link they had: 55.5 of Gen4's 31.5
    assert measured(result, "Pinned host → device") == "55.5 GB/s (176%)"
    narrow = watched(check_result(), pcie_width=8)
    assert verdicts(narrow)["PCIe link trained to its capability"] == "FAIL"


def test_a_gpu_its_slot_holds_back_warns():
    result = watched(check_result(), pcie_gpu_max_generation=6)
    assert verdicts(result)["PCIe link trained to its capability"] == "WARN"


@pytest.mark.parametrize(
    ("reasons", "verdict"),
    [
        (["gpu_idle", "sync_boost"], "PASS"),
        (["sw_power_cap"], "WARN"),
        (["applications_clocks_setting"], "WARN"),
        (["hw_thermal_slowdown"], "FAIL"),
        (["sw_power_cap", "hw_slowdown"], "FAIL"),
    ],
)
def test_clocks_held_down_warn_and_hardware_slowdowns_fail(reasons, verdict):
    result = watched(check_result(), clock_reasons=reasons)
    assert verdicts(result)["No clock held down during the run"] == verdict


def test_another_process_on_the_gpu_warns():
    result = watched(check_result(), other_processes=[OtherProcess(4242, "compute", 1 << 30)])
    assert verdicts(result)["No other process on the GPU"] == "WARN"
    assert measured(result, "No other process on the GPU") == "pid 4242 (compute)"


def test_without_nvml_the_state_lines_warn_unknown():
    result = check_result()
    result.gpu_states = None
    found = verdicts(result)
    assert found["No clock held down during the run"] == "WARN"
    assert found["No other process on the GPU"] == "WARN"
    assert found["PCIe link trained to its capability"] == "PASS"  # sysfs said so
    assert measured(result, "No other process on the GPU") == "unknown (not recorded)"


def test_where_nvml_could_not_be_read_the_state_lines_say_why():
    result = check_result()
    result.gpu_states = [GpuState(0, "0000:00:06.0", unavailable="NVML_ERROR_NO_PERMISSION")]
    for what in ("No clock held down during the run", "No other process on the GPU"):
        (line,) = [line for line in lines(result, None) if line.what == what]
        assert (line.verdict, line.measured, line.expected) == (
            "WARN",
            "unknown (NVML_ERROR_NO_PERMISSION)",
            "none",
        )


def whole(line) -> tuple:
    return (line.verdict, line.what, line.measured, line.expected)


def test_each_state_line_reads_whole():
    link, *_, clocks, processes = lines(watched(check_result()), None)
    assert whole(link) == (
        "PASS",
        "PCIe link trained to its capability",
        "Gen5 x16 [NVML]",
        "Gen5 x16, its maximum",
    )
    assert whole(clocks) == ("PASS", "No clock held down during the run", "none", "none")
    assert whole(processes) == ("PASS", "No other process on the GPU", "none", "none")
    below = lines(watched(check_result(), pcie_generation=4), None)[0]
    assert (below.verdict, below.expected) == ("FAIL", "Gen5 x16, its maximum")
    slot = watched(check_result(), pcie_max_generation=4, pcie_generation=4)
    assert lines(slot, None)[0].expected == "Gen5: the GPU can, its slot allows Gen4"
    two = watched(
        check_result(),
        clock_reasons=["sw_power_cap", "sw_thermal_slowdown"],
        other_processes=[OtherProcess(4242, "compute", 1 << 30), OtherProcess(7, "graphics", 0)],
    )
    *_, clocks, processes = lines(two, None)
    assert whole(clocks) == (
        "FAIL",
        "No clock held down during the run",
        "software power cap, software thermal slowdown",
        "none",
    )
    assert whole(processes) == (
        "WARN",
        "No other process on the GPU",
        "pid 4242 (compute), pid 7 (graphics)",
        "none",
    )


@pytest.mark.parametrize("field", ["clock_reasons", "other_processes"])
def test_a_state_nvml_read_without_a_lines_part_warns_unknown(field):
    what = {"clock_reasons": "No clock held down during the run"}.get(
        field, "No other process on the GPU"
    )
    (line,) = [x for x in lines(watched(check_result(), **{field: None}), None) if x.what == what]
    assert whole(line) == ("WARN", what, "unknown (not recorded)", "none")


def test_a_figure_not_measured_fails_and_one_without_a_ceiling_warns():
    result = check_result()
    result.measurements = [
        m for m in result.measurements if m.operation not in ("h2d", "h2d_at_once")
    ]
    found = {line.what: line for line in lines(result, None)}
    for what in ("Pinned host → device", "Both directions at once"):
        assert whole(found[what]) == ("FAIL", what, "not measured", "a figure")
        assert found[what].judged == found[what].sources == ()
    result = check_result()
    result.measurements[0] = replace(result.measurements[0], bytes=0)  # no GB/s to judge
    assert whole(lines(result, None)[1]) == (
        "FAIL",
        "Pinned host → device",
        "not measured",
        "a figure",
    )
    # the link the GPU trained at known, not its maximum
    result = check_result()
    result.device = replace(result.device, pcie_max_generation=None)
    assert lines(result, None)[0].measured == "unknown"
    # no link recorded at all: neither NVML's nor the device facts'
    result = check_result()
    result.device = replace(result.device, pcie_generation=None, pcie_max_generation=None)
    link, h2d = lines(result, None)[:2]
    assert whole(link) == (
        "WARN",
        "PCIe link trained to its capability",
        "unknown",
        "its maximum (NVML or sysfs did not say)",
    )
    assert whole(h2d) == (
        "WARN",
        "Pinned host → device",
        "55.5 GB/s",
        "unknown: the ceiling was not recorded",
    )
    assert h2d.sources == (check.figure_of(result, "h2d").measurement,)
    # a retry's copies: the cells are the attempt's
    from tests.test_check_gates import retried, retry

    again = retried(result, retry(result, "h2d", 1, h2d=50.0))
    line = lines(again, None)[1]
    assert line.measured == "50.0 GB/s"
    assert [one.name for one in line.sources] == ["retry 1"]


def test_judge_bands():
    assert judge(100, 100) == "PASS"
    assert judge(99.9, 100) == "WARN"
    assert judge(90, 100) == "WARN"
    assert judge(89.9, 100) == "FAIL"
    assert judge(100, 90, reference=112) == "WARN"  # under 90% of a known-good figure
    assert judge(101, 90, reference=112) == "PASS"
    assert judge(90, 80, reference=100) == "PASS"  # exactly 90% of a known-good figure
    assert judge(89.99, 80, reference=100) == "WARN"


def save(result: Result, path: Path) -> Path:
    path.write_text(result.to_json())
    return path


def test_report_exits_1_on_a_fail_and_0_on_warnings(tmp_path):
    runner = CliRunner()
    warned = save(watched(check_result(), clock_reasons=["sw_power_cap"]), tmp_path / "w.json")
    ran = runner.invoke(app, ["report", str(warned)], env={"COLUMNS": "80"})
    assert ran.exit_code == 0, ran.output
    failed = save(slower(watched(check_result()), "h2d", 30.0), tmp_path / "f.json")
    ran = runner.invoke(app, ["report", str(failed)], env={"COLUMNS": "80"})
    assert ran.exit_code == 1
    assert "FAIL     Pinned host → device" in ran.stdout
    assert "memprof: error: check failed: GPU 0 (NVIDIA H200): Pinned host → device: 30.0 GB/s" in (
        ran.stderr
    )


def test_the_check_table_reads_in_80_columns():
    console = Console(width=80, record=True, color_system=None)
    result = watched(check_result(), other_processes=[OtherProcess(4242, "compute", None)])
    render_result(result, summarize(result), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "memprof check, GPU 0 (NVIDIA H200): 6 PASS, 1 WARN, 0 FAIL." in text


# -- references ----------------------------------------------------------------------------------


def test_without_a_reference_the_check_says_so(no_shipped_references):
    reference, notes = reference_for(check_result())
    assert reference is None
    assert notes == [
        "No reference result for NVIDIA H200 ships with this memprof: expectations come from "
        "the device's theoretical figures only."
    ]


def test_a_reference_of_the_same_gpu_model_adds_its_figures(no_shipped_references):
    known_good = slower(watched(check_result()), "d2d", 4600.0)
    save(known_good, no_shipped_references / "h200.json")
    other = replace(
        check_result(),
        device=replace(check_result().device, name="NVIDIA H100 80GB HBM3"),
    )
    save(other, no_shipped_references / "h100.json")
    result = slower(watched(check_result()), "d2d", 4000.0)  # 83% of HBM: above the floor
    reference, notes = reference_for(result)
    assert reference.device.name == "NVIDIA H200"
    assert notes[0].startswith("Reference: memprof/references/h200.json, a check of NVIDIA H200")
    found = {line.what: line for line in lines(result, reference)}
    assert found["Device copy (read + write)"].verdict == "WARN"  # under 90% of 4600
    assert found["Device copy (read + write)"].expected.endswith("; reference 4600")
    assert found["Pinned host → device"].verdict == "PASS"


def test_a_reference_at_another_size_is_not_compared(no_shipped_references):
    known_good = slower(watched(check_result()), "d2d", 4600.0)
    known_good.parameters = replace(known_good.parameters, device_power=28)
    for m in known_good.measurements:  # the same copies' rate at 1 GiB
        if m.operation == "d2d":
            m.bytes = 1 << 30
            m.throughput_ms = m.samples_ms = [t * 4 for t in m.throughput_ms]
    save(known_good, no_shipped_references / "h200.json")
    result = slower(watched(check_result()), "d2d", 4000.0)
    found = {line.what: line for line in lines(result, reference_for(result)[0])}
    assert found["Device copy (read + write)"].verdict == "PASS"
    assert "reference" not in found["Device copy (read + write)"].expected


def test_a_broken_reference_is_named_and_skipped(no_shipped_references):
    (no_shipped_references / "broken.json").write_text("{not json")
    pinned = json.loads(check_result().to_json())
    pinned["command"] = "pinned"
    (no_shipped_references / "pinned.json").write_text(json.dumps(pinned))
    reference, notes = reference_for(check_result())
    assert reference is None
    assert notes[0].startswith("reference broken.json not used: broken.json is not a memprof")
    assert notes[1].startswith("reference pinned.json not used:")


def test_the_package_ships_references_only_as_recorded_results():
    from importlib import resources

    check._references.cache_clear()
    shipped = [entry.name for entry in resources.files("memprof.references").iterdir()]
    for name in shipped:
        assert name.endswith((".json", ".py")) or name == "__pycache__", name
    found, problems = check._references(None)
    assert problems == ()
    assert all(reference.command == "check" for _, reference in found)


# -- every pair of GPUs ---------------------------------------------------------------------


def switch_links() -> list[NvLink]:
    return [NvLink(i, True, "4.0", 26562, "0000:ff:00.0", "switch") for i in range(18)]


def paired(result: Result) -> Result:
    result.gpu_states = [
        healthy(0, nvlinks=switch_links()),
        healthy(1, pci_bus_id="0000:00:07.0", nvlinks=switch_links()),
    ]
    return result


def pair_verdicts(result: Result) -> dict[str, tuple[str, str]]:
    return {line.what: (line.verdict, line.measured) for line in pair_lines(result)}


def test_pairs_over_nvlink_pass_at_their_recorded_rate():
    found = pair_verdicts(paired(pairs_result()))
    assert found["GPU 0 → GPU 1"] == ("PASS", "393 GB/s (82%)")
    assert found["GPU 1 → GPU 0"][0] == "PASS"
    assert found["GPU 0 ↔ GPU 1 both at once"] == ("PASS", "390 + 390 GB/s (99%, 99%)")


def test_a_slow_pair_fails_and_an_unknown_link_warns():
    result = slower(paired(pairs_result()), "peer", 250.0)  # 52% of 478
    found = pair_verdicts(result)
    assert found["GPU 0 → GPU 1"][0] == "FAIL"
    assert summarize(result).failed[0] == "pairs: GPU 0 → GPU 1: 250 GB/s (52%)"
    unknown = pair_verdicts(pairs_result())  # no NVML state: NVLink unknown
    assert unknown["GPU 0 → GPU 1"] == ("WARN", "393 GB/s")


def test_gpus_without_peer_access_warn():
    result = paired(pairs_result())
    result.extra = replace(result.extra, peer_access=[[True, False], [False, True]])
    assert pair_verdicts(result) == {
        "GPU 0 ↔ GPU 1 peer access": ("WARN", "no (cuDeviceCanAccessPeer)")
    }


def test_a_pair_without_peer_access_expects_it_and_the_pairs_after_it_are_judged():
    from memprof.cli_gates import results_junit

    result = paired(pairs_result())
    third = replace(result.extra.devices[1], index=2, pci_bus_id="0000:00:08.0")
    access = [[True, False, True], [False, True, True], [True, True, True]]
    result.extra = replace(result.extra, devices=[*result.extra.devices, third], peer_access=access)
    found = pair_lines(result)
    assert whole(found[0]) == (
        "WARN",
        "GPU 0 ↔ GPU 1 peer access",
        "no (cuDeviceCanAccessPeer)",
        "yes",
    )
    assert [line.what for line in found[1:]] == [
        "GPU 0 → GPU 2",
        "GPU 2 → GPU 0",
        "GPU 0 ↔ GPU 2 both at once",
        "GPU 1 → GPU 2",
        "GPU 2 → GPU 1",
        "GPU 1 ↔ GPU 2 both at once",
    ]
    both = pair_lines(paired(pairs_result()))[2]
    assert (both.what, both.expected) == (
        "GPU 0 ↔ GPU 1 both at once",
        "each >= 80% of its rate alone",
    )
    xml = results_junit([paired(pairs_result())])
    assert '<testsuite name="memprof check-pairs, every pair of GPUs"' in xml


def test_check_on_every_gpu_ends_with_its_pairs():
    from memprof.experiments import experiment_named

    experiment = experiment_named("check")
    assert experiment.gpus == "one_or_every"
    assert experiment_named(experiment.every_gpu_then).name == "check-pairs"
    assert experiment_named("check-pairs").gpus == "every"


def test_a_run_counts_its_steps_for_the_progress_bar():
    from memprof.experiments.base import RunContext

    seen = []
    ctx = RunContext(params=None, progress=lambda what, done, total: seen.append((what, done)))
    step = ctx.steps(3)
    for what in ("link", "copies", "device"):
        step(what)
    assert seen == [("link", 0), ("copies", 1), ("device", 2)]


@pytest.mark.parametrize(
    "path",
    sorted(FIXTURES.glob("*check*.json")),
    ids=lambda path: path.stem,
)
def test_every_recorded_check_is_judged_line_by_line(path):
    """The checks recorded on the GPU: every line judged, the verdicts and exit code agree."""
    result = load(path)
    judged = lines(result, None) if result.command == "check" else pair_lines(result)
    assert judged and all(line.verdict in ("PASS", "WARN", "FAIL") for line in judged)
    summary = summarize(result)
    assert len(summary.failed) == sum(line.verdict == "FAIL" for line in judged)
