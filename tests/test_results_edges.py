"""model/results.py where the recorded fixtures cannot tell a bug from the code: a lookup
after the measurements change, the edge between one Result and several, refusals whose
words or field a plain fixture hides, and the saved file's shape."""

import functools
import json
import os
import threading
import time
from pathlib import Path

import msgspec
import pytest

import memprof
from memprof.errors import InvalidArgument
from memprof.experiments import load as load_result
from memprof.model import results
from memprof.model.results import (
    FAILURE_WORDS,
    PASSED_DETAIL,
    RUN_SET_FORMAT,
    MissingMeasurement,
    Result,
    results_to_json,
)
from memprof.version import __version__

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = FIXTURES / "h200_pinned_p20.json"
CHECKS = [FIXTURES / "fleet" / f"h200x4_check_gpu{i}.json" for i in range(2)]


def test_a_missing_measurement_names_the_command_and_that_one_was_expected():
    result = load_result(PINNED)
    with pytest.raises(MissingMeasurement) as caught:
        result.find("h2d", "managed")
    assert str(caught.value) == (
        "0 measurements with operation='h2d', kind='managed' in the 'pinned' result "
        "(expected exactly one)"
    )
    assert (caught.value.command, caught.value.count) == ("pinned", 0)


def test_find_reads_the_measurements_as_they_are_now():
    """find's index is made once per list: a list replaced (even by one of the same length)
    or grown after a first lookup is read again, never the index of the old one."""
    result = load_result(PINNED)
    pinned_h2d = result.find("h2d", "pinned", "gpu")
    others = [m for m in result.measurements if m is not pinned_h2d]
    moved = msgspec.structs.replace(pinned_h2d, kind="managed")
    result.measurements = [*others, moved]  # the same length, another list
    assert result.find("h2d", "managed", "gpu") is moved
    with pytest.raises(MissingMeasurement):
        result.find("h2d", "pinned", "gpu")
    added = msgspec.structs.replace(pinned_h2d, kind="mapped")
    result.measurements.append(added)  # the same list, one longer
    assert result.find("h2d", "mapped", "gpu") is added


def test_load_takes_one_result_and_refuses_two(tmp_path):
    """The edge: a file of one Result is what load reads; one of two (the fewest a run of
    --device all saves) is refused in one line, and load_all reads both."""
    loaded = [memprof.load(path) for path in CHECKS]
    one = tmp_path / "one.json"
    one.write_text(results_to_json(loaded[:1]))
    assert memprof.load(one).to_json() == loaded[0].to_json()
    two = tmp_path / "two.json"
    two.write_text(results_to_json(loaded))
    with pytest.raises(InvalidArgument) as caught:
        memprof.load(two)
    assert str(caught.value) == (
        f"{two} holds 2 results (a run of --device all), not one: memprof report shows them "
        "all, memprof.load_all reads them"
    )
    assert [r.gpu_index for r in memprof.load_all(two)] == [0, 1]


def test_an_envelope_value_of_the_wrong_type_is_named_with_what_it_is(tmp_path):
    document = json.loads(results_to_json([memprof.load(CHECKS[0])]))
    path = tmp_path / "all.json"
    path.write_text(json.dumps({**document, "format_version": "1"}))
    assert document["format"] == RUN_SET_FORMAT
    with pytest.raises(InvalidArgument) as caught:
        memprof.load_all(path)
    assert str(caught.value) == (f"{path}: format_version is the string '1': expected an integer")


def test_a_nan_is_refused_at_its_field_wherever_the_version_is_written(tmp_path):
    """Python's json writes NaN; the loader reads such a file as the version it says, so the
    sample is named whether schema_version comes last (as memprof writes) or first."""
    data = json.loads(PINNED.read_text())
    data["measurements"][3]["samples_ms"][1] = float("nan")
    first = {"schema_version": data.pop("schema_version"), **data}
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(first))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value).startswith(f"{path}: measurements[3].samples_ms[1] is NaN: expected")


