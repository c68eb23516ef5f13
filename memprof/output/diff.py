"""`memprof diff`: two runs (two machines, two drivers, before and after) side by side, each
measurement matched by what it is (by_key), a change marked as CHANGE_NOTE says: beyond the
medians' noise within each run's process, which another process can exceed (docs/ci.md).
"""

from __future__ import annotations

import fnmatch
import math
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from memprof.model.ceilings import link_of
from memprof.model.figures import figure_finder
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms, plural
from memprof.model.gpustate import GpuState, link_words, reason_words
from memprof.model.measures import Measure
from memprof.model.results import Measurement, Result
from memprof.model.statistics import NOISE_SIGMAS, Statistics, median_noise, repetitions_words
from memprof.model.summary import Summary, Table, one_time_unit_per_column
from memprof.output.where import paired_lines

MAX_FAIL_ABOVE_PCT = 1000.0  # --fail-above's largest percentage
MIN_CHANGE = 0.02  # below this a ratio is never a change, however quiet the runs


CHANGE_NOTE = (
    f"Change: B/A beyond {NOISE_SIGMAS}x the two medians' combined noise (and {MIN_CHANGE:.0%}); "
    "'within noise' otherwise. Below 1x B was faster. A median is per operation: of "
    "back-to-back batches where both runs timed them (what their GB/s is of), else of "
    "single operations. The noise is each run's own: two runs of the same code can differ "
    "beyond it, mostly in driver calls, host work and pageable copies."
)


def by_key(result: Result) -> dict[tuple, Measurement]:
    """Each measurement by its key and its place among those of that key (each GPU's driver
    calls of a run over several): the n-th of A is compared with the n-th of B."""
    seen: dict[tuple, int] = {}
    by_key = {}
    for m in result.measurements:
        key = (m.group, m.name, m.operation, m.kind, m.bytes, m.gpus)
        seen[key] = seen.get(key, -1) + 1
        by_key[(*key, seen[key])] = m
    return by_key


def noise(a_samples_ms: Sequence[float], b_samples_ms: Sequence[float]) -> float:
    """The relative change the two medians' own noise could explain (never below MIN_CHANGE)."""
    combined = math.hypot(median_noise(a_samples_ms), median_noise(b_samples_ms))
    return max(MIN_CHANGE, NOISE_SIGMAS * combined)


def mean_noise(a: Statistics, b: Statistics) -> float:
    """The relative change of two means their standard errors could explain (never below
    MIN_CHANGE): a line's calls of several sizes vary as much as their sizes do."""
    errors = (s.stdev_ms / math.sqrt(s.count) / s.mean_ms for s in (a, b))
    return max(MIN_CHANGE, NOISE_SIGMAS * math.hypot(*errors))


def ratio_of_medians(a: Statistics, b: Statistics) -> float:
    """B's median over A's: 1 when both took no measurable time, infinite when only A did."""
    if a.median_ms > 0:
        return b.median_ms / a.median_ms
    return 1.0 if b.median_ms == 0 else math.inf


def change_of(ratio: float, noise: float) -> str:
    """'B faster' or 'B slower' where the ratio differs from 1 beyond noise, else 'within noise'."""
    if abs(ratio - 1) <= noise:
        return "within noise"
    return "B faster" if ratio < 1 else "B slower"


def ratio_cell(ratio: float | None) -> str:
    return f"{ratio:.3f}x" if ratio is not None and math.isfinite(ratio) else "-"


@dataclass(frozen=True)
class Compared:
    """One figure in both runs: a measurement's median time in A and B, where both have
    valid samples (a_ms and b_ms None otherwise)."""

    label: str  # "[CUDA memcpy HtoD] (pinned) [gpu], 4 MiB": the table's Measurement and Bytes
    a_ms: float | None
    b_ms: float | None
    ratio: float | None  # B's median over A's
    noise: float | None  # the relative change the two medians' noise explains
    group: str = ""  # gpu, api, host or span: what --only gpu / api / host selects
    # each run's GB/s and share of its ceiling, as its own tables print them (None: it moves
    # no bytes, or its command's figures were not given)
    a_gb_per_s: float | None = None
    b_gb_per_s: float | None = None
    b_share: float | None = None

    def change(self) -> str:
        """'B faster', 'B slower' beyond noise, else 'within noise'."""
        if self.ratio is None or self.noise is None:
            return "no valid samples"
        return change_of(self.ratio, self.noise)

    def worse_beyond(self, fail_above: float) -> bool:
        """Whether B got slower than A by more than `fail_above` (0.05: 5%) and the runs'
        noise (every figure compared is a median time: a lower GB/s is a slower time)."""
        if self.ratio is None or self.noise is None:
            return False
        return self.ratio - 1 > max(fail_above, self.noise)


