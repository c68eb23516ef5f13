"""What the command line accepts and refuses, and what it hands the experiments.

`_run` is replaced by a recorder, so these tests see the exact Params a command would
measure with, without a GPU.
"""

from __future__ import annotations

import math

import pytest
import typer
from typer.testing import CliRunner

from memprof import cli
from memprof.errors import ExitCode
from memprof.experiments.alloc import AllocParams
from memprof.experiments.compare import CompareParams
from memprof.experiments.device import DeviceParams
from memprof.experiments.info import InfoParams
from memprof.experiments.managed import ManagedParams
from memprof.experiments.pinned import PinnedParams
from memprof.experiments.register import RegisterParams
from memprof.experiments.streams import StreamsParams
from memprof.experiments.sweep import SWEEP_KINDS, SweepParams
from memprof.experiments.uva import UvaParams
from memprof.experiments.writecombined import WriteCombinedParams
from memprof.experiments.zerocopy import ZeroCopyParams
from tests.conftest import FIXTURES

runner = CliRunner()


@pytest.fixture
def runs(monkeypatch) -> list[tuple]:
    """Every (command, params, device, output) a command would have run on the GPU."""
    recorded: list[tuple] = []
    monkeypatch.setattr(cli, "_run", lambda *arguments: recorded.append(arguments))
    return recorded


def invoke(*arguments: str):
    return runner.invoke(cli.app, list(arguments))


def params_of(runs: list[tuple], *arguments: str):
    result = invoke(*arguments)
    assert result.exit_code == 0, result.output
    assert len(runs) == 1
    return runs.pop()[1]


@pytest.mark.parametrize(
    ("command", "defaults"),
    [
        ("info", InfoParams()),
        ("pinned", PinnedParams()),
        ("zerocopy", ZeroCopyParams()),
        ("uva", UvaParams()),
        ("managed", ManagedParams()),
        ("writecombined", WriteCombinedParams()),
        ("wc", WriteCombinedParams()),
        ("register", RegisterParams()),
        ("alloc", AllocParams()),
        ("streams", StreamsParams()),
        ("device", DeviceParams()),
        ("compare", CompareParams()),
        ("sweep", SweepParams()),
    ],
)
def test_a_command_without_options_measures_with_its_experiments_defaults(runs, command, defaults):
    assert params_of(runs, command) == defaults


def test_help_shows_the_dataclass_defaults():
    result = invoke("pinned", "--help")
    assert f"[default: {PinnedParams.power}]" in " ".join(result.output.split())
    assert f"{PinnedParams.power} = 16 MiB" in result.output


@pytest.mark.parametrize(
    ("arguments", "field", "value"),
    [
        (["pinned", "--power", "0"], "power", 0),
        (["pinned", "--power", "30"], "power", 30),
        (["pinned", "--repeat", "1"], "repeat", 1),
        (["pinned", "--repeat", "10000"], "repeat", 10000),
        (["pinned", "--warmup", "0"], "warmup", 0),
        (["pinned", "--warmup", "1000"], "warmup", 1000),
        (["compare", "--power", "0"], "power", 0),
        (["compare", "--power", "30"], "power", 30),
        (["streams", "--streams", "2"], "streams", 2),
        (["streams", "--streams", "32"], "streams", 32),
        (["streams", "--kernel-ms", "10000"], "kernel_ms", 10000.0),
        (["streams", "--kernel-ms", "0.001"], "kernel_ms", 0.001),
        (["zerocopy", "--from", "0", "--to", "30", "--step", "30"], "powers", (0, 30)),
        (["zerocopy", "--power", "30"], "powers", (30,)),
        (["alloc", "--from", "3", "--to", "3"], "powers", (3,)),
        (["sweep", "--from", "29", "--to", "30", "--step", "1"], "powers", (29, 30)),
    ],
)
def test_the_edges_of_each_range_are_accepted(runs, arguments, field, value):
    assert getattr(params_of(runs, *arguments), field) == value


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["compare", "--power", "31"], "31 is outside the allowed range 0 to 30"),
        (["sweep", "--to", "31", "--from", "1"], "31 is outside the allowed range 0 to 30"),
        (["streams", "--streams", "1"], "1 is outside the allowed range 2 to 32"),
        (["streams", "--streams", "33"], "33 is outside the allowed range 2 to 32"),
        (["pinned", "--repeat", "10001"], "10001 is outside the allowed range 1 to 10000"),
        (["pinned", "--warmup", "1001"], "1001 is outside the allowed range 0 to 1000"),
        (["info", "--device", "64"], "64 is outside the allowed range 0 to 63"),
        (["sweep", "--step", "31"], "31 is outside the allowed range 1 to 30"),
    ],
)
def test_one_past_each_edge_is_refused(runs, arguments, message):
    result = invoke(*arguments)
    assert result.exit_code == ExitCode.USAGE
    assert message in result.output
    assert runs == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "NaN", "inf", "-inf", "10000.001"])
