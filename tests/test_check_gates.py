"""`memprof check` as a gate: floors set per line, a reference saved on the user's machine
(--reference), and --retries: what is retried, when it stops, what the Result keeps and what
the screen and JUnit say. The retry loop's GPU side runs on tests/fakegpu.py; the figures
judged are recorded ones (tests/check_results.py) with retries made of recorded figures."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import InvalidArgument
from memprof.experiments import check, load, shape_of, summarize
from memprof.experiments.base import RunContext, declared_keys
from memprof.experiments.check import (
    CheckGpu,
    CheckParams,
    CheckRetry,
    RetriedCopies,
    figure,
    lines,
    read_reference,
    reference_figures,
    retry_until_pass,
)
from memprof.model.ceilings import hbm_ceiling, pcie_ceiling
from memprof.model.results import Result
from tests.check_results import check_result, slower
from tests.conftest import replace
from tests.fakegpu import FakeSession
from tests.test_gpu_state import healthy

runner = CliRunner()


def load_reference(path, facts):
    """--reference as a run takes it: read before the GPU, held to its model inside."""
    return reference_figures(path, read_reference(path), facts)


@pytest.fixture(autouse=True)
def no_shipped_references(tmp_path, monkeypatch):
    folder = tmp_path / "references"
    folder.mkdir()
    monkeypatch.setattr(check, "REFERENCE_FOLDER", folder)
    check._references.cache_clear()
    yield folder
    check._references.cache_clear()


def watched(result: Result) -> Result:
    result.gpu_states = [healthy()]
    return result


def with_params(result: Result, **changes) -> Result:
    result.parameters = dataclasses.replace(result.parameters, **changes)
    return result


def verdict(result: Result, what: str) -> str:
    return next(line.verdict for line in lines(result, None) if line.what == what)


def per_copy_ms(result: Result, operation: str, gb_per_s: float) -> list[float]:
    """Batches of copies at `gb_per_s`, as a retry keeps them (one per --repeat)."""
    nbytes = (
        2 * (4 << result.parameters.device_power)
        if operation == "d2d"
        else 4 << result.parameters.power
    )
    return [nbytes / (gb_per_s * 1e9) * 1e3] * result.parameters.repeat


def retry(result: Result, line: str, attempt: int, **gb_per_s: float) -> CheckRetry:
    """A retry of `line` whose copies ran at the given GB/s (recorded figures otherwise)."""
    copies = []
    for operation in check.LINE_OPERATIONS[line]:
        rate = gb_per_s.get(operation, figure(result, operation))
        copies.append(RetriedCopies(operation, 17, per_copy_ms(result, operation, rate)))
    return CheckRetry(line, attempt, copies)


def retried(result: Result, *retries: CheckRetry) -> Result:
    result.parameters = dataclasses.replace(result.parameters, retries=len(retries) or 1)
    result.extra = dataclasses.replace(result.extra, retries=list(retries))
    return result


def report(result: Result, tmp_path, *options: str):
    path = tmp_path / "check.json"
    path.write_text(result.to_json())
    return runner.invoke(app, ["report", str(path), *options], env={"COLUMNS": "80"})


# -- floors, per line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "what", "operation"),
    [
        ("h2d_floor_pct", "Pinned host → device", "h2d"),
        ("d2h_floor_pct", "Pinned device → host", "d2h"),
        ("d2d_floor_pct", "Device copy (read + write)", "d2d"),
    ],
)
def test_a_line_passes_at_its_own_floor_and_warns_just_above_it(field, what, operation):
    result = watched(check_result())
    ceiling = pcie_ceiling(result) if operation != "d2d" else hbm_ceiling(result.device)
    share = figure(result, operation) / ceiling.gb_per_s  # 0.881 of the link, 0.891 of HBM
    at, above = int(share * 100), int(share * 100) + 1
    assert verdict(with_params(watched(check_result()), **{field: at}), what) == "PASS"
    assert verdict(with_params(watched(check_result()), **{field: above}), what) == "WARN"
    others = {
        line.what for line in lines(with_params(watched(check_result()), **{field: above}), None)
    }
    assert what in others
    failing = with_params(watched(check_result()), **{field: int(share * 100 / 0.9) + 1})
    assert verdict(failing, what) == "FAIL"  # under 90% of the floor


def test_the_floor_of_both_at_once_is_its_own():
    result = watched(check_result())
    together = min(figure(result, f"{op}_at_once") / figure(result, op) for op in ("h2d", "d2h"))
    at = int(together * 100)
    assert (
        verdict(
            with_params(watched(check_result()), at_once_floor_pct=at), "Both directions at once"
        )
        == "PASS"
    )
    assert (
        verdict(
            with_params(watched(check_result()), at_once_floor_pct=at + 1),
            "Both directions at once",
        )
        == "WARN"
    )


def test_the_expectation_and_the_header_say_the_floor_used(tmp_path):
    result = with_params(watched(check_result()), h2d_floor_pct=70)
    found = {line.what: line.expected for line in lines(result, None)}
    assert found["Pinned host → device"] == ">= 44.1 GB/s (70% of PCIe's 63.0)"
    assert found["Pinned device → host"] == ">= 53.6 GB/s (85% of PCIe's 63.0)"
    shown = report(result, tmp_path)
    assert "h2d_floor_pct=70" in shown.stdout


def test_floors_are_options_in_percent_refused_outside_1_to_100():
    ran = runner.invoke(app, ["check", "--h2d-floor", "101"])
    assert ran.exit_code == 2
    assert "101 is outside the allowed range 1 to 100" in ran.output
    help_text = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "100"}).output
    for flag in ("--h2d-floor", "--d2h-floor", "--at-once-floor", "--d2d-floor"):
        assert flag in help_text
    assert "percentage of the link's theoretical rate" in " ".join(help_text.split())


def test_a_file_saved_before_floors_existed_is_judged_at_the_old_ones():
    result = load(check.Path(__file__).parent / "fixtures" / "h200_check.json")
    assert (result.parameters.h2d_floor_pct, result.parameters.d2d_floor_pct) == (85, 80)
    assert result.parameters.retries == 0 and result.extra.retries == []


# -- a reference saved on this machine -----------------------------------------------------------


def test_a_reference_file_of_this_gpu_model_keeps_its_figures(tmp_path):
    known_good = slower(watched(check_result()), "d2d", 4600.0)
    path = tmp_path / "mine.json"
    path.write_text(known_good.to_json())
    reference = load_reference(str(path), check_result().device)
    assert reference.file == str(path) and reference.gpu == "NVIDIA H200"
    assert reference.d2d_gb_per_s == pytest.approx(4600.0)
    assert reference.h2d_gb_per_s == figure(known_good, "h2d")
    result = slower(watched(check_result()), "d2d", 4139.0)  # 89.98% of 4600: under 90%
    result.extra = dataclasses.replace(result.extra, reference=reference)
    found = {line.what: line for line in lines(result, reference)}
    assert found["Device copy (read + write)"].verdict == "WARN"
    assert found["Device copy (read + write)"].expected.endswith("; reference 4600")
    result = slower(watched(check_result()), "d2d", 4141.0)  # 90.02%
    assert {line.what: line for line in lines(result, reference)}[
        "Device copy (read + write)"
    ].verdict == "PASS"


def test_a_run_with_a_reference_file_is_judged_by_it_again_anywhere(tmp_path):
    known_good = slower(watched(check_result()), "h2d", 62.0)
    path = tmp_path / "mine.json"
    path.write_text(known_good.to_json())
    result = watched(check_result())  # 55.5 GB/s: under 90% of 62
    result.extra = dataclasses.replace(
        result.extra, reference=load_reference(str(path), result.device)
    )
    path.unlink()  # the file is gone: the run's Extra holds what it was judged by
    shown = report(result, tmp_path)
    assert shown.exit_code == 0
    assert f"Reference: {path} (--reference), a check of NVIDIA H200" in " ".join(
        shown.stdout.split()
    )
    assert "WARN     Pinned host → device" in shown.stdout


def test_a_reference_of_another_gpu_or_command_is_refused_in_one_line(tmp_path):
    other = check_result()
    other.device = replace(other.device, name="NVIDIA H100 80GB HBM3")
    path = tmp_path / "h100.json"
    path.write_text(other.to_json())
    with pytest.raises(InvalidArgument, match="a check of NVIDIA H100 80GB HBM3, but this GPU"):
        load_reference(str(path), check_result().device)
    pinned = check.Path(__file__).parent / "fixtures" / "h200_pinned_p20.json"
    whole = f"--reference {pinned}: a result of memprof pinned, not of memprof check on one GPU"
    with pytest.raises(InvalidArgument, match=f"^{re.escape(whole)}$"):
        load_reference(str(pinned), check_result().device)
    assert load_reference(None, check_result().device) is None


def test_the_reference_is_never_the_file_the_run_saves(tmp_path):
    path = tmp_path / "check.json"
    path.write_text(check_result().to_json())
    ran = runner.invoke(app, ["check", "--reference", str(path), "--json", str(path)])
    assert ran.exit_code == 2
    assert "would overwrite the input" in ran.output


# -- retries -----------------------------------------------------------------------------------


def scripted(verdicts: dict[str, list[str]]):
    """verdict(line): the next of the line's verdicts each time a new attempt was made."""
    made: dict[str, int] = {}
    measured = []

    def verdict(line: str) -> str:
        return verdicts[line][made.get(line, 0)]

    def measure_again(line: str, attempt: int) -> None:
        made[line] = made.get(line, 0) + 1
        assert attempt == made[line]
        measured.append((line, attempt))

    return verdict, measure_again, measured