def compared(
    first: Result,
    second: Result,
    declared_a: Iterable[Measure] = (),
    declared_b: Iterable[Measure] = (),
) -> list[Compared]:
    """Every measurement in both runs, in A's order; with each run's declared measures, each
    one's GB/s as that run's tables print it."""
    a_by_key, b_by_key = by_key(first), by_key(second)
    a_figure, b_figure = figure_finder(first, declared_a), figure_finder(second, declared_b)
    found = []
    for key in (key for key in a_by_key if key in b_by_key):
        a, b = a_by_key[key], b_by_key[key]
        label = measurement_label(a)
        a_times, b_times = compared_times(a, b)
        a_stats, b_stats = _stats_of(a_times), _stats_of(b_times)
        if a_stats is None or b_stats is None:
            medians = (s.median_ms if s else None for s in (a_stats, b_stats))
            found.append(Compared(label, *medians, None, None, a.group))
            continue
        medians = (a_stats.median_ms, b_stats.median_ms, ratio_of_medians(a_stats, b_stats))
        a_moved, b_moved = a_figure(a), b_figure(b)
        moved = (a_moved.gb_per_s, b_moved.gb_per_s, b_moved.share)
        found.append(Compared(label, *medians, noise(a_times, b_times), a.group, *moved))
    return found


def measurement_label(m: Measurement) -> str:
    """A measurement as diff's tables name it: its Measurement and Bytes."""
    return f"{m.display_name} [{m.group}], {format_bytes(m.bytes) if m.bytes else '-'}"


# What --only selects besides a pattern: figures with a GB/s, and each group of figures.
ONLY_KINDS = ("gbps", "gpu", "api", "host")


def selected(figures: Sequence[Compared], only: Sequence[str]) -> list[Compared]:
    """The figures --only names (all of them where it names none): a kind of ONLY_KINDS, or
    a shell pattern matched against the Measurement and Bytes as the table prints them
    ("*HtoD*", "*pinned*, 4 MiB"), case-insensitive; several select what any of them does."""
    if not only:
        return list(figures)

    def chosen(figure: Compared, what: str) -> bool:
        if what == "gbps":
            return figure.a_gb_per_s is not None and figure.b_gb_per_s is not None
        if what in ONLY_KINDS:
            return figure.group == what
        return fnmatch.fnmatch(figure.label.lower(), what.lower())

    return [figure for figure in figures if any(chosen(figure, what) for what in only)]


def compared_times(a: Measurement, b: Measurement) -> tuple[list[float], list[float]]:
    """What the two runs' tables print of a measurement: per-operation times of back-to-back
    batches where both timed them (their GB/s), else each operation's samples."""
    if a.throughput_ms and b.throughput_ms:
        return a.throughput_ms, b.throughput_ms
    return a.samples_ms, b.samples_ms


UNMATCHED_NAMED = 3  # named in the conclusion; the rest counted


def _named(labels: Sequence[str]) -> str:
    shown = "; ".join(labels[:UNMATCHED_NAMED])
    rest = len(labels) - UNMATCHED_NAMED
    return f"{shown} and {rest} more" if rest > 0 else shown


