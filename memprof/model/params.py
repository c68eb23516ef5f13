"""What an experiment's Params field declares: its default, the values it allows, and its help.

    power: Power = param(22, "Size: 2^N float32 elements per array", flags=("--power", "-p"))

is what the command line offers, what `memprof.run()` refuses and what a saved file must hold.
`form=` gives a field another shape on the command line: Sizes, CommaList, NamedSets.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec

from memprof.errors import InvalidArgument
from memprof.model.schema import Range, SchemaError, allows, check, is_range, refusal

__all__ = ["Range"]  # experiments declare their ranges with it


# -- how a field looks on the command line ---------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """A tuple of powers as --from A --to B --step S; `single` names a bool field that
    --power N sets (one size, shown in full) where the experiment offers it."""

    step: int = 1
    single: str | None = None
    single_help: str = "One size: 2^N floats, shown in full."

    @staticmethod
    def value(first: int | None, last: int | None, step: int, default: tuple[int, ...]) -> tuple:
        """The sizes --from/--to/--step give, or the default sweep where neither is given."""
        if first is None and last is None:
            return default
        if first is None or last is None:
            raise InvalidArgument("a sweep needs both --from and --to")
        if first > last:
            raise InvalidArgument(f"--from {first} is larger than --to {last}")
        return tuple(range(first, last + 1, step))


@dataclass(frozen=True)
class CommaList:
    """A tuple of names given as one comma-separated option, in the order given, each once."""

    @staticmethod
    def value(text: str, flag: str, choices: tuple) -> tuple[str, ...]:
        chosen = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
        if not chosen or any(name not in choices for name in chosen):
            raise InvalidArgument(
                f"{flag} {text!r}: choose from {', '.join(choices)} (comma-separated)"
            )
        return chosen


@dataclass(frozen=True)
class NamedSets:
    """A tuple chosen by name: --direction both gives ("h2d", "d2h")."""

    sets: Mapping[str, tuple]

    def name_of(self, value: tuple) -> str:
        return next(name for name, values in self.sets.items() if values == value)


@dataclass(frozen=True)
class Option:
    """A Params field's command-line face: its help, its flags, and its form."""

    help: str
    flags: tuple[str, ...] = ()  # "--power", "-p"; empty: --field-name
    form: Sizes | CommaList | NamedSets | None = None
    hidden_from_cli: bool = False  # set by another option (Sizes.single), never given itself
    reads_file: bool = False  # its value names a file the command reads: never written over


def param(
    default: Any,
    help: str,
    *,
    flags: tuple[str, ...] = (),
    form: Sizes | CommaList | NamedSets | None = None,
    hidden_from_cli: bool = False,
    reads_file: bool = False,
) -> Any:
    """A Params field: its default, and how the command line offers it."""
    return dataclasses.field(
        default=default, metadata={"option": Option(help, flags, form, hidden_from_cli, reads_file)}
    )


def input_files(params_type: type, values: dict[str, Any]) -> list[Path]:
    """The files a command reads (fields declared reads_file): no output is written over one."""
    return [
        Path(values[one.name])
        for one in dataclasses.fields(params_type)
        if option_of(one).reads_file and values.get(one.name)
    ]


def option_of(field: dataclasses.Field) -> Option:
    """The Option a Params field declares (a plain field: its name as the help)."""
    return field.metadata.get("option") or Option(field.name.replace("_", " "))


def hints(params_type: type) -> dict[str, Any]:
    """The annotations of a Params class, rules included."""
    return typing.get_type_hints(params_type, include_extras=True)


def range_of(hint: Any) -> msgspec.Meta | None:
    """The Range a field's values (or each item of a tuple field) must keep, if any."""
    if get_origin(hint) in (Union, types.UnionType):
        found = [range_of(arg) for arg in get_args(hint)]
        return next((rule for rule in found if rule is not None), None)
    if get_origin(hint) is Annotated:
        base, *rules = get_args(hint)
        return next((rule for rule in rules if is_range(rule)), None) or range_of(base)
    if get_origin(hint) is tuple and get_args(hint):
        return range_of(get_args(hint)[0])
    return None


def base_type(hint: Any) -> Any:
    """A field's type without its rules: int, float | None, Literal[...], tuple[str, ...]."""
    if get_origin(hint) in (Union, types.UnionType):
        return functools.reduce(operator.or_, (base_type(arg) for arg in get_args(hint)))
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def choices_of(hint: Any) -> tuple | None:
    """The allowed values of a Literal field, or of each item of a tuple of Literals."""
    hint = base_type(hint)
    if get_origin(hint) is Literal:
        return get_args(hint)
    if get_origin(hint) is tuple:
        item = get_args(hint)[0]
        if get_origin(item) is Literal:
            return get_args(item)
    return None


def validated(params: Any) -> Any:
    """`params` if every field keeps its type and rules, else InvalidArgument naming the field."""
    for field in dataclasses.fields(params):
        if not field.init:
            continue
        value = getattr(params, field.name)
        hint = hints(type(params))[field.name]
        try:
            check(value, hint, field.name)
        except SchemaError as error:
            raise InvalidArgument(_refusal(field.name, hint, value, error)) from None
    try:
        check_single_sizes(params)
    except SchemaError as error:  # memprof.run("zerocopy", powers=(5, 6), single_size=True)
        raise InvalidArgument(str(error)) from None
    return params


def check_single_sizes(params: Any) -> None:
    """A sweep's sizes are one where the flag its --power sets says so (Sizes.single)."""
    for one in dataclasses.fields(params):
        form = option_of(one).form
        if isinstance(form, Sizes) and form.single and getattr(params, form.single):
            powers = getattr(params, one.name)
            if len(powers) != 1:
                raise SchemaError(one.name, f"has {len(powers)} sizes, but {form.single} says one")


