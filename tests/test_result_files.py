"""Saving and loading Results: numpy values, verification, lookups, files that are not results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np
import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import parse as parse_result
from memprof.experiments.alloc import AllocExtra
from memprof.experiments.pinned import PinnedParams
from memprof.model import results
from memprof.model.results import Check, Measurement, Result
from memprof.model.schema import text_fields


def built(checks: list[Check] | None = None) -> Result:
    copy = Measurement(
        group="gpu",
        name="[CUDA memcpy HtoD]",
        operation="h2d",
        kind="pinned",
        bytes=int(np.int64(4 << 20)),
        samples_ms=[np.float64(1.5), np.float64(0.5), 4.0],  # median 1.5, mean 2,
    )
    small = Measurement(
        group="gpu",
        name="[CUDA memcpy HtoD]",
        operation="h2d",
        kind="pinned",
        bytes=1024,
        samples_ms=[0.01],
    )
    return Result(
        command="pinned",
        parameters=PinnedParams(power=20),
        device=None,
        measurements=[copy, small],
        checks=checks if checks is not None else [Check("sum", np.bool_(True), 8, "ok")],
        extra=AllocExtra(kinds=["pinned"], skipped=[np.str_("none")], allocators=None),
    )


def test_numpy_values_are_saved_as_plain_json_and_load_back(tmp_path):
    path = tmp_path / "run.json"
    built().save(path)
    text = path.read_text()
    assert text.endswith("}\n")
    data = json.loads(text)
    assert data["measurements"][0]["samples_ms"] == [1.5, 0.5, 4.0]
    assert data["checks"][0]["passed"] is True
    assert data["extra"]["skipped"] == ["none"]


def test_a_value_json_cannot_hold_is_refused_by_name():
    result = built()
    result.extra = {"kinds": object()}
    with pytest.raises(TypeError, match="object cannot be saved"):
        result.to_json()


def test_a_result_passes_only_when_every_check_passed():
    assert built([Check("a", True, 1, ""), Check("b", True, 1, "")]).passed
    assert not built([Check("a", True, 1, ""), Check("b", False, 1, "mismatch")]).passed
    assert not built([Check("a", False, 1, "mismatch"), Check("b", True, 1, "")]).passed
    assert built([]).passed


def test_find_tells_sizes_apart():
    result = built()
    assert result.find("h2d", "pinned", "gpu", 1024).samples_ms == [0.01]
    with pytest.raises(KeyError, match="2 measurements"):
        result.find("h2d", "pinned", "gpu")
    with pytest.raises(KeyError, match=r"0 measurements .* bytes=2048"):
        result.find("h2d", byte_count=2048)


def test_throughput_statistics_exist_only_where_batches_were_timed():
    plain = built().measurements[0]
    assert (plain.batch, plain.throughput_stats) == (0, None)
    batched = Measurement(
        group="gpu",
        name="x",
        operation="h2d",
        kind="pinned",
        bytes=1,
        throughput_ms=[3.0, 1.0, 2.0, 10.0],
        batch=32,
    )
    assert batched.throughput_stats.median_ms == 2.5


@pytest.mark.parametrize("text", ['{"command": "pinned"}', "{}", "[]", "3"])
def test_json_without_a_schema_version_is_not_a_result(text):
    with pytest.raises(
        InvalidArgument, match=r"not a memprof result: (no schema_version|the JSON is)"
    ):
        parse_result(text)


# -- a key named twice ----------------------------------------------------------------------

PINNED = Path(__file__).parent / "fixtures" / "h200_pinned_p20.json"
OLDER = Path(__file__).parent / "fixtures" / "legacy_v2_pinned_p20.json"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "before", "after", "key"),
    [
        (PINNED, '"command":', '"command": "zerocopy", "command":', "command"),  # top level
        (PINNED, '"bytes":', '"bytes": 1, "bytes":', "bytes"),  # in a measurement
        (PINNED, '"power":', '"power": 30, "power":', "power"),  # in the parameters
        (OLDER, '"bytes":', '"bytes": 1, "bytes":', "bytes"),  # a file upgraded first
    ],
)
@pytest.mark.parametrize("escape", [None, "\\u003a", "\\u003A"])
def test_a_key_named_twice_in_one_object_is_refused(fixture, before, after, key, escape):
    text = fixture.read_text().replace(before, after, 1)
    if escape:  # an escaped colon in a string (either case) cannot hide a key from the count
        text = text.replace('"name": "', f'"name": "{escape}', 1)
    with pytest.raises(InvalidArgument) as refused:
        parse_result(text, "run.json")
    assert str(refused.value) == (
        f"run.json is not a memprof result: it names the string {key!r} as a key twice in "
        "one object (readers differ on which one counts)"
    )


def test_colons_in_strings_are_not_keys():
    text = PINNED.read_text()
    data = json.loads(text)
    data["host"] = "a:b\u003ac::"  # host names and paths hold colons; a file may escape one
    assert parse_result(json.dumps(data), "run.json").host == "a:b:c::"
    escaped = json.dumps(data).replace("a:b:c::", "a:b\\u003ac::")
    assert parse_result(escaped, "run.json").host == "a:b:c::"


def test_the_colons_of_a_result_are_counted_as_written():
    """_encoded_colons counts a Result's measurements without writing them: as many as the
    written file holds, every fixture's and a trace whose strings hold colons."""
    for path in sorted(FIXTURES.glob("*.json")):
        found = results._as_today(path.read_bytes())
        if found is not None:
            assert results._encoded_colons(found) == msgspec.json.encode(found).count(b":")
    data = json.loads((FIXTURES / "h200_trace_pycuda.json").read_text())
    for index, m in enumerate(data["measurements"]):
        m["name"] = f"at::native::{m['name']}:"
        m["kind"] = None if index % 3 else f"{m['kind']}:a"
        m["operation"] = f"op:{index}" if index % 2 else m["operation"]
    found = results._as_today(json.dumps(data).encode())
    assert results._encoded_colons(found) == msgspec.json.encode(found).count(b":")
    assert text_fields(Measurement) == ("name", "operation", "kind")  # group, source: Literals


