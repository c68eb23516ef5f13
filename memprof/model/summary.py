"""The plain shape of what a command shows after its profile: tables and conclusions.

Experiments turn a Result into a Summary with pure functions; render.py draws it,
and later CSV or other outputs can read the same cells.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how the figures were measured
    highlighted: list[tuple[int, int]] = field(default_factory=list)  # (row, column): the best
    # each row's measurements, whose figures its cells show (the CSV rows it came from)
    sources: list[tuple[Any, ...]] = field(default_factory=list)

    def add_row(self, *cells: str, source: Any = ()) -> None:
        """A row of cells; `source`: the measurement (or measurements) its figures are of."""
        if len(cells) != len(self.headers):
            raise ValueError(
                f"{len(cells)} cells for {len(self.headers)} columns in {self.title!r}"
            )
        self.rows.append(list(cells))
        self.sources.append(source if isinstance(source, tuple) else (source,))


@dataclass
class Chart:
    """Lines drawn in the terminal (a timeline, a bandwidth curve): preformatted `lines`, or
    `draw(width)`, which draws them for the console's width so the chart fits any console."""

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
    header: list[str] = field(default_factory=list)  # warnings before the tables (diff's)
    # what the summary judged failed (memprof check's FAIL lines): the command exits 1
    failed: list[str] = field(default_factory=list)
    # every measurement's figures (memprof.model.figures), what the CSV and frames hold
    figures: list[Any] = field(default_factory=list)