def regressed_line(figure: Compared, fail_above: float) -> str:
    """One regressed figure, for the gate's lines on stderr."""
    assert figure.ratio is not None and figure.noise is not None
    limit = max(fail_above, figure.noise)
    which = "--fail-above" if fail_above >= figure.noise else "the runs' noise"
    return (
        f"regressed: {figure.label}: {format_ms(figure.a_ms)} -> {format_ms(figure.b_ms)}, "
        f"{figure.ratio:.3f}x, B slower by {figure.ratio - 1:.1%} (limit {limit:.1%}: {which})"
    )


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: the figures in both (those --only selected), and their Summary."""

    rows: list[Compared]
    fail_above: float | None  # the gate (0.05: 5%), or None
    only_a: list[str]  # measurements only in A, by label
    only_b: list[str]
    summary: Summary = field(repr=False)

    @property
    def regressions(self) -> list[Compared]:
        """The figures B made worse: beyond the noise, and the gate where there is one."""
        if self.fail_above is not None:
            return [row for row in self.rows if row.worse_beyond(self.fail_above)]
        return [row for row in self.rows if row.change() == "B slower"]

    @property
    def improvements(self) -> list[Compared]:
        return [row for row in self.rows if row.change() == "B faster"]

    @property
    def verdict(self) -> str:
        """'regressed' where a figure got worse (as regressions counts), else 'passed'."""
        return "regressed" if self.regressions else "passed"


def compare(
    first: Result,
    second: Result,
    fail_above: float | None = None,
    only: Sequence[str] = (),
    verbose: bool = True,
    declared_a: Iterable[Measure] = (),
    declared_b: Iterable[Measure] = (),
) -> Comparison:
    """Every measurement in both runs (those `only` selects) with the ratio and whether it
    changed; with `fail_above` (0.05: 5%), how many got worse beyond it. Not `verbose`: only
    the rows that changed beyond noise (two runs of one build fit a screen)."""
    a_name, b_name = first.gpu_name or first.host, second.gpu_name or second.host
    figures = selected(compared(first, second, declared_a, declared_b), only)
    moving = any(f.a_gb_per_s is not None or f.b_gb_per_s is not None for f in figures)
    headers = ["Measurement", "Bytes", "A median", "B median"]
    headers += ["A GB/s", "B GB/s", "B of ceiling"] if moving else []
    table = Table(
        f"memprof {first.command}: A = {a_name} ({first.created_at}), "
        f"B = {b_name} ({second.created_at})",
        [*headers, "B / A", "Change"],
        notes=[CHANGE_NOTE],
    )
    changes = [figure.change() for figure in figures]
    for figure, change in zip(figures, changes, strict=True):
        if not verbose and change == "within noise":
            continue
        name, _, size = figure.label.rpartition(", ")
        medians = (format_ms(ms) if ms is not None else "-" for ms in (figure.a_ms, figure.b_ms))
        shown = [figure.a_gb_per_s, figure.b_gb_per_s] if moving else []
        rates = [format_gb_per_s(rate) if rate is not None else "-" for rate in shown]
        if moving:
            rates.append(f"{figure.b_share:.0%}" if figure.b_share is not None else "-")
        table.add_row(name, size, *medians, *rates, ratio_cell(figure.ratio), change)
    if moving:
        table.notes.append(
            "GB/s: each run's own figure, as its tables print it; B of ceiling: B's GB/s over "
            "the ceiling B's tables name."
        )
    faster, slower = changes.count("B faster"), changes.count("B slower")
    unusable, quiet = changes.count("no valid samples"), changes.count("within noise")
    a_by_key, b_by_key = by_key(first), by_key(second)
    common = [key for key in a_by_key if key in b_by_key]
    if common:
        pairs = [compared_times(a_by_key[key], b_by_key[key]) for key in common]
        a_words, b_words = (repetitions_words([pair[side] for pair in pairs]) for side in (0, 1))
        table.notes.append(f"A's medians: of {a_words}. B's: of {b_words}.")
    only_a = [measurement_label(m) for key, m in a_by_key.items() if key not in b_by_key]
    only_b = [measurement_label(m) for key, m in b_by_key.items() if key not in a_by_key]
    chosen = f" ({', '.join(only)})" if only else ""
    conclusions = [
        f"{plural(len(figures), 'measurement')}{chosen} in both runs: B was faster in "
        f"{faster}, slower in {slower}, and within noise in {quiet}."
    ]
    if not verbose and quiet:
        conclusions.append(
            f"The {plural(quiet, 'measurement')} within noise "
            f"{'is' if quiet == 1 else 'are'} not listed: --verbose lists every row."
        )
    if unusable:
        conclusions.append(f"{plural(unusable, 'measurement')} had no valid samples to compare.")
    if first.command != second.command:
        conclusions.append(
            f"The runs are of different commands ({first.command}, {second.command})."
        )
    if only_a or only_b:
        named = [
            f"{len(labels)} only in {run}" + (f" ({_named(labels)})" if labels else "")
            for run, labels in (("A", only_a), ("B", only_b))
        ]
        conclusions.append(f"Unmatched: {', '.join(named)}.")
    if fail_above is not None:
        worse = sum(figure.worse_beyond(fail_above) for figure in figures)
        conclusions.append(
            f"Gate (--fail-above {fail_above:.1%}): {worse} of "
            f"{plural(len(figures), 'measurement')} got slower beyond it and beyond the runs' "
            "noise" + (": exit 1." if worse else ".")
        )
    line_tables, line_conclusions = source_lines(first, second, verbose)
    tables = [t for t in (table, *line_tables) if t.rows]
    if not table.rows:  # nothing to list: the runs are still named
        conclusions.insert(0, f"{table.title}.")
    summary = Summary(  # each column of times in one unit, as every command's tables
        tables=[one_time_unit_per_column(t) for t in tables],
        conclusions=conclusions + line_conclusions,
        show_profile=False,
        header=[f"Not comparable: {line}" for line in differences(first, second)],
    )
    return Comparison(figures, fail_above, only_a, only_b, summary)


def source_lines(first: Result, second: Result, verbose: bool) -> tuple[list[Table], list[str]]:
    """Two traces' shared source lines, time per call compared as the measurements are. A
    line's median call is its small ones' (4 KiB and 32 MiB copies on one line): its mean is
    held to the same noise, so larger calls that slowed alone are named, "B slower (mean)"."""
    pairs, only_a, only_b = paired_lines(first, second)
    unmatched = []
    if only_a or only_b:
        unmatched.append(f"Source lines unmatched: {only_a} only in A, {only_b} only in B.")
    if not pairs:
        return [], unmatched
    table = Table(
        "Source lines: time per call (copies and memsets: GPU time; other calls: host time)",
        ["Line", "Calls A/B", "A median", "B median", "B / A", "Change"],
        notes=[CHANGE_NOTE],
    )
    slower = []
    for pair in pairs:
        a_samples, b_samples = pair.samples(pair.a), pair.samples(pair.b)
        a_stats, b_stats = _stats_of(a_samples), _stats_of(b_samples)
        calls = f"{pair.a.calls}/{pair.b.calls}"
        if a_stats is None or b_stats is None:
            table.add_row(pair.label, calls, "-", "-", "-", "no valid samples")
            continue
        ratio = ratio_of_medians(a_stats, b_stats)
        change = change_of(ratio, noise(a_samples, b_samples))
        if change == "within noise" and a_stats.mean_ms > 0 and b_stats.mean_ms > 0:
            means = b_stats.mean_ms / a_stats.mean_ms
            if change_of(means, mean_noise(a_stats, b_stats)) != "within noise":
                ratio, change = means, f"{change_of(means, 0)} (mean)"
        if change.startswith("B slower"):
            slower.append(f"{pair.label} ({ratio:.2f}x)" if math.isfinite(ratio) else pair.label)
        if not verbose and change == "within noise":
            continue
        medians = (format_ms(a_stats.median_ms), format_ms(b_stats.median_ms))
        table.add_row(pair.label, calls, *medians, ratio_cell(ratio), change)
    if any(row[-1].endswith("(mean)") for row in table.rows):
        table.notes.append(
            "(mean): the line's time over all its calls moved beyond its own noise (the "
            "standard error of each mean) while its median call did not: its larger calls "
            "alone changed. B / A is then of the means."
        )
    named = f": {'; '.join(slower)}" if slower else ""
    conclusions = [
        f"Source lines: {plural(len(pairs), 'line')} in both traces, B slower at "
        f"{len(slower)}{named}."
    ]
    return [table], conclusions + unmatched


def _stats_of(samples: list[float]) -> Statistics | None:
    """The samples' statistics, or None where there are none to trust (NaN, negative, empty)."""
    try:
        return Statistics.of(samples)
    except ValueError:
        return None