class Written(msgspec.Struct):
    """A field of each kind text_fields tells apart."""

    name: str
    count: int
    share: float | None
    unit: Literal["GB/s", "ms"]
    place: Literal["host:0", "gpu"]
    label: str | None
    sizes: list[int]
    pair: tuple[int, ...]


class Names(msgspec.Struct):
    names: list[str]


class Inner(msgspec.Struct):
    inner: Written


class NumberOrNames(msgspec.Struct):
    value: int | list[str]


class ByGpu(msgspec.Struct):
    ms: dict[int, float]  # numbers, but an object: its keys written with colons


class Labelled(msgspec.Struct):
    pair: tuple[int, str]


def test_text_fields_names_the_strings_and_none_where_a_field_holds_more():
    """The strings (a Literal with a colon in a value is one) are counted, numbers, null, the
    other Literals and lists of numbers are not; a list holding strings or an object (a dict of
    numbers too), no field."""
    assert text_fields(Written) == ("name", "place", "label")
    for record in (Names, Inner, NumberOrNames, ByGpu, Labelled):
        assert text_fields(record) is None, record


def test_a_key_named_twice_beside_names_with_colons_is_refused():
    data = json.loads((FIXTURES / "h200_trace_pycuda.json").read_text())
    for m in data["measurements"]:
        m["name"] = f"at::native::{m['name']}"
    text = json.dumps(data, indent=1).replace('"bytes":', '"bytes": 1, "bytes":', 1)
    with pytest.raises(InvalidArgument, match="names the string 'bytes' as a key twice"):
        parse_result(text, "run.json")
