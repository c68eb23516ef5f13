"""docs/ci.md's gate, run end to end as a CI job runs it (bash, the `memprof` command) on
recorded results: unchanged ones pass, a figure made slower fails it and is named, a check
with a FAILed line fails it. A separate process is what is tested here: the script and the
command as a job starts them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MARKER = "<!-- ci: gate -->"


def gate_script() -> str:
    """The bash block right after the marker in docs/ci.md."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    after = text.split(MARKER, 1)[1].lstrip("\n")
    assert after.startswith("```bash\n"), "the gate must be a ```bash block after its marker"
    return after.removeprefix("```bash\n").split("\n```", 1)[0] + "\n"


def slowed(source: Path, target: Path, operation: str, kind: str, factor: float) -> None:
    """A copy of a recorded result with one GPU figure `factor` times slower (every time of
    it scaled alike: samples, CUPTI's events, batches)."""
    document = json.loads(source.read_text())
    found = 0
    for m in document["measurements"]:
        if (m["group"], m["operation"], m["kind"]) == ("gpu", operation, kind):
            found += 1
            for field in ("samples_ms", "events_ms", "throughput_ms"):
                m[field] = [value * factor for value in m[field]]
    assert found == 1
    target.write_text(json.dumps(document))


@pytest.fixture
def job(tmp_path: Path):
    """A job's folder after its measuring step (the recorded H200 check as both baseline and
    run), and how to run the gate in it with the `memprof` command on PATH."""
    (tmp_path / "baseline").mkdir()
    shutil.copy(FIXTURES / "h200_check.json", tmp_path / "baseline" / "check.json")
    shutil.copy(FIXTURES / "h200_check.json", tmp_path / "check.json")
    (tmp_path / "gate.sh").write_text(gate_script())
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    command = bin_folder / "memprof"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memprof "$@"\n')
    command.chmod(0o755)
    environment = {
        **os.environ,
        "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "gate.sh"],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return tmp_path, run


def test_the_ci_gate_passes_unchanged_runs_and_fails_a_regressed_figure_and_a_failed_check(job):
    folder, run = job
    passed = run()
    assert passed.returncode == 0, passed.stderr
    check_cases = ET.parse(folder / "check.xml").getroot()
    assert check_cases.get("failures") == "0" and int(check_cases.get("tests")) >= 7
    assert ET.parse(folder / "diff.xml").getroot().get("failures") == "0"

    # both gates fail at once, and each says why: a failed check does not hide a regression
    slowed(FIXTURES / "h200_check.json", folder / "check.json", "h2d", "pinned", 2)
    failed = run()
    assert failed.returncode == 1
    assert "check failed: GPU 0 (NVIDIA H200): Pinned host → device" in failed.stderr
    assert "memprof: regressed: [CUDA memcpy HtoD] (pinned) [gpu], 64 MiB" in failed.stderr
    assert ET.parse(folder / "check.xml").getroot().get("failures") == "1"
    assert ET.parse(folder / "diff.xml").getroot().get("failures") == "1"


def test_the_baseline_catches_what_checks_floors_let_pass(job):
    folder, run = job
    slowed(FIXTURES / "h200_check.json", folder / "check.json", "d2d", "device", 1.15)
    failed = run()
    assert failed.returncode == 1
    assert "check failed" not in failed.stderr
    assert ET.parse(folder / "check.xml").getroot().get("failures") == "0"
    assert "memprof: regressed: [CUDA memcpy DtoD] (device) [gpu], 1 GiB" in failed.stderr
    assert ET.parse(folder / "diff.xml").getroot().get("failures") == "1"
