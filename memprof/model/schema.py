"""Checking loaded JSON against the types the dataclasses declare, one value at a time.

A Result file is read by `memprof report` and `memprof diff` on any machine, so every value is
checked before anything is drawn from it. The types are the annotations themselves (int, float,
str, bool, None, Literal, list, tuple, dict, a dataclass, a TypedDict, `X | None`, a dict of
field types for a record), plus rules attached with `Annotated` (Range, AtLeast, NON_EMPTY,
DISTINCT). So a new field is checked as soon as it is declared. A dataclass may also say what
its fields must agree on with a `check_consistency()` method (free memory no more than total),
run once its fields are checked. The first problem found is raised as a SchemaError that says
where it is: `measurements[3].samples_ms[0] is NaN: expected ...`.

Each type is turned once into a checking function (cached), so a file of 100,000 measurements
costs one pass over its values, not one reading of the annotations per value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

# A record: field name -> type, every field required.
Record = dict[str, Any]
Checker = Callable[[Any, str], Any]  # (value, where) -> the value as declared, or SchemaError

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


def _number(value: float) -> str:
    """A bound as a person reads it: 10000, 2^53, 604800000; never 1.04858e+06."""
    if float(value).is_integer() and abs(value) < 1e16:
        whole = int(value)
        if whole >= 1 << 20 and whole & (whole - 1) == 0:
            return f"2^{whole.bit_length() - 1}"
        return str(whole)
    return f"{value:g}"


@dataclass(frozen=True)
class Range:
    """A number from `low` to `high` (`low` itself excluded when low_open); NaN never."""

    low: float
    high: float
    low_open: bool = False
    unit: str = ""  # named in the message after the range: "milliseconds"

    def allows(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    @property
    def phrase(self) -> str:
        if self.low_open:
            text = f"({_number(self.low)}, {_number(self.high)}]"
        else:
            text = f"{_number(self.low)} to {_number(self.high)}"
        return f"{text} {self.unit}".rstrip()

    def refusal(self, value: Any) -> str:
        """The one message every refusal of this range uses (command line, API, loader)."""
        shown = value if not isinstance(value, float) else f"{value:g}"
        return f"{shown} is outside the allowed range {self.phrase}"

    def check(self, value: float, where: str) -> None:
        """The schema's rule interface: a loaded value outside the range is refused."""
        if not self.allows(value):
            raise SchemaError(where, f"is {describe(value)}")

    accepts = allows


@dataclass(frozen=True)
class AtLeast:
    """A rule for Annotated numbers: the value must be >= minimum."""

    minimum: float

    def check(self, value: float, where: str) -> None:
        if not self.accepts(value):
            raise SchemaError(where, f"is {describe(value)}")

    def accepts(self, value: float) -> bool:
        return value >= self.minimum

    @property
    def phrase(self) -> str:
        return f">= {self.minimum:g}"


@dataclass(frozen=True)
class NonEmpty:
    """A rule for Annotated lists: at least one item (a measurement has at least one sample)."""

    def check(self, value: list, where: str) -> None:
        if not value:
            raise SchemaError(where, "is an empty list")

    def accepts(self, value: list) -> bool:
        return bool(value)

    @property
    def phrase(self) -> str:
        return "with at least one item"


@dataclass(frozen=True)
class Distinct:
    """A rule for Annotated lists: no item twice (the sizes of a sweep)."""

    def check(self, value: list | tuple, where: str) -> None:
        seen = set()
        for index, item in enumerate(value):
            if item in seen:
                raise SchemaError(f"{where}[{index}]", f"is {describe(item)} again")
            seen.add(item)

    def accepts(self, value: list | tuple) -> bool:
        return len(set(value)) == len(value)

    @property
    def phrase(self) -> str:
        return "each item once"


