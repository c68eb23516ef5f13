"""Hostile result files, made systematically from the recorded fixtures.

Every field of every fixture (lists: their first element) is replaced in turn by a value an
attacker or a careless edit would write: of the wrong type, out of range, contradicting the
rest of the file (doubled, halved, reversed, a field removed or added), huge, or holding
terminal control bytes and rich markup. Which mutator a field gets is a stable hash of the
fixture's name and the field's place, so a field shared by many fixtures
(measurements[0].bytes) meets many kinds of value. Whole-file cases (not JSON, not UTF-8,
nested too deep, an integer of 5,000 digits) come beside them.

Coverage never moves when a fixture is added: a fixture's cases depend on its own name and
content, and on the fixtures listed before it in FIXTURE_ORDER (a place they cover is not
covered again), never on those after it. A new fixture goes at the end of FIXTURE_ORDER
(test_hostile_assignment checks that every fixture is listed), so it adds cases for what it
brings and takes none from the others. Sorting by name instead let one new fixture reassign
810 of 1,082 cases.

tests/test_hostile_results.py runs them all through `memprof report`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

FIXTURES = Path(__file__).parent / "fixtures"
SKIP = object()  # a mutator that does not apply to this value
HUGE_INTEGER = "__five_thousand_digits__"  # json.dumps cannot write one: put in afterwards
CONTROL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\x08\x00"
MARKUP = "[bold red]boom[/][link=https://example.com]click[/link]"


@dataclass(frozen=True)
class Hostile:
    """A case whose file is written when its test runs: dumping all 1,250 of them took 6 s,
    which every pytest-xdist worker paid at collection, for cases most of them never run."""

    name: str  # fixture, field and mutator: what a failure names
    made: Callable[[], str]  # the file's content

    @property
    def text(self) -> str:
        return self.made()

    def write(self, folder: Path) -> Path:
        path = folder / "hostile.json"
        path.write_text(self.text, encoding="utf-8", errors="surrogatepass")
        return path


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numbers(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: change(value) if _number(value) else SKIP


def _strings(change: Callable[[str], Any]) -> Callable[[Any], Any]:
    return lambda value: change(value) if isinstance(value, str) else SKIP


def _lists(change: Callable[[list], Any]) -> Callable[[Any], Any]:
    return lambda value: change(value) if isinstance(value, list) and value else SKIP


def _objects(change: Callable[[dict], Any]) -> Callable[[Any], Any]:
    return lambda value: change(value) if isinstance(value, dict) else SKIP


def _other_type(value: Any) -> Any:
    """A value of another JSON type than the field's."""
    if isinstance(value, str):
        return 12
    if isinstance(value, dict | list):
        return "x"
    return "12"


