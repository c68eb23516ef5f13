"""Result JSON: round trip, schema versions, and every bad file refused in one line."""

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import ExitCode, InvalidArgument
from memprof.experiments import COMMANDS, experiment_class
from memprof.experiments import load as load_result
from memprof.model.results import SCHEMA_VERSION, MissingMeasurement

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = sorted(FIXTURES.glob("*.json"))


def test_fixtures_were_recorded_on_a_gpu():
    assert len(RECORDED) >= 4
    for path in RECORDED:
        result = load_result(path)
        if result.command == "trace":  # the traced program owns its GPU: nothing to collect
            assert result.measurements and result.timing.source == "cupti"
            continue
        assert result.device is not None and result.device.multiprocessors > 0


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_every_fixture_loads_saves_and_loads_again_equal(path, tmp_path):
    result = load_result(path)
    saved = tmp_path / "again.json"
    result.save(saved)
    again = load_result(saved)
    assert again == result
    assert again.to_json() == result.to_json()
    assert json.loads(saved.read_text())["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_loading_keeps_every_recorded_value(path):
    """Loading converts (lists to tuples, version 1 to 2) but never drops or alters a figure."""
    recorded = json.loads(path.read_text())
    loaded = json.loads(load_result(path).to_json())
    for m_recorded, m_loaded in zip(recorded["measurements"], loaded["measurements"], strict=True):
        if recorded["schema_version"] < 3 and m_loaded["gpus"]:  # the GPUs were in the key
            assert version_2_operation(m_loaded, recorded["command"]) == m_recorded["operation"]
            m_loaded = {**m_loaded, "operation": m_recorded["operation"]}
        assert {k: m_loaded[k] for k in m_recorded} == m_recorded
    parameters = loaded["parameters"]  # and any added since, at their defaults
    assert {k: parameters[k] for k in recorded["parameters"]} == recorded["parameters"]
    assert loaded["device"] == recorded["device"]
    assert loaded["checks"] == recorded["checks"]
    for key in ("command", "pid", "host", "created_at", "memprof_version"):
        assert loaded[key] == recorded[key]


def version_2_operation(measurement: dict, command: str) -> str:
    """How schema 2 wrote a multi-GPU measurement's operation, its GPUs inside."""
    operation, gpus = measurement["operation"], measurement["gpus"]
    if command == "peer":
        return f"{operation} {gpus[0]}->{gpus[1]}"
    direction, _, at_once = operation.partition("_")
    first = measurement["kind"] if command == "portable" else ("together" if at_once else "alone")
    return f"{first} {direction} {gpus[0]}"


@pytest.mark.parametrize("name", ["compare", "streams"])
def test_version_1_bytes_is_checked_against_the_power_and_dropped(name, tmp_path):
    """Version 1 wrote an array's bytes into extra (as `bytes`); today they follow from
    parameters.power: a file whose bytes agree loads without them, one that contradicts
    its power is refused naming the field."""
    recorded = json.loads((FIXTURES / f"legacy_v1_{name}.json").read_text())
    assert recorded["schema_version"] == 1
    result = load_result(FIXTURES / f"legacy_v1_{name}.json")
    assert recorded["extra"]["bytes"] == 4 << result.parameters.power
    assert not hasattr(result.extra, "bytes") and not hasattr(result.extra, "bytes_per_array")
    recorded["extra"]["bytes"] *= 2
    path = tmp_path / "contradicting.json"
    path.write_text(json.dumps(recorded))
    with pytest.raises(InvalidArgument, match=r"extra.bytes_per_array is .*, but the parameters"):
        load_result(path)


def test_parameters_come_back_as_the_params_types():
    result = load_result(FIXTURES / "h200_sweep.json")
    assert result.parameters.powers == tuple(range(8, 27))
    assert isinstance(result.parameters.kinds, tuple)


def test_a_parameter_added_since_the_file_was_written_takes_its_default():
    recorded = json.loads((FIXTURES / "legacy_v1_pinned_p20.json").read_text())
    assert "host_buffer" not in recorded["parameters"]  # recorded before it existed
    result = load_result(FIXTURES / "legacy_v1_pinned_p20.json")
    assert asdict(result.parameters) == {**recorded["parameters"], "host_buffer": "numpy"}


def test_every_experiment_declares_its_params_and_extra():
    for experiment in (experiment_class(c.name) for c in COMMANDS):
        assert is_dataclass(experiment.Params), experiment.name
        assert is_dataclass(experiment.Extra), experiment.name


def test_numpy_scalars_are_saved_as_plain_values(tmp_path):
    """Experiments compute with numpy: a bool from a comparison, an int64 size."""
    result = load_result(FIXTURES / "h200_managed.json")
    result.extra = replace(result.extra, skipped=[np.str_("prefetch: not here")])
    result.checks[0].passed = np.bool_(True)
    result.checks[0].elements = np.int64(result.checks[0].elements)
    result.measurements[0].samples_ms[0] = np.float64(0.25)
    path = tmp_path / "numpy.json"
    result.save(path)
    again = load_result(path)
    assert again.checks[0].passed is True
    assert type(again.checks[0].elements) is int
    assert again.extra.skipped == ["prefetch: not here"]
    assert again.measurements[0].samples_ms[0] == 0.25


def test_find_is_exact():
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    assert result.find("h2d", "pinned", "gpu").kind == "pinned"
    with pytest.raises(MissingMeasurement, match="2 measurements with operation='h2d'"):
        result.find("h2d", "pinned")  # the GPU activity and the API call
    with pytest.raises(KeyError, match="0 measurements with operation='h2d', kind='managed'"):
        result.find("h2d", "managed")
    with pytest.raises(KeyError, match="bytes=5"):
        result.find("h2d", "pinned", "gpu", byte_count=5)


def test_newer_schema_is_refused_with_the_versions(tmp_path):
    data = json.loads((FIXTURES / "h200_info.json").read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=f"schema version {SCHEMA_VERSION + 1}"):
        load_result(path)


def test_missing_file_says_why(tmp_path):
    with pytest.raises(InvalidArgument, match="No such file"):
        load_result(tmp_path / "nothing.json")


# Bad files: a real recording with one thing broken, and the message that must name it.

Mutation = Callable[[dict], None]


def _measurement(data: dict, operation: str, kind: str, group: str) -> dict:
    return next(
        m
        for m in data["measurements"]
        if (m["operation"], m["kind"], m["group"]) == (operation, kind, group)
    )


def _set_sample(value: object) -> Mutation:
    def mutate(data: dict) -> None:
        data["measurements"][3]["samples_ms"][1] = value

    return mutate


def _set(path: tuple, value: object) -> Mutation:
    def mutate(data: dict) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _remove(path: tuple) -> Mutation:
    def mutate(data: dict) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def _remove_pageable_h2d(data: dict) -> None:
    data["measurements"].remove(_measurement(data, "h2d", "pageable", "gpu"))


def _duplicate_pinned_d2h(data: dict) -> None:
    data["measurements"].append(_measurement(data, "d2h", "pinned", "gpu"))


BAD_PINNED = {
    "NaN sample": (
        _set_sample(math.nan),
        "measurements[3].samples_ms[1] is NaN: expected a number 0 to",
    ),
    "Infinity sample": (_set_sample(math.inf), "measurements[3].samples_ms[1] is Infinity"),
    "negative sample": (_set_sample(-0.5), "measurements[3].samples_ms[1] is -0.5: expected"),
    "sample as a string": (_set_sample("0.5"), "measurements[3].samples_ms[1] is the string"),
    "sample as true": (_set_sample(True), "measurements[3].samples_ms[1] is true"),
    "empty samples": (
        _set(("measurements", 3, "samples_ms"), []),
        "measurements[3].samples_ms is an empty list: expected a list",
    ),
    "samples left out": (_remove(("measurements", 3, "samples_ms")), "samples_ms is missing"),
    "bytes as a string": (
        _set(("measurements", 2, "bytes"), "4096"),
        "measurements[2].bytes is the string '4096': expected an integer 0 to 2^53",
    ),
    "negative bytes": (_set(("measurements", 2, "bytes"), -1), "measurements[2].bytes is -1"),
    "bytes as a float": (_set(("measurements", 2, "bytes"), 1.5), "measurements[2].bytes is 1.5"),
    "bytes as true": (_set(("measurements", 2, "bytes"), True), "measurements[2].bytes is true"),
    "unknown group": (
        _set(("measurements", 0, "group"), "gpus"),
        "measurements[0].group is the string 'gpus': expected one of gpu, api, host, span",
    ),
    "unknown source": (_set(("measurements", 0, "source"), "nvprof"), "measurements[0].source"),
    "kind as a number": (_set(("measurements", 0, "kind"), 3), "measurements[0].kind is 3"),
    "unknown measurement field": (
        _set(("measurements", 0, "bandwidth"), 1.0),
        "measurements[0].bandwidth is not a known field",
    ),
    "measurement as a number": (_set(("measurements", 1), 7), "measurements[1] is 7"),
    "power as a string": (
        _set(("parameters", "power"), "20"),
        "parameters.power is the string '20': expected an integer",
    ),
    "power as a float": (_set(("parameters", "power"), 20.5), "parameters.power is 20.5"),
    "unknown parameter": (_set(("parameters", "kinds"), []), "parameters.kinds is not a known"),
    "parameter as null": (_set(("parameters", "warmup"), None), "parameters.warmup is null"),
    "parameters as a list": (_set(("parameters",), [20]), "parameters is a list"),
    "command as a list": (
        _set(("command",), ["pinned"]),
        "command is a list of 1 item: expected a string",
    ),
    "unknown command": (_set(("command",), "pinnned"), "command is the string 'pinnned'"),
    "command missing": (_remove(("command",)), "command is missing"),
    "extra old name": (_set(("extra", "bytes"), 4), "extra.bytes is not a known field"),
    "compute capability of 3": (
        _set(("device", "compute_capability"), [9, 0, 1]),
        "device.compute_capability is a list of 3 items: expected a list of 2 items",
    ),
    "memory as a string": (
        _set(("device", "memory_total_bytes"), "140 GB"),
        "device.memory_total_bytes is the string",
    ),
    "pcie width as a string": (
        _set(("device", "pcie_width"), "x16"),
        "device.pcie_width is the string 'x16': expected an integer 0 to 64 or null",
    ),
    "attribute as a float": (
        _set(("device", "attributes", "unifiedAddressing"), 0.5),
        "device.attributes.unifiedAddressing is 0.5",
    ),
    "check passed as a string": (
        _set(("checks", 0, "passed"), "yes"),
        "checks[0].passed is the string 'yes': expected true or false",
    ),
    "check elements negative": (_set(("checks", 0, "elements"), -4), "checks[0].elements is -4"),
    "timing source unknown": (
        _set(
            ("timing",),
            {
                "source": "nsight",
                "note": "",
                "event_overhead_ms": None,
                "unified_memory": None,
                "unified_memory_note": None,
            },
        ),
        "timing.source is the string 'nsight'",
    ),
    "pid as a string": (_set(("pid",), "123"), "pid is the string '123'"),
    "host missing": (_remove(("host",)), "host is missing"),
    "schema version as a string": (_set(("schema_version",), "1"), "schema_version is the string"),
    "needed measurement removed": (
        _remove_pageable_h2d,
        "the pinned summary needs exactly one measurement with operation='h2d', "
        "kind='pageable', group='gpu'; the file has 0",
    ),
    "needed measurement twice": (
        _duplicate_pinned_d2h,
        "again (gpu '[CUDA memcpy DtoH]', pinned, 4194304 bytes)",  # before its summary needs it
    ),
}


# Fields older files held (today derived from the parameters): checked as they upgrade.
BAD_OLDER_PINNED = {
    "extra bytes as a string": (
        _set(("extra", "bytes_per_array"), "4 MiB"),
        "extra.bytes_per_array is the string '4 MiB'",
    ),
    "extra field contradicting": (
        _set(("extra", "elements"), 1 << 19),
        "extra.elements is 524288, but the parameters and measurements make 1048576",
    ),
}
CASES = [pytest.param("h200_pinned_p20", *case, id=name) for name, case in BAD_PINNED.items()] + [
    pytest.param("legacy_v2_pinned_p20", *case, id=name) for name, case in BAD_OLDER_PINNED.items()
]


@pytest.mark.parametrize(("stem", "mutate", "message"), CASES)
def test_a_bad_value_is_one_line_naming_the_file_and_the_field(tmp_path, stem, mutate, message):
    data = json.loads((FIXTURES / f"{stem}.json").read_text())
    mutate(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") or text.startswith(f"{path} is ")
    assert message in text
    assert "\n" not in text
    assert caught.value.exit_code == ExitCode.USAGE


NOT_A_RESULT = " is not a memprof result: "
BAD_BYTES = {
    "binary": (bytes(range(256)) * 4, NOT_A_RESULT + "not UTF-8 text (byte 0x80 at offset 128)"),
    "png header": (
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        NOT_A_RESULT + "not UTF-8 text (byte 0x89 at offset 0)",
    ),
    "latin-1 text": (
        '{"schema_version": 1, "host": "café"}'.encode("latin-1"),
        NOT_A_RESULT + "not UTF-8 text (byte 0xe9 at offset 34)",
    ),
    "NUL bytes": (
        b"\0\0\0\0",
        NOT_A_RESULT + "invalid JSON at line 1 column 1 (invalid character)",
    ),
    # the place as an editor counts it: lines before it, and the column after the last of them
    "a bad value on line 3": (
        b'\n{"a": 1,\n "b": x\n}\n',
        NOT_A_RESULT + "invalid JSON at line 3 column 7 (invalid character)",
    ),
    "a bad key after a first empty line": (
        b"\n{x}\n",
        NOT_A_RESULT + "invalid JSON at line 2 column 2 (object keys must be strings)",
    ),
    "a lone surrogate on line 2": (
        b'{\n "host": "ab\\ud800"}',
        NOT_A_RESULT
        + "invalid JSON at line 2 column 13 (a lone UTF-16 surrogate in a string, which is no "
        "character)",
    ),
    # Python's json writes NaN; a file of it is refused as JSON whatever else it holds
    "NaN in a list": (
        b"[NaN]",
        NOT_A_RESULT + "invalid JSON at line 1 column 2 (invalid character)",
    ),
    "NaN beside an unreadable version": (
        b'{"schema_version": 99, "x": NaN}',
        NOT_A_RESULT + "invalid JSON at line 1 column 29 (invalid character)",
    ),
    "truncated": (
        (FIXTURES / "h200_pinned_p20.json").read_bytes()[:1000],
        NOT_A_RESULT + "invalid JSON (input data was truncated)",
    ),
    "empty": (b"", NOT_A_RESULT + "it is empty"),
    "a list": (b"[1, 2]", NOT_A_RESULT + "the JSON is a list of 2 items, not an object"),
    "a string": (b'"pinned"', NOT_A_RESULT + "the JSON is the string 'pinned', not an object"),
    "no schema version": (b'{"command": "pinned"}', NOT_A_RESULT + "no schema_version"),
    "nested too deeply": (b"[" * 100_000, NOT_A_RESULT + "JSON nested too deeply"),
    "nested too deeply in an object": (
        b'{"schema_version": 4, "command": "pinned", "host": ' + b"[" * 100_000,
        NOT_A_RESULT + "JSON nested too deeply",
    ),
    "only a version": (b'{"schema_version": 2}', ": command is missing"),
    "a byte-order mark": (
        b"\xef\xbb\xbf" + (FIXTURES / "h200_pinned_p20.json").read_bytes(),
        " is not a memprof result as saved: it starts with a UTF-8 byte-order mark (an "
        "editor's): save it without one",
    ),
}


@pytest.mark.parametrize(("content", "message"), BAD_BYTES.values(), ids=BAD_BYTES.keys())
def test_a_file_that_is_no_result_is_one_line(tmp_path, content, message):
    path = tmp_path / "run.json"
    path.write_bytes(content)
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value) == f"{path}{message}"


@pytest.mark.parametrize(
    # info and trace summaries need no measurements (a traced program may make none)
    "path",
    [p for p in RECORDED if not {"info", "trace"} & set(p.stem.split("_"))],
    ids=lambda p: p.name,
)
def test_every_summary_without_its_measurements_is_one_line(tmp_path, path):
    data = json.loads(path.read_text())
    data["measurements"] = []
    broken = tmp_path / path.name
    broken.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=f"^{re.escape(str(broken))}: ") as caught:
        load_result(broken)
    declared = re.search(
        r"measurements has no \w+ '\w+', which every \w+ run records", str(caught.value)
    )
    assert declared or "summary" in str(caught.value)