@dataclass(frozen=True)
class Increasing:
    """A rule for Annotated lists: each item larger than the one before (a sweep's sizes)."""

    def check(self, value: list | tuple, where: str) -> None:
        for index in range(1, len(value)):
            if value[index] <= value[index - 1]:
                found = f"is {describe(value[index])}, after {describe(value[index - 1])}"
                raise SchemaError(f"{where}[{index}]", found)

    def accepts(self, value: list | tuple) -> bool:
        return all(a < b for a, b in itertools.pairwise(value))

    @property
    def phrase(self) -> str:
        return "in increasing order"


NON_EMPTY = NonEmpty()
DISTINCT = Distinct()
INCREASING = Increasing()


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
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def expected(hint: Any) -> str:
    """What a type accepts, in words."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        base, *rules = args
        return " ".join([expected(base), *(rule.phrase for rule in rules)])
    if origin in (Union, types.UnionType):
        return " or ".join(expected(arg) for arg in args)
    if origin is Literal:
        return "one of " + ", ".join(str(arg) for arg in args)
    if isinstance(hint, dict) or dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        return "an object"
    if origin in (list, tuple) or hint in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"a list of {len(args)} item{'s' if len(args) != 1 else ''}"
        return "a list"
    words = {
        type(None): "null",
        bool: "true or false",
        int: "an integer",
        float: "a finite number",
        str: "a string",
    }
    return words.get(hint, "an object")


def check(value: Any, hint: Any, where: str) -> Any:
    """value as its type declares it (tuples from lists, dataclasses from objects), or raise."""
    return checker(hint)(value, where)


def check_record(
    value: Any, hints: Record, where: str, may_be_absent: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """An object with exactly these fields (those in may_be_absent may be left out), checked."""
    fields = [(name, checker(hint)) for name, hint in hints.items()]
    return _record(fields, may_be_absent)(value, where)


def check_dataclass(value: Any, cls: type, where: str) -> Any:
    """An instance of cls from a JSON object, every field checked against its annotation.

    A field whose default is a constant or an empty list or dict may be absent: files written
    before the field existed mean that default (so a new field's default must be what memprof
    did before it). Defaults computed from this process (pid, host, time, version) never stand
    in for a file's own, and an empty default that is not valid (samples_ms) is never taken.
    """
    return checker(cls)(value, where)


# -- turning a type into its checking function -----------------------------------------------

_CHECKERS: dict[Any, Checker] = {}


def checker(hint: Any) -> Checker:
    """The function that checks values of this type (made once per type)."""
    try:
        return _CHECKERS[hint]
    except KeyError:
        made = _CHECKERS[hint] = _compile(hint)
        return made
    except TypeError:  # an unhashable type: a record written as a dict of field types
        return _compile(hint)


def _compile(hint: Any) -> Checker:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return lambda value, where: value
    if origin is Annotated:
        return _annotated(hint, args[0], args[1:])
    if origin in (Union, types.UnionType):
        return _union(hint, args)
    if origin is Literal:
        return _literal(hint, args)
    if isinstance(hint, dict):
        return _record([(name, checker(h)) for name, h in hint.items()], frozenset())
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    if typing.is_typeddict(hint):
        return _typeddict(hint)
    if origin is list or hint is list:
        return _sequence(hint, list, checker(args[0]) if args else checker(Any), list)
    if origin is tuple:
        if args[-1] is Ellipsis:
            return _sequence(hint, list | tuple, checker(args[0]), tuple)
        return _fixed_tuple(hint, [checker(arg) for arg in args])
    if origin is dict or hint is dict:
        return _mapping(hint, checker(args[1]) if args else checker(Any))
    if hint in _SCALARS:
        return _SCALARS[hint]
    raise TypeError(f"schema.check has no rule for {hint!r}")


def _wrong(value: Any, hint: Any, where: str) -> SchemaError:
    return SchemaError(where, f"is {describe(value)}", expected(hint))


# A checker may carry `accepts`: a quick test that a value is valid and comes back as it
# is. Lists of numbers, strings and names are then checked without a place for each item,
# which a refusal alone spells out.
Accepts = Callable[[Any], bool]


def _accepting(check: Checker, accepts: Accepts | None) -> Checker:
    check.accepts = accepts  # type: ignore[attr-defined]
    return check


def _accepts_of(check: Checker) -> Accepts | None:
    return getattr(check, "accepts", None)


def _all_of(tests: list[Accepts]) -> Accepts:
    first, *rest = tests
    if len(rest) == 1:
        second = rest[0]
        return lambda value: first(value) and second(value)
    return lambda value: first(value) and all(test(value) for test in rest)


def _number_in(limits: Range, integer: bool) -> Accepts:
    """An int (or a float too) within the range, in one test: the most common value."""
    low, high = limits.low, limits.high
    kinds = (int,) if integer else (int, float)
    if limits.low_open:
        return lambda value: type(value) in kinds and low < value <= high
    return lambda value: type(value) in kinds and low <= value <= high


def _any_of(tests: list[Accepts], none_allowed: bool) -> Accepts:
    if len(tests) == 1:
        test = tests[0]
        return lambda value: (value is None and none_allowed) or test(value)
    return lambda value: (value is None and none_allowed) or any(test(value) for test in tests)


def _never(value: Any) -> bool:
    return False


def _each(item: Accepts) -> Accepts:
    return lambda values: all(map(item, values))


def _list_of(items: Accepts) -> Accepts:
    return lambda value: type(value) is list and items(value)


def _numbers_in(limits: Range, integer: bool) -> Accepts:
    """Many numbers within the range at once, in C loops: a measurement's samples."""
    low, high = limits.low, limits.high
    kinds = {int} if integer else {int, float}

    def accepts(values: list | tuple) -> bool:
        if not values:
            return True
        if not set(map(type, values)) <= kinds:
            return False
        try:
            if not integer and not all(map(math.isfinite, values)):
                return False
        except OverflowError:  # an integer beyond any float
            return False
        least = min(values)
        return (low < least if limits.low_open else low <= least) and max(values) <= high

    return accepts