def test_kernel_ms_outside_its_range_or_not_a_number_is_refused(runs, value):
    assert not 0 < float(value) <= 10_000 or math.isnan(float(value))
    result = invoke("streams", "--kernel-ms", value)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "outside the allowed range (0, 10000] milliseconds" in result.output
    assert runs == []


@pytest.mark.parametrize(
    "kinds", ["foo", "pinned,foo", "Pinned", "", ",", " , ", "pinned;pageable", "device"]
)
def test_sweep_refuses_unknown_or_no_kinds(runs, kinds):
    result = invoke("sweep", "--kinds", kinds)
    assert result.exit_code == ExitCode.USAGE
    assert result.output.strip() == (
        f"memprof: error: --kinds {kinds!r}: choose from {', '.join(SWEEP_KINDS)} (comma-separated)"
    )
    assert runs == []


def test_sweep_kinds_keep_the_order_given_once_each(runs):
    params = params_of(runs, "sweep", "--kinds", " zerocopy, pinned ,zerocopy,pageable")
    assert params.kinds == ("zerocopy", "pinned", "pageable")


@pytest.mark.parametrize(
    ("direction", "directions"), [("h2d", ("h2d",)), ("d2h", ("d2h",)), ("both", ("h2d", "d2h"))]
)
def test_sweep_direction(runs, direction, directions):
    assert params_of(runs, "sweep", "--direction", direction).directions == directions


def test_managed_advice_one_several_or_each(runs):
    assert params_of(runs, "managed", "--advise", "read-mostly").advice == ("read-mostly",)
    several = params_of(runs, "managed", "--advise", "accessed-by,read-mostly").advice
    assert several == ("accessed-by", "read-mostly")
    result = invoke("managed", "--advise", "often")
    assert result.exit_code == ExitCode.USAGE
    assert result.output == (
        "memprof: error: --advise 'often': choose from read-mostly, preferred-location, "
        "accessed-by (comma-separated)\n"
    )
    assert params_of(runs, "managed", "--no-prefetch").prefetch is False


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["pinned", "--powr", "3"], "No such option: --powr"),
        (["pined"], "No such command 'pined'"),
        (["report"], "Missing argument"),
        (["diff", "a.json"], "Missing argument"),
        (["pinned", "--power"], "Option '--power' requires an argument"),
        (["pinned", "--power", "many"], "Invalid value for '--power'"),
        (["streams", "--kernel-ms", "fast"], "Invalid value for '--kernel-ms'"),
        (["device", "--dtype", "int8"], "Invalid value for '--dtype'"),
        (["sweep", "--direction", "up"], "Invalid value for '--direction'"),
        (["pinned", "extra"], "Got unexpected extra argument"),
    ],
)
def test_every_usage_error_is_one_line_naming_the_help(runs, arguments, message):
    result = invoke(*arguments)
    assert result.exit_code == ExitCode.USAGE
    assert result.output.startswith("memprof: error: ")
    assert message in result.output
    assert len(result.output.splitlines()) == 1
    assert "--help'" in result.output
    assert runs == []


def test_memprof_alone_prints_the_help():
    result = invoke()
    assert result.exit_code == 0
    assert "Usage: memprof" in result.output
    assert "error" not in result.output


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, typer.Abort])
def test_an_interrupt_in_a_command_is_one_line_and_130(monkeypatch, interrupt):
    def interrupted(*arguments):
        raise interrupt

    monkeypatch.setattr(cli, "_run", interrupted)
    result = invoke("pinned")
    assert result.exit_code == ExitCode.INTERRUPTED == 130
    assert result.output == f"memprof: error: {cli.INTERRUPTED}\n"


def test_an_error_python_made_of_an_interrupt_is_an_interrupt(monkeypatch):
    """Python 3.11 wraps a KeyboardInterrupt raised in __set_name__ in a RuntimeError."""

    def interrupted(*arguments):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as error:
            raise RuntimeError("Error calling __set_name__") from error

    monkeypatch.setattr(cli, "_run", interrupted)
    result = invoke("pinned")
    assert result.exit_code == 130
    assert len(result.output.splitlines()) == 1


