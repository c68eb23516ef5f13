"""A saved result is untrusted input: every string in it reaches the terminal literally.

Recorded fixtures are turned hostile here: every string the loader accepts (a measurement
name, the host, the GPU's name, a check's detail, a traced program's arguments, the keys of
free-form maps) gets terminal control sequences and rich markup appended. Whatever the
environment (colour on or off, NO_COLOR, --no-color, any width, an ASCII stream), the output
must hold no byte below 0x20 but newline, no escape sequence but memprof's own colours, no
C1 control and no bidi override, and show the markup as typed.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprof.cli import app
from memprof.errors import MemprofError
from memprof.experiments import load, summarize
from memprof.output.literal import literal
from tests.conftest import FIXTURES

ESC, BEL = "\x1b", "\x07"
HOSTILE = (
    f"{ESC}[2J{ESC}[H"  # clear the screen
    f"{ESC}]0;owned{BEL}"  # set the window title
    f"{ESC}]8;;http://evil.example{ESC}\\link{ESC}]8;;{ESC}\\"  # an OSC 8 hyperlink
    "[bold red]red[/][link=http://evil.example]click[/link]"  # rich markup
    ":smile::warning:"  # rich's emoji codes
    "\r\t\x00\x08\x7f"  # carriage return, tab, NUL, backspace, DEL
    "\x9b31m\x85"  # C1: a one-character CSI, NEL
    "\u202eevil\u2066\u200b\u2028"  # bidi override and isolate, zero width, line separator
)
LONE_SURROGATE = "\ud800"  # no character at all: the loader refuses it (a test below)
# What the hostile text must look like once printed: control characters as escapes.
SHOWN = [
    "\\x1b[2J",
    "\\x07",
    "[bold red]red[/]",
    "[link=http://evil.example]",
    ":smile::warning:",
    "\\u202e",
]
# memprof's own styling, the only escape sequences allowed when colour is on.
SGR = re.compile(r"\x1b\[[0-9;]*m")
FORBIDDEN = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
# A recording of each shape of Result: one GPU, whole-program traces, several GPUs, device
# facts, unified memory, timelines, a legacy file.
NAMES = [
    "h200_pinned_p20",
    "h200_info",
    "h200_managed",
    "h200_streams",
    "h200_trace_managed",
    "h200x2_peer",
    "legacy_v1_pinned_p20",
]


def _string_places(value, path=()) -> set[tuple]:
    """Every place a string sits in a JSON document, list positions as '*', keys as '{key}'."""
    places = set()
    if isinstance(value, dict):
        for key, item in value.items():
            places.add((*path, "{key}"))
            places |= _string_places(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            places |= _string_places(item, (*path, "*"))
    elif isinstance(value, str):
        places.add(path)
    return places


def _poisoned(value, place: tuple):
    """`value` with HOSTILE appended to every string at `place`."""
    if not place:
        return value + HOSTILE if isinstance(value, str) else value
    head, rest = place[0], place[1:]
    if isinstance(value, list) and head == "*":
        return [_poisoned(item, rest) for item in value]
    if isinstance(value, dict) and head == "{key}" and not rest:
        return {key + HOSTILE: item for key, item in value.items()}
    if isinstance(value, dict) and head in value:
        return {**value, head: _poisoned(value[head], rest)}
    return value


def _accepted(document: dict, path: Path) -> bool:
    path.write_text(json.dumps(document))
    try:
        summarize(load(path))
    except MemprofError:  # refused by the loader, as it should be where a string is a key
        return False
    return True


LINKED = [
    (("device", "name"), ("extra", "devices", "*", "name")),
    (("device", "pci_bus_id"), ("extra", "devices", "*", "pci_bus_id")),
]


@cache
def hostile_file(name: str, folder: Path) -> tuple[Path, tuple]:
    """The fixture with every string the loader accepts made hostile; and those places."""
    original = json.loads((FIXTURES / f"{name}.json").read_text())
    if original.get("command") == "trace":  # a program that raised exits 1: error may be set
        original["extra"]["exit_code"] = 1
    path = folder / f"{name}.hostile.json"
    document, taken = copy.deepcopy(original), []
    for linked in LINKED:  # copies of one fact: poisoned together, or the file contradicts itself
        candidate = document
        for place in linked:
            candidate = _poisoned(candidate, place)
        if all(place in _string_places(original) for place in linked) and _accepted(
            candidate, path
        ):
            document = candidate
            taken += linked
    for place in sorted(_string_places(original) - set(taken), key=str):
        candidate = _poisoned(document, place)
        if _accepted(candidate, path):
            document = candidate
            taken.append(place)
    path.write_text(json.dumps(document))
    return path, tuple(taken)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


def assert_harmless(text: str, colour: bool = False) -> None:
    shown = SGR.sub("", text) if colour else text
    assert ESC not in shown, repr(shown[max(0, shown.find(ESC) - 40) :][:120])
    bad = FORBIDDEN.search(shown)
    assert bad is None, repr(shown[max(0, bad.start() - 40) : bad.start() + 40])
    if not colour:
        assert SGR.search(text) is None


def test_a_lone_surrogate_is_refused_where_it_is(tmp_path):
    """JSON may escape half of a UTF-16 pair alone; that is no character, and no encoding can
    write it: the file is refused with the place, never decoded into a string."""
    document = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())
    document["host"] += LONE_SURROGATE
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(document))
    with pytest.raises(MemprofError, match=r"line 1 column \d+ \(a lone UTF-16 surrogate"):
        load(path)


def test_the_hostile_files_reach_every_kind_of_string(folder):
    """Not a vacuous test: the free-text fields are accepted and do carry the payload."""
    places = {place for name in NAMES for place in hostile_file(name, folder)[1]}
    for expected in [
        ("host",),
        ("measurements", "*", "name"),
        ("checks", "*", "detail"),
        ("device", "name"),
        ("timing", "note"),
        ("extra", "error"),  # a traced program's exception
        ("parameters", "program"),  # its command line
        ("extra", "devices", "*", "name"),  # every GPU of a peer run
    ]:
        assert expected in places, expected


ENVIRONMENTS = [
    pytest.param([], {}, False, id="pipe"),
    pytest.param(["--no-color"], {"FORCE_COLOR": "1"}, False, id="no-color-on-terminal"),
    pytest.param([], {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, id="NO_COLOR-on-terminal"),
    pytest.param([], {"FORCE_COLOR": "1", "TERM": "xterm-256color"}, True, id="colour"),
]


@pytest.mark.parametrize("width", [40, 200])
@pytest.mark.parametrize(("options", "environment", "colour"), ENVIRONMENTS)
@pytest.mark.parametrize("name", NAMES)
def test_report_prints_every_hostile_string_literally(
    folder, name, width, options, environment, colour
):
    path, _ = hostile_file(name, folder)
    env = {"COLUMNS": str(width), "NO_COLOR": None, "FORCE_COLOR": None, **environment}
    ran = CliRunner().invoke(app, ["report", *options, str(path)], env=env)
    assert ran.exit_code == 0, ran.output
    assert_harmless(ran.stdout, colour)
    assert_harmless(ran.stderr, colour)
    if colour:
        assert SGR.search(ran.stdout)  # the environment did turn colour on
    words = " ".join(SGR.sub("", ran.stdout).split())  # as read, wherever a line wrapped
    for shown in SHOWN:
        assert shown in words, shown


def test_diff_of_hostile_files_is_literal(folder):
    first, _ = hostile_file("h200_pinned_p20", folder)
    second, _ = hostile_file("h200x2_peer", folder)
    ran = CliRunner().invoke(app, ["diff", str(first), str(first)], env={"COLUMNS": "100"})
    assert ran.exit_code == 0, ran.output
    assert_harmless(ran.stdout)
    assert "[bold red]red[/]" in " ".join(ran.stdout.split())
    ran = CliRunner().invoke(app, ["diff", str(first), str(second)], env={"COLUMNS": "100"})
    assert_harmless(ran.stdout + ran.stderr)


def test_an_ascii_stream_gets_the_same_escapes(folder):
    path, _ = hostile_file("h200_trace_managed", folder)
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    ran = subprocess.run(
        [sys.executable, "-m", "memprof", "report", str(path)],
        capture_output=True,
        env=env,
        cwd=Path(__file__).parent.parent,
    )
    assert ran.returncode == 0, ran.stderr
    text = ran.stdout.decode("ascii")  # nothing but ASCII was written
    assert_harmless(text)
    assert "\\x1b]0;owned\\x07" in text and "[link=http://evil.example]" in text


def test_csv_keeps_the_spelling_but_no_control_character(folder, tmp_path):
    """A CSV is a text file people cat: its cells are the names as printed on the terminal."""
    path, _ = hostile_file("h200_pinned_p20", folder)
    csv = tmp_path / "out.csv"
    ran = CliRunner().invoke(app, ["report", "-q", str(path), "--csv", str(csv)])
    assert ran.exit_code == 0, ran.output
    text = csv.read_text()
    assert_harmless(text.replace("\r\n", "\n"))
    assert literal("[CUDA memcpy HtoD]" + HOSTILE) in text


def test_json_saved_again_escapes_every_control_character(folder, tmp_path):
    path, _ = hostile_file("h200_pinned_p20", folder)
    saved = tmp_path / "again.json"
    ran = CliRunner().invoke(app, ["report", "-q", str(path), "--json", str(saved)])
    assert ran.exit_code == 0, ran.output
    raw = saved.read_bytes()
    assert raw.isascii() and not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", raw)
    assert json.loads(raw)["host"].endswith(HOSTILE)  # the value itself is kept exactly


def test_error_lines_show_a_hostile_value_or_file_name_literally(tmp_path):
    document = json.loads((FIXTURES / "h200_pinned_p20.json").read_text())
    document["command"] = "pinned" + HOSTILE  # refused: no such command
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    missing = tmp_path / f"missing{ESC}]0;owned{BEL}.json"
    for path in (bad, missing):
        ran = CliRunner().invoke(app, ["report", str(path)], env={"FORCE_COLOR": "1"})
        assert ran.exit_code == 2
        line = SGR.sub("", ran.stderr)
        assert line.count("\n") == 1 and line.startswith("memprof: error: ")
        assert_harmless(ran.stderr, colour=True)
    assert "\\x1b]0;owned\\x07" in ran.stderr


def test_literal_escapes_exactly_what_a_terminal_would_obey():
    assert literal("cuMemcpyHtoD_v2 → 4 MiB, µs ×2  ") == "cuMemcpyHtoD_v2 → 4 MiB, µs ×2  "
    assert literal("a\x1b[2Jb\x07\n\t\r") == "a\\x1b[2Jb\\x07\\n\\t\\r"
    assert literal("\x9b\x7f\u202e\u2028\ud800\U000e0001") == (
        "\\x9b\\x7f\\u202e\\u2028\\ud800\\U000e0001"
    )
    assert literal("no\u00a0break\u3000space") == "no\u00a0break\u3000space"  # spaces stay


def test_error_lines_and_notes_keep_emoji_codes_as_written(tmp_path):
    missing = tmp_path / ":smile: [bold]x[/].json"
    ran = CliRunner().invoke(app, ["report", str(missing)], env={"NO_COLOR": None})
    assert ran.exit_code == 2 and ":smile: [bold]x[/].json" in ran.stderr, ran.stderr
    saved = tmp_path / ":rocket:.json"
    fixture = str(FIXTURES / "h200_info.json")
    ran = CliRunner().invoke(app, ["report", fixture, "--json", str(saved)], env={"COLUMNS": "80"})
    assert ran.exit_code == 0 and f"saved {saved}" in " ".join(ran.stderr.split()), ran.stderr