def test_only_lines_that_did_not_pass_are_measured_again_until_they_pass():
    verdict, again, measured = scripted(
        {
            "h2d": ["FAIL", "PASS"],
            "d2h": ["PASS"],
            "at_once": ["WARN", "WARN", "PASS"],
            "d2d": ["PASS"],
        }
    )
    retry_until_pass(verdict, again, retries=3)
    assert measured == [("h2d", 1), ("at_once", 1), ("at_once", 2)]


def test_retries_stop_at_n_and_zero_retries_measure_nothing():
    verdict, again, measured = scripted({"h2d": ["FAIL"] * 5, "d2h": ["WARN"] * 5})
    retry_until_pass(verdict, again, retries=2, lines=("h2d", "d2h"))
    assert measured == [("h2d", 1), ("h2d", 2), ("d2h", 1), ("d2h", 2)]
    verdict, again, measured = scripted({"h2d": ["FAIL"] * 5})
    retry_until_pass(verdict, again, retries=0, lines=("h2d",))
    assert measured == []


def fake_run(monkeypatch, verdicts: dict[str, list[str]], retries: int = 2):
    """check's run() on the fake GPU, each line's verdicts scripted per attempt."""
    made = {line: 0 for line in check.LINE_OPERATIONS}
    measured = check._CheckCopies.measure

    def latest(result, reference, line):
        made[line] = len([r for r in result.extra.retries if r.line == line])
        return verdicts.get(line, ["PASS"])[made[line]]

    monkeypatch.setattr(check, "_latest", latest)
    session = FakeSession({}, declared_keys(CheckGpu))
    facts = SimpleNamespace(name="NVIDIA H200", attributes={})
    seen = []
    params = CheckParams(power=10, device_power=11, repeat=2, retries=retries)
    ctx = RunContext(params, lambda *step: seen.append(step), session=session, facts={0: facts})
    calls = []
    monkeypatch.setattr(
        check._CheckCopies,
        "measure",
        lambda self, line, profiler, label="": (
            calls.append((line, label)) or measured(self, line, profiler, label)
        ),
    )
    extra = CheckGpu().run(ctx)
    session.close()
    return extra, ctx, seen, calls, session


