"""`memprof diff --fail-above`: a gate on both sides of its threshold, the noise that widens
it, runs that cannot be compared, and the JUnit XML of diff and report (well-formed whatever
a Result holds)."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.experiments import load
from memprof.model.formatting import format_ms
from memprof.model.results import Measurement, Result
from memprof.model.statistics import Statistics
from memprof.output.diff import compare, compared, regressed_line
from memprof.output.junit import Case, Suite, junit_xml
from tests.conftest import replace

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"
runner = CliRunner()


def run(*measurements: Measurement, command: str = "pinned") -> Result:
    return Result(command=command, parameters={}, device=None, measurements=list(measurements))


def copy(samples_ms: list[float], name: str = "[CUDA memcpy HtoD]") -> Measurement:
    return Measurement("gpu", name, "h2d", "pinned", 1 << 20, list(samples_ms))


def one(first: Result, second: Result):
    (figure,) = compared(first, second)
    return figure


@pytest.mark.parametrize(
    ("factor", "fail_above", "worse"),
    [
        # steady samples: no spread, so the noise is diff's 2% floor
        (1.0499, 0.05, False),
        (1.0501, 0.05, True),  # just beyond --fail-above 5
        (1.0199, 0.01, False),  # beyond 1%, within the 2% noise floor
        (1.0201, 0.01, True),
        (1.5, 0.5, False),  # exactly 50% slower at --fail-above 50: not beyond it
        (0.5, 0.0, False),  # faster is never worse
        (2.0, 1.5, False),  # 100% slower, under --fail-above 150
    ],
)
def test_a_figure_fails_the_gate_only_beyond_the_larger_of_pct_and_its_noise(
    factor, fail_above, worse
):
    figure = one(run(copy([1.0] * 5)), run(copy([factor] * 5)))
    assert figure.worse_beyond(fail_above) is worse


def test_noisy_runs_widen_the_gate_to_their_noise():
    noisy = [0.9, 1.0, 1.0, 1.4]  # each median's noise 0.0465: 3 x its combined 0.0657 = 0.197
    figure = one(run(copy(noisy)), run(copy([s * 1.19 for s in noisy])))
    assert figure.noise == pytest.approx(0.197, abs=0.001)
    assert not figure.worse_beyond(0.05)  # 19% slower, within the medians' own noise
    figure = one(run(copy(noisy)), run(copy([s * 1.21 for s in noisy])))
    assert figure.worse_beyond(0.05)


def regressed_copy(tmp_path: Path, factor: float, names: tuple[str, ...]) -> Path:
    """tests/fixtures/h200_pinned_p20.json with the named GPU figures `factor` times slower:
    every time of theirs scaled alike (samples, CUPTI's events, batches)."""
    document = json.loads(PINNED.read_text())
    for m in document["measurements"]:
        if m["group"] == "gpu" and f"{m['name']} ({m['kind']})" in names:
            for field in ("samples_ms", "events_ms", "throughput_ms"):
                m[field] = [value * factor for value in m[field]]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(document))
    return path


def diff(*arguments) -> object:
    return runner.invoke(app, ["diff", *map(str, arguments)], env={"COLUMNS": "100"})


def test_an_unchanged_run_passes_the_gate():
    ran = diff(PINNED, PINNED, "--fail-above", "5")
    assert ran.exit_code == 0, ran.output
    assert "Gate (--fail-above 5.0%): 0 of" in ran.stdout


def test_each_regressed_figure_is_named_in_one_line_and_the_gate_exits_1(tmp_path):
    slow = regressed_copy(
        tmp_path, 1.5, ("[CUDA memcpy HtoD] (pinned)", "[CUDA memcpy DtoH] (pinned)")
    )
    ran = diff(PINNED, slow, "--fail-above", "5", "--quiet")
    assert ran.exit_code == 1
    lines = ran.stderr.splitlines()
    assert [line.split(": ")[1] for line in lines[:-1]] == ["regressed"] * 2
    copy = load(PINNED).find("h2d", "pinned", "gpu")
    batches = Statistics.of(copy.throughput_ms).median_ms  # what its GB/s is of
    assert lines[0].startswith(
        f"memprof: regressed: [CUDA memcpy HtoD] (pinned) [gpu], 4 MiB: {format_ms(batches)} "
        f"-> {format_ms(batches * 1.5)}, 1.500x, B slower by 50.0% (limit 5.0%: --fail-above)"
    )
    assert lines[1].startswith("memprof: regressed: [CUDA memcpy DtoH] (pinned) [gpu], 4 MiB")
    assert lines[-1] == (
        "memprof: error: 2 of 29 figures got slower by more than --fail-above 5.0% and their noise"
    )
    assert ran.stdout == ""  # --quiet: nothing but the errors
    assert diff(PINNED, slow, "--fail-above", "60").exit_code == 0  # 50% slower, under 60%
    assert diff(PINNED, slow).exit_code == 0  # no gate: a comparison