def test_an_older_file_with_an_integer_json_cannot_hold_is_one_line(tmp_path):
    """An older version is read as plain JSON before it is upgraded: what that refuses is
    said in the words it has for today's files."""
    text = (FIXTURES / "legacy_v2_pinned_p20.json").read_text()
    assert '"repeat": 10' in text
    path = tmp_path / "old.json"
    path.write_text(text.replace('"repeat": 10', '"repeat": 1' + "0" * 5000, 1))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value) == (
        f"{path} is not a memprof result: it holds an integer beyond 64 bits: no figure is "
        "that large"
    )


def test_a_saved_result_is_indented_one_space_a_level(tmp_path):
    """One space a level: a person can read it, and 100,000 measurements stay small."""
    path = tmp_path / "saved.json"
    load_result(PINNED).save(path)
    lines = path.read_text().splitlines()
    assert lines[0] == "{" and lines[1] == ' "command": "pinned",'
    assert ' "parameters": {' in lines and '  "power": 20,' in lines
    assert Result.to_json(load_result(PINNED)) + "\n" == path.read_text()


@pytest.mark.parametrize("stem", ["h200_pinned_p20", "legacy_v2_pinned_p20"])
@pytest.mark.parametrize("number", ["1e400", "-1e400"])
def test_a_number_beyond_a_float_is_refused_in_words_not_msgspecs_path(tmp_path, stem, number):
    """1e400 is JSON no float holds: said as the integer beyond 64 bits is, not as msgspec's
    'number out of range - at `$[...][...]`'."""
    text = (FIXTURES / f"{stem}.json").read_text()
    path = tmp_path / "huge.json"
    path.write_text(text.replace('"repeat": 10', f'"repeat": {number}', 1))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value) == (
        f"{path} is not a memprof result: it holds a number beyond a 64-bit float's range: "
        "no figure is that large"
    )


def test_the_state_of_each_gpu_is_its_own():
    """A run over four GPUs: each index finds that GPU's state, no index the run's own."""
    result = load_result(FIXTURES / "h200x4_peer.json")
    assert result.device.index == 0
    assert [result.gpu_state(index).index for index in (2, 3, 1)] == [2, 3, 1]
    assert result.gpu_state().index == 0
    assert result.gpu_state(7) is None


def refusal_of_version(tmp_path: Path, version: object) -> tuple[Path, str]:
    """The pinned fixture saved with another schema_version, and the loader's refusal of it."""
    path = tmp_path / "version.json"
    path.write_text(json.dumps({**json.loads(PINNED.read_text()), "schema_version": version}))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    return path, str(caught.value)


@pytest.mark.parametrize("version", [0, 5])
def test_a_version_outside_those_read_is_refused_naming_them(tmp_path, version):
    """Versions 1 to 4 are read (every fixture is one of them); 0 and 5 are not."""
    path, refusal = refusal_of_version(tmp_path, version)
    assert refusal == (
        f"{path} has result schema version {version}, which this memprof {__version__} cannot "
        "read (it reads versions 1, 2, 3, 4)"
    )


@pytest.mark.parametrize("version", ["4", 4.0, None])
def test_a_version_that_is_no_integer_is_refused_as_such(tmp_path, version):
    path, refusal = refusal_of_version(tmp_path, version)
    shown = {"4": "the string '4'", 4.0: "4.0", None: "null"}[version]
    assert refusal == f"{path}: schema_version is {shown}: expected an integer"


def test_repr_says_whether_the_run_was_verified_and_on_which_gpu():
    """The first line of repr is a verdict: one check failed is FAILED, all passed is
    verified; a run without device facts says no GPU was recorded."""
    result = load_result(PINNED)
    head = "<memprof 'pinned' Result: {}, 2026-11-25T15:25:58+00:00, 29 measurements, {}>"
    assert repr(result).splitlines()[0] == head.format("NVIDIA H200", "verified")
    result.checks[1].passed = False
    assert repr(result).splitlines()[0] == head.format("NVIDIA H200", "FAILED verification")
    result.checks[1].passed = True
    result.device = None
    assert repr(result).splitlines()[0] == head.format("no GPU recorded", "verified")


