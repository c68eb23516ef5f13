"""Checking loaded JSON against the types the dataclasses declare, one value at a time.

A Result file is read by `memprof report` and `memprof diff` on any machine, so every value is
checked before anything is drawn from it. The types are the annotations themselves (int, float,
str, bool, None, Literal, list, tuple, dict, a dataclass, `X | None`, a dict of field types for a
record such as an experiment's `extra`), plus rules attached with `Annotated` (AtLeast, NON_EMPTY).
So a new field is checked as soon as it is declared. The first problem found is raised as a
SchemaError that says where it is: `measurements[3].samples_ms[0] is NaN: expected ...`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

# A record: field name -> type, every field required (an experiment's `extra`).
Record = dict[str, Any]


class SchemaError(ValueError):
    """One value that is not what its field declares, and where it is in the file."""

    def __init__(self, where: str, found: str, wanted: str | None = None) -> None:
        message = f"{where} {found}" if where else found
        super().__init__(f"{message}: expected {wanted}" if wanted else message)
        self.where, self.found = where, found


@dataclass(frozen=True)
class AtLeast:
    """A rule for Annotated numbers: the value must be >= minimum."""

    minimum: float

    def check(self, value: float, where: str) -> None:
        if value < self.minimum:
            raise SchemaError(where, f"is {describe(value)}")

    @property
    def phrase(self) -> str:
        return f">= {self.minimum:g}"


@dataclass(frozen=True)
class NonEmpty:
    """A rule for Annotated lists: at least one item (a measurement has at least one sample)."""

    def check(self, value: list, where: str) -> None:
        if not value:
            raise SchemaError(where, "is an empty list")

    @property
    def phrase(self) -> str:
        return "with at least one item"


NON_EMPTY = NonEmpty()


def describe(value: Any) -> str:
    """A value as the message shows it: what it is, briefly."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
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
    if isinstance(hint, dict) or dataclasses.is_dataclass(hint):
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


# What JSON value each plain type accepts (an int where a float is declared: JSON writes 2.0 as 2).
_SCALARS = {type(None): type(None), bool: bool, int: int, float: int | float, str: str}


def check(value: Any, hint: Any, where: str) -> Any:
    """value as its type declares it (tuples from lists, dataclasses from objects), or raise."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return value
    if origin is Annotated:
        base, *rules = args
        try:
            value = check(value, base, where)
            for rule in rules:
                rule.check(value, where)
        except SchemaError as error:
            if error.where != where:
                raise  # a problem inside the value (a list's item) says where it is itself
            raise SchemaError(where, error.found, expected(hint)) from None
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        real = [arg for arg in args if arg is not type(None)]
        for arg in real:
            try:
                return check(value, arg, where)
            except SchemaError as error:
                if len(real) > 1:
                    continue
                if error.where != where:
                    raise  # a problem inside an object or a list: its own place says more
                raise SchemaError(where, error.found, expected(hint)) from None
        raise _wrong(value, hint, where)
    if origin is Literal:
        if any(value == arg and type(value) is type(arg) for arg in args):
            return value
        raise _wrong(value, hint, where)
    if isinstance(hint, dict):
        return check_record(value, hint, where)
    if dataclasses.is_dataclass(hint):
        return check_dataclass(value, hint, where)
    if origin is list or hint is list:
        if not isinstance(value, list):
            raise _wrong(value, hint, where)
        item = args[0] if args else Any
        return [check(v, item, f"{where}[{index}]") for index, v in enumerate(value)]
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise _wrong(value, hint, where)
        if args[-1] is Ellipsis:
            return tuple(check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            found = f"has {len(value)} item{'' if len(value) == 1 else 's'}"
            raise SchemaError(where, found, expected(hint))
        items = enumerate(zip(value, args, strict=True))
        return tuple(check(v, arg, f"{where}[{i}]") for i, (v, arg) in items)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _wrong(value, hint, where)
        item = args[1] if args else Any
        return {key: check(v, item, f"{where}.{key}") for key, v in value.items()}
    if hint in _SCALARS:
        if (
            not isinstance(value, _SCALARS[hint])
            or (isinstance(value, bool) and hint is not bool)  # JSON true is not the number 1
            or (hint is float and not math.isfinite(value))
        ):
            raise _wrong(value, hint, where)
        return value
    raise TypeError(f"schema.check has no rule for {hint!r} (at {where})")


def check_record(
    value: Any, hints: Record, where: str, may_be_absent: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """An object with exactly these fields (those in may_be_absent may be left out), checked."""
    if not isinstance(value, dict):
        raise _wrong(value, dict, where)
    prefix = f"{where}." if where else ""
    for key in value:
        if key not in hints:
            known = ", ".join(hints) or "no fields"
            raise SchemaError(f"{prefix}{key}", "is not a known field", f"only {known}")
    checked = {}
    for name, hint in hints.items():
        if name in value:
            checked[name] = check(value[name], hint, f"{prefix}{name}")
        elif name not in may_be_absent:
            raise SchemaError(f"{prefix}{name}", "is missing")
    return checked


def check_dataclass(value: Any, cls: type, where: str) -> Any:
    """An instance of cls from a JSON object, every field checked against its annotation.

    A field whose default is a constant or an empty list or dict may be absent: files written
    before the field existed mean that default (so a new field's default must be what memprof
    did before it). Defaults computed from this process (pid, host, time, version) never stand
    in for a file's own, and an empty default that is not valid (samples_ms) is never taken.
    """
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
    checked = check_record(
        value, {f.name: hints[f.name] for f in fields}, where, frozenset(absent_ok)
    )
    return cls(**checked)


def _wrong(value: Any, hint: Any, where: str) -> SchemaError:
    return SchemaError(where, f"is {describe(value)}", expected(hint))


# Types with the rules a loaded file must keep (checked by check below).
Count = Annotated[int, AtLeast(0)]  # elements, bytes, calls: never negative
ByteCount = Count
NonNegative = Annotated[float, AtLeast(0)]  # finite, never negative
Milliseconds = NonNegative
Samples = Annotated[list[Milliseconds], NON_EMPTY]  # a measurement has at least one sample