def test_each_regressed_line_is_a_red_note_that_heeds_no_color(tmp_path, monkeypatch):
    from memprof.output import console

    notes = []
    monkeypatch.setattr(console, "print_note", lambda *said: notes.append(said))
    slow = regressed_copy(tmp_path, 1.5, ("[CUDA memcpy HtoD] (pinned)",))
    for options, no_color in [(["--no-color"], True), ([], False)]:
        notes.clear()
        ran = runner.invoke(
            app, ["diff", str(PINNED), str(slow), "--fail-above", "40", "-q", *options], color=True
        )
        assert ran.exit_code == 1, ran.output
        [(line, told, style)] = [said for said in notes if "regressed" in said[0]]
        assert line.startswith("memprof: regressed: [CUDA memcpy HtoD] (pinned) [gpu], 4 MiB: ")
        assert line.endswith("B slower by 50.0% (limit 40.0%: --fail-above)")  # 40 of 100
        assert (told, style) == (no_color, "bold red")


def test_a_gate_refuses_runs_that_are_not_comparable_unless_asked(tmp_path):
    events = FIXTURES / "h200_pinned_p20_events.json"
    ran = diff(PINNED, events, "--fail-above", "5")
    assert ran.exit_code == 2
    assert ran.output == (
        "memprof: error: A and B are not comparable: timing source: A CUPTI's records, B gated "
        "CUDA events; --allow-not-comparable compares them anyway\n"
    )
    assert diff(PINNED, events).exit_code == 0  # no gate: two ways of timing, side by side
    allowed = diff(PINNED, events, "--fail-above", "5", "--allow-not-comparable")
    assert allowed.exit_code == 1  # gated: events read small copies slower
    assert "memprof: regressed:" in allowed.stderr


def test_runs_of_two_commands_are_refused_and_nothing_in_common_always(tmp_path):
    sweep = FIXTURES / "h200_sweep.json"
    ran = diff(PINNED, sweep)
    assert ran.exit_code == 2
    assert "not comparable: commands: A pinned, B sweep" in ran.output
    assert diff(PINNED, sweep, "--allow-not-comparable").exit_code == 0
    info = FIXTURES / "h200_info.json"
    for options in ((), ("--allow-not-comparable",)):
        ran = diff(PINNED, info, *options)
        assert ran.exit_code == 2
        assert "have no measurement in common: nothing to compare" in ran.output


@pytest.mark.parametrize("percent", ["0", "1000"])
def test_fail_above_takes_0_and_1000(percent):
    assert diff(PINNED, PINNED, "--fail-above", percent, "-q").exit_code == 0


@pytest.mark.parametrize("percent", ["-1", "-0.5", "1000.5"])
def test_fail_above_is_refused_outside_0_to_1000(percent):
    ran = diff(PINNED, PINNED, "--fail-above", percent)
    assert ran.exit_code == 2 and ran.stdout == ""
    assert ran.stderr == (
        f"memprof: error: Invalid value for '--fail-above': {percent} is outside the allowed "
        "range 0 to 1000 (percent) (see 'memprof diff --help')\n"
    )


def test_diff_junit_has_a_case_per_figure_and_fails_the_regressed(tmp_path):
    slow = regressed_copy(tmp_path, 1.5, ("[CUDA memcpy HtoD] (pinned)",))
    path = tmp_path / "diff.xml"
    ran = diff(PINNED, slow, "--fail-above", "5", "--junit", path, "-q")
    assert ran.exit_code == 1
    suite = ET.parse(path).getroot().find("testsuite")
    cases = list(suite.iter("testcase"))
    assert len(cases) == 29 and suite.get("failures") == "1"
    assert suite.get("name") == f"memprof diff {PINNED} {slow}"
    (failed,) = [case for case in cases if case.find("failure") is not None]
    assert failed.get("name") == "[CUDA memcpy HtoD] (pinned) [gpu], 4 MiB"
    assert "B slower by 50.0%" in failed.find("failure").get("message")
    passing = diff(PINNED, PINNED, "--junit", path, "-q")
    assert passing.exit_code == 0
    assert ET.parse(path).getroot().get("failures") == "0"