# -- are the runs comparable? ----------------------------------------------------------------


def differences(first: Result, second: Result) -> list[str]:
    """What differs between the machines or the ways the two runs were made, one line each:
    GPU model, driver, clocks, link, host affinity, timing source, host buffer."""
    lines = []

    def differ(what: str, a: object, b: object) -> None:
        if a != b:
            lines.append(f"{what}: A {_shown(a)}, B {_shown(b)}.")

    a_name, b_name = first.gpu_name, second.gpu_name  # a trace's too
    if (a_name is None) != (b_name is None):  # as _clocks says of a state one run lacks
        lines.append(f"GPU model: unknown in {'A' if a_name is None else 'B'}.")
    else:
        differ("GPU model", a_name, b_name)
    # two traces are of one program run the same way, or they measure different things
    for what, name, words in TRACE_SETTINGS:
        a, b = (_parameter(result, name) for result in (first, second))
        differ(what, *(None if value is None else words(value) for value in (a, b)))
    devices = (first.device, second.device)
    if None not in devices:
        drivers = (f"{d.driver_version} (CUDA {d.cuda_driver_api_version})" for d in devices)
        differ("driver", *drivers)
    lines += _clocks(first, second)
    a_link, b_link = link_of(first), link_of(second)
    if a_link is not None and b_link is not None:
        differ("PCIe link", link_words(a_link.now), link_words(b_link.now))
    differ("host affinity", _placement(first.timing), _placement(second.timing))
    differ("timing source", _source(first), _source(second))
    differ("host buffer", _parameter(first, "host_buffer"), _parameter(second, "host_buffer"))
    lines += _others(first, second)
    return lines


