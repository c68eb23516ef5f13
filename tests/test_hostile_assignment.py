"""The hostile-file sweep's coverage does not move when a fixture is added: each fixture's
cases depend on itself and the fixtures listed before it, never on a newcomer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import hostile

ROOT = Path(__file__).resolve().parent.parent


def test_every_fixture_is_listed_in_the_order_that_claims_places():
    on_disk = sorted(path.name for path in hostile.FIXTURES.glob("*.json"))
    missing = sorted(set(on_disk) - set(hostile.FIXTURE_ORDER))
    assert missing == [], "append them at the end of tests/hostile.py's FIXTURE_ORDER"
    assert sorted(hostile.FIXTURE_ORDER) == on_disk  # and no name of a fixture that is gone
    assert len(set(hostile.FIXTURE_ORDER)) == len(hostile.FIXTURE_ORDER)


@pytest.mark.parametrize("name", ["aaa_first.json", "h200_middle.json", "zzz_last.json"])
def test_a_new_fixture_moves_no_other_fixtures_case(tmp_path, name):
    """A copy of a fixture under a new name shares every place with it: wherever its name
    sorts, it takes none of the cases the listed fixtures had."""
    before = hostile.assignments()
    fake = tmp_path / name
    shutil.copy(hostile.FIXTURES / "h200_pinned_p20.json", fake)
    after = hostile.assignments([*hostile.fixtures(), fake])
    assert [case for case in after if not case.startswith(f"{name}: ")] == before


def test_a_fixtures_mutators_do_not_depend_on_its_position():
    """The mutator a place gets is the fixture's and the place's: alone or among all, the
    same (only places an earlier fixture covered are left out)."""
    every = set(hostile.assignments())
    places = {case.rpartition(": ")[0] for case in every}  # "fixture: place"
    compared = 0
    for fixture in hostile.fixtures()[::5]:
        for case in hostile.assignments([fixture]):
            if case.rpartition(": ")[0] in places:
                assert case in every, case  # the same mutator as among all the fixtures
                compared += 1
    assert compared > 100


def test_assignments_are_the_same_in_another_process():
    """No salted hash(): another interpreter (another PYTHONHASHSEED) assigns the same."""
    script = "from tests import hostile; print('\\n'.join(hostile.assignments()))"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    assert ran.stdout.splitlines() == hostile.assignments()


def test_the_cases_are_the_assignments_and_leave_the_fixture_as_it_was():
    names = [case.name for case in hostile.all_cases([hostile.FIXTURES / "h200_info.json"])]
    fields = [name for name in names if not name.startswith("whole file:")]
    assert fields == hostile.assignments([hostile.FIXTURES / "h200_info.json"])


def test_the_files_are_written_as_json_dumps_indents_them():
    """hostile.indented's quick way and json's own, character for character: every fixture,
    and every mutator's value of a number, a string, a list and an object."""
    values = [0, 3, 1.5, "name é", [1, 2], {"a": 1, "b": [2.5, None]}, True, None]
    changed = [mutate(value) for mutate in hostile.MUTATORS.values() for value in values]
    changed = [value for value in changed if value is not hostile.SKIP]
    documents = [json.loads(path.read_text()) for path in hostile.fixtures()]
    for document in [*documents, {"values": changed, "empty": [{}, [], ""]}]:
        expected = json.dumps(document, indent=1, allow_nan=True, ensure_ascii=False)
        assert hostile.indented(document) == expected
