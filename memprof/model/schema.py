"""The types a Result file's values must have, and the one place plain JSON data becomes them.

msgspec checks the annotations in C, ranges included (a Range is a msgspec Meta); what it has
no word for is checked after: DISTINCT, INCREASING, unknown dataclass fields, and each type's
check_consistency(). The first problem is one SchemaError saying where it is:
`measurements[3].samples_ms[0] is -1: expected a number >= 0`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec

MAX_COUNT = 2**53  # bytes, elements, calls: beyond what any run makes, and exact in a float
MAX_MS = 7 * 24 * 3600 * 1000.0  # a week: nothing memprof times lasts longer
MAX_GPU_INDEX = 63  # as `--device` allows


class SchemaError(ValueError):
    """One value that is not what its field declares, and where it is in the file."""

    def __init__(self, where: str, found: str, wanted: str | None = None) -> None:
        message = f"{where} {found}" if where else found
        super().__init__(f"{message}: expected {wanted}" if wanted else message)
        self.where, self.found, self.wanted = where, found, wanted

    def within(self, where: str) -> SchemaError:
        """The same problem, placed inside `where` (a problem of a whole object: at it)."""
        if not where:
            return self
        inner = f"{where}.{self.where}" if self.where else where
        return SchemaError(inner, self.found, self.wanted)


# -- rules ----------------------------------------------------------------------------------------


def Range(low: float, high: float, low_open: bool = False, unit: str = "") -> msgspec.Meta:
    """A number from `low` to `high` (`low` itself excluded when low_open); NaN never."""
    bound = {"gt": low} if low_open else {"ge": low}
    return msgspec.Meta(**bound, le=high, extra={"unit": unit} if unit else {})


def _number(value: float) -> str:
    """A bound as a person reads it: 10000, 2^53, 604800000; never 1.04858e+06."""
    if float(value).is_integer() and abs(value) < 1e16:
        whole = int(value)
        if whole >= 1 << 20 and whole & (whole - 1) == 0:
            return f"2^{whole.bit_length() - 1}"
        return str(whole)
    return f"{value:g}"


def allows(rule: msgspec.Meta, value: float) -> bool:
    """Whether a number keeps a Range."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if rule.gt is not None and not value > rule.gt:
        return False
    if rule.ge is not None and not value >= rule.ge:
        return False
    return rule.le is None or value <= rule.le


def phrase(rule: msgspec.Meta) -> str:
    """A Range in words: '0 to 30', '(0, 10000] milliseconds'."""
    if rule.gt is not None:
        text = f"({_number(rule.gt)}, {_number(rule.le)}]"
    else:
        text = f"{_number(rule.ge)} to {_number(rule.le)}"
    return f"{text} {(rule.extra or {}).get('unit', '')}".rstrip()


def refusal(rule: msgspec.Meta, value: Any) -> str:
    """The one message every refusal of a range uses (command line, API, loader)."""
    shown = value if not isinstance(value, float) else f"{value:g}"
    return f"{shown} is outside the allowed range {phrase(rule)}"


def is_range(rule: Any) -> bool:
    return isinstance(rule, msgspec.Meta) and rule.le is not None


def distinct(value: list | tuple, where: str) -> None:
    """A rule for Annotated lists (DISTINCT): no item twice."""
    seen = set()
    for index, item in enumerate(value):
        if item in seen:
            raise SchemaError(f"{where}[{index}]", f"is {describe(item)} again")
        seen.add(item)


def increasing(value: list | tuple, where: str) -> None:
    """A rule for Annotated lists (INCREASING): each item larger than the one before."""
    for index in range(1, len(value)):
        if value[index] <= value[index - 1]:
            found = f"is {describe(value[index])}, after {describe(value[index - 1])}"
            raise SchemaError(f"{where}[{index}]", found)


def totals_possible(count: int, least: int, most: int) -> tuple[int, int]:
    """The least and most `count` values from `least` to `most`, each one of them, sum to."""
    others = count - 1
    return most + others * least, least + others * most


NON_EMPTY = msgspec.Meta(min_length=1)
DISTINCT, INCREASING = distinct, increasing  # the rules msgspec has no word for
RULES = (DISTINCT, INCREASING)

# Types with the rules a loaded file must keep.
Count = Annotated[int, Range(0, MAX_COUNT)]  # elements, bytes, calls: never negative
ByteCount = Count
GpuIndex = Annotated[int, Range(0, MAX_GPU_INDEX)]
Milliseconds = Annotated[float, Range(0, MAX_MS, unit="ms")]
Seconds = Annotated[float, Range(0, MAX_MS / 1000, unit="s")]
Samples = Annotated[list[Milliseconds], NON_EMPTY]  # a measurement has at least one sample