def _scalar(hint: Any, accepts: Accepts) -> Checker:
    def check_scalar(value: Any, where: str) -> Any:
        if not accepts(value):
            raise _wrong(value, hint, where)
        return value

    return _accepting(check_scalar, accepts)


def _is_number(value: Any) -> bool:
    """A finite JSON number (JSON writes 2.0 as 2; true is not the number 1)."""
    if type(value) is float:
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1e308


_SCALARS: dict[Any, Checker] = {
    type(None): _scalar(type(None), lambda value: value is None),
    bool: _scalar(bool, lambda value: isinstance(value, bool)),
    int: _scalar(int, lambda value: isinstance(value, int) and not isinstance(value, bool)),
    float: _scalar(float, _is_number),
    str: _scalar(str, lambda value: isinstance(value, str)),
}
_SCALARS[str].accepts_all = lambda values: set(map(type, values)) <= {str}  # type: ignore[attr-defined]


def _annotated(hint: Any, base: Any, rules: tuple) -> Checker:
    wanted = expected(hint)
    check_base = checker(base)
    tests = [_accepts_of(check_base), *(getattr(rule, "accepts", None) for rule in rules)]
    accepts = _all_of(tests) if all(tests) else None
    numbers = base in (int, float) and len(rules) == 1 and isinstance(rules[0], Range)
    if numbers:
        accepts = _number_in(rules[0], base is int)

    def check_annotated(value: Any, where: str) -> Any:
        if accepts is not None and accepts(value):
            return value
        try:
            value = check_base(value, where)
            for rule in rules:
                rule.check(value, where)
        except SchemaError as error:
            if error.where != where:
                raise  # a problem inside the value (a list's item) says where it is itself
            raise SchemaError(where, error.found, wanted) from None
        return value

    _accepting(check_annotated, accepts)
    if numbers:
        check_annotated.accepts_all = _numbers_in(rules[0], base is int)  # type: ignore[attr-defined]
    return check_annotated


