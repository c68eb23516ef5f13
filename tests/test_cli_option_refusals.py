"""The shared options' refusals word for word: --device's for a command that runs every GPU in
turn (offering 'all') and for one that measures one GPU (naming those that take 'all'), and
--max-noise beside --repeat (issue 37: mutmut 3.8.1 on memprof/cli_options.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memprof import cli

runner = CliRunner()
DEVICE = "memprof: error: Invalid value for '-d' / '--device': "


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            ["pinned", "--device", "x"],
            f"{DEVICE}'x' is not a device index (0, 1, ...) or 'all' (see 'memprof pinned --help')",
        ),
        (
            ["zerocopy", "--device", "x"],
            f"{DEVICE}'x' is not a device index (0, 1, ...) (see 'memprof zerocopy --help')",
        ),
        (
            ["zerocopy", "--device", "all"],
            f"{DEVICE}memprof zerocopy measures one GPU: give its index (0, 1, ...); 'all' is "
            "taken by check, pinned, compare, sweep (see 'memprof zerocopy --help')",
        ),
        (
            ["pinned", "--max-noise", "2", "--repeat", "5"],
            "memprof: error: --max-noise decides when repetitions stop, but --repeat repeats "
            "exactly: give one of them",
        ),
    ],
)
def test_a_shared_option_is_refused_in_these_words_with_exit_2(arguments, line):
    result = runner.invoke(cli.app, arguments)
    assert (result.exit_code, result.output) == (2, f"{line}\n")
