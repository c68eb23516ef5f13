"""The plain shape of what a command shows after its profile: tables and conclusions."""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memprof.model.formatting import (
    TIME_UNITS_NS,
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_ratio,
    in_unit,
    nvprof_unit,
)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how the figures were measured
    highlighted: list[tuple[int, int]] = field(default_factory=list)  # (row, column): the best
    # each row's measurements, whose figures its cells show (the CSV rows it came from)
    sources: list[tuple[Any, ...]] = field(default_factory=list)
    # a built table's columns and each row's figures by name: a picture reads these, not cells
    columns: list[Column] = field(default_factory=list)
    figures: list[Mapping[str, Any]] = field(default_factory=list)

    def add_row(self, *cells: str, source: Any = ()) -> None:
        """A row of cells; `source`: the measurement (or measurements) its figures are of."""
        if len(cells) != len(self.headers):
            raise ValueError(
                f"{len(cells)} cells for {len(self.headers)} columns in {self.title!r}"
            )
        self.rows.append(list(cells))
        self.sources.append(source if isinstance(source, tuple) else (source,))


def _median_ms(one: Any) -> float:
    """A Figure's or Derived's median, or a bare Measurement's (its samples')."""
    return one.median_ms if hasattr(one, "median_ms") else one.stats.median_ms


def _share(one: Any) -> str:
    """'85% PCIe' (Ceiling.cell); '-' for a figure bounded by none (a Derived total)."""
    ceiling = getattr(one, "ceiling", None)
    if ceiling is None or one.gb_per_s is None:
        return "-"
    return ceiling.cell(one.gb_per_s)


# What a column shows of its figure, each in its unit and precision: a time as nvprof
# writes it, GB/s to three digits, a ratio to two decimals, a share of the ceiling.
SHOWS: dict[str, Callable[[Any], str]] = {
    "latency_ms": lambda one: format_ms(one.latency_ms),
    "median_ms": lambda one: format_ms(_median_ms(one)),
    "min_ms": lambda one: format_ms(one.stats.min_ms),
    "max_ms": lambda one: format_ms(one.stats.max_ms),
    "mean_ms": lambda one: format_ms(one.stats.mean_ms),
    "per_operation_ms": lambda one: format_ms(one.per_operation_ms),
    "per_operation_us": lambda one: f"{one.per_operation_ms * 1e3:.2f}",  # a column in µs
    "gb_per_s": lambda one: "-" if one.gb_per_s is None else format_gb_per_s(one.gb_per_s),
    "ratio": lambda one: format_ratio(one.ratio),
    "ratio_percent": lambda one: f"{one.ratio:.0%}",  # a ratio below 1: the ideal's share
    "share": _share,
    "percent": lambda one: "-" if one.share is None else f"{one.share:.1%}",  # of its ceiling
    "moved_bytes": lambda one: "-" if one.moved_bytes is None else format_bytes(one.moved_bytes),
    "count": lambda one: str(one.stats.count),
}


@dataclass(frozen=True)
class Column:
    """A declared column: its header, the row's key it reads (`of`) and what it shows: a name
    in SHOWS, a function, or "label" (words, printed as they are, as is a str in place of a
    figure). `mark`: what follows a figure's cell (pools' "*": a call near its floor)."""

    header: str
    of: str
    shows: str | Callable[[Any], str] = "label"
    mark: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.shows, str) and self.shows != "label" and self.shows not in SHOWS:
            raise ValueError(f"column {self.header!r} shows {self.shows!r}: not one of SHOWS")

    def cell(self, row: Mapping[str, Any]) -> str:
        one = row.get(self.of)
        if one is None:
            return "-"
        if self.shows == "label" or isinstance(one, str):
            return one
        shown = SHOWS[self.shows](one) if isinstance(self.shows, str) else self.shows(one)
        return shown + self.mark(one) if self.mark is not None else shown


def table(
    title: str,
    columns: Sequence[Column],
    rows: Iterable[Mapping[str, Any]],
    notes: Sequence[str] = (),
) -> Table:
    """The one builder of figure tables: a row per mapping, each cell as its column declares,
    its sources its cells' measurements (each once: the CSV holds them)."""
    made = Table(title, [column.header for column in columns], notes=list(notes))
    made.columns = list(columns)
    for row in rows:
        made.figures.append(row)
        sources: dict[int, Any] = {}
        for column in columns:
            one = row.get(column.of) if column.shows != "label" else None
            if one is not None and not isinstance(one, str):
                # a Figure: its measurement; a cell of several (check's Line): its `sources`
                parts = (
                    one.sources if hasattr(one, "sources") else (getattr(one, "measurement", one),)
                )
                for part in parts:
                    sources.setdefault(id(part), part)
        made.add_row(*(column.cell(row) for column in columns), source=tuple(sources.values()))
    return made


@dataclass
class Chart:
    """Lines drawn in the terminal: preformatted `lines`, or `draw(width)` for the console's."""

    title: str
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    draw: Callable[[int], list[str]] | None = None

    def lines_for(self, width: int) -> list[str]:
        """The lines to print on a console `width` columns wide."""
        return self.draw(width) if self.draw is not None else self.lines


@dataclass
class Summary:
    tables: list[Table] = field(default_factory=list)
    conclusions: list[str] = field(default_factory=list)
    show_profile: bool = True
    charts: list[Chart] = field(default_factory=list)
    timing_note: str | None = None  # the profile's footnote, where the command's is its own
    header: list[str] = field(default_factory=list)  # warnings before the tables
    # what the summary judged failed (memprof check's FAIL lines): the command exits 1
    failed: list[str] = field(default_factory=list)
    # every measurement's figures, the CSV's and frames': made when first asked (a large trace)
    figures_of: Callable[[], list[Any]] = field(default=list, repr=False)
    # the Derived figures and DeviceFacts its tables show: the CSV's rows after the measurements'
    derived: list[Any] = field(default_factory=list)

    @functools.cached_property
    def figures(self) -> list[Any]:
        return self.figures_of()


# a time as nvprof prints it, and a mark after it (pools' "*": near the timing floor)
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|ms|s)([*†]?)$")


def one_time_unit_per_column(table: Table) -> Table:
    """Where a column mixes units (16.720us above 9.5137ms), every column of times in one unit
    named in its header ("Median (ms)")."""
    columns = {}
    for column in range(1, len(table.headers)):
        cells = [row[column] for row in table.rows if row[column] != "-"]
        times = [_TIME.match(cell) for cell in cells]
        if cells and all(times):
            columns[column] = [float(found[1]) * TIME_UNITS_NS[found[2]] for found in times]
            columns[column, "mixed"] = len({found[2] for found in times}) > 1
    if not any(columns.get((column, "mixed")) for column in range(len(table.headers))):
        return table
    headers, rows = list(table.headers), [list(row) for row in table.rows]  # tables share lists
    for column in range(1, len(headers)):
        if column not in columns:
            continue
        unit = nvprof_unit(statistics.median(columns[column]))
        for row in rows:
            found = _TIME.match(row[column])
            if found:
                row[column] = in_unit(found[1] + found[2], unit) + found[3]
        headers[column] = f"{headers[column]} ({unit})"
    table.headers, table.rows = headers, rows
    return table