def test_a_run_measures_a_failing_line_again_on_its_own_profiler_and_keeps_each_attempt(
    monkeypatch,
):
    extra, ctx, seen, calls, session = fake_run(
        monkeypatch, {"h2d": ["FAIL", "WARN", "PASS"], "at_once": ["WARN", "PASS"]}
    )
    assert [(r.line, r.attempt) for r in extra.retries] == [("h2d", 1), ("h2d", 2), ("at_once", 1)]
    assert [[c.operation for c in r.copies] for r in extra.retries] == [
        ["h2d"],
        ["h2d"],
        ["h2d", "d2h", "h2d_at_once", "d2h_at_once"],  # judged against each alone, again
    ]
    assert all(len(c.per_copy_ms) == 2 and c.batch >= 1 for r in extra.retries for c in r.copies)
    # the run's measurements are the first attempts only: retries went to their own profilers
    first = session.profiler.measurements()
    assert sorted(m.operation for m in first if m.group == "gpu") == sorted(
        ["h2d", "d2h", "h2d_at_once", "d2h_at_once", "d2d"]
    )
    assert all(len(m.throughput_ms) == 2 for m in first if m.group == "gpu")
    # every attempt is verified, each retry's checks named for it
    names = [c.name for c in ctx.checks]
    assert "retry 1, host → device, pinned, 4 KiB" in names
    assert "retry 1, both at once, device → host, pinned, 4 KiB" in names
    assert all(c.passed for c in ctx.checks)
    assert calls[4:] == [
        ("h2d", "retry 1, "),
        ("h2d", "retry 2, "),
        ("at_once", "retry 1, "),
        ("h2d", "retry 1, "),  # both at once measures each direction alone again first
        ("d2h", "retry 1, "),
    ]
    assert session.gpu.leaks() == {}
    # progress: the four lines, then each retry, in order, out of 2 retries of each line
    # that did not pass, ending at that total
    assert seen == [
        ("pinned host → device, 4 KiB", 0, 4),
        ("pinned device → host, 4 KiB", 1, 4),
        ("pinned, both directions at once, 4 KiB", 2, 4),
        ("device to device, 8 KiB", 3, 4),
        ("retry 1 of pinned host → device, 4 KiB", 4, 4 + 2 * 2),
        ("retry 2 of pinned host → device, 4 KiB", 5, 8),
        ("retry 1 of pinned, both directions at once, 4 KiB", 6, 8),
        ("done", 8, 8),
    ]


