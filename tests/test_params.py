from typing import Annotated, Literal

import pytest

from memprof.model.params import Range
from memprof.model.schema import INCREASING, NON_EMPTY

Level = Annotated[int, Range(2, 20)]  # module-level: get_type_hints reads the module's names


def test_the_files_a_command_reads_are_its_fields_declared_reads_file():
    from pathlib import Path

    from memprof.experiments.check import CheckParams
    from memprof.model.params import input_files

    given = {"reference": "ref.json", "thresholds": None, "power": 20}
    assert input_files(CheckParams, given) == [Path("ref.json")]
    both = {"reference": "ref.json", "thresholds": "floors.json"}
    assert input_files(CheckParams, both) == [Path("ref.json"), Path("floors.json")]
    assert input_files(CheckParams, {"power": 20}) == []


# -- a Params class of every form, made inside each test (mutmut 3 forks after import: a class
# made at import would never run a mutant of param)


def every_form() -> type:
    """A Params class with each form and face a command's options take."""
    from dataclasses import dataclass

    from memprof.model.params import CommaList, NamedSets, Sizes, param

    @dataclass(frozen=True)
    class EveryForm:
        powers: Annotated[tuple[Level, ...], NON_EMPTY, INCREASING] = param(
            (3, 5), "Sizes.", form=Sizes(step=2, single="one_size")
        )
        one_size: bool = param(False, "One size.", hidden_from_cli=True)
        kind_list: tuple[Literal["a", "b", "c"], ...] = param(
            ("a", "c"), "Kinds.", form=CommaList()
        )
        way: tuple[str, ...] = param(
            ("x", "y"), "Way.", form=NamedSets({"x": ("x",), "both": ("x", "y")}), flags=("--way",)
        )
        mode: Literal["fast", "slow"] = param("slow", "Mode.")
        deep_check: bool = param(True, "Check deeply.")
        quiet_run: bool = param(False, "Quiet.", flags=("--quiet-run",))
        level: Level | None = param(None, "Level.", flags=("--level", "-l"))
        input_file: str | None = param(None, "Input.", reads_file=True)
        plain_count: int = 5

    return EveryForm


CLI_VALUES = {
    "power": None,
    "from_power": None,
    "to_power": None,
    "step": None,
    "kind_list": "a,c",
    "way": "both",
    "mode": "slow",
    "deep_check": True,
    "quiet_run": False,
    "level": None,
    "input_file": None,
    "plain_count": 5,
}


def test_the_command_line_offers_each_field_in_its_form_flags_help_and_rule():
    from memprof.model.params import CliOption, Range, cli_options

    levels = Range(2, 20)
    sweep = "Sweep: {} size, N of 2^N floats."
    assert cli_options(every_form()) == [
        CliOption("power", int | None, None, ("--power", "-p"),
                  "One size: 2^N floats, shown in full.", levels),
        CliOption("from_power", int | None, None, ("--from",), sweep.format("first"), levels),
        CliOption("to_power", int | None, None, ("--to",), sweep.format("last"), levels),
        CliOption("step", int | None, None, ("--step",),
                  "Sweep: step, with --from and --to (default 2).", Range(1, 20)),
        CliOption("kind_list", str, "a,c", ("--kind-list",),
                  "Kinds. Comma-separated, from: a, b, c."),
        CliOption("way", str, "both", ("--way",), "Way.", None, ("x", "both")),
        CliOption("mode", str, "slow", ("--mode",), "Mode.", None, ("fast", "slow")),
        CliOption("deep_check", bool, True, ("--deep-check/--no-deep-check",), "Check deeply."),
        CliOption("quiet_run", bool, False, ("--quiet-run",), "Quiet."),
        CliOption("level", int | None, None, ("--level", "-l"), "Level.", levels),
        CliOption("input_file", str | None, None, ("--input-file",), "Input."),
        CliOption("plain_count", int, 5, ("--plain-count",), "plain count"),
    ]  # fmt: skip


def test_a_sweep_without_single_size_or_range_steps_up_to_64():
    from dataclasses import dataclass

    from memprof.model.params import CliOption, Range, Sizes, cli_options, param

    @dataclass(frozen=True)
    class Unbounded:
        sizes: tuple[int, ...] = param((1,), "Sizes.", form=Sizes())

    options = cli_options(Unbounded)
    assert [option.name for option in options] == ["from_power", "to_power", "step"]
    assert options[2] == CliOption(
        "step", int | None, None, ("--step",), "Sweep: step, with --from and --to (default 1).",
        Range(1, 64),
    )  # fmt: skip
    assert options[0].rule is None