def test_a_result_without_the_experiments_says_how_to_get_its_frame(monkeypatch):
    result = load_result(PINNED)
    monkeypatch.setattr(Result, "views", None)
    assert result._repr_html_() is None
    with pytest.raises(TypeError) as caught:
        result.to_frame()
    assert str(caught.value) == (
        "this Result's frame and tables need memprof.experiments: import memprof and use "
        "memprof.load or memprof.run, which load it"
    )


# -- reading the bytes: a pipe's pieces and the size limit -----------------------------------------


@pytest.fixture
def pipe_of(monkeypatch):
    """A pipe holding the data given (its writer closed), whose reads give at most `piece`
    bytes: a pipe may hand a reader less than it asked for."""
    opened: list[int] = []

    def make(data: bytes, piece: int) -> Path:
        assert len(data) < 1 << 16  # the whole of it fits in the pipe before anyone reads
        read_end, write_end = os.pipe()
        opened.append(read_end)
        os.write(write_end, data)
        os.close(write_end)
        monkeypatch.setattr(os, "read", functools.partial(_read_at_most, READ, piece))
        return Path(f"/dev/fd/{read_end}")

    yield make
    for descriptor in opened:
        os.close(descriptor)


READ = os.read


def _read_at_most(read, piece: int, descriptor: int, wanted: int) -> bytes:
    return read(descriptor, min(wanted, piece))


@pytest.mark.parametrize("pieces", [2, 3])
def test_a_result_read_in_pieces_loads_whole(pipe_of, pieces):
    data = PINNED.read_bytes()
    pipe = pipe_of(data, piece=-(-len(data) // pieces))
    assert load_result(pipe).to_json() == load_result(PINNED).to_json()


def test_a_pipe_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(pipe_of, monkeypatch):
    """The limit read from a pipe, whose size is known only by reading it: a piece that
    reaches the limit exactly is read past, and the byte after it refused."""
    data = PINNED.read_bytes()
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", len(data))
    assert load_result(pipe_of(data, piece=len(data) - 1)).command == "pinned"
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", len(data) - 1)
    pipe = pipe_of(data, piece=len(data) - 1)
    with pytest.raises(InvalidArgument) as caught:
        load_result(pipe)
    assert str(caught.value) == f"{pipe} is not a memprof result: larger than 0 MiB"


@pytest.mark.parametrize(("size_mib", "over"), [(3, 0), (3, 1)])
def test_a_file_at_the_limit_is_read_and_one_byte_over_refused_unread(
    tmp_path, monkeypatch, size_mib, over
):
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", size_mib << 20)
    path = tmp_path / "spaces.json"
    path.write_bytes(b" " * ((size_mib << 20) + over))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    read = f"{path} is not a memprof result: invalid JSON (input data was truncated)"
    refused = f"{path} is not a memprof result: larger than {size_mib} MiB"
    assert str(caught.value) == (refused if over else read)


def test_a_pipe_whose_writer_is_slow_is_waited_for(tmp_path):
    """Opened without waiting for a writer, then read blocking: the data comes later."""
    read_end, write_end = os.pipe()

    def write_late() -> None:
        time.sleep(0.5)
        os.write(write_end, PINNED.read_bytes())
        os.close(write_end)

    writer = threading.Thread(target=write_late)
    writer.start()
    try:
        assert load_result(Path(f"/dev/fd/{read_end}")).command == "pinned"
    finally:
        writer.join()
        os.close(read_end)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("-", "cannot read -: No such file or directory (standard input is /dev/stdin)"),
        ("missing.json", "cannot read missing.json: No such file or directory"),
        ("a\0b", "cannot read a\x00b: embedded null byte"),
        ("/proc/self/mem", "cannot read /proc/self/mem: Input/output error"),
    ],
)
def test_a_path_that_cannot_be_read_says_why_in_one_line(tmp_path, monkeypatch, name, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument) as caught:
        load_result(Path(name))
    assert str(caught.value) == message