def test_a_run_verifies_every_copy_it_measures_each_named_for_its_attempt(monkeypatch):
    _, ctx, _, _, _ = fake_run(monkeypatch, {"d2d": ["FAIL", "PASS"]}, retries=1)
    assert [c.name for c in ctx.checks] == [
        "host → device, pinned, 4 KiB",
        "device → host, pinned, 4 KiB",
        "both at once, host → device, pinned, 4 KiB",
        "both at once, device → host, pinned, 4 KiB",
        "device → device, 8 KiB, its first and last 8 KiB",
        "retry 1, device → device, 8 KiB, its first and last 8 KiB",
    ]
    assert all(c.passed for c in ctx.checks)


def test_a_run_asks_for_the_memory_its_buffers_take_before_it_allocates(monkeypatch):
    from memprof.core import memory

    asked = []
    monkeypatch.setattr(memory, "require_memory", lambda session, **need: asked.append(need))
    fake_run(monkeypatch, {})
    # 4 KiB host copies (power 10), an 8 KiB device copy (device_power 11): two pinned
    # buffers and the values they hold; two device buffers of each size
    assert asked == [{"device_bytes": 2 * 4096 + 2 * 8192, "host_bytes": 3 * 4096}]


def test_a_run_without_retries_or_failures_measures_each_line_once(monkeypatch):
    extra, _, seen, calls, _ = fake_run(monkeypatch, {"h2d": ["FAIL"] * 3}, retries=0)
    assert extra.retries == [] and len(calls) == 4
    assert seen[-1] == ("done", 4, 4)
    extra, _, _, calls, _ = fake_run(monkeypatch, {}, retries=2)
    assert extra.retries == [] and len(calls) == 4


