"""How the command line's commands are made: each built only when looked up, so `--help`
imports no experiment and `memprof report X.json` imports X's alone (OnDemandGroup); values
read without pydantic (PlainValue), whose import took longer than the rest of `memprof
report`, in click's words for a bad value; every --help ending with real command lines.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator, MutableMapping
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
from typer.core import TyperCommand, TyperGroup

try:  # typer 0.2x and later carry their own copy of click
    from typer._click.utils import make_default_short_help
except ImportError:  # older typer: click itself
    from click.utils import make_default_short_help  # type: ignore[no-redef]

Read = Callable[[Any], Any]  # a command-line value (a string, or a default) -> the option's

# Every command, in the order --help lists them: its help (the list shows its first
# paragraph), and how its click command is built when first needed.
HELP: dict[str, str] = {}
BUILDERS: dict[str, Callable[[], Any]] = {}


# -- examples at the end of every --help --------------------------------------------------------

# Real command lines (tests/test_cli_help.py parses every one) of the commands that run no
# experiment, kept here so `memprof --help` does not import memprof.cli_options; an
# experiment's are its registry line's (memprof.experiments.Command.examples).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "memprof info",
        "memprof pinned --power 20 --json run.json",
        "memprof report run.json",
        "memprof diff before.json after.json --fail-above 5",
    ),
    "report": (
        "memprof report run.json",
        "memprof report a.json b.json --csv all.csv",
        "memprof report check.json --junit check.xml",
        "memprof report --fail-outliers 10 results/*.json",
    ),
    "diff": (
        "memprof diff before.json after.json",
        "memprof diff baseline.json run.json --fail-above 5 --junit diff.xml",
        "memprof diff baseline.json run.json --fail-above 5 --only gbps",
    ),
    "plot": (
        "memprof plot sweep.json",
        "memprof plot peer.json -o peer.png",
        "memprof plot check.json -o check.html",
        "memprof plot before.json after.json -o cmp.svg --label before --label after",
    ),
}


def examples_of(command: str) -> tuple[str, ...]:
    """The command's examples (the command line's own for ""), or the generic pair."""
    from memprof.experiments import COMMANDS

    own = {line.name: line.examples for line in COMMANDS}.get(command)
    return (
        EXAMPLES.get(command)
        or own
        or (
            f"memprof {command}",
            f"memprof {command} --json {command}.json",
        )
    )


def epilog(command: str) -> str:
    """The end of a command's --help: its examples ("\b" keeps click from joining them)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in examples_of(command))


def command(name: str, help: str, options: Callable[[], list[inspect.Parameter]], **settings: Any):
    """Register `body(**values)` as the command `name`, built with options() when first needed."""

    def register(body: Callable[..., None]) -> Callable[..., None]:
        on_demand(name, help, lambda: build(name, body, help, options(), settings))
        return body

    return register


def on_demand(name: str, help: str, make: Callable[[], Any]) -> None:
    """List the command `name` with `help`; make() builds it, once, when it is looked up."""
    HELP[name] = help
    BUILDERS[name] = functools.cache(make)


def build(
    name: str,
    body: Callable[..., None],
    help: str,
    parameters: list[inspect.Parameter],
    settings: dict[str, Any],
) -> Any:
    """The click command typer makes of `body(**values)` whose options are `parameters`."""
    body.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    one = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    one.command(name, help=help, epilog=epilog(name), cls=PlainCommand, **settings)(body)
    return typer.main.get_command(one)


class OnDemand(MutableMapping):
    """A group's commands by name: every registered name known, each built when looked up."""

    def __init__(self, built: MutableMapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            self._built[name] = BUILDERS[name]()  # KeyError where no command has that name
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(BUILDERS), **self._built})

    def __len__(self) -> int:
        return len({**BUILDERS, **self._built})

    def __contains__(self, name: object) -> bool:
        return name in BUILDERS or name in self._built


