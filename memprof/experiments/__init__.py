"""The registry: every command's Experiment, in the order `memprof --help` lists them.

A new command is one module with one Experiment class, and one line here. The command line,
the Python API, `report` and `diff` all find experiments here and nowhere else.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memprof.errors import InvalidArgument
from memprof.experiments.alloc import Alloc
from memprof.experiments.base import Experiment
from memprof.experiments.check import CheckGpu, CheckPairs
from memprof.experiments.compare import Compare
from memprof.experiments.device import DeviceBandwidth
from memprof.experiments.hostlink import Hostlink
from memprof.experiments.info import Info
from memprof.experiments.managed import Managed
from memprof.experiments.peer import Peer
from memprof.experiments.pinned import Pinned
from memprof.experiments.portable import Portable
from memprof.experiments.register import Register
from memprof.experiments.smallcopies import SmallCopies
from memprof.experiments.streams import Streams
from memprof.experiments.sweep import Sweep
from memprof.experiments.trace import Trace
from memprof.experiments.uva import Uva
from memprof.experiments.writecombined import WriteCombined
from memprof.experiments.zerocopy import ZeroCopy
from memprof.model.results import MissingMeasurement, Result, ResultShape
from memprof.model.summary import Summary

REGISTRY: tuple[type[Experiment], ...] = (
    Info,
    CheckGpu,
    Pinned,
    ZeroCopy,
    Uva,
    Managed,
    WriteCombined,
    Register,
    Alloc,
    Streams,
    DeviceBandwidth,
    Compare,
    Sweep,
    SmallCopies,
    Peer,
    Hostlink,
    Portable,
    CheckPairs,
    Trace,
)
_BY_NAME = {
    name: experiment for experiment in REGISTRY for name in (experiment.name, *experiment.aliases)
}


def experiment_named(name: str) -> Experiment:
    """The experiment of a command (or an alias): InvalidArgument naming the choices if none."""
    if name not in _BY_NAME:
        names = ", ".join(experiment.name for experiment in REGISTRY)
        raise InvalidArgument(f"no command named {name!r}: choose from {names}")
    return _BY_NAME[name]()


def shape_of(command: str) -> ResultShape | None:
    """What a saved Result of `command` must hold, from its experiment's declarations."""
    experiment = _BY_NAME.get(command)
    if experiment is None or experiment.name != command:
        return None
    return experiment.result_shape()


def summarize(result: Result) -> Summary:
    """The tables and conclusions of a Result, by its command's experiment, and every
    measurement's figures as its declarations read them."""
    from memprof.model.figures import figures

    experiment = experiment_named(result.command)
    summary = experiment.summarize(result)
    summary.figures = figures(result, experiment.declared())
    return summary


def load(path: Path) -> Result:
    """A saved Result, every value checked, its summary built once: a file that does not
    hold what its command needs is one line naming the file (InvalidArgument, exit 2)."""
    return _summarizable(Result.load(path, shape_of), str(path))


def parse(text: str, name: str = "result") -> Result:
    """A Result from JSON text, checked as load() checks a file."""
    return _summarizable(Result.from_json(text, shape_of, name), name)


def _summarizable(result: Result, path: str) -> Result:
    """The Result, once its summary has been built from it without error.

    Every value was checked against its type and its experiment's check_consistency before
    this: a summary that still fails met a file no check foresaw. That is refused (exit 2),
    as the file's fault, in a line that says where the summary failed, and MEMPROF_DEBUG=1
    raises it instead, so it is found and a check added (tests/test_hostile_results.py fails
    on any file that gets this far).
    """
    try:
        summarize(result)
    except MissingMeasurement as error:
        raise InvalidArgument(
            f"{path}: the {result.command} summary needs exactly one measurement with "
            f"{error.wanted}; the file has {error.count}"
        ) from None
    except (
        LookupError,
        StopIteration,
        ValueError,
        ArithmeticError,
        TypeError,
        AttributeError,
    ) as error:
        if os.environ.get("MEMPROF_DEBUG"):
            raise
        raise InvalidArgument(
            f"{path}: the {result.command} summary cannot be built from this file, which no "
            f"check refused ({type(error).__name__}: {error}, {_where(error)}): please report "
            "it"
        ) from None
    return result


def _where(error: BaseException) -> str:
    """The last line of memprof that the error passed through: `pinned.py:212`."""
    place = "memprof"
    trace = error.__traceback__
    while trace is not None:
        filename = trace.tb_frame.f_code.co_filename
        if f"{os.sep}memprof{os.sep}" in filename:
            place = f"{Path(filename).name}:{trace.tb_lineno}"
        trace = trace.tb_next
    return f"in {place}"


class ResultViews:
    """What a Result's own methods make of it with its command's experiment (Result.views,
    which the model layer holds but cannot fill): its DataFrame and its notebook view."""

    def frame(self, result: Result) -> Any:
        from memprof.output.frames import frame

        return frame([result], [summarize(result).figures])

    def html(self, result: Result) -> str:
        from memprof.output.notebook import summary_html

        return summary_html(result, summarize(result))


Result.views = ResultViews()