def _refusal(name: str, hint: Any, value: Any, error: SchemaError) -> str:
    """A Range's own words where the value broke one, else the schema's."""
    values = value if isinstance(value, tuple) else (value,)
    limit = range_of(hint)
    if limit is not None:
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        bad = [v for v in numbers if not allows(limit, v)]
        if bad:
            return f"{name}: {refusal(limit, bad[0])}"
    return str(error)


def make(params_type: type, **values: Any) -> Any:
    """Params from keyword values (unknown names refused), every value checked."""
    names = {f.name for f in dataclasses.fields(params_type) if f.init}
    unknown = sorted(set(values) - names)
    if unknown:
        raise InvalidArgument(
            f"unknown parameter {unknown[0]!r}: choose from {', '.join(sorted(names)) or 'none'}"
            + _sizes_hint(params_type, unknown[0])
        )
    files = {f.name for f in dataclasses.fields(params_type) if option_of(f).reads_file}
    converted = {k: _file_name(v) if k in files else plain(v) for k, v in values.items()}
    return validated(params_type(**converted))


def _file_name(value: Any) -> Any:
    """A file's name as the str its field keeps, from a Path too (as memprof.load takes)."""
    return os.fsdecode(value) if isinstance(value, os.PathLike | bytes) else value


SIZE_OPTION_NAMES = ("power", "from", "from_", "from_power", "to", "to_power", "step")


def _sizes_hint(params_type: type, name: str) -> str:
    """How a sweep's --power, --from/--to/--step are spelt as keywords, for one who tried."""
    if name not in SIZE_OPTION_NAMES:
        return ""
    for one in dataclasses.fields(params_type):
        form = option_of(one).form
        if isinstance(form, Sizes):
            single = f"; --power N is {one.name}=(N,), {form.single}=True" if form.single else ""
            return f" (the sizes are {one.name}=(N, ...), powers of two of floats{single})"
    return ""


def plain(value: Any) -> Any:
    """numpy's scalars as the Python values they hold, a list or array as a tuple of them."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        value = value.tolist()  # a scalar's Python value, an array's nested lists
    if isinstance(value, list | tuple):
        return tuple(plain(item) for item in value)
    return value


# -- the command line's view of a Params class ------------------------------------------------


@dataclass(frozen=True)
class CliOption:
    """One command-line option, whatever parses it (memprof.cli renders it with typer)."""

    name: str  # the Python name its value arrives under
    kind: Any  # int, float | None, str, bool...
    default: Any
    flags: tuple[str, ...]
    help: str
    rule: msgspec.Meta | None = None  # a Range: values outside it are refused in its words
    choices: tuple[str, ...] = ()  # a fixed set of names
    argument: bool = False  # positional (trace's SCRIPT and its arguments), not an option


def cli_options(params_type: type) -> list[CliOption]:
    """The options a Params class offers: one per field, a sweep of sizes as several."""
    options = []
    for field in dataclasses.fields(params_type):
        face, hint = option_of(field), hints(params_type)[field.name]
        flags = face.flags or (f"--{field.name.replace('_', '-')}",)
        rule = range_of(hint)
        form, choices = face.form, choices_of(hint) or ()
        if face.hidden_from_cli:
            continue
        if isinstance(form, Sizes):
            if form.single:
                help = form.single_help
                options.append(CliOption("power", int | None, None, ("--power", "-p"), help, rule))
            for name, which in (("from", "first"), ("to", "last")):
                help = f"Sweep: {which} size, N of 2^N floats."
                options.append(
                    CliOption(f"{name}_power", int | None, None, (f"--{name}",), help, rule)
                )
            step = Range(1, rule.le if rule else 64)
            help = f"Sweep: step, with --from and --to (default {form.step})."
            options.append(CliOption("step", int | None, None, ("--step",), help, step))
        elif isinstance(form, CommaList):
            help = f"{face.help} Comma-separated, from: {', '.join(choices)}."
            options.append(CliOption(field.name, str, ",".join(field.default), flags, help))
        elif isinstance(form, NamedSets):
            default = form.name_of(field.default)
            options.append(
                CliOption(field.name, str, default, flags, face.help, None, tuple(form.sets))
            )
        else:
            kind = base_type(hint) if not choices else str
            if kind is bool and not face.flags:  # --prefetch / --no-prefetch
                name = field.name.replace("_", "-")
                flags = (f"--{name}/--no-{name}",)
            options.append(
                CliOption(field.name, kind, field.default, flags, face.help, rule, choices)
            )
    return options


def from_cli(params_type: type, values: dict[str, Any]) -> Any:
    """Params from the values of cli_options(params_type), every value checked."""
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(params_type):
        face = option_of(field)
        form, flag = face.form, (face.flags or (f"--{field.name.replace('_', '-')}",))[0]
        if face.hidden_from_cli:
            continue
        if isinstance(form, Sizes):
            power, sizes = values.get("power"), (values["from_power"], values["to_power"])
            if power is not None and sizes != (None, None):
                raise InvalidArgument("use either --power or --from/--to, not both")
            if values["step"] is not None and sizes == (None, None):  # ignored, it was
                raise InvalidArgument("--step is the step from --from to --to: give them too")
            step = form.step if values["step"] is None else values["step"]
            fields[field.name] = form.value(*sizes, step, field.default)
            if power is not None:
                fields[field.name], fields[form.single] = (power,), True
        elif isinstance(form, CommaList):
            choices = choices_of(hints(params_type)[field.name]) or ()
            fields[field.name] = form.value(values[field.name], flag, choices)
        elif isinstance(form, NamedSets):
            fields[field.name] = form.sets[values[field.name]]
        else:
            fields[field.name] = values[field.name]
    return make(params_type, **fields)