def test_the_command_lines_values_make_the_params_each_form_gives():
    from memprof.model.params import from_cli

    every = every_form()
    made = from_cli(every, CLI_VALUES)
    assert made == every()  # the defaults, NamedSets' "both" included
    swept = from_cli(every, CLI_VALUES | {"from_power": 4, "to_power": 9, "kind_list": "c, b,c"})
    assert (swept.powers, swept.one_size, swept.kind_list) == ((4, 6, 8), False, ("c", "b"))
    stepped = from_cli(every, CLI_VALUES | {"from_power": 4, "to_power": 9, "step": 5})
    assert stepped.powers == (4, 9)
    one = from_cli(every, CLI_VALUES | {"power": 7, "way": "x", "quiet_run": True, "level": 2})
    assert (one.powers, one.one_size, one.way, one.quiet_run, one.level) == (
        (7,),
        True,
        ("x",),
        True,
        2,
    )
    assert one.mode == "slow" and one.plain_count == 5


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (
            {"power": 7, "from_power": 4, "to_power": 9},
            "use either --power or --from/--to, not both",
        ),
        ({"power": 7, "to_power": 9}, "use either --power or --from/--to, not both"),
        ({"step": 2}, "--step is the step from --from to --to: give them too"),
        ({"from_power": 4}, "a sweep needs both --from and --to"),
        ({"to_power": 4}, "a sweep needs both --from and --to"),
        ({"from_power": 5, "to_power": 4}, "--from 5 is larger than --to 4"),
        ({"kind_list": "a,z"}, "--kind-list 'a,z': choose from a, b, c (comma-separated)"),
        ({"level": 21}, "level: 21 is outside the allowed range 2 to 20"),
        ({"from_power": 1, "to_power": 4}, "powers: 1 is outside the allowed range 2 to 20"),
    ],
)
def test_the_command_lines_contradictions_are_refused_in_their_words(values, words):
    from memprof.errors import InvalidArgument
    from memprof.model.params import from_cli

    with pytest.raises(InvalidArgument) as refused:
        from_cli(every_form(), CLI_VALUES | values)
    assert str(refused.value) == words


def test_a_sweep_of_one_size_from_to_is_kept():
    from memprof.model.params import from_cli

    made = from_cli(every_form(), CLI_VALUES | {"from_power": 4, "to_power": 4})
    assert (made.powers, made.one_size) == ((4,), False)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"level": 21}, "level: 21 is outside the allowed range 2 to 20"),
        ({"level": 1}, "level: 1 is outside the allowed range 2 to 20"),
        ({"powers": (3, 99)}, "powers: 99 is outside the allowed range 2 to 20"),
        ({"powers": (25, 99)}, "powers: 25 is outside the allowed range 2 to 20"),
        ({"level": True}, "level is true: expected an integer 2 to 20 or null"),
        ({"level": "x"}, "level is the string 'x': expected an integer 2 to 20 or null"),
        ({"powers": (3, 4), "one_size": True}, "powers has 2 sizes, but one_size says one"),
    ],
)
def test_a_value_is_refused_in_its_ranges_words_else_the_schemas(values, words):
    from memprof.errors import InvalidArgument
    from memprof.model.params import make

    with pytest.raises(InvalidArgument) as refused:
        make(every_form(), **values)
    assert str(refused.value) == words


def test_values_at_a_ranges_ends_are_kept():
    from memprof.model.params import make

    every = every_form()
    assert make(every, level=2, powers=(2, 20)).level == 2
    assert make(every, level=20).level == 20
    assert make(every, powers=(9,), one_size=True).powers == (9,)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("colour", ""),
        ("power", " (the sizes are powers=(N, ...), powers of two of floats; --power N is "
                  "powers=(N,), one_size=True)"),
        ("from_", " (the sizes are powers=(N, ...), powers of two of floats; --power N is "
                  "powers=(N,), one_size=True)"),
    ],
)  # fmt: skip
def test_an_unknown_keyword_is_refused_naming_the_known_ones(name, hint):
    from memprof.errors import InvalidArgument
    from memprof.model.params import make

    with pytest.raises(InvalidArgument) as refused:
        make(every_form(), **{name: 1, "zzz": 2})
    assert str(refused.value) == (
        f"unknown parameter {name!r}: choose from deep_check, input_file, kind_list, level, "
        "mode, one_size, plain_count, powers, quiet_run, way" + hint
    )


