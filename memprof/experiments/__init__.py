"""The registry: every command, in the order `memprof --help` lists them.

A new command is one Experiment module and one line here. Only the experiment a command needs
is imported, so `memprof --help` loads none and `memprof report X.json` loads X's alone.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memprof.errors import InvalidArgument

if TYPE_CHECKING:
    from memprof.experiments.base import Experiment
    from memprof.model.results import Result, ResultShape
    from memprof.model.summary import Summary


@dataclass(frozen=True)
class Command:
    """One command's only record. `where` and `picture`: "module:name" in memprof.experiments."""

    name: str
    where: str
    help: str  # one line: the command list's entry (`memprof CMD --help` adds its description)
    aliases: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()  # real command lines, each as a person types it
    fixture: str = ""  # the tests/fixtures recording (its stem) that docs/img draws
    picture: str = ""  # its panels(result, summary) for `memprof plot`; else its tables'


COMMANDS: tuple[Command, ...] = (
    Command(
        "info",
        "info:Info",
        "The GPU, its theoretical memory and PCIe bandwidth, and which memory kinds it supports.",
        examples=("memprof info", "memprof info --device 1 --json info.json"),
        fixture="h200_info",
        picture="pictures:info_panels",
    ),
    Command(
        "check",
        "check:CheckGpu",
        "Health check of this GPU's memory paths: PASS/WARN/FAIL per line, exit 1 on FAIL.",
        examples=(
            "memprof check",
            "memprof check --retries 2 --json check.json --junit check.xml",
            "memprof check --reference my-gpu.json --h2d-floor 80",
            "memprof check --device all --quiet",
        ),
        fixture="h200_check",
        picture="pictures:check_panels",
    ),
    Command(
        "pinned",
        "pinned:Pinned",
        "Pageable vs pinned host memory: allocation cost, HtoD/DtoH bandwidth, sumArrays flow.",
        examples=(
            "memprof pinned --power 20",
            "memprof pinned --host-buffer malloc --timing events",
            "memprof pinned --device all --csv pinned.csv",
        ),
        fixture="h200_pinned_p20",
    ),
    Command(
        "zerocopy",
        "zerocopy:ZeroCopy",
        "Mapped (zero-copy) host memory read by a kernel vs device memory after explicit copies.",
        examples=(
            "memprof zerocopy",
            "memprof zerocopy --power 20",
            "memprof zerocopy --from 10 --to 20",
        ),
        fixture="h200_zerocopy_sweep",
        picture="pictures:zerocopy_panels",
    ),
    Command(
        "uva",
        "uva:Uva",
        "Unified virtual addressing: the mapped host pointer passed to a kernel as it is.",
        examples=("memprof uva", "memprof uva --power 20 --json uva.json"),
        fixture="h200_uva",
    ),
    Command(
        "managed",
        "managed:Managed",
        "Unified (managed) memory: on-demand page migration, prefetch and advice, vs copies.",
        examples=("memprof managed", "memprof managed --no-prefetch --advise read-mostly"),
        fixture="h200_managed",
        picture="pictures:managed_panels",
    ),
    Command(
        "writecombined",
        "writecombined:WriteCombined",
        "Cached vs write-combined pinned memory: transfers, host writes and (slow) host reads.",
        aliases=("wc",),
        examples=("memprof writecombined", "memprof wc --power 24"),
        fixture="h200_writecombined",
    ),
    Command(
        "register",
        "register:Register",
        "Pin an existing numpy array in place (cuMemHostRegister): its cost and its bandwidth.",
        examples=("memprof register", "memprof register --power 24 --repeat 20"),
        fixture="h200_register",
    ),
    Command(
        "pinlimit",
        "pinlimit:Pinlimit",
        "How much memory can be pinned here, what pinning costs as it grows, and what it "
        "takes from the host's pageable copies.",
        examples=("memprof pinlimit", "memprof pinlimit --cap 32 --step 2 --json pinlimit.json"),
        fixture="h200_pinlimit",
        picture="pictures:pinlimit_panels",
    ),
    Command(
        "alloc",
        "alloc:Alloc",
        "Allocation and free time of every memory kind across sizes (default 2^16 to 2^28 "
        "floats), stream-ordered pools and virtual memory included.",
        examples=("memprof alloc", "memprof alloc --from 20 --to 24 --json alloc.json"),
        fixture="h200_alloc",
        picture="pictures:alloc_panels",
    ),
    Command(
        "streams",
        "streams:Streams",
        "Overlap copies with kernels on streams: serial, overlapped, pageable, and a timeline.",
        examples=("memprof streams", "memprof streams --streams 8 --kernel-ms 2"),
        fixture="h200_streams",
        picture="pictures:streams_panels",
    ),
    Command(
        "device",
        "device:DeviceBandwidth",
        "Device-memory bandwidth: cuMemcpyDtoD, cuMemset and STREAM copy/mul/add/triad/dot.",
        examples=("memprof device", "memprof device --dtype float32 --power 26"),
        fixture="h200_device",
    ),
    Command(
        "compare",
        "compare:Compare",
        "Every memory kind side by side, and which to use for what, from the measured figures.",
        examples=("memprof compare", "memprof compare --power 20 --json compare.json"),
        fixture="h200_compare",
        picture="pictures:compare_panels",
    ),
    Command(
        "sweep",
        "sweep:Sweep",
        "Bandwidth against size per kind (default 2^8 to 2^26 floats): chart, table, crossovers.",
        examples=(
            "memprof sweep",
            "memprof sweep --kinds pinned,pageable --direction h2d",
            "memprof sweep --from 10 --to 24 --step 2 --csv sweep.csv",
        ),
        fixture="h200_sweep",
        picture="pictures:sweep_panels",
    ),
    Command(
        "smallcopies",
        "smallcopies:SmallCopies",
        "N small copies host <-> device done five ways (one call each from pinned or pageable, "
        "batched, gathered, a zero-copy kernel): cost per copy, and where batching stops paying.",
        examples=("memprof smallcopies", "memprof smallcopies --from 10 --to 14 --copies 64"),
        fixture="h200_smallcopies",
        picture="pictures:smallcopies_panels",
    ),
    Command(
        "peer",
        "peer:Peer",
        "Copies between every pair of GPUs: copy engine and kernels, peer access on/off, latency.",
        examples=("memprof peer", "memprof peer --power 24"),
        fixture="h200x2_peer",
        picture="pictures:peer_panels",
    ),
    Command(
        "hostlink",
        "hostlink:Hostlink",
        "Every GPU's pinned HtoD and DtoH alone, then all at once: is the host link shared?",
        examples=("memprof hostlink", "memprof hostlink --power 24"),
        fixture="h200x2_hostlink",
    ),
    Command(
        "portable",
        "portable:Portable",
        "One pinned buffer used from every GPU's context: PORTABLE against pinned in one only.",
        examples=("memprof portable", "memprof portable --power 24"),
        fixture="h200x2_portable",
    ),
    Command(
        "check-pairs",
        "check:CheckPairs",
        "Health check of every pair of GPUs: peer copies against their NVLink or PCIe link.",
        examples=("memprof check-pairs", "memprof check-pairs --junit pairs.xml"),
        fixture="h200x2_check_pairs",
        picture="pictures:check_panels",
    ),
    Command(
        "trace",
        "trace:Trace",
        "Run your Python program under CUPTI: nvprof's profile of it, with advice for this GPU.",
        examples=(
            "memprof trace train.py --epochs 1",
            "memprof trace --json run.json --module mypackage.train",
        ),
        fixture="h200_trace_torch",
        picture="pictures:trace_panels",
    ),
)
# The command that runs the user's program (memprof.cli_trace): memprof.run refuses it
PROGRAM_COMMAND = "trace"
_BY_NAME = {name: command for command in COMMANDS for name in (command.name, *command.aliases)}