def test_a_bug_is_one_line_and_exit_70_not_the_verification_code(monkeypatch):
    def broken(*arguments):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "_run", broken)
    result = invoke("pinned")
    assert result.exit_code == ExitCode.INTERNAL == 70
    assert result.output.startswith("memprof: error: internal error")
    assert "ZeroDivisionError: division by zero" in result.output
    assert len(result.output.splitlines()) == 1


def test_max_noise_beside_an_exact_repeat_is_one_line_before_any_gpu_work(runs):
    """--repeat N repeats exactly: a --max-noise beside it was silently ignored."""
    refused = invoke("pinned", "--repeat", "5", "--max-noise", "2")
    assert refused.exit_code == 2 and runs == []
    assert "--max-noise decides when repetitions stop, but --repeat repeats exactly" in (
        refused.output
    )
    assert invoke("pinned", "--max-noise", "2").exit_code == 0
    assert runs.pop()[-1] == 2.0  # the noise target given
    assert invoke("pinned", "--repeat", "5").exit_code == 0
    assert runs.pop()[-1] is None  # none given: the run's own default, or exactly 5


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["pinned", "--power", "20", "--power", "21"], "--power / -p"),
        (["pinned", "-p", "20", "--power", "21"], "--power / -p"),
        (["check", "--device", "all", "-d", "0"], "-d / --device"),
        (["report", "r.json", "--json", "a.json", "--json", "b.json"], "--json"),
        (["sweep", "--kinds", "pinned", "--kinds", "pageable"], "--kinds"),
        (["trace", "--json", "a.json", "--json", "b.json", "s.py"], "--json"),
    ],
)
def test_an_option_given_twice_is_refused_naming_it(args, named):
    """Click keeps the last value: `--json a.json --json b.json` saved only b.json and
    `--power 20 --power 21` measured 21, silently; refused before any work (exit 2)."""
    ran = runner.invoke(cli.app, args)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr.count("\n") == 1
    assert f"memprof: error: {named} is given twice: give it once" in ran.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "A", "B", "--only", "gpu", "--only", "api"],  # repeatable, as its help says
        ["report", "r.json", "-q", "-q"],  # a flag: said twice, meant once
        ["plot", "r.json", "--label", "a", "--label", "b"],  # once per file
        ["trace", "s.py", "--json", "x"],  # the program's own arguments
    ],
)
def test_options_meant_to_repeat_and_a_programs_arguments_are_not_refused(args):
    ran = runner.invoke(cli.app, args)
    assert "given twice" not in ran.output


@pytest.mark.parametrize(
    "arguments",
    [
        ["alloc", "--step", "3"],
        ["sweep", "--step", "1"],
        ["zerocopy", "--power", "5", "--step", "3"],
    ],
)
def test_a_step_without_from_and_to_is_refused_not_ignored(runs, arguments):
    """--step shapes only a sweep given --from/--to: the default sweep and --power ran as if it
    had not been given (alloc --step 3 measured 2^4, 2^6, ... as --step 2 does)."""
    result = invoke(*arguments)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "--step is the step from --from to --to: give them too" in result.stderr
    assert runs == []


def test_a_sweeps_default_step_is_its_own_where_none_is_given(runs):
    assert params_of(runs, "alloc", "--from", "4", "--to", "9").powers == (4, 6, 8)
    assert params_of(runs, "sweep", "--from", "4", "--to", "6").powers == (4, 5, 6)


QUIET_AND_VERBOSE = "--quiet prints nothing but errors and --verbose prints every verification"


@pytest.mark.parametrize(
    "args",
    [
        ["pinned", "-q", "-v"],
        ["zerocopy", "--verbose", "--quiet"],
        ["report", str(FIXTURES / "h200_pinned_p20.json"), "-q", "--verbose"],
        ["trace", "-q", "-v", "program.py"],
    ],
)
def test_quiet_beside_verbose_is_refused_in_one_line(args):
    """Both said: the run stayed quiet, the verifications asked for never shown."""
    ran = runner.invoke(cli.app, args)
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert ran.stderr == f"memprof: error: {QUIET_AND_VERBOSE}: give one of them\n"


@pytest.mark.parametrize("flag", ["-q", "-v"])
def test_quiet_or_verbose_alone_is_taken(flag):
    ran = runner.invoke(cli.app, ["report", str(FIXTURES / "h200_pinned_p20.json"), flag])
    assert ran.exit_code == 0 and QUIET_AND_VERBOSE not in ran.output