# -- what each part of a file must make true (check_consistency) ---------------------------------


def _refusal_of(tmp_path: Path, change) -> str:
    data = json.loads(PINNED.read_text())
    change(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    prefix = f"{path}: "
    assert str(caught.value).startswith(prefix)
    return str(caught.value).removeprefix(prefix)


def _loads(tmp_path: Path, change) -> Result:
    data = json.loads(PINNED.read_text())
    change(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return load_result(path)


def _check(index: int, passed: bool, detail: str):
    return lambda data: data["checks"][index].update(passed=passed, detail=detail)


@pytest.mark.parametrize("word", FAILURE_WORDS)
@pytest.mark.parametrize("case", [str.lower, str.upper])
def test_a_check_that_passed_but_says_it_failed_is_refused(tmp_path, word, case):
    detail = f"sumArrays: {case(word)} at element 3"
    assert _refusal_of(tmp_path, _check(0, True, detail)) == (
        f"checks[0].passed is true, but detail says it failed: {detail!r}"
    )


def test_a_check_that_failed_but_says_it_succeeded_is_refused(tmp_path):
    assert _refusal_of(tmp_path, _check(1, False, PASSED_DETAIL)) == (
        "checks[1].passed is false, but detail says 'Check result success!'"
    )


def test_a_check_whose_words_agree_with_it_loads(tmp_path):
    """Just inside both refusals: a failure in failure's words, a success in success's."""
    failed = "3 of 1048576 elements differ; first at index 7"
    result = _loads(tmp_path, _check(0, False, failed))
    assert (result.checks[0].passed, result.checks[0].detail) == (False, failed)
    assert not result.passed
    result = _loads(tmp_path, _check(1, True, "Check result success! 1048576 elements"))
    assert result.passed


def _measurement(index: int, **values):
    return lambda data: data["measurements"][index].update(values)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            _measurement(7, batch=0),
            "measurements[7].batch is 0, but throughput_ms holds back-to-back batches",
        ),
        (
            _measurement(4, batch=4),
            "measurements[4].batch is 4, but throughput_ms holds no back-to-back batch",
        ),
        (
            _measurement(4, events_ms=[0.01] * 20),
            "measurements[4].events_ms holds events beside CUPTI's records, but source is 'host'",
        ),
        (
            _measurement(5, events_ms=[0.01] * 19),
            "measurements[5].events_ms has 19 samples, one per operation, but samples_ms has 20",
        ),
        (
            lambda data: data["measurements"][5].pop("samples_ms"),
            "measurements[5].samples_ms is missing or empty: a measurement holds a sample",
        ),
    ],
    ids=[
        "batch 0 with batches",
        "batch 4 without",
        "events not CUPTI's",
        "events short",
        "no samples",
    ],
)
def test_a_measurement_contradicting_itself_is_refused_naming_the_field(tmp_path, change, message):
    assert _refusal_of(tmp_path, change) == message


@pytest.mark.parametrize(
    ("stem", "first"),
    [("legacy_v1_pinned_p20", 1), ("legacy_v2_pinned_p20", 2), ("h200_pinned_p20", None)],
)
def test_the_version_a_run_was_first_saved_in_is_kept_when_it_is_saved_again(tmp_path, stem, first):
    """What an older run's values are held to (written_as) survives its upgrade and a save
    by today's memprof; a run saved today has none."""
    result = load_result(FIXTURES / f"{stem}.json")
    assert (result.schema_version, result.first_schema_version) == (4, first)
    assert result.written_as == (first or 4)
    path = tmp_path / "again.json"
    result.save(path)
    assert json.loads(path.read_text())["first_schema_version"] == first
    again = load_result(path)
    assert (again.first_schema_version, again.written_as) == (first, first or 4)


MANAGED = FIXTURES / "h200_managed.json"