def test_a_class_without_fields_is_refused_any_keyword():
    from dataclasses import dataclass

    from memprof.errors import InvalidArgument
    from memprof.model.params import make

    @dataclass(frozen=True)
    class Empty:
        pass

    with pytest.raises(InvalidArgument, match=r"^unknown parameter 'power': choose from none$"):
        make(Empty, power=3)


def test_a_sweeps_hint_without_single_size_says_so():
    from dataclasses import dataclass

    from memprof.errors import InvalidArgument
    from memprof.model.params import Sizes, make, param

    @dataclass(frozen=True)
    class Sweep:
        sizes: tuple[int, ...] = param((1,), "Sizes.", form=Sizes())

    with pytest.raises(InvalidArgument) as refused:
        make(Sweep, step=3)
    assert str(refused.value) == (
        "unknown parameter 'step': choose from sizes (the sizes are sizes=(N, ...), powers of "
        "two of floats)"
    )


def test_make_takes_numpys_values_and_a_paths_name():
    from pathlib import Path

    import numpy as np

    from memprof.model.params import input_files, make

    every = every_form()
    made = make(every, powers=np.array([3, 4]), level=np.int64(7), input_file=Path("in.json"))
    assert (made.powers, made.level, made.input_file) == ((3, 4), 7, "in.json")
    assert type(made.level) is int and all(type(power) is int for power in made.powers)
    assert make(every, input_file=b"raw.json").input_file == "raw.json"
    # a file's field keeps what it is given, a list included: its check refuses it
    assert input_files(every, {"input_file": "in.json", "mode": "fast"}) == [Path("in.json")]
    assert input_files(every, {"input_file": None, "mode": "fast"}) == []


def test_plain_turns_numpys_scalars_and_nested_sequences_to_python():
    import numpy as np

    from memprof.model.params import plain

    assert plain([np.float32(0.5), (np.int8(3), [np.bool_(True)])]) == (0.5, (3, (True,)))
    assert plain(np.array([[1, 2], [3, 4]])) == ((1, 2), (3, 4))
    assert plain("text") == "text" and plain(None) is None


def test_the_ranges_and_types_a_hint_declares():
    from typing import Annotated, Literal

    from memprof.experiments.base import Power, Powers, Repeat
    from memprof.model.params import Range, base_type, choices_of, range_of

    powers = Range(0, 30)
    assert range_of(Power) == powers
    assert range_of(tuple[Power, ...]) == powers
    assert range_of(Powers) == powers  # through its rules to its items'
    assert range_of(Repeat) == Range(1, 10_000)  # through an optional
    assert range_of(None | Annotated[int, Range(3, 4)]) == Range(3, 4)
    assert range_of(int) is None and range_of(tuple[()]) is None
    assert range_of(Annotated[int, "a note"]) is None
    assert base_type(Repeat) == int | None
    assert base_type(Power) is int and base_type(str) is str
    assert choices_of(Literal["a", "b"]) == ("a", "b")
    assert choices_of(Literal["a"] | None) is None
    assert choices_of(tuple[Literal["x", "y"], ...]) == ("x", "y")
    assert choices_of(tuple[int, ...]) is None and choices_of(int) is None


def test_named_sets_name_the_set_a_value_is():
    from memprof.model.params import NamedSets

    sets = NamedSets({"h2d": ("h2d",), "d2h": ("d2h",), "both": ("h2d", "d2h")})
    assert [sets.name_of(value) for value in sets.sets.values()] == ["h2d", "d2h", "both"]


def test_a_field_not_given_to_init_leaves_the_fields_after_it_checked():
    from dataclasses import dataclass, field

    from memprof.errors import InvalidArgument
    from memprof.model.params import make, param

    @dataclass(frozen=True)
    class Derived:
        label: str = field(default="fixed", init=False)
        level: Level = param(3, "Level.")

    assert make(Derived, level=20).level == 20
    with pytest.raises(InvalidArgument, match=r"^level: 21 is outside the allowed range 2 to 20$"):
        make(Derived, level=21)


def test_only_numpys_values_are_made_plain():
    """Another object with a tolist (array.array, memoryview) is kept as given, for its
    field's check to refuse: memprof.run takes Python's values and numpy's."""
    import array

    from memprof.errors import InvalidArgument
    from memprof.model.params import make, plain

    given = array.array("q", [3, 4])
    assert plain(given) is given
    view = memoryview(b"ab")
    assert plain(view) is view
    with pytest.raises(InvalidArgument, match=r"^powers is "):
        make(every_form(), powers=given)
