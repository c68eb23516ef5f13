"""The mutation benchmark and the planted bugs aim at today's code: every module and function
benchmarks/mutation.sh names exists, and every planted bug's line is found exactly once (a
target that moved away would drop out of the score without a word)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def test_every_module_and_function_the_mutation_benchmark_names_exists():
    script = (ROOT / "benchmarks" / "mutation.sh").read_text()
    targets = re.findall(r"^  (memprof/\S+)$", script, re.MULTILINE)
    assert len(targets) >= 20
    missing = []
    for target in targets:
        path, _, functions = target.partition(":")
        assert (ROOT / path).is_file(), path
        names = defined_names(ROOT / path)
        missing += [f"{path}:{f}" for f in functions.split(",") if f and f not in names]
    assert missing == []


def test_every_planted_bug_finds_its_line_once():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import planted_bugs
    finally:
        sys.path.remove(str(ROOT / "tools"))
    plants = planted_bugs.read_plants()
    assert len(plants) >= 100
    stale = []
    for plant in plants:
        lines = (ROOT / plant.path).read_text().split("\n")
        if sum(line.strip() == plant.before for line in lines) != 1 or plant.after == plant.before:
            stale.append(plant.number)
    assert stale == []


def test_the_mutation_tools_line_recorder_survives_a_test_that_clears_the_tracer():
    # tests/test_scale.py traces lines itself: it once left sys.settrace(None) behind, and
    # every test after it (the verdict tests among them) seemed to reach no line
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mutate
    finally:
        sys.path.remove(str(ROOT / "tools"))
    here = str(Path(__file__).resolve())
    recorder = mutate._LineRecorder({here})
    before = sys.gettrace()
    try:
        recorder.start()
        sys.settrace(None)  # what a careless test does
        recorder.pytest_runtest_logstart("a test", None)
        defined_names(Path(__file__))  # a function of this file, run "inside" the test
        recorder.pytest_runtest_logfinish("a test", None)
    finally:
        sys.settrace(before)
    assert any(file == here for file, _ in recorder.by_test["a test"])