def command_named(name: str) -> Command:
    """The registry line of a command (or an alias): InvalidArgument naming the choices."""
    if name not in _BY_NAME:
        names = ", ".join(command.name for command in COMMANDS)
        raise InvalidArgument(f"no command named {name!r}: choose from {names}")
    return _BY_NAME[name]


def experiment_class(name: str) -> type[Experiment]:
    """The Experiment class of a command (or an alias), its module imported now."""
    command = command_named(name)
    experiment = _named(command.where)
    assert experiment.name == command.name, f"{command.where} is named {experiment.name!r}"
    return experiment


def _named(where: str) -> Any:
    """What a registry line's "module:name" names, its module imported now."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def picture_maker(command: str) -> Any:
    """The function drawing a command's picture, or None where it draws its tables."""
    where = _BY_NAME[command].picture if command in _BY_NAME else ""
    return _named(where) if where else None


def experiment_named(name: str) -> Experiment:
    """The experiment of a command (or an alias): InvalidArgument naming the choices if none."""
    return experiment_class(name)()


def shape_of(command: str) -> ResultShape | None:
    """What a saved Result of `command` (never an alias) must hold."""
    if command not in _BY_NAME or _BY_NAME[command].name != command:
        return None
    return experiment_class(command).result_shape()


def summarize(result: Result) -> Summary:
    """The tables, conclusions and figures of a Result, by its command's experiment."""
    from memprof.experiments.base import declared_measures
    from memprof.model.figures import figures
    from memprof.model.measures import moved_during_run
    from memprof.model.summary import one_time_unit_per_column

    experiment = experiment_named(result.command)
    declared = declared_measures(experiment)
    summary = experiment.summarize(result)
    summary.header += moved_during_run(result, declared)
    summary.tables = [one_time_unit_per_column(table) for table in summary.tables]
    summary.figures_of = functools.partial(figures, result, declared)
    shown = [one for table in summary.tables for row in table.sources for one in row]
    summary.derived = list(_with_parts_first(shown, {}).values())
    return summary


