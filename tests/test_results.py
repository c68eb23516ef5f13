"""Result JSON: round trip, schema version, bad files."""

import json
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.results import SCHEMA_VERSION, Result

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = sorted(FIXTURES.glob("*.json"))


def test_fixtures_were_recorded_on_a_gpu():
    assert len(RECORDED) >= 4
    for path in RECORDED:
        result = Result.load(path)
        assert result.device is not None and result.device.multiprocessors > 0


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_json_round_trip_is_lossless(path):
    result = Result.load(path)
    again = Result.from_json(result.to_json())
    assert again == result
    assert json.loads(again.to_json()) == json.loads(path.read_text())


def test_every_sample_and_the_run_context_are_kept():
    data = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    for key in ("memprof_version", "device", "parameters", "measurements", "checks", "pid"):
        assert key in data
    htod = next(m for m in data["measurements"] if m["operation"] == "h2d")
    assert len(htod["samples_ms"]) == 2 * data["parameters"]["repeat"]


def test_find_is_exact():
    result = Result.load(FIXTURES / "h200_pinned_p20.json")
    assert result.find("h2d", "pinned", "gpu").kind == "pinned"
    with pytest.raises(KeyError, match="2 measurements"):
        result.find("h2d", "pinned")  # the GPU activity and the API call
    with pytest.raises(KeyError, match="0 measurements"):
        result.find("h2d", "managed")


def test_newer_schema_is_refused_with_the_versions(tmp_path):
    data = json.loads((FIXTURES / "h200_info.json").read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=f"schema version {SCHEMA_VERSION + 1}"):
        Result.load(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a memprof result"),
        ("[1, 2]", "no schema_version"),
        ('{"schema_version": 1}', "not a memprof result"),
    ],
)
def test_broken_files_are_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(InvalidArgument, match=message):
        Result.load(path)


def test_missing_file_says_why(tmp_path):
    with pytest.raises(InvalidArgument, match="No such file"):
        Result.load(tmp_path / "nothing.json")