def test_a_junit_file_that_is_an_input_is_refused_before_anything(tmp_path):
    ran = diff(PINNED, PINNED, "--junit", PINNED)
    assert ran.exit_code == 2
    assert "would overwrite the input" in ran.output
    ran = runner.invoke(
        app,
        [
            "report",
            str(PINNED),
            "--junit",
            str(tmp_path / "x.json"),
            "--json",
            str(tmp_path / "x.json"),
        ],
    )
    assert ran.exit_code == 2


HOSTILE = "\x1b[31mred\x07\x00 ]]> <&> \"'\ufffe\ud800\u202e\x85 ok"


def test_junit_is_well_formed_whatever_the_strings_hold(tmp_path):
    text = junit_xml([Suite(HOSTILE, [Case(HOSTILE, HOSTILE, HOSTILE), Case("plain")])], HOSTILE)
    root = ET.fromstring(text.encode("utf-8"))
    case = root.find("testsuite").find("testcase")
    assert case.get("name") == "\\x1b[31mred\\x07\\x00 ]]> <&> \"'\\ufffe\\ud800\\u202e\\x85 ok"
    assert case.find("failure").text == case.get("name")
    assert root.get("tests") == "2" and root.get("failures") == "1"


def test_report_junit_of_a_result_with_hostile_strings_is_valid_xml(tmp_path):
    from memprof.experiments import load

    result = load(PINNED)
    result.device = replace(result.device, name=HOSTILE.replace("\ud800", ""))
    result.checks[0] = replace(result.checks[0], name=HOSTILE.replace("\ud800", ""))
    saved = tmp_path / "hostile.json"
    saved.write_text(result.to_json())
    path = tmp_path / "report.xml"
    ran = runner.invoke(app, ["report", str(saved), "--junit", str(path), "-q"])
    assert ran.exit_code == 0, ran.output
    root = ET.parse(path).getroot()
    names = [case.get("name") for case in root.iter("testcase")]
    assert names[0].startswith("verified: \\x1b[31mred\\x07\\x00 ]]> <&>")
    assert len(names) == len(result.checks)
    assert root.find("testsuite").get("name").startswith("memprof pinned, GPU 0 (\\x1b[31mred")


def test_a_bandwidth_that_dropped_while_single_copies_kept_their_time_is_slower():
    """The tables' GB/s is of back-to-back batches: diff compares those where both runs
    timed them, not the single copies beside them."""
    a = load(PINNED)
    b = load(PINNED)
    copy = b.find("h2d", "pinned", "gpu")
    copy.throughput_ms = [ms * 2 for ms in copy.throughput_ms]  # its samples as they were
    changed = {f.label: f for f in compared(a, b)}["[CUDA memcpy HtoD] (pinned) [gpu], 4 MiB"]
    assert changed.ratio == pytest.approx(2.0) and changed.change() == "B slower"
    copy.throughput_ms = []  # one run without batches: both compared by their single copies
    copy.batch = None
    same = {f.label: f for f in compared(a, b)}["[CUDA memcpy HtoD] (pinned) [gpu], 4 MiB"]
    assert same.ratio == 1.0 and same.change() == "within noise"


def test_a_figure_without_valid_samples_is_never_a_regression():
    comparison = compare(run(copy([1.0])), run(copy([math.nan])), fail_above=0.0)
    assert comparison.regressions == [] and comparison.verdict == "passed"
    assert comparison.summary.conclusions[-1] == (
        "Gate (--fail-above 0.0%): 0 of 1 measurement got slower beyond it and beyond the "
        "runs' noise."
    )


@pytest.mark.parametrize(
    ("samples", "fail_above", "limit"),
    [
        ([1.0], 0.02, "limit 2.0%: --fail-above"),  # the gate equals the 2% noise floor
        ([1.0], 0.019, "limit 2.0%: the runs' noise"),
        ([0.9, 1.0, 1.0, 1.4], 0.05, "limit 19.7%: the runs' noise"),
        ([0.9, 1.0, 1.0, 1.4], 0.25, "limit 25.0%: --fail-above"),
    ],
)
def test_a_regressed_line_names_what_set_its_limit(samples, fail_above, limit):
    figure = one(run(copy(samples)), run(copy([2 * s for s in samples])))
    assert regressed_line(figure, fail_above).endswith(f"B slower by 100.0% ({limit})")