def _with_parts_first(found: list, made: dict) -> dict:
    """The Derived figures and device facts among `found`, each once, after its parts (the
    CSV's row of one names its parts' rows)."""
    from memprof.model.device import DeviceFact
    from memprof.model.figures import Derived

    for one in found:
        if isinstance(one, Derived | DeviceFact) and id(one) not in made:
            _with_parts_first(list(getattr(one, "parts", ())), made)
            made[id(one)] = one
    return made


def result_frame(result: Result) -> Any:
    """Result.to_frame: the CSV's rows and columns as a pandas DataFrame."""
    from memprof.output.frames import frame

    return frame([result], [summarize(result)])


def result_html(result: Result) -> str:
    """Result._repr_html_: what a notebook shows (memprof.output.notebook)."""
    from memprof.output.notebook import summary_html

    return summary_html(result, summarize(result))


def table_lines(result: Result) -> list[str]:
    """A line per table of the summary, for the repr; none where it cannot be built."""
    from memprof.output.notebook import table_lines

    try:
        summary = summarize(result)
    except Exception:  # a repr must show something whatever the object holds
        return []
    return table_lines(summary)


def load(path: Path) -> Result:
    """A saved Result, every value checked: InvalidArgument naming the file if not."""
    return load_summarized(path)[0]


def load_summarized(path: Path) -> tuple[Result, Summary]:
    """load(), with the summary it built (a second over 100,000 measurements: built once)."""
    from memprof.model.results import Result

    return _summarizable(Result.load(path, shape_of), str(path))


