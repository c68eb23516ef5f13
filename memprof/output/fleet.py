"""`memprof report --fleet`: many runs of one command side by side, each GPU's figures
against the fleet's median. An outlier's per-operation time differs from the median by more
than the threshold (10%, or --fail-outliers) and three times its run's noise; a median needs
three runs to single one out (with two, each is as far from it as the other).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from memprof.model.figures import figure_finder
from memprof.model.formatting import format_gb_per_s, format_ms, plural
from memprof.model.measures import Measure
from memprof.model.results import Result
from memprof.model.statistics import NOISE_SIGMAS, noise_band
from memprof.model.summary import Summary, Table
from memprof.output.diff import by_key, measurement_label

DEFAULT_OUTLIER = 0.10  # a figure this far from the fleet's median is marked
MIN_RUNS = 3  # fewer: the median cannot single one run out
SHOWN_FIGURES = 12  # the figures with outliers listed; the rest counted


@dataclass(frozen=True)
class Deviation:
    """One run's figure beside the fleet's median."""

    run: int  # its place among the results given
    label: str  # the figure: Measurement and Bytes, as diff names them
    shown: str  # its value as the table prints it (GB/s where it moves bytes, else a time)
    ratio: float  # its per-operation time over the fleet's median one (above 1: slower)
    limit: float  # how far from 1 the ratio must be to count: the threshold or its noise

    @property
    def outlier(self) -> bool:
        return abs(self.ratio - 1) > self.limit

    @property
    def slower(self) -> bool:
        return self.ratio - 1 > self.limit


@dataclass(frozen=True)
class Fleet:
    """The fleet's tables, and every figure of every run against its median."""

    summary: Summary
    deviations: list[Deviation]
    runs: list[str]  # each run's name in the tables

    @property
    def slower(self) -> list[Deviation]:
        """The figures slower than the fleet's median (none where it has too few runs)."""
        return [d for d in self.deviations if d.slower] if len(self.runs) >= MIN_RUNS else []


def run_names(results: Sequence[Result]) -> list[str]:
    """Each run as host and GPU, then its PCI bus id, then its number, where they repeat."""
    plain = [f"{r.host} GPU {r.gpu_index if r.gpu_index is not None else '?'}" for r in results]
    buses = [r.device.pci_bus_id if r.device is not None else "" for r in results]
    pairs = list(zip(plain, buses, strict=True))
    names = []
    for index, (name, bus) in enumerate(pairs):
        if plain.count(name) == 1:
            names.append(name)
        elif bus and pairs.count((name, bus)) == 1:
            names.append(f"{name} ({bus})")
        else:
            names.append(f"{name} #{index + 1}")
    return names


def _shown(gb_per_s: float | None, per_operation_ms: float) -> str:
    """A figure as the table prints it: GB/s where it moves bytes, else its time."""
    return format_ms(per_operation_ms) if gb_per_s is None else f"{format_gb_per_s(gb_per_s)} GB/s"


def fleet(
    results: Sequence[Result],
    declared_of: Callable[[Result], Iterable[Measure]],
    threshold: float | None = None,
) -> Fleet:
    """Every figure all `results` hold, each run's against the median of all of them."""
    limit = DEFAULT_OUTLIER if threshold is None else threshold
    names = run_names(results)
    finders = [figure_finder(result, declared_of(result)) for result in results]
    keyed = [by_key(result) for result in results]  # matched as diff matches two runs
    common = [key for key in keyed[0] if all(key in other for other in keyed[1:])]
    spread: list[tuple[str, str, list[Deviation]]] = []  # label, median shown, each run's
    for key in common:
        found = [finder(run[key]) for finder, run in zip(finders, keyed, strict=True)]
        times = [f.per_operation_ms for f in found]
        if not all(math.isfinite(t) and t > 0 for t in times):
            continue
        middle = statistics.median(times)
        label = measurement_label(keyed[0][key])
        each = []
        for run, f in enumerate(found):
            noise = noise_band(f.measurement.throughput_ms or f.measurement.samples_ms)
            shown = _shown(f.gb_per_s, f.per_operation_ms)
            each.append(
                Deviation(run, label, shown, f.per_operation_ms / middle, max(limit, noise))
            )
        rates = [f.gb_per_s for f in found]
        median_rate = None if None in rates else statistics.median(rates)
        spread.append((label, _shown(median_rate, middle), each))
    deviations = [d for _, _, each in spread for d in each]
    return Fleet(_summary(results, names, spread, limit), deviations, names)


def _summary(
    results: Sequence[Result],
    names: list[str],
    spread: list[tuple[str, str, list[Deviation]]],
    limit: float,
) -> Summary:
    command = results[0].command
    judged = len(results) >= MIN_RUNS
    per_run = Table(
        f"memprof {command}: {plural(len(results), 'run')} against the fleet's median",
        ["Run", "GPU", "Outliers", "Furthest from the median"],
        notes=[
            f"Outlier: a figure's time per operation more than {limit:.0%} from the median of "
            f"the fleet's and beyond {NOISE_SIGMAS}x its run's own noise; GB/s where it moves "
            "bytes. Furthest: the run's figure furthest from the median, and by how much "
            "(+: slower)."
        ],
    )
    for run, (name, result) in enumerate(zip(names, results, strict=True)):
        mine = [d for _, _, each in spread for d in each if d.run == run]
        outliers = [d for d in mine if d.outlier] if judged else []
        furthest = max(mine, key=lambda d: abs(d.ratio - 1), default=None)
        far = "-"
        if furthest is not None:
            far = f"{furthest.label}: {furthest.shown} ({furthest.ratio - 1:+.1%})"
        per_run.add_row(name, result.gpu_name or "-", str(len(outliers)), far)
    flagged = [
        (label, middle, each) for label, middle, each in spread if any(d.outlier for d in each)
    ]
    figures = Table(
        "Figures with an outlier: the fleet's median and the runs beyond it",
        ["Figure", "Fleet median", "Outliers"],
    )
    for label, middle, each in flagged[:SHOWN_FIGURES] if judged else []:
        named = "; ".join(
            f"{names[d.run]}: {d.shown} ({d.ratio - 1:+.0%})" for d in each if d.outlier
        )
        figures.add_row(label, middle, named)
    if judged and len(flagged) > SHOWN_FIGURES:
        figures.notes.append(f"{len(flagged) - SHOWN_FIGURES} more figures have an outlier.")
    commands = sorted({result.command for result in results})
    models = sorted({result.gpu_name or "an unknown GPU" for result in results})
    runs = "the one run" if len(results) == 1 else f"all {len(results)} runs"
    conclusions = [f"{plural(len(spread), 'figure')} in {runs}."]
    if len(commands) > 1:
        conclusions.append(f"The runs are of different commands ({', '.join(commands)}).")
    if len(models) > 1:
        conclusions.append(
            f"The runs are of different GPU models ({', '.join(models)}): an outlier may be "
            "its model, not its GPU."
        )
    if not judged:
        conclusions.append(
            f"A median of {plural(len(results), 'run')} cannot single one out: give "
            f"{MIN_RUNS} or more."
        )
    else:
        slow = ", ".join(sorted({names[d.run] for _, _, each in spread for d in each if d.slower}))
        conclusions.append(
            f"Slower than the fleet beyond {limit:.0%} and their noise: {slow or 'none'}."
        )
    tables = [per_run, *([figures] if figures.rows else [])]
    return Summary(tables=tables, conclusions=conclusions, show_profile=False)