MUTATORS: dict[str, Callable[[Any], Any]] = {
    # of the wrong type
    "another type": _other_type,
    "null": lambda value: None if value is not None else "null",
    "true": lambda value: True if not isinstance(value, bool) else SKIP,
    "a list": lambda value: [value] if not isinstance(value, list) else SKIP,
    "an object": lambda value: {"value": value} if not isinstance(value, dict) else SKIP,
    "a fraction": _numbers(lambda value: value + 0.5 if isinstance(value, int) else SKIP),
    # out of range
    "negative": _numbers(lambda value: -value - 1),
    "zero": _numbers(lambda value: 0 if value else 1),
    "1e308": _numbers(lambda value: 1e308),
    "-1e308": _numbers(lambda value: -1e308),
    "NaN": _numbers(lambda value: float("nan")),
    "Infinity": _numbers(lambda value: float("inf")),
    "2^70": _numbers(lambda value: 2**70),
    "5000 digits": _numbers(lambda value: HUGE_INTEGER),
    "tiny": _numbers(lambda value: 1e-300),
    # contradicting the rest of the file
    "doubled": _numbers(lambda value: value * 2 if value else SKIP),
    "halved": _numbers(lambda value: value // 2 if isinstance(value, int) else value / 2),
    "plus one": _numbers(lambda value: value + 1),
    "flipped": lambda value: (not value) if isinstance(value, bool) else SKIP,
    "first item removed": _lists(lambda value: value[1:]),
    "first item twice": _lists(lambda value: [value[0], *value]),
    "reversed": _lists(lambda value: value[::-1] if value != value[::-1] else SKIP),
    "emptied": lambda value: type(value)() if isinstance(value, list | dict | str) else SKIP,
    "a field removed": _objects(lambda value: dict(list(value.items())[1:]) if value else SKIP),
    "a field added": _objects(lambda value: {**value, "unknown_field": 1}),
    # huge
    "a long string": _strings(lambda value: value + "A" * 20_000),
    "a thousand items": _lists(lambda value: value * (1000 // len(value) + 1)),
    # terminal control bytes and rich markup
    "control bytes": _strings(lambda value: value + CONTROL),
    "markup": _strings(lambda value: MARKUP + value),
    "a lone surrogate": _strings(lambda value: value + "\ud800"),
    "another command": _strings(lambda value: "pinned" if value != "pinned" else "trace"),
}


def paths(value: Any, where: tuple = ()) -> Iterator[tuple]:
    """Every place in a JSON value: each object's fields, each list's first item."""
    yield where
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*where, key))
    elif isinstance(value, list) and value:
        yield from paths(value[0], (*where, 0))


def _get(document: Any, where: tuple) -> Any:
    for step in where:
        document = document[step]
    return document


def _text_with(document: Any, where: tuple, value: Any) -> str:
    """The document's text with the value at `where` replaced (the document is left as it
    was: changed in place for the dump, then put back, which copying 1,000 times is not)."""
    if not where:
        return _text(value)
    parent = _get(document, where[:-1])
    original = parent[where[-1]]
    parent[where[-1]] = value
    try:
        return _text(document)
    finally:
        parent[where[-1]] = original


def _text(document: Any) -> str:
    return indented(document).replace(json.dumps(HUGE_INTEGER), "9" * 5000)


def indented(document: Any) -> str:
    """json.dumps(document, indent=1, allow_nan=True, ensure_ascii=False), character for
    character, three times as fast: json's C encoder writes it on one line and msgspec lays
    that out (an indent makes json use its Python encoder: 6 of the sweep's 43 s). NaN,
    Infinity and lone surrogates, which msgspec does not take, go json's way."""
    try:
        return msgspec.json.format(
            json.dumps(document, allow_nan=True, ensure_ascii=False), indent=1
        )
    except (msgspec.DecodeError, UnicodeEncodeError):
        return json.dumps(document, indent=1, allow_nan=True, ensure_ascii=False)


OWN = ("parameters", "extra", "measurements")  # places whose meaning is the command's


def assigned(name: str, document: Any, seen: dict[tuple, int]) -> Iterator[tuple]:
    """(place, mutator, changed value) for each place of a fixture named `name`, with one of
    the mutators that apply to it (chosen by a stable hash of the name and the place); a
    place every fixture shares (device.name) is left out once `seen` has it, one of a
    command's own (parameters, extra, measurements) once `seen` has it twice."""
    mutators = list(MUTATORS)
    for where in paths(document):
        own = bool(where[:1]) and where[0] in OWN
        key = (document.get("command"), *where) if own else where
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > (2 if own else 1):
            continue
        original = _get(document, where)
        applicable = [
            (mutator, changed)
            for mutator in mutators
            if (changed := MUTATORS[mutator](original)) is not SKIP
        ]
        mutator, changed = applicable[stable_hash(name, place_name(where)) % len(applicable)]
        yield where, mutator, changed


def place_name(where: tuple) -> str:
    return ".".join(map(str, where)) or "(the whole file)"


def stable_hash(*parts: str) -> int:
    """The same number on every machine and run (Python's hash() of a str is salted)."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:8], "big")


WHOLE_FILES = {
    "empty": "",
    "whitespace": " \n\t",
    "not JSON": "memprof pinned --power 20",
    "a JSON list": "[1, 2, 3]",
    "a JSON string": '"pinned"',
    "null": "null",
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "an integer of 5000 digits": "9" * 5000,
    "schema_version 99": '{"schema_version": 99, "command": "pinned", "parameters": {}}',
    "schema_version as text": '{"schema_version": "2", "command": "pinned", "parameters": {}}',
    "no command": '{"schema_version": 3, "parameters": {}}',
    "an unknown command": '{"schema_version": 3, "command": "rm -rf", "parameters": {}}',
    "a command with control bytes": json.dumps(
        {"schema_version": 3, "command": CONTROL, "parameters": {}}
    ),
}


def whole_file_cases() -> Iterator[Hostile]:
    pinned = (FIXTURES / "h200_pinned_p20.json").read_text()
    texts = WHOLE_FILES | {
        "truncated": pinned[: len(pinned) // 2],
        "a byte-order mark": "\ufeff" + pinned,
        "twice": pinned + pinned,
        "duplicate keys": pinned.replace('"command"', '"command": 1, "command"', 1),
    }
    for name, text in texts.items():
        yield Hostile(f"whole file: {name}", functools.partial(str, text))


# The order fixtures claim the places they share: append a new fixture at the end, never in
# between, so it takes no place from a fixture listed before it.
FIXTURE_ORDER = (
    "h100_check.json",
    "h200_alloc.json",
    "h200_check.json",
    "h200_compare.json",
    "h200_device.json",
    "h200_info.json",
    "h200_managed.json",
    "h200_pinned_p20.json",
    "h200_pinned_p20_events.json",
    "h200_register.json",
    "h200_smallcopies.json",
    "h200_streams.json",
    "h200_sweep.json",
    "h200_trace_managed.json",
    "h200_trace_pycuda.json",
    "h200_trace_torch.json",
    "h200_uva.json",
    "h200_writecombined.json",
    "h200_zerocopy_p20.json",
    "h200_zerocopy_sweep.json",
    "h200x2_check_pairs.json",
    "h200x2_hostlink.json",
    "h200x2_peer.json",
    "h200x2_pinned_p20_device1.json",
    "h200x2_portable.json",
    "legacy_trace_pycuda_unpaired.json",
    "legacy_v1_compare.json",
    "legacy_v1_pinned_p20.json",
    "legacy_v1_streams.json",
    "legacy_v2_alloc.json",
    "legacy_v2_compare.json",
    "legacy_v2_device.json",
    "legacy_v2_h200x2_hostlink.json",
    "legacy_v2_h200x2_peer.json",
    "legacy_v2_h200x2_pinned_p20_device1.json",
    "legacy_v2_h200x2_portable.json",
    "legacy_v2_info.json",
    "legacy_v2_managed.json",
    "legacy_v2_pinned_p20.json",
    "legacy_v2_pinned_p20_events.json",
    "legacy_v2_register.json",
    "legacy_v2_streams.json",
    "legacy_v2_sweep.json",
    "legacy_v2_trace_managed.json",
    "legacy_v2_trace_pycuda.json",
    "legacy_v2_trace_torch.json",
    "legacy_v2_uva.json",
    "legacy_v2_writecombined.json",
    "legacy_v2_zerocopy_p20.json",
    "legacy_v2_zerocopy_sweep.json",
    "legacy_v3_alloc.json",
    "legacy_v3_smallcopies.json",
    "legacy_v3_check.json",
    "h100_sweep_link_changed.json",
    "h200_pinlimit.json",
    "h200x4_peer.json",
    "h200x4_hostlink.json",
)


def ordered(found: list[Path]) -> list[Path]:
    """Fixtures in FIXTURE_ORDER, any not listed yet after all listed ones (by name): a new
    fixture never comes before one that was there."""
    rank = {name: index for index, name in enumerate(FIXTURE_ORDER)}
    return sorted(found, key=lambda path: (rank.get(path.name, len(rank)), path.name))


def fixtures() -> list[Path]:
    return ordered(list(FIXTURES.glob("*.json")))


def all_cases(fixture_paths: list[Path] | None = None) -> Iterator[Hostile]:
    seen: dict[tuple, int] = {}
    for fixture in ordered(fixtures() if fixture_paths is None else fixture_paths):
        document = json.loads(fixture.read_text())
        for where, mutator, changed in assigned(fixture.name, document, seen):
            name = f"{fixture.name}: {place_name(where)}: {mutator}"
            yield Hostile(name, functools.partial(_text_with, document, where, changed))
    yield from whole_file_cases()


def assignments(fixture_paths: list[Path] | None = None) -> list[str]:
    """The field cases' names (fixture: place: mutator), without writing their files."""
    seen: dict[tuple, int] = {}
    found = []
    for fixture in ordered(fixtures() if fixture_paths is None else fixture_paths):
        document = json.loads(fixture.read_text())
        for where, mutator, _ in assigned(fixture.name, document, seen):
            found.append(f"{fixture.name}: {place_name(where)}: {mutator}")
    return found