def _managed_refusal(tmp_path: Path, change) -> str | None:
    """The loader's refusal of the managed fixture changed so (None: it loads)."""
    data = json.loads(MANAGED.read_text())
    change(data["timing"]["unified_memory"])
    path = tmp_path / "managed.json"
    path.write_text(json.dumps(data))
    try:
        load_result(path)
    except InvalidArgument as refused:
        return str(refused).removeprefix(f"{path}: ")
    return None


def test_a_counter_of_no_records_does_not_end_the_check_of_the_others(tmp_path):
    def change(counters: dict) -> None:
        counters["BYTES_TRANSFER_HTOD"].update(count=0, total=0, min=0, max=0, time_ms=0.0)
        counters["GPU_PAGE_FAULT"].update(min=99)  # after it in the file

    assert _managed_refusal(tmp_path, change) == (
        "timing.unified_memory.GPU_PAGE_FAULT.min is 99, more than max (17)"
    )


@pytest.mark.parametrize(
    ("total", "refused"), [(2726, True), (2727, False), (46071, False), (46072, True)]
)
def test_a_counters_total_is_held_to_what_its_records_can_sum_to(tmp_path, total, refused):
    """2711 faults of 1 to 17: one record at 17 and the rest at 1 make 2727, one at 1 and
    the rest at 17 make 46071; each is possible, one past it is not."""
    message = _managed_refusal(tmp_path, lambda c: c["GPU_PAGE_FAULT"].update(total=total))
    assert message == (
        f"timing.unified_memory.GPU_PAGE_FAULT.total is {total}, but 2711 records of 1 to 17 "
        "make 2727 to 46071"
        if refused
        else None
    )


@pytest.mark.parametrize(
    ("created_at", "refused"),
    [
        ("2026-11-25T15:25:58Z", False),  # UTC written as Z
        ("2026-02-28T23:59:59.5+01:00", False),
        ("2026-02-30T00:00:00+00:00", True),  # the format, but no such day
        ("2026-11-25T24:00:00Z", True),
    ],
)
def test_created_at_is_a_real_date_and_time(tmp_path, created_at, refused):
    data = json.loads(PINNED.read_text())
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**data, "created_at": created_at}))
    if not refused:
        assert load_result(path).created_at == created_at
        return
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value) == f"{path}: created_at is the string {created_at!r}: not a date"


@pytest.mark.parametrize("stem", ["h200_pinned_p20", "legacy_v2_pinned_p20"])
def test_an_extra_of_null_reads_as_an_extra_of_nothing(tmp_path, stem):
    """memprof writes {} for a command with nothing extra; null (an older or hand-made
    file) means the same, not a refusal."""
    data = json.loads((FIXTURES / f"{stem}.json").read_text())
    path = tmp_path / "null.json"
    path.write_text(json.dumps({**data, "extra": None}))
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({**data, "extra": {}}))
    assert load_result(path).extra == load_result(empty).extra


def test_an_older_files_bad_value_is_named_with_its_declared_range(tmp_path):
    data = json.loads((FIXTURES / "legacy_v2_pinned_p20.json").read_text())
    data["measurements"][2]["bytes"] = "4096"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument) as caught:
        load_result(path)
    assert str(caught.value) == (
        f"{path}: measurements[2].bytes is the string '4096': expected an integer 0 to 2^53"
    )


def test_text_with_a_lone_surrogate_is_refused_in_one_line_naming_its_byte():
    """memprof.experiments.parse (and Result.from_json) of a str: a lone surrogate ends in the
    loader's refusal, as a file's bad byte does, never in msgspec's UnicodeDecodeError."""
    from memprof.experiments import parse

    text = PINNED.read_text()
    place = text.index('"pinned"')
    spoiled = text[:place] + '"pin\udc80ned"' + text[place + len('"pinned"') :]
    with pytest.raises(InvalidArgument) as caught:
        parse(spoiled, "pasted")
    offset = len(text[: place + 4].encode())
    assert str(caught.value) == (
        f"pasted is not a memprof result: not UTF-8 text (byte 0xed at offset {offset})"
    )
    assert parse(text, "pasted").command == "pinned"  # the same text, whole, loads