def test_a_run_measures_again_by_the_reference_it_is_held_to(
    monkeypatch, tmp_path, no_shipped_references
):
    """What fails and what passes on a retry is judged against the reference the run keeps
    (--reference), else the one memprof ships for the GPU model; never against none."""
    shipped = check_result()
    (no_shipped_references / "h200.json").write_text(shipped.to_json())
    given = slower(check_result(), "h2d", 60.0)
    path = tmp_path / "mine.json"
    path.write_text(given.to_json())
    facts = SimpleNamespace(name="NVIDIA H200", attributes={})
    held = []  # the reference each verdict was asked against

    def latest(result, reference, line):
        held.append(reference)
        tried = [r for r in result.extra.retries if r.line == line]
        return "PASS" if tried or line != "h2d" else "WARN"

    monkeypatch.setattr(check, "_latest", latest)
    for reference, expected in ((None, shipped), (str(path), given)):
        held.clear()
        session = FakeSession({}, declared_keys(CheckGpu))
        params = CheckParams(power=10, device_power=10, repeat=2, retries=1, reference=reference)
        inputs = CheckGpu().read_inputs(params)
        ctx = RunContext(
            params, lambda *step: None, session=session, facts={0: facts}, inputs=inputs
        )
        extra = CheckGpu().run(ctx)
        session.close()
        assert [(r.line, r.attempt) for r in extra.retries] == [("h2d", 1)]
        assert len(held) == 4 + 1  # which lines failed, then h2d before its one retry
        if reference is None:
            assert extra.reference is None
            assert all(one.to_json() == expected.to_json() for one in held)
        else:
            assert extra.reference == load_reference(reference, facts)
            assert all(one == extra.reference for one in held)
        assert extra.reference is None or extra.reference.h2d_gb_per_s == pytest.approx(60.0)


# -- what a retried run says -----------------------------------------------------------------


def test_a_passing_slowdown_reads_fail_then_pass_on_retry_1(tmp_path):
    result = slower(watched(check_result()), "h2d", 40.0)
    result = retried(result, retry(result, "h2d", 1, h2d=55.5))
    assert verdict(result, "Pinned host → device") == "PASS"
    shown = report(result, tmp_path)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert (
        "Pinned host → device: FAIL, then PASS on retry 1 (40.0 GB/s (63%); 55.5 GB/s (88%))."
    ) in text
    assert "7 PASS, 0 WARN, 0 FAIL (1 line measured again: above)." in text


def test_a_line_that_warned_against_its_reference_reads_warn_then_pass(tmp_path):
    known_good = slower(watched(check_result()), "h2d", 62.0)
    path = tmp_path / "mine.json"
    path.write_text(known_good.to_json())
    result = watched(check_result())  # 55.5 GB/s: over the floor, under 90% of 62
    reference = load_reference(str(path), result.device)
    result.extra = dataclasses.replace(result.extra, reference=reference)
    result = retried(result, retry(result, "h2d", 1, h2d=58.0))
    summary = summarize(result)
    assert summary.conclusions[0] == (
        "Pinned host → device: WARN, then PASS on retry 1 (55.5 GB/s (88%); 58.0 GB/s (92%))."
    )
    notes = summary.tables[0].notes
    assert notes[0].endswith(", median of 5; GB/s = 10^9 bytes/s; (n%) = share of the ceiling "
                             "(docs/ceilings.md).")  # fmt: skip
    assert notes[1] == (
        "PASS at or above the expectation; WARN below it (or under 90% of the reference's "
        "figure); FAIL under 90% of it. Clocks and processes: NVML, during the run."
    )
    assert notes[2].startswith(f"Reference: {path} (--reference), a check of NVIDIA H200")
    assert notes[3] == (
        "--retries 1: a throughput line that WARNed or FAILed was measured again until it "
        "PASSed; the table shows its last attempt."
    )


def test_the_last_attempt_stands_and_a_fail_on_the_last_retry_fails_the_run(tmp_path):
    result = slower(watched(check_result()), "h2d", 40.0)
    result = retried(result, retry(result, "h2d", 1, h2d=50.0), retry(result, "h2d", 2, h2d=41.0))
    assert verdict(result, "Pinned host → device") == "FAIL"
    shown = report(result, tmp_path)
    assert shown.exit_code == 1
    assert "FAIL, then WARN on retry 1, then FAIL on retry 2" in " ".join(shown.stdout.split())
    assert "Pinned host → device: 41.0 GB/s" in shown.stderr


def test_both_at_once_is_judged_against_its_own_attempt_alone():
    result = slower(watched(check_result()), "h2d_at_once", 30.0)  # 54% of 55.5 alone: FAIL
    assert verdict(result, "Both directions at once") == "FAIL"
    # the retry measured each direction alone slower too: 30 of 34 is 88%, a PASS
    again = retry(result, "at_once", 1, h2d=34.0, h2d_at_once=30.0, d2h_at_once=50.0)
    assert verdict(retried(result, again), "Both directions at once") == "PASS"


