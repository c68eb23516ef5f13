"""On the GPU: `memprof check --retries`, --reference and the floors, end to end. A floor of
100% of the link no pinned copy reaches makes both copy lines WARN or FAIL at every attempt,
so each is measured again exactly --retries times; every attempt is verified and kept, the
saved Result loads and reads the same, and the run's own measurements stay its first
attempts. Structure only: no figure is asserted."""

from __future__ import annotations

import pytest

import memprof
from memprof.experiments import parse, summarize
from memprof.experiments.check import LINE_OPERATIONS, attempts, lines, reference_in_use

pytestmark = pytest.mark.gpu


def test_lines_that_cannot_pass_are_measured_again_n_times_and_every_attempt_is_kept():
    result = memprof.run("check", retries=2, h2d_floor_pct=100, d2h_floor_pct=100, power=22)
    retried = [(retry.line, retry.attempt) for retry in result.extra.retries]
    assert [(line, n) for line, n in retried if line in ("h2d", "d2h")] == [
        ("h2d", 1),
        ("h2d", 2),
        ("d2h", 1),
        ("d2h", 2),
    ]
    for retry in result.extra.retries:
        assert [c.operation for c in retry.copies] == list(LINE_OPERATIONS[retry.line])
        assert all(len(c.per_copy_ms) == result.parameters.repeat for c in retry.copies)
    assert all(check.passed for check in result.checks)
    assert sum(check.name.startswith("retry ") for check in result.checks) >= 4
    gpu = [m for m in result.measurements if m.group == "gpu"]
    assert len(gpu) == 5 and all(len(m.throughput_ms) == result.parameters.repeat for m in gpu)
    loaded = parse(result.to_json(), "check.json")
    assert loaded.extra.retries == result.extra.retries
    reference, _ = reference_in_use(loaded)
    assert len(attempts(loaded, reference, "h2d")) == 3
    assert [line.verdict for line in lines(loaded, reference)][1:3] != ["PASS", "PASS"]
    text = " ".join(summarize(loaded).conclusions)
    assert "Pinned host → device: " in text and " on retry 2 (" in text
    print(text)


def test_a_check_saved_here_is_a_reference_for_the_next(tmp_path):
    saved = tmp_path / "mine.json"
    first = memprof.run("check", power=22)
    saved.write_text(first.to_json())
    again = memprof.run("check", power=22, reference=str(saved))
    assert again.extra.reference.file == str(saved)
    assert again.extra.reference.gpu == first.device.name
    notes = reference_in_use(again)[1]
    assert notes[0].startswith(f"Reference: {saved} (--reference)")


def test_a_thresholds_file_naming_this_gpu_judges_it_and_is_kept(tmp_path):
    """--thresholds: a floor of 100% of the link no pinned copy reaches, set by the file's
    entry for this GPU (its name in lower case), makes the copy lines WARN or FAIL where the
    built-in floors PASS them; the saved run keeps the entry and reads the same."""
    import json

    name = memprof.run("check", power=22).device.name
    gates = tmp_path / "gates.json"
    gates.write_text(json.dumps({name.lower(): {"h2d_floor_pct": 100, "d2h_floor_pct": 100}}))
    result = memprof.run("check", power=22, thresholds=str(gates))
    kept = result.extra.thresholds
    assert (kept.file, kept.model, kept.h2d_floor_pct, kept.d2d_floor_pct) == (
        str(gates),
        name.lower(),
        100,
        None,
    )
    shown = lines(parse(result.to_json(), "check.json"), reference_in_use(result)[0])
    assert [line.verdict for line in shown][1:3] != ["PASS", "PASS"]
    assert all("(gates.json: 100% of " in line.expected for line in shown[1:3])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"NVIDIA No Such GPU": {"h2d_floor_pct": 100}}))
    unmatched = memprof.run("check", power=22, thresholds=str(other))
    assert unmatched.extra.thresholds.model is None
    print([line.expected for line in shown[1:3]])
