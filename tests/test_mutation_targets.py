"""Mutation testing (mutmut, [tool.mutmut] in pyproject.toml) aims at today's code: mutmut
matches only_mutate by pattern and skips a missing also_copy path without a word, so a module
that moved away would drop out of the score silently. Every module tests/README_verdicts.md
says decides what a user reads is mutated."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mutmut_list(key: str) -> list[str]:
    """A list of [tool.mutmut], read by hand (tomllib is Python 3.11+)."""
    section = (ROOT / "pyproject.toml").read_text().split("[tool.mutmut]", 1)[1]
    found = re.search(rf"^{key} = \[(.*?)\]", section, re.MULTILINE | re.DOTALL)
    assert found, key
    return ast.literal_eval(f"[{found.group(1)}]")


def verdict_modules(table: str) -> set[str]:
    """The memprof module of each row of tests/README_verdicts.md's table ('check.judge',
    'core/nvml.py _state', 'sweep crossovers' ...)."""
    modules = set()
    for row in re.findall(r"^\| ([^|]+?) \|", table, re.MULTILINE):
        if row == "Where":  # the header
            continue
        name = re.split(r"[.: ]", row, maxsplit=1)[0] if "/" not in row else row.split(" ")[0]
        if "/" in name:
            modules.add(f"memprof/{name}")
        else:
            found = [
                p
                for p in ("experiments", "model")
                if (ROOT / "memprof" / p / f"{name}.py").is_file()
            ]
            modules.add(f"memprof/{found[0]}/{name}.py" if found else f"memprof/?/{name}.py")
    return modules


def test_every_module_mutmut_mutates_and_every_path_it_copies_exists():
    targets = mutmut_list("only_mutate")
    assert len(targets) >= 30
    assert [t for t in targets if not (ROOT / t).is_file()] == []
    assert [p for p in mutmut_list("also_copy") if not (ROOT / p).exists()] == []
    assert mutmut_list("source_paths") == ["memprof"]


def test_every_module_that_decides_a_verdict_is_mutated():
    modules = verdict_modules((ROOT / "tests" / "README_verdicts.md").read_text())
    assert "memprof/experiments/check.py" in modules and "memprof/core/nvml.py" in modules
    assert sorted(modules - set(mutmut_list("only_mutate"))) == []


def test_the_verdict_table_reader_finds_each_kind_of_row():
    table = "| Where | x |\n|---|---|\n| check.judge | a |\n| core/nvml.py _state | b |\n"
    table += "| sweep crossovers | c |\n| nosuch.f | d |\n"
    assert verdict_modules(table) == {
        "memprof/experiments/check.py",
        "memprof/core/nvml.py",
        "memprof/experiments/sweep.py",
        "memprof/?/nosuch.py",
    }
