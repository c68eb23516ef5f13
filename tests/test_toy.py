"""A new experiment is one module and one registry line (docs/adding-an-experiment.md): a toy
added so to a copy of this tree, with a fixture made of a real recording's measurements and
its generated files made by the tools, passes the tests that iterate over every command and
every fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = """    Command(
        "toy",
        "toy:Toy",
        "Pinned copies each way: the smallest experiment.",
        examples=("memprof toy", "memprof toy --power 20 --json toy.json"),
        fixture="h200_toy",
    ),
"""
# The tests that iterate over every command or every fixture.
EVERY_COMMAND = (
    "tests/test_contract.py",
    "tests/test_cli_help.py",
    "tests/test_golden.py",
    "tests/test_hostile_assignment.py",
    "tests/test_json_schema.py",
    "tests/test_plot.py::test_the_pictures_in_the_docs_are_what_the_fixtures_draw_today",
)

# The toy's generated files made by the tools, then its tests run: in one Python, as each
# started alone imported memprof, rich and matplotlib again (the toy's test took 6.2 CPU s).
TOOLS_THEN_TESTS = """
import runpy, sys

import pytest

tests = sys.argv[1:]
for tool in (["tools/golden.py", "h200_toy"], ["tools/pictures.py", "toy"]):
    sys.argv = tool  # the others': test_golden, test_plot
    try:
        runpy.run_path(tool[0], run_name="__main__")
    except SystemExit as ended:
        if ended.code:
            raise
runpy.run_module("memprof.experiments.json_schema", run_name="__main__")
sys.exit(pytest.main(tests))
"""


def toy_fixture() -> dict:
    """h200_pinned_p20's pinned copies, their calls and allocation, as a toy run of them."""
    document = json.loads((ROOT / "tests" / "fixtures" / "h200_pinned_p20.json").read_text())
    keep = {("gpu", "h2d"), ("gpu", "d2h"), ("api", "h2d"), ("api", "d2h")}
    keep |= {("api", "alloc"), ("api", "free")}
    document["measurements"] = [
        m
        for m in document["measurements"]
        if (m["group"], m["operation"]) == ("api", "driver_call")
        or ((m["group"], m["operation"]) in keep and m["kind"] == "pinned")
    ]
    document["command"] = "toy"
    document["parameters"] = {k: document["parameters"][k] for k in ("power", "repeat", "warmup")}
    return document


def toys_share(tests: list[str]) -> list[str]:
    """The tests that look at every command or fixture at once, and the cases of the
    parametrised ones that are the toy's: the suite runs every other case on this same tree."""
    return [test for test in tests if "[" not in test or "toy" in test.split("[", 1)[1]]


def pytest_collection_modifyitems(config, items) -> None:
    """Of the tests collected, the toy's share only, where this module is a plugin (-p
    tests.test_toy, as the toy's pytest below runs): one pytest, where one listing the
    tests and another running them collected them twice."""
    chosen = set(toys_share([item.nodeid for item in items]))
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in chosen])
    items[:] = [item for item in items if item.nodeid in chosen]


def test_the_toys_share_is_every_whole_test_and_only_its_own_cases():
    tests = [
        "tests/test_golden.py::test_every_fixture_has_its_golden_renderings",
        "tests/test_golden.py::test_every_fixture_renders_as_recorded[h200_toy.80]",
        "tests/test_golden.py::test_every_fixture_renders_as_recorded[h200_pinned_p20.80]",
        "tests/test_contract.py::test_every_experiment_has_a_recorded_fixture[toy]",
        "tests/test_contract.py::test_every_experiment_has_a_recorded_fixture[pinned]",
    ]
    assert toys_share(tests) == [tests[0], tests[1], tests[3]]


def test_a_toy_experiment_is_one_module_and_one_registry_line(tmp_path):
    tree = tmp_path / "tree"
    for folder in ("memprof", "tests", "tools", "docs", "kernels", "examples"):
        if (ROOT / folder).exists():
            shutil.copytree(
                ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copy(ROOT / "tests" / "toy" / "toy.py", tree / "memprof" / "experiments" / "toy.py")
    registry = tree / "memprof" / "experiments" / "__init__.py"
    text = registry.read_text()
    end = text.index("\n)\n", text.index("COMMANDS: tuple[Command, ...] = ("))  # its last line
    registry.write_text(text[:end] + "\n" + LINE.rstrip("\n") + text[end:])
    # recorded on the GPU: its fixture, its place in the hostile sweep, its generated files
    fixture = tree / "tests" / "fixtures" / "h200_toy.json"
    fixture.write_text(json.dumps(toy_fixture(), indent=1))
    hostile = tree / "tests" / "hostile.py"
    order = hostile.read_text().replace(
        '    "h200x4_hostlink.json",\n)', '    "h200x4_hostlink.json",\n    "h200_toy.json",\n)'
    )
    hostile.write_text(order)
    env = {**os.environ, "PYTHONPATH": str(tree)}

    def run(*command: str) -> str:
        done = subprocess.run(
            command, cwd=tree, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        return done.stdout

    shown = run(sys.executable, "-m", "memprof", "report", str(fixture))
    assert "Pinned copies of 4 MiB" in shown
    share = ("-p", "tests.test_toy", "-p", "no:cacheprovider", "-v", "-rs")
    ran = run(sys.executable, "-c", TOOLS_THEN_TESTS, *share, *EVERY_COMMAND).splitlines()
    passed = [line.split()[0] for line in ran if line.split()[1:2] == ["PASSED"]]
    assert toys_share(passed) == passed, passed  # the whole tests and the toy's cases only
    assert any("[" in test for test in passed), passed  # the toy is among their cases
    assert (tree / "tests" / "golden" / "h200_toy.80.txt").exists()
    assert (tree / "docs" / "img" / "toy.svg").exists()
