"""Verification on screen: one line when every result matched, the failures in full when one
did not, every line with --verbose."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from memprof.cli import app
from memprof.experiments import load
from memprof.model.results import Check
from memprof.output.render import verification_lines

PINNED = Path(__file__).parent / "fixtures" / "h200_pinned_p20.json"
runner = CliRunner()


def checks(*passed: bool) -> list[Check]:
    return [
        Check(f"result {n}", ok, 4, "Check result success!" if ok else f"mismatch at {n}")
        for n, ok in enumerate(passed)
    ]


def test_every_result_matched_is_one_line():
    assert verification_lines(checks(True)) == [
        ("Verified against numpy: the result matches (--verbose lists them).", True)
    ]
    assert verification_lines(checks(True, True, True)) == [
        ("Verified against numpy: all 3 results match (--verbose lists them).", True)
    ]


def test_a_failure_is_shown_in_full_beside_the_count():
    assert verification_lines(checks(True, False, True, False)) == [
        ("Verified against numpy: 2 of 4 results match; these do not:", False),
        ("result 1: mismatch at 1", False),
        ("result 3: mismatch at 3", False),
    ]


def test_verbose_lists_every_verification():
    assert verification_lines(checks(True, False), verbose=True) == [
        ("result 0: Check result success!", True),
        ("result 1: mismatch at 1", False),
    ]


def test_report_collapses_and_verbose_lists(tmp_path):
    quiet = runner.invoke(app, ["report", str(PINNED)], env={"COLUMNS": "100"})
    assert "Verified against numpy: both results match" in quiet.stdout
    assert "Check result success!" not in quiet.stdout
    listed = runner.invoke(app, ["report", str(PINNED), "--verbose"], env={"COLUMNS": "100"})
    assert listed.stdout.count("Check result success!") == 2
    assert "Verified against numpy" not in listed.stdout
    result = load(PINNED)
    result.checks[1].passed, result.checks[1].detail = False, "Arrays do not match! 1 of 4"
    failed = tmp_path / "failed.json"
    failed.write_text(result.to_json())
    shown = runner.invoke(app, ["report", str(failed)], env={"COLUMNS": "100"})
    assert shown.exit_code == 1
    assert "1 of 2 results match; these do not:" in shown.stdout
    assert f"{result.checks[1].name}: Arrays do not match! 1 of 4" in shown.stdout