def test_the_gate_says_how_many_of_how_many_got_slower_and_that_it_exits_1():
    first = run(copy([1.0]), copy([1.0], "[CUDA memcpy DtoH]"))
    second = run(copy([2.0]), copy([1.0], "[CUDA memcpy DtoH]"))
    assert compare(first, second, fail_above=0.05).summary.conclusions[-1] == (
        "Gate (--fail-above 5.0%): 1 of 2 measurements got slower beyond it and beyond the "
        "runs' noise: exit 1."
    )


def test_diff_junit_reads_each_figures_change_and_fails_only_the_regressed():
    from memprof.cli_gates import diff_junit

    first = run(copy([1.0]), copy([1.0], "[CUDA memcpy DtoH]"), copy([1.0], "[CUDA memcpy DtoD]"))
    second = run(
        copy([1.5]), copy([1.0], "[CUDA memcpy DtoH]"), copy([math.nan], "[CUDA memcpy DtoD]")
    )
    figures = compared(first, second)
    suite = 'classname="memprof diff a.json b.json" name="[CUDA memcpy'
    regressed = (
        "regressed: [CUDA memcpy HtoD] (pinned) [gpu], 1 MiB: 1.0000ms -&gt; 1.5000ms, 1.500x, "
        "B slower by 50.0% (limit 5.0%: --fail-above)"
    )
    assert diff_junit(figures, 0.05, Path("a.json"), Path("b.json")).splitlines() == [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites name="memprof diff" tests="3" failures="1">',
        '  <testsuite name="memprof diff a.json b.json" tests="3" failures="1" errors="0" '
        'skipped="0">',
        f'    <testcase {suite} HtoD] (pinned) [gpu], 1 MiB">',
        f'      <failure message="{regressed}">{regressed}</failure>',
        "      <system-out>B / A 1.500x, noise 2.0%: B slower</system-out>",
        "    </testcase>",
        f'    <testcase {suite} DtoH] (pinned) [gpu], 1 MiB">',
        "      <system-out>B / A 1.000x, noise 2.0%: within noise</system-out>",
        "    </testcase>",
        f'    <testcase {suite} DtoD] (pinned) [gpu], 1 MiB">',
        "      <system-out>no valid samples</system-out>",  # no B / A: nothing to compare
        "    </testcase>",
        "  </testsuite>",
        "</testsuites>",
    ]
    ungated = diff_junit(figures, None, Path("a.json"), Path("b.json"))
    assert 'failures="0"' in ungated and "<failure" not in ungated  # no gate: nothing fails


def test_report_junit_fails_a_failed_verification_alone_and_names_a_run_without_a_gpu():
    from memprof.cli_gates import results_junit

    pinned = load(PINNED)
    pinned.checks[1] = replace(pinned.checks[1], passed=False, detail="element 7: 2.0 != 3.0")
    trace = load(FIXTURES / "h200_trace_pycuda.json")  # no device facts: its host names it
    suite = 'classname="memprof pinned, GPU 0 (NVIDIA H200)" name="verified: sumArrays, p'
    assert results_junit([pinned, trace]).splitlines() == [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites name="memprof pinned" tests="2" failures="1">',
        '  <testsuite name="memprof pinned, GPU 0 (NVIDIA H200)" tests="2" failures="1" '
        'errors="0" skipped="0">',
        f'    <testcase {suite}ageable host memory">',
        "      <system-out>Check result success!</system-out>",
        "    </testcase>",
        f'    <testcase {suite}inned host memory">',
        '      <failure message="element 7: 2.0 != 3.0">element 7: 2.0 != 3.0</failure>',
        "      <system-out>element 7: 2.0 != 3.0</system-out>",
        "    </testcase>",
        "  </testsuite>",
        '  <testsuite name="memprof trace, vm" tests="0" failures="0" errors="0" skipped="0">',
        "  </testsuite>",
        "</testsuites>",
    ]
    assert '<testsuites name="memprof" tests="0" failures="0">' in results_junit([])