def test_a_run_without_its_device_facts_is_one_line(tmp_path):
    data = json.loads((FIXTURES / "h200_device.json").read_text())
    data["device"] = None  # the device summary reads the GPU's peak bandwidth
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="device is null, but every device run records"):
        load_result(path)


def test_a_summary_that_cannot_be_built_is_one_line(tmp_path):
    data = json.loads((FIXTURES / "h200_device.json").read_text())
    data["measurements"] = [m for m in data["measurements"] if "triad" not in m["name"]]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match="has 0 gpu kernels named stream_triad_"):
        load_result(path)


def test_fields_added_later_may_be_absent_from_older_files():
    """Version 1 files predate source, events_ms, throughput_ms, batch and timing."""
    result = load_result(FIXTURES / "legacy_v1_pinned_p20.json")
    assert result.timing is None
    assert all(m.source == "events" and m.throughput_ms == [] for m in result.measurements)


# The same bad files through `memprof report`: exit 2, one line on stderr, nothing on stdout.

REPORT_CASES = {
    name: BAD_PINNED[name]
    for name in (
        "NaN sample",
        "negative sample",
        "bytes as a string",
        "power as a string",
        "command as a list",
        "needed measurement removed",
    )
}


@pytest.mark.parametrize(("mutate", "message"), REPORT_CASES.values(), ids=REPORT_CASES.keys())
def test_report_of_a_bad_file_prints_one_line_and_nothing_else(tmp_path, mutate, message):
    data = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())
    mutate(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    good = str(FIXTURES / "h200_register.json")
    result = CliRunner().invoke(app, ["report", good, str(path)])  # the good one first
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"memprof: error: {path}: ")
    assert message in result.stderr


@pytest.mark.parametrize(("content", "_"), BAD_BYTES.values(), ids=BAD_BYTES.keys())
def test_diff_of_a_file_that_is_no_result_prints_one_line(tmp_path, content, _):
    path = tmp_path / "run.json"
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["diff", str(FIXTURES / "h200_pinned_p20.json"), str(path)])
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"memprof: error: {path}")