def test_the_loader_keeps_every_attempt_and_refuses_retries_that_disagree(tmp_path):
    result = slower(watched(check_result()), "h2d", 40.0)
    result = retried(result, retry(result, "h2d", 1, h2d=55.5))
    loaded = Result.from_json(result.to_json(), shape_of, "check.json")
    assert loaded.extra.retries == result.extra.retries

    def refused(edit) -> str:
        """The one line the loader refuses the edited file with, less the file's name."""
        document = json.loads(result.to_json())
        edit(document["extra"]["retries"][0], document)
        load_path = tmp_path / "edited.json"
        load_path.write_text(json.dumps(document))
        with pytest.raises(InvalidArgument) as raised:
            load(load_path)
        return str(raised.value).removeprefix(f"{load_path}: ")

    # each refusal names the field it refuses, whole
    assert refused(lambda r, d: r.update(attempt=2)) == (
        "extra.retries[0].attempt is 2, but it is retry 1 of 'h2d'"
    )
    assert refused(lambda r, d: d["parameters"].update(retries=0)) == (
        "extra.retries[0].attempt is 1, but parameters.retries is 0"
    )
    assert refused(lambda r, d: r["copies"][0].update(operation="d2h")) == (
        "extra.retries[0].copies measure ['d2h'], but a retry of 'h2d' measures ['h2d']"
    )
    assert refused(lambda r, d: r["copies"][0].update(per_copy_ms=[1.0, 1.0])) == (
        "extra.retries[0].copies[0].per_copy_ms holds 2 batches, but parameters.repeat is 5"
    )
    assert refused(lambda r, d: r["copies"][0].update(per_copy_ms=[1.0] * 4 + [0.0])) == (
        "extra.retries[0].copies[0].per_copy_ms holds a copy that took no time"
    )


def test_junit_says_every_attempt_and_fails_only_a_final_fail(tmp_path):
    import xml.etree.ElementTree as ET

    result = slower(watched(check_result()), "h2d", 40.0)
    result = slower(result, "d2h", 40.0)
    result = retried(result, retry(result, "h2d", 1, h2d=55.5))
    xml_path = tmp_path / "check.xml"
    shown = report(result, tmp_path, "--junit", str(xml_path))
    assert shown.exit_code == 1  # d2h still FAILs
    suite = ET.parse(xml_path).getroot().find("testsuite")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert suite.get("name") == "memprof check, GPU 0 (NVIDIA H200)"
    assert suite.get("tests") == str(7 + len(result.checks)) and suite.get("failures") == "1"
    assert cases["Pinned host → device"].find("failure") is None
    said = cases["Pinned host → device"].findtext("system-out")
    assert said.startswith("PASS: ") and "; expected >= " in said  # the line, then its attempts
    assert "; measured again: FAIL, then PASS on retry 1" in said
    failure = cases["Pinned device → host"].find("failure")
    assert failure.get("message").startswith("FAIL: 40.0 GB/s (63%); expected >= 53.6 GB/s")


def test_the_run_decides_on_a_lines_latest_attempt():
    result = slower(watched(check_result()), "h2d", 40.0)
    assert check._latest(result, None, "h2d") == "FAIL"
    result = retried(result, retry(result, "h2d", 1, h2d=55.5))
    assert check._latest(result, None, "h2d") == "PASS"
    assert check._latest(result, None, "d2h") == "PASS"


def test_a_reference_file_at_another_size_is_not_compared(tmp_path):
    known_good = slower(watched(check_result()), "h2d", 62.0)
    path = tmp_path / "mine.json"
    path.write_text(known_good.to_json())
    reference = load_reference(str(path), check_result().device)
    at_another_size = dataclasses.replace(reference, bytes_per_copy=reference.bytes_per_copy // 2)
    result = watched(check_result())  # 55.5 GB/s: under 90% of 62 at the same size
    assert {line.what: line.verdict for line in lines(result, reference)}[
        "Pinned host → device"
    ] == "WARN"
    found = {line.what: line for line in lines(result, at_another_size)}
    assert found["Pinned host → device"].verdict == "PASS"
    for what in ("Pinned host → device", "Pinned device → host"):
        assert "reference" not in found[what].expected
    assert "reference" in found["Device copy (read + write)"].expected  # its own size: the same