def _union(hint: Any, args: tuple) -> Checker:
    none_allowed = type(None) in args
    real = [checker(arg) for arg in args if arg is not type(None)]
    wanted = expected(hint)
    tests = [_accepts_of(check_one) for check_one in real]
    accepts = _any_of(tests, none_allowed) if all(tests) else None

    def check_union(value: Any, where: str) -> Any:
        if value is None and none_allowed:
            return None
        if len(real) == 1:
            try:
                return real[0](value, where)
            except SchemaError as error:
                if error.where != where:
                    raise  # a problem inside an object or a list: its own place says more
                raise SchemaError(where, error.found, wanted) from None
        for check_one in real:
            try:
                return check_one(value, where)
            except SchemaError:
                continue
        raise _wrong(value, hint, where)

    return _accepting(check_union, accepts)


def _literal(hint: Any, args: tuple) -> Checker:
    allowed = {(type(arg), arg) for arg in args}
    kinds = {type(arg) for arg in args}

    def accepts(value: Any) -> bool:
        return type(value) in kinds and (type(value), value) in allowed

    def check_literal(value: Any, where: str) -> Any:
        if accepts(value):
            return value
        raise _wrong(value, hint, where)

    if kinds == {str}:  # names: a column of them at once
        names = set(args)
        check_literal.accepts_all = lambda values: (  # type: ignore[attr-defined]
            set(map(type, values)) <= kinds and set(values) <= names
        )
    return _accepting(check_literal, accepts)


def _sequence(hint: Any, accepted: Any, check_item: Checker, made: type) -> Checker:
    item_accepts = _accepts_of(check_item)
    items_accept = getattr(check_item, "accepts_all", None)
    if items_accept is None and item_accepts is not None:
        items_accept = _each(item_accepts)

    many = getattr(check_item, "many", None)

    def check_sequence(value: Any, where: str) -> Any:
        if not isinstance(value, accepted):
            raise _wrong(value, hint, where)
        if many is not None:
            records = many(value)
            if records is not None:
                return made(records)
        if items_accept is not None:
            if items_accept(value):
                return value if type(value) is made else made(value)
        else:
            try:  # the places of items are only spelled out when one is wrong
                return made([check_item(item, where) for item in value])
            except SchemaError:
                pass
        return made([check_item(v, f"{where}[{i}]") for i, v in enumerate(value)])

    accepts = _list_of(items_accept) if items_accept is not None and made is list else None
    return _accepting(check_sequence, accepts)


def _fixed_tuple(hint: Any, checks: list[Checker]) -> Checker:
    def check_tuple(value: Any, where: str) -> tuple:
        if not isinstance(value, list | tuple):
            raise _wrong(value, hint, where)
        if len(value) != len(checks):
            found = f"has {len(value)} item{'' if len(value) == 1 else 's'}"
            raise SchemaError(where, found, expected(hint))
        items = enumerate(zip(value, checks, strict=True))
        return tuple(check_one(v, f"{where}[{i}]") for i, (v, check_one) in items)

    return check_tuple