def describe(value: Any) -> str:
    """A value as the message shows it: what it is, briefly."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and value.bit_length() > 64:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list | tuple):
        count = len(value)
        return f"a list of {count} item{'' if count == 1 else 's'}" if count else "an empty list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# -- plain data to declared types -----------------------------------------------------------------


def check(value: Any, hint: Any, where: str = "") -> Any:
    """`value` (plain JSON data) as its type declares it, or SchemaError naming where."""
    value = _completed(value, hint, where)
    try:
        made = msgspec.convert(value, hint)
    except msgspec.ValidationError as error:
        raise from_msgspec(error, value, where, hint) from None
    check_rules(made, hint, where)
    return made


def check_rules(value: Any, hint: Any, where: str) -> None:
    """What msgspec does not check: DISTINCT and INCREASING, and each object's
    check_consistency(), inside `value` as `hint` declares it."""
    if value is None:
        return
    hint, rules = _split(hint)
    for rule in rules:
        if rule in RULES:
            rule(value, where)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(inner) == 1:
            check_rules(value, inner[0], where)
        return
    if origin in (list, tuple) and get_args(hint) and _needs_walk(get_args(hint)[0]):
        item = get_args(hint)[0]
        for index, one in enumerate(value):
            check_rules(one, item, f"{where}[{index}]")
    elif origin is dict and len(get_args(hint)) == 2 and _needs_walk(get_args(hint)[1]):
        for key, one in value.items():
            check_rules(one, get_args(hint)[1], _join(where, f".{key}"))
    elif _is_record(hint):
        for name, field_hint in _fields(hint).items():
            if _needs_walk(field_hint):
                check_rules(getattr(value, name), field_hint, _join(where, f".{name}"))
        consistent = getattr(value, "check_consistency", None)
        if consistent is not None:
            try:
                consistent()
            except SchemaError as error:
                raise error.within(where) from None


def from_msgspec(
    error: msgspec.ValidationError, data: Any, where: str = "", hint: Any = None
) -> SchemaError:
    """msgspec's refusal as a SchemaError: where, the value found, what `hint` expects there."""
    message, _, path = str(error).partition(" - at `$")
    steps = _path_steps(path.rstrip("`"))
    if "[...]" in path:  # a value of a mapping: msgspec does not say which one
        steps.append(_bad_key(_value_at(data, steps), _wanted(message), _item_hint(hint, steps)))
    place = _join(where, "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps))
    field = re.fullmatch(r"Object (contains unknown|missing required) field `(.*)`", message)
    if field:
        found = "is not a known field" if field[1] == "contains unknown" else "is missing"
        return SchemaError(_join(place, "." + field[2]), found)
    value = _value_at(data, steps)
    wanted = _declared_words(_hint_at(hint, steps)) if hint is not None else ""
    wanted = wanted or _wanted(message)
    if value is _UNKNOWN:
        return SchemaError(place, f"is not {wanted}" if wanted else message)
    if wanted:
        return SchemaError(place, f"is {describe(value)}", wanted)
    return SchemaError(place, f"is {describe(value)}: {message[0].lower()}{message[1:]}")


# JSON's types in words: by Python's type, and by msgspec's name
_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
_TYPE_WORDS = {kind.__name__: words for kind, words in _WORDS.items()}
_TYPE_WORDS.update(array="a list", object="an object", null="null")


_KIND_TESTS = {
    "an integer": lambda v: type(v) is int,
    "a number": lambda v: type(v) in (int, float),
    "a string": lambda v: type(v) is str,
    "true or false": lambda v: type(v) is bool,
}


def _bad_key(mapping: Any, wanted: str, item: Any = None) -> str:
    """The first key of a mapping whose value is not what msgspec wanted there: by the
    values' declared type where known (a value out of its range is of the right kind)."""
    if not isinstance(mapping, dict) or not mapping:
        return "..."
    if item is not None:
        bad = [key for key, value in mapping.items() if not _converts(value, item)]
        return str(bad[0] if bad else next(iter(mapping)))
    test = next((t for words, t in _KIND_TESTS.items() if wanted.startswith(words)), None)
    bad = [key for key, value in mapping.items() if test is None or not test(value)]
    return str(bad[0] if bad else next(iter(mapping)))


def _converts(value: Any, hint: Any) -> bool:
    try:
        msgspec.convert(value, hint)
    except msgspec.ValidationError:
        return False
    return True


def _item_hint(hint: Any, steps: list[str | int]) -> Any:
    """The declared type of the values of the mapping at `steps` (None where not known)."""
    base, _ = _split(_hint_at(hint, steps)) if hint is not None else (None, ())
    if get_origin(base) in (Union, types.UnionType):
        inner = [arg for arg in get_args(base) if arg is not type(None)]
        base = _split(inner[0])[0] if len(inner) == 1 else None
    args = get_args(base) if get_origin(base) is dict else ()
    return args[1] if len(args) == 2 else None


def _hint_at(hint: Any, steps: list[str | int]) -> Any:
    """The type declared at a path inside `hint` (None where the path leaves it)."""
    for step in steps:
        base, _ = _split(hint)
        if get_origin(base) in (Union, types.UnionType):
            inner = [arg for arg in get_args(base) if arg is not type(None)]
            base, _ = _split(inner[0]) if len(inner) == 1 else (None, ())
        if _is_record(base) and isinstance(step, str):
            hint = _fields(base).get(step)
        elif get_origin(base) in (list, tuple) and isinstance(step, int) and get_args(base):
            args = get_args(base)
            hint = (
                args[0]
                if args[-1] is Ellipsis or get_origin(base) is list
                else (args[step] if step < len(args) else None)
            )
        elif get_origin(base) is dict and len(get_args(base)) == 2:
            hint = get_args(base)[1]
        else:
            return None
        if hint is None:
            return None
    return hint


def _declared_words(hint: Any) -> str:
    """What a declared type accepts, in words: 'an integer 0 to 64 or null', 'one of a, b'."""
    if hint is None:
        return ""
    base, rules = _split(hint)
    origin = get_origin(base)
    if origin in (Union, types.UnionType):
        words = [_declared_words(arg) for arg in get_args(base)]
        return " or ".join(words) if all(words) else ""
    if origin is typing.Literal:
        return "one of " + ", ".join(str(arg) for arg in get_args(base))
    words = "null" if base is type(None) else _WORDS.get(base)
    if words is None:
        return ""
    described = next((rule.description for rule in rules if getattr(rule, "description", None)), "")
    if described:  # a format in words ("a date and time with its offset, as ...")
        return described
    ranges = [rule for rule in rules if is_range(rule)]
    return f"{words} {phrase(ranges[0])}" if ranges else words


def _wanted(message: str) -> str:
    """What msgspec expected, in words ('' where its message says something else)."""
    if message.startswith("Invalid enum value"):
        return "one of the values this field allows"
    found = re.fullmatch(r"Expected `([^`]*)`(.*?)(?:, got .*)?", message)
    if found is None:
        return ""
    kinds = " or ".join(_TYPE_WORDS.get(kind.strip(), kind.strip()) for kind in found[1].split("|"))
    rest = found[2].strip()
    length = re.fullmatch(r"of length (>=|<=)? ?(\d+)", rest)
    if length:
        bound = {">=": "at least ", "<=": "at most "}.get(length[1] or "", "")
        count = int(length[2])
        return f"{kinds} of {bound}{count} item{'' if count == 1 else 's'}"
    if rest.startswith("matching regex"):
        return f"{kinds} in its format"
    bound = re.fullmatch(r"([<>]=?) (\S+)", rest)
    if bound:
        rest = f"{bound[1]} {_number(float(bound[2]))}"
    return f"{kinds} {rest}".strip()


_UNKNOWN = object()


def _path_steps(path: str) -> list[str | int]:
    """'.measurements[3].bytes' -> ['measurements', 3, 'bytes']."""
    return [
        int(index) if index else name
        for name, index in re.findall(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]", path)
        if name or index != "..."
    ]


def _join(where: str, inner: str) -> str:
    return f"{where}{inner}" if where else inner.removeprefix(".")


def _value_at(data: Any, steps: list[str | int]) -> Any:
    for step in steps:
        try:
            data = data[step]
        except (LookupError, TypeError):
            return _UNKNOWN
    return data


# -- the shape of types ---------------------------------------------------------------------------


def _split(hint: Any) -> tuple[Any, tuple]:
    """A type and its Annotated rules."""
    if get_origin(hint) is Annotated:
        base, *rules = get_args(hint)
        inner, more = _split(base)
        return inner, (*rules, *more)
    return hint, ()


def _is_record(hint: Any) -> bool:
    return isinstance(hint, type) and (
        dataclasses.is_dataclass(hint)
        or issubclass(hint, msgspec.Struct)
        or typing.is_typeddict(hint)
    )


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    """A dataclass's or Struct's fields and their types, rules included."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if dataclasses.is_dataclass(cls):
        return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    if typing.is_typeddict(cls):
        return hints
    return {name: hints[name] for name in cls.__struct_fields__}


@functools.cache
def _needs_walk(hint: Any) -> bool:
    """Whether values of this type hold anything check_rules checks."""
    base, rules = _split(hint)
    if any(rule in RULES for rule in rules):
        return True
    if _is_record(base):
        return hasattr(base, "check_consistency") or any(
            _needs_walk(field) for field in _fields(base).values()
        )
    return any(_needs_walk(arg) for arg in get_args(base) if arg is not Ellipsis)


@functools.cache
def text_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of a record whose values JSON may write with a colon in them (strings);
    None where a field may hold anything but those, numbers, null, a Literal without a colon
    or a list of numbers (an object, a list of strings)."""
    written = {name: _written(hint) for name, hint in _fields(cls).items()}
    if None in written.values():
        return None
    return tuple(name for name, kind in written.items() if kind == "text")


def _written(hint: Any) -> str | None:
    """'text' for a string (a Literal with a colon in a value too), 'plain' for what is written
    without one (a number, null, a Literal, a list of numbers); None for anything else."""
    base, _ = _split(hint)
    if base is str:
        return "text"
    if base in (int, float, bool, type(None)):
        return "plain"
    origin, args = get_origin(base), [arg for arg in get_args(base) if arg is not Ellipsis]
    if origin is typing.Literal:
        return "text" if any(":" in arg for arg in args if isinstance(arg, str)) else "plain"
    if origin in (Union, types.UnionType):
        kinds = {_written(arg) for arg in args}
        return None if None in kinds else "text" if "text" in kinds else "plain"
    if origin in (list, tuple) and args and all(_written(arg) == "plain" for arg in args):
        return "plain"
    return None


def _completed(value: Any, hint: Any, where: str) -> Any:
    """The data with every dataclass object whole: an unknown field refused (msgspec ignores
    it), a missing one given its default (else a value saved again would lack it)."""
    if not _has_dataclass(hint):
        return value
    base, _ = _split(hint)
    origin = get_origin(base)
    if origin in (Union, types.UnionType):
        records = [arg for arg in get_args(base) if _has_dataclass(arg)]
        if len(records) == 1 and isinstance(value, dict | list):
            return _completed(value, records[0], where)
    elif origin in (list, tuple) and isinstance(value, list) and get_args(base):
        item = get_args(base)[0]
        if _whole_records(value, item):
            return value
        return [_completed(one, item, f"{where}[{index}]") for index, one in enumerate(value)]
    elif origin is dict and isinstance(value, dict) and len(get_args(base)) == 2:
        item = get_args(base)[1]
        return {key: _completed(one, item, _join(where, f".{key}")) for key, one in value.items()}
    elif isinstance(base, type) and dataclasses.is_dataclass(base) and isinstance(value, dict):
        fields = _fields(base)
        unknown = next((key for key in value if key not in fields), None)
        if unknown is not None:
            known = ", ".join(fields) or "no fields"
            raise SchemaError(_join(where, f".{unknown}"), "is not a known field", f"only {known}")
        whole = {**_simple_defaults(base), **value}
        return {
            name: _completed(one, fields[name], _join(where, f".{name}"))
            if _has_dataclass(fields[name])
            else one
            for name, one in whole.items()
        }
    return value


def _whole_records(values: list, item: Any) -> bool:
    """Objects that each hold exactly their dataclass's fields, none a dataclass: nothing to
    complete (100,000 of a trace's records at C speed)."""
    base, _ = _split(item)
    if not (isinstance(base, type) and dataclasses.is_dataclass(base)):
        return False
    fields = _fields(base)
    if any(_has_dataclass(hint) for hint in fields.values()):
        return False
    known, count = fields.keys(), len(fields)
    return all(type(one) is dict and len(one) == count and one.keys() == known for one in values)


@functools.cache
def _simple_defaults(cls: type) -> dict[str, Any]:
    """A dataclass's fields whose default is a value, not made by a factory."""
    return {
        field.name: field.default
        for field in dataclasses.fields(cls)
        if field.init and field.default is not dataclasses.MISSING
    }


@functools.cache
def _has_dataclass(hint: Any) -> bool:
    base, _ = _split(hint)
    if isinstance(base, type) and dataclasses.is_dataclass(base):
        return True
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        return any(_has_dataclass(field) for field in _fields(base).values())
    return any(_has_dataclass(arg) for arg in get_args(base) if arg is not Ellipsis)