class PlainCommand(TyperCommand):
    """Typer's command, its values (--help too) read by PlainValue. Built once and kept
    (OnDemand), it answers to the help names of the context it runs in (-h under memprof's
    group), not those of the first context that asked (click keeps the first)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return read_plainly(super().get_params(ctx))

    def make_parser(self, ctx: Any) -> Any:
        """Click's parser, refusing an option given twice (click keeps the last: `--json
        a.json --json b.json` saved only b.json, and `--power 20 --power 21` measured 21)."""
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_once(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            for param in order:
                if param.param_type_name != "option" or param.multiple or param.is_flag:
                    continue  # an argument, --label (once per file), -q: as often as wanted
                if order.count(param) > 1:
                    ctx.fail(f"{' / '.join(param.opts)} is given twice: give it once")
            return opts, rest, order

        parser.parse_args = parse_once
        return parser

    def get_help_option(self, ctx: Any) -> Any:
        kept = getattr(self, "_help_option", None)
        if kept is not None and set(kept.opts) != set(self.get_help_option_names(ctx)):
            self._help_option = None
        return super().get_help_option(ctx)


class OnDemandGroup(TyperGroup):
    """Typer's group, its commands built when first looked up (OnDemand), its values read by
    PlainValue."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands = OnDemand(self.commands)

    def get_params(self, ctx: Any) -> list[Any]:
        """Every parameter, --help and completion's included, read by PlainValue."""
        return read_plainly(super().get_params(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names: listing them builds none

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list as click lays it out, from each command's registered help."""
        names = [name for name in self.list_commands(ctx) if name in HELP]
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, make_default_short_help(HELP[name], limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def read_plainly(parameters: list[Any]) -> list[Any]:
    """The parameters, each read by PlainValue instead of typer 0.2x's adapters where it has a
    reader of that kind; the rest (and an older typer's, click's types) left to typer."""
    for parameter in parameters:
        descriptor = getattr(parameter, "type_descriptor", None)
        runtime = getattr(parameter, "_runtime_param", PlainValue)  # none: an older typer
        if descriptor is None or runtime is PlainValue or isinstance(runtime, PlainValue):
            continue
        read = plain_reader(descriptor.annotation, descriptor.parameter_info)
        if read is not None:
            parameter._runtime_param = PlainValue(read)
    return parameters


class PlainValue:
    """What typer asks of an option's reader: coerce(value, param, ctx), None kept as None
    (or no values), a bad value a BadParameter (click's "Invalid value for '--power'...")."""

    def __init__(self, read: Read) -> None:
        self.read = read

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        several = param.multiple or param.nargs == -1
        if value is None:
            return () if several else None
        try:
            if several and isinstance(value, str):
                raise ValueError("Value must be an iterable.")
            return self.read(value)
        except ValueError as error:
            raise typer.BadParameter(str(error), ctx=ctx, param=param) from None


def plain_reader(kind: Any, info: Any) -> Read | None:
    """How a value of `kind` is read, in click's words for a bad one; None for a kind (or a
    setting: a parser, a range, a path that must exist...) left to typer."""
    if getattr(info, "parser", None) is not None:
        return None
    if get_origin(kind) is list:
        read_one = plain_reader(get_args(kind)[0], info)
        if read_one is None:
            return None
        return lambda values: [read_one(value) for value in values]
    if kind in (int, float):
        if getattr(info, "min", None) is not None or getattr(info, "max", None) is not None:
            return None
        words = "integer" if kind is int else "float"
        return lambda value: _number(kind, value, words)
    if kind is str:
        return lambda value: os.fsdecode(value) if isinstance(value, bytes) else str(value)
    if kind is bool:
        return _flag
    if isinstance(kind, type) and issubclass(kind, Enum):
        return lambda value: _choice(kind, value, getattr(info, "case_sensitive", True))
    if kind is Path and _plain_path(info):
        return _path
    return None


def _number(kind: type, value: Any, words: str) -> Any:
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a valid {words}.") from None


FLAGS = {
    **dict.fromkeys(("1", "true", "t", "yes", "y", "on"), True),
    **dict.fromkeys(("0", "false", "f", "no", "n", "off"), False),
}


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    flag = FLAGS.get(str(value).strip().lower())
    if flag is None:
        raise ValueError(f"{value!r} is not a valid boolean.")
    return flag


def _choice(kind: type[Enum], value: Any, case_sensitive: bool) -> Enum:
    if isinstance(value, kind):
        return value
    fold = (lambda text: text) if case_sensitive else str.casefold
    for member in kind:
        if fold(str(member.value)) == fold(str(value)):
            return member
    names = ", ".join(repr(str(member.value)) for member in kind)
    raise ValueError(f"{value!r} is not one of {names}.")


def _plain_path(info: Any) -> bool:
    """A path typer only checks for readability where it exists (its default settings)."""
    settings = ("exists", "resolve_path", "writable", "allow_dash", "path_type")
    return not any(getattr(info, name, None) for name in settings) and all(
        getattr(info, name, True) for name in ("file_okay", "dir_okay")
    )


def _path(value: Any) -> Path:
    if not isinstance(value, Path) and not os.fsdecode(value):  # Path("") would be "."
        raise ValueError("the file name is empty")
    path = Path(os.fsdecode(value)) if not isinstance(value, Path) else value
    if os.path.exists(path) and not os.access(path, os.R_OK):
        raise ValueError(f"path {os.fsdecode(path)!r} is not readable.")
    return path
