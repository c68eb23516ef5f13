"""Plant the hand-written bugs of tools/planted_bugs.md one at a time and see which the CPU
suite catches.

Usage (from the repository root, in the virtual environment README.md installs):

    python tools/planted_bugs.py                  # every plant, its area's tests
    python tools/planted_bugs.py --only 4 17      # some plants
    python tools/planted_bugs.py --suite all      # every plant, the whole CPU suite
    python tools/planted_bugs.py --confirm        # area's tests; misses again with the suite
    python tools/planted_bugs.py --confirm --record After   # and write the outcomes into
                                                  # the table's "After" column

Each plant is one line of memprof replaced by another: the line is found by its text
(stripped of indentation), so a plant still applies after code around it moved. A plant
whose line is no longer there (or is there twice) is reported `stale`, not run. The file is
written with the bug, the tests run in a fresh interpreter, and the file is restored in a
`finally` (and checked against its text before), so an interrupted run leaves nothing
behind. A plant is `caught` when pytest exits non-zero.

Tests of a plant: the files its area names in AREA_TESTS plus every tests/test_verdicts_*.py;
`--suite all`: the whole CPU suite (GPU tests and the wheel test left out).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tools" / "planted_bugs.md"
SUITE = ["tests", "-m", "not gpu", "--ignore=tests/test_wheel.py"]
# The existing test files that aim at each area: a quick first pass before the suite.
AREA_TESTS = {
    "check": ["tests/test_check.py"],
    "check-pairs": ["tests/test_check.py"],
    "ceilings": ["tests/test_ceilings.py", "tests/test_summary_figures.py"],
    "nvml": ["tests/test_nvml.py", "tests/test_gpu_state.py", "tests/test_check.py"],
    "measure": [
        "tests/test_measure_core.py",
        "tests/test_streams_timeline.py",
        "tests/test_activity_records.py",
    ],
    "cupti": [
        "tests/test_activity_records.py",
        "tests/test_trace_activity.py",
        "tests/test_trace.py",
        "tests/test_trace_blocked.py",
    ],
    "verify": ["tests/test_verify.py", "tests/test_streams_math.py"],
    "statistics": ["tests/test_statistics.py", "tests/test_diff_noise.py"],
    "streams": ["tests/test_streams_math.py", "tests/test_streams_timeline.py"],
    "managed": ["tests/test_summary_figures.py"],
    "hostlink": ["tests/test_summary_figures.py", "tests/test_render_multigpu_fixtures.py"],
    "pools": ["tests/test_allocators.py"],
    "smallcopies": ["tests/test_smallcopies.py", "tests/test_summary_helpers.py"],
    "sweep": ["tests/test_summary_figures.py", "tests/test_summary_helpers.py"],
    "peer": ["tests/test_peer.py", "tests/test_render_peer.py", "tests/test_summary_figures.py"],
    "compare": ["tests/test_summary_figures.py", "tests/test_render_overlap_compare.py"],
    "trace": ["tests/test_trace.py", "tests/test_trace_blocked.py", "tests/test_trace_cli.py"],
}


@dataclass
class Plant:
    number: int
    area: str
    path: str
    before: str
    after: str
    outcome: str = ""


def _cell(text: str) -> str:
    """A table cell's code: `...` unwrapped, \\| back to |."""
    text = text.strip()
    if text.startswith("`") and text.endswith("`"):
        text = text[1:-1]
    return text.replace("\\|", "|")


def read_plants(path: Path = TABLE) -> list[Plant]:
    """Every row of the plants table: | # | area | path | before | after | ..."""
    plants = []
    for line in path.read_text().splitlines():
        if not re.match(r"\|\s*\d+\s*\|", line):
            continue
        cells = [c for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        number, area, file, before, after = (_cell(c) for c in cells[:5])
        plants.append(Plant(int(number), area, file, before, after))
    return plants


def apply(plant: Plant) -> tuple[Path, str] | None:
    """Write the plant into its file: (path, the text before), or None where it is stale."""
    path = ROOT / plant.path
    if not path.is_file():
        return None
    original = path.read_text()
    lines = original.split("\n")
    found = [i for i, line in enumerate(lines) if line.strip() == plant.before]
    if len(found) != 1:
        return None
    line = lines[found[0]]
    indent = line[: len(line) - len(line.lstrip())]
    lines[found[0]] = indent + plant.after
    path.write_text("\n".join(lines))
    return path, original


def run_tests(tests: list[str]) -> bool:
    """True when the tests fail (the plant is caught)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    completed = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True)
    return completed.returncode != 0


def tests_for(plant: Plant, suite: str, only: list[str] | None = None) -> list[str]:
    if only:
        return only
    if suite == "all":
        return SUITE
    mine = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_verdicts_*.py"))
    return sorted(set(AREA_TESTS.get(plant.area, []) + mine))


def run_plant(plant: Plant, suite: str, only: list[str] | None = None) -> str:
    applied = apply(plant)
    if applied is None:
        return "stale"
    path, original = applied
    try:
        return "caught" if run_tests(tests_for(plant, suite, only)) else "missed"
    finally:
        path.write_text(original)


def record(plants: list[Plant], column: str, path: Path = TABLE) -> None:
    """Each plant's outcome written into its row's `column` cell of the table."""
    outcomes = {p.number: p.outcome for p in plants}
    index = {"Before": 6, "After": 7}[column]
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        found = re.match(r"\|\s*(\d+)\s*\|", line)
        if not found or int(found.group(1)) not in outcomes:
            continue
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        cells[index] = f" {outcomes[int(found.group(1))]} "
        lines[n] = "|" + "|".join(cells) + "|"
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, nargs="*", help="plant numbers to run")
    parser.add_argument("--suite", choices=("area", "all"), default="area")
    parser.add_argument("--confirm", action="store_true", help="misses again, whole suite")
    parser.add_argument("--tests", nargs="*", help="these test files instead of the area's")
    parser.add_argument(
        "--record", choices=("Before", "After"), help="write the outcomes into this column"
    )
    options = parser.parse_args(argv)
    plants = [p for p in read_plants() if not options.only or p.number in options.only]
    started = time.monotonic()
    for plant in plants:
        plant.outcome = run_plant(plant, options.suite, options.tests)
        if plant.outcome == "missed" and options.confirm:
            plant.outcome = "caught (suite)" if run_plant(plant, "all") == "caught" else "missed"
        print(
            f"{plant.number:>3} {plant.area:<12} {plant.outcome:<15} {plant.path}: "
            f"{plant.before}  ->  {plant.after}",
            flush=True,
        )
    if options.record:
        record(plants, options.record)
    ran = [p for p in plants if p.outcome != "stale"]
    caught = sum(p.outcome.startswith("caught") for p in ran)
    stale = len(plants) - len(ran)
    score = f"{caught / len(ran):.0%}" if ran else "-"
    print(
        f"\ncaught {caught} of {len(ran)} ({score}); {stale} stale; "
        f"{time.monotonic() - started:.0f} s"
    )
    return 0 if caught == len(ran) else 1


if __name__ == "__main__":
    sys.exit(main())
