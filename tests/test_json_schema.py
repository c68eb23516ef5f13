"""The published contract: memprof/result.schema.json and docs/formats.md's list of fields are
what the typed structures say today, every recorded file of today's schema version is valid
under the schema, what it refuses the loader refuses too, and the CSV's columns are listed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import parse
from memprof.experiments.json_schema import (
    BEGIN,
    DOC,
    END,
    SCHEMA_FILE,
    fields_markdown,
    result_schema,
    schema_text,
    unit_of,
)
from memprof.model.results import SCHEMA_VERSION
from memprof.output.export import CSV_COLUMNS

FIXTURES = Path(__file__).parent / "fixtures"
AGAIN = "python -m memprof.experiments.json_schema writes them again"


@pytest.fixture(scope="module")
def schema() -> dict:
    return result_schema()


def current_fixtures() -> list[Path]:
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("schema_version") == SCHEMA_VERSION:
            found.append(path)
    return found


def test_the_shipped_schema_and_the_listed_fields_are_todays_structures(schema):
    assert SCHEMA_FILE.read_text() == schema_text(), AGAIN
    doc = DOC.read_text()
    listed = doc.split(BEGIN + "\n", 1)[1].split(END, 1)[0]
    assert listed == fields_markdown(schema), AGAIN


def test_every_command_is_one_variant_and_every_structure_is_listed(schema):
    from memprof.experiments import COMMANDS

    *commands, several = [variant["$ref"].rsplit("/", 1)[-1] for variant in schema["oneOf"]]
    assert len(commands) == len(COMMANDS) and several == "RunSet"
    doc = DOC.read_text()
    assert all(f"\n### {name}\n" in doc for name in schema["$defs"])


def validator(schema: dict, data: dict):
    """A validator of the variant of the file's command (the whole schema's oneOf validates
    a file against all 19 variants: test_one_of_picks_the_files_command checks it)."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed here")
    names = [
        name
        for name, structure in schema["$defs"].items()
        if structure.get("properties", {}).get("command", {}).get("const") == data["command"]
    ]
    part = {"$ref": f"#/$defs/{names[0]}", "$defs": schema["$defs"]} if names else schema
    return jsonschema.Draft202012Validator(part)


def compact(data: object) -> object:
    """The file with each list of structures or rows cut to its first five items: they share
    one schema, and jsonschema takes 3 s over sweep's 311 measurements alone. A list of
    numbers is kept whole: it may be a row of fixed length (a timeline's event)."""
    if isinstance(data, dict):
        return {key: compact(value) for key, value in data.items()}
    if isinstance(data, list):
        nested = any(isinstance(item, dict | list) for item in data)
        return [compact(item) for item in (data[:5] if nested else data)]
    return data


def test_every_recorded_file_of_todays_version_is_valid_under_the_schema(schema):
    fixtures = current_fixtures()
    assert len(fixtures) >= 10
    for path in fixtures:
        data = compact(json.loads(path.read_text()))
        errors = [error.message for error in validator(schema, data).iter_errors(data)]
        assert errors == [], path.name


def test_one_of_picks_the_files_command(schema):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed here")
    data = json.loads((FIXTURES / "h200_trace_managed.json").read_text())
    data["measurements"] = data["measurements"][:1]  # a small file: 19 variants are tried
    whole = jsonschema.Draft202012Validator(schema)
    assert whole.is_valid(data)
    assert not whole.is_valid(plant(data, "command", "sweep"))  # a trace's extra is no sweep's


def plant(data: dict, where: str, value: object) -> dict:
    planted = copy.deepcopy(data)
    *path, last = where.split(".")
    target = planted
    for step in path:
        target = target[int(step)] if step.isdigit() else target[step]
    target[int(last) if last.isdigit() else last] = value
    return planted


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("measurements.0.bytes", -1),  # a size below nothing
        ("measurements.0.group", "disk"),  # no such group
        ("command", "teleport"),  # no such command
        ("parameters.repeat", 0),  # outside its range
        ("extra.kinds", ["pinned"]),  # a key sweep's extra does not declare
        ("parameters.powers", "20"),  # not a list
    ],
)
def test_what_the_schema_refuses_the_loader_refuses(schema, where, value):
    data = json.loads((FIXTURES / "h200_sweep.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    parse(json.dumps(data))  # whole, it loads: what is refused below is the planted value
    planted = plant(data, where, value)
    with pytest.raises(InvalidArgument):
        parse(json.dumps(planted))
    assert not validator(schema, planted).is_valid(compact(planted))


def test_every_csv_column_is_listed_with_its_unit():
    rows = re.findall(
        r"^\| `(\w+)` \|([^|]*)\|",
        DOC.read_text().split("## CSV columns")[1].split("##")[0],
        re.M,
    )
    assert [name for name, _ in rows] == list(CSV_COLUMNS)
    for name, unit in rows:
        if name.endswith("_ms"):
            assert unit.strip() == "ms", name
        if "bytes" in name:
            assert unit.strip() == "bytes", name


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("h2d_gb_per_s", "GB/s (10^9 bytes/s)"),
        ("gpu_ms_each", "ms, each"),
        ("blocked_ms", "ms"),
        ("wall_s", "s"),
        ("memory_clock_khz", "kHz"),
        ("l2_cache_bytes", "bytes"),
        ("bytes", "bytes"),
        ("calls", ""),
        ("stacks", ""),  # ends in "s", and is no time
    ],
)
def test_a_fields_unit_comes_from_its_name(name, unit):
    assert unit_of(name) == unit