def _clocks(first: Result, second: Result) -> list[str]:
    """Clocks: their maxima, the memory clock during the run, and clocks held down; a run
    whose NVML could not be read is said to be, as one recorded before NVML is."""
    a, b = first.gpu_state(), second.gpu_state()
    if (a is None) != (b is None):
        which = "A" if a is None else "B"
        return [f"clocks and link during the run: not recorded in {which} (an older memprof)."]
    if a is None or b is None or (a.unavailable and b.unavailable):
        return []
    if a.unavailable or b.unavailable:
        which, why = ("A", a.unavailable) if a.unavailable else ("B", b.unavailable)
        return [f"clocks and link during the run: unknown in {which} (NVML: {why})."]
    shown = {run: _clock_words(state) for run, state in (("A", a), ("B", b))}
    return [] if shown["A"] == shown["B"] else [f"clocks: A {shown['A']}, B {shown['B']}."]


def _clock_words(state: GpuState) -> str:
    words = (
        f"SM max {state.sm_clock_max_mhz} MHz, memory {state.memory_clock_mhz} of "
        f"{state.memory_clock_max_mhz} MHz"
    )
    held = state.limiting_reasons
    if held:
        words += f", held down ({', '.join(reason_words(name) for name in held)})"
    return words


def _others(first: Result, second: Result) -> list[str]:
    lines = []
    for run, result in (("A", first), ("B", second)):
        state = result.gpu_state()
        if state is not None and state.other_processes:
            pids = ", ".join(str(process.pid) for process in state.other_processes)
            lines.append(f"{run} shared its GPU with another process (pid {pids}).")
    return lines


def _placement(timing: object) -> str | None:
    placed = getattr(timing, "host_affinity", None)
    return placed.removeprefix("affinity: ") if placed else None


def _source(result: Result) -> str | None:
    if result.timing is None:
        return None
    return "CUPTI's records" if result.timing.source == "cupti" else "gated CUDA events"


def _parameter(result: Result, name: str) -> object:
    parameters = result.parameters
    if isinstance(parameters, dict):
        return parameters.get(name)
    return getattr(parameters, name, None)


EVERY_CALL = "every call (--all-calls)"
# A trace's settings as `differences` names them: what, its parameter, and its words.
TRACE_SETTINGS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    # by its file's name: examples/train.py and a CI run's /home/ci/app/examples/train.py
    ("program", "program", lambda program: PurePath(str(program)).name),
    ("arguments", "arguments", lambda arguments: shlex.join(map(str, arguments)) or "none"),
    # a trace of every call against one of the work calls: the others are only in one
    ("API calls recorded", "all_calls", lambda every: EVERY_CALL if every else "the work calls"),
)


def _shown(value: object) -> str:
    return "not recorded" if value is None else str(value)