def test_several_gpus_comparisons_are_one_summary_each_line_named_by_its_gpu():
    import dataclasses
    from types import SimpleNamespace

    from memprof.cli_gates import each_gpu_compared

    def gpu(header: str, *factors: float) -> SimpleNamespace:
        names = ["[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"][: len(factors)]
        a = run(*(copy([1.0], name) for name in names))
        b = run(*(copy([f], name) for f, name in zip(factors, names, strict=True)))
        made = compare(a, b, fail_above=0.05)
        return SimpleNamespace(
            summary=dataclasses.replace(made.summary, header=[header]), rows=made.rows
        )

    zero, one = gpu("driver: A 1, B 2", 2.0), gpu("clocks: A x, B y", 1.0, 1.0)
    summary, figures = each_gpu_compared([("GPU 0", zero), ("GPU 1", one)])
    assert summary.header == ["GPU 0: driver: A 1, B 2", "GPU 1: clocks: A x, B y"]
    title = zero.summary.tables[0].title
    assert [table.title for table in summary.tables] == [f"GPU 0: {title}", f"GPU 1: {title}"]
    assert summary.conclusions == [
        "GPU 0: 1 measurement in both runs: B was faster in 0, slower in 1, and within noise in 0.",
        "GPU 0: Gate (--fail-above 5.0%): 1 of 1 measurement got slower beyond it and beyond "
        "the runs' noise: exit 1.",
        "GPU 1: 2 measurements in both runs: B was faster in 0, slower in 0, and within noise "
        "in 2.",
        "GPU 1: Gate (--fail-above 5.0%): 0 of 2 measurements got slower beyond it and beyond "
        "the runs' noise.",
    ]
    assert [figure.label for figure in figures] == [
        "GPU 0: [CUDA memcpy HtoD] (pinned) [gpu], 1 MiB",
        "GPU 1: [CUDA memcpy HtoD] (pinned) [gpu], 1 MiB",
        "GPU 1: [CUDA memcpy DtoH] (pinned) [gpu], 1 MiB",
    ]
    assert zero.summary.header == ["driver: A 1, B 2"] and len(zero.summary.conclusions) == 2
    assert each_gpu_compared([("", zero)]) == (zero.summary, zero.rows)  # one GPU: as it is


def test_only_that_selects_no_figure_is_refused_naming_each_pattern_and_the_kinds():
    ran = diff(PINNED, PINNED, "--only", "*nothing*", "--only", "*none*")
    assert ran.exit_code == 2 and ran.stdout == "", ran.output
    assert ran.stderr == (
        "memprof: error: --only *nothing* *none*: no figure in both runs is of that kind or "
        "matches that pattern (kinds: gbps, gpu, api, host)\n"
    )


@pytest.mark.parametrize(
    ("command", "lines"),
    [
        (
            "diff",
            [
                "--fail-above <percent> Exit 1 when a figure in both runs got slower (a longer "
                "median time, so a lower GB/s) by more than this percentage",
                "--allow-not-comparable Compare and gate runs that are not comparable (another "
                "command, GPU model,",
                "--only <what> Compare and gate only these figures (repeatable;",
                "-v, --verbose List every figure in both runs, also those within noise.",
                "--junit <path> Also save a JUnit XML report for CI systems: one test case per "
                "figure in both runs, failed where",
            ],
        ),
        (
            "report",
            [
                "--fleet Many runs of one command (one per GPU or node,",
                "--fail-outliers <percent> Exit 1 when a run's figure is slower than the fleet's "
                "median by more than this percentage",
                "--junit <path> Also save a JUnit XML report for CI systems: one test case per "
                "check line (a FAIL fails it) and per verification against numpy.",
            ],
        ),
        ("check", ["--junit <path> Also save a JUnit XML report for CI systems: one test case"]),
    ],
)
def test_the_gates_options_are_in_the_help_each_with_its_value_and_words(command, lines):
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "100"})
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    for line in lines:
        assert line in text


def test_memprof_diffs_comparison_lists_the_regressions_and_improvements_its_verdict_reads():
    """What memprof.diff returns a script: without a gate every figure slower beyond noise is a
    regression and the verdict 'regressed'; with one only those beyond it too (50% slower is
    not beyond --fail-above 50%, is beyond 49%); a faster figure is an improvement either way."""
    names = ("[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", "[CUDA memcpy DtoD]")
    first = run(*(copy([1.0] * 3, name) for name in names))
    second = run(*(copy([t] * 3, name) for t, name in zip((1.5, 0.5, 1.0), names, strict=True)))
    labels = {figure.label.split(" (")[0] for figure in compared(first, second)}
    assert labels == set(names)

    def found(comparison) -> tuple[list[str], list[str], str]:
        return (
            [figure.label.split(" (")[0] for figure in comparison.regressions],
            [figure.label.split(" (")[0] for figure in comparison.improvements],
            comparison.verdict,
        )

    slower, faster = ["[CUDA memcpy HtoD]"], ["[CUDA memcpy DtoH]"]
    assert found(compare(first, second)) == (slower, faster, "regressed")
    assert found(compare(first, second, fail_above=0.49)) == (slower, faster, "regressed")
    assert found(compare(first, second, fail_above=0.5)) == ([], faster, "passed")
    assert found(compare(first, first)) == ([], [], "passed")
    assert found(compare(second, first)) == (faster, slower, "regressed")