def _mapping(hint: Any, check_item: Checker) -> Checker:
    def check_mapping(value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise _wrong(value, hint, where)
        return {key: check_item(v, f"{where}.{key}") for key, v in value.items()}

    return check_mapping


def _record(fields: list[tuple[str, Checker]], may_be_absent: frozenset[str]) -> Checker:
    """An object with exactly these fields, each checked: a dict."""
    known = {name for name, _ in fields}
    known_text = ", ".join(name for name, _ in fields) or "no fields"
    required = known - may_be_absent
    quick = [(name, _accepts_of(check) or _never, check) for name, check in fields]

    def check_fields(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _wrong(value, dict, where)
        prefix = f"{where}." if where else ""
        if not value.keys() <= known:
            key = next(key for key in value if key not in known)
            raise SchemaError(f"{prefix}{key}", "is not a known field", f"only {known_text}")
        if not required <= value.keys():
            name = next(name for name, _ in fields if name in required and name not in value)
            raise SchemaError(prefix + name, "is missing")
        try:  # the places of fields are only spelled out when one is wrong
            checked = {}
            for name, accepts, check in quick:
                if name in value:
                    item = value[name]
                    checked[name] = item if accepts(item) else check(item, where)
            return checked
        except SchemaError:
            return {
                name: check(value[name], prefix + name) for name, check in fields if name in value
            }

    return check_fields


def _typeddict(cls: Any) -> Checker:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [(name, checker(hint)) for name, hint in hints.items()]
    return _record(fields, frozenset(cls.__optional_keys__))


def _dataclass(cls: type) -> Checker:
    """Made on first use, so a dataclass may name types defined after it."""
    made: list[Checker] = []

    def now() -> Checker:
        if not made:
            made.append(_dataclass_now(cls))
        return made[0]

    def check_instance(value: Any, where: str) -> Any:
        return now()(value, where)

    check_instance.many = lambda values: now().many(values)  # type: ignore[attr-defined]
    return check_instance


def _dataclass_now(cls: type) -> Checker:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    absent_ok = set()
    for f in fields:
        if f.default is not dataclasses.MISSING:
            absent_ok.add(f.name)
        elif f.default_factory in (list, dict):
            try:
                check(f.default_factory(), hints[f.name], f.name)
                absent_ok.add(f.name)
            except SchemaError:
                pass
    check_fields = _record([(f.name, checker(hints[f.name])) for f in fields], frozenset(absent_ok))
    consistent = getattr(cls, "check_consistency", None)

    def check_instance(value: Any, where: str) -> Any:
        instance = cls(**check_fields(value, where))
        if consistent is not None:
            try:
                instance.check_consistency()
            except SchemaError as error:
                raise error.within(where) from None
        return instance

    check_instance.many = _records_at_once(cls, fields, hints)  # type: ignore[attr-defined]
    return check_instance


def _records_at_once(
    cls: type, fields: list[dataclasses.Field], hints: dict[str, Any]
) -> Callable[[list], list | None]:
    """Instances of a list of records, checked field by field across all of them in C loops
    (100,000 measurements); None where any needs a closer look (a field absent, a value to
    refuse): then each record is checked alone, which says where."""
    names = [f.name for f in fields]
    checks = [checker(hints[name]) for name in names]
    tests = [_column_test(check) for check in checks]
    known = frozenset(names)
    consistent = getattr(cls, "check_consistency", None)

    def many(values: list) -> list | None:
        if not values:
            return []
        if set(map(type, values)) != {dict} or set(map(len, values)) != {len(names)}:
            return None
        if not all(map(known.issuperset, values)):
            return None
        columns = []
        for name, check, test in zip(names, checks, tests, strict=True):
            column = list(map(operator.itemgetter(name), values))
            if test is not None:
                if not test(column):
                    return None
            else:
                try:
                    column = [check(item, name) for item in column]
                except SchemaError:
                    return None
            columns.append(column)
        instances = list(itertools.starmap(cls, zip(*columns, strict=True)))
        if consistent is not None:
            try:
                for instance in instances:
                    instance.check_consistency()
            except SchemaError:
                return None
        return instances

    return many


def _column_test(check: Checker) -> Accepts | None:
    """A test of many values at once that they pass `check` unchanged, if it has one."""
    every = getattr(check, "accepts_all", None)
    if every is not None:
        return every
    one = _accepts_of(check)
    return _each(one) if one is not None else None


# Types with the rules a loaded file must keep.
Count = Annotated[int, Range(0, MAX_COUNT)]  # elements, bytes, calls: never negative
ByteCount = Count
GpuIndex = Annotated[int, Range(0, MAX_GPU_INDEX)]
NonNegative = Annotated[float, Range(0, 1e15)]  # finite, never negative, never absurd
Milliseconds = Annotated[float, Range(0, MAX_MS, unit="ms")]
Seconds = Annotated[float, Range(0, MAX_MS / 1000, unit="s")]
Samples = Annotated[list[Milliseconds], NON_EMPTY]  # a measurement has at least one sample