def load_all_summarized(path: Path) -> list[tuple[Result, Summary]]:
    """Every Result of a file with its summary, a file of several held to being one run."""
    from memprof.model.results import Result

    found = Result.load_all(path, shape_of)
    why = not_one_run(found)
    if why is not None:
        raise InvalidArgument(f"{path}: {why}")
    if len(found) == 1:
        return [_summarizable(found[0], str(path))]
    return [_summarizable(one, f"{path}: results[{i}]") for i, one in enumerate(found)]


def not_one_run(results: Sequence[Result]) -> str | None:
    """Why these Results cannot be one run of `--device all` (None where they can): one
    command's, a GPU each, then at most one every_gpu_then run, all on one host."""
    if len(results) < 2:
        return None
    first = results[0]
    hosts = sorted({result.host for result in results})
    if len(hosts) > 1:
        return f"its results come from {len(hosts)} hosts ({', '.join(map(repr, hosts))}), not one"
    count = next((i for i, r in enumerate(results) if r.command != first.command), len(results))
    after = experiment_class(first.command).every_gpu_then
    if len(results) - count > 1 or results[-1].command not in (first.command, after):
        place = count if len(results) - count > 1 else len(results) - 1
        return (
            f"results[{place}] is a {results[place].command} result after {first.command} "
            f"results: a run of --device all ends with at most one {after} result"
        )
    gpus = [result.gpu_index for result in results[:count]]
    for index, gpu in enumerate(gpus):
        if gpu is None:
            return f"results[{index}] names no GPU: each {first.command} result holds one"
        if gpu in gpus[:index]:
            return (
                f"results[{index}] measured GPU {gpu}, as results[{gpus.index(gpu)}] did: "
                f"each GPU's {first.command} result holds a GPU of its own"
            )
    return None


def parse(text: str, name: str = "result") -> Result:
    """A Result from JSON text, checked as load() checks a file."""
    from memprof.model.results import Result

    return _summarizable(Result.from_json(text, shape_of, name), name)[0]


def refusal(result: Result) -> str | None:
    """Why the loader would refuse `result` once saved, or None (checked before writing)."""
    try:
        text = result.to_json()
    except (TypeError, ValueError, OverflowError) as error:
        return f"the {result.command} result cannot be written as JSON: {error}"
    try:
        parse(text, f"the {result.command} result")
    except InvalidArgument as error:
        return str(error)
    return None


# What a summary raises on a file no check foresaw
UNFORESEEN = (LookupError, StopIteration, ValueError, ArithmeticError, TypeError, AttributeError)


def _summarizable(result: Result, path: str) -> tuple[Result, Summary]:
    """The Result and its summary. A summary that fails met a file no check foresaw: refused
    (exit 2) saying where, or raised under MEMPROF_DEBUG=1 so a check is added."""
    from memprof.model.results import MissingMeasurement

    try:
        summary = summarize(result)
    except MissingMeasurement as error:
        raise InvalidArgument(
            f"{path}: the {result.command} summary needs exactly one measurement with "
            f"{error.wanted}; the file has {error.count}"
        ) from None
    except UNFORESEEN as error:
        if os.environ.get("MEMPROF_DEBUG"):
            raise
        raise InvalidArgument(
            f"{path}: the {result.command} summary cannot be built from this file, which no "
            f"check refused ({type(error).__name__}: {error}, {_where(error)}): please report "
            "it"
        ) from None
    return result, summary


# The package's own folder: a checkout may itself be named memprof (as the README clones it).
PACKAGE_FOLDER = os.path.realpath(Path(__file__).parent.parent)


def _where(error: BaseException) -> str:
    """The last line of memprof's own package that the error passed through: `pinned.py:212`."""
    place = "memprof"
    trace = error.__traceback__
    while trace is not None:
        filename = trace.tb_frame.f_code.co_filename
        if os.path.realpath(filename).startswith(PACKAGE_FOLDER + os.sep):
            place = f"{Path(filename).name}:{trace.tb_lineno}"
        trace = trace.tb_next
    return f"in {place}"
