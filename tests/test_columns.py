"""The one table builder (memprof.model.summary.table): each cell as its column declares, each
row's sources the figures its cells show."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.model.ceilings import Ceiling
from memprof.model.summary import Chart, Column, Table, table

COLUMNS = (
    Column("Memory", "kind"),
    Column("One copy", "copy", "latency_ms"),
    Column("Blocked", "blocked", "median_ms"),
    Column("GB/s", "copy", "gb_per_s"),
    Column("vs pageable", "against", "ratio"),
    Column("Of ceiling", "copy", "share"),
)


def copy_figure(gb_per_s: float | None, ceiling: Ceiling | None) -> SimpleNamespace:
    measurement = SimpleNamespace(name="HtoD")
    return SimpleNamespace(measurement=measurement, latency_ms=0.25, gb_per_s=gb_per_s,
                           ceiling=ceiling)  # fmt: skip


def test_each_cell_is_its_columns_figure_in_its_unit():
    link = Ceiling(64.0, "PCIe", "Gen5 x16")
    copy = copy_figure(48.0, link)
    blocked = SimpleNamespace(stats=SimpleNamespace(median_ms=1.5))  # a bare measurement
    against = SimpleNamespace(ratio=2.345)
    made = table("T", COLUMNS, [{"kind": "pinned", "copy": copy, "blocked": blocked,
                                 "against": against}])  # fmt: skip
    assert made.headers == [column.header for column in COLUMNS]
    assert made.rows == [["pinned", "250.00us", "1.5000ms", "48.0", "2.35x", "75% PCIe"]]
    # the figure's measurement, not the figure; each once, in column order; no label
    assert made.sources == [(copy.measurement, blocked, against)]


def test_a_figure_a_row_lacks_or_that_moves_nothing_is_a_dash():
    copy = copy_figure(None, None)
    made = table("T", COLUMNS, [{"kind": "staging", "copy": copy}])
    assert made.rows == [["staging", "250.00us", "-", "-", "-", "-"]]
    assert made.sources == [(copy.measurement,)]
    unbounded = table("T", COLUMNS, [{"kind": "memcpy", "copy": copy_figure(9.0, None)}])
    assert unbounded.rows[0][3:] == ["9.00", "-", "-"]


def test_each_statistic_and_share_reads_its_own_figure():
    stats = SimpleNamespace(min_ms=1.0, mean_ms=2.0, median_ms=3.0, max_ms=4.0, count=7)
    one = SimpleNamespace(stats=stats, share=0.8766, moved_bytes=3 << 20, gb_per_s=1.0,
                          ceiling=None, median_ms=3.0)  # fmt: skip
    shows = ("min_ms", "mean_ms", "median_ms", "max_ms", "count", "percent", "moved_bytes")
    made = table("T", [Column(name, "one", name) for name in shows], [{"one": one}])
    assert made.rows == [["1.0000ms", "2.0000ms", "3.0000ms", "4.0000ms", "7", "87.7%", "3 MiB"]]


def test_a_figure_of_no_one_ceiling_shows_a_dash_for_its_share():
    total = SimpleNamespace(gb_per_s=222.0)  # a Derived total: its parts each have their own
    made = table("T", [Column("Of ceiling", "total", "share")], [{"total": total}])
    assert made.rows == [["-"]]


def test_a_column_that_shows_nothing_declared_is_refused_when_declared():
    with pytest.raises(ValueError, match="gbps"):
        Column("GB/s", "copy", "gbps")


def test_a_command_may_write_a_figure_its_own_way():
    faster = SimpleNamespace(ratio=3.0)
    column = Column("In place is", "faster", lambda one: f"{one.ratio:.2f}x faster")
    made = table("T", [column], [{"faster": faster}, {}])
    assert made.rows == [["3.00x faster"], ["-"]]
    assert made.sources == [(faster,), ()]


def test_words_a_row_holds_in_a_figures_column_are_printed_as_they_are_and_no_source():
    """Words in a column of figures (pinlimit's "-" where no step was pinned): printed as they
    are, read by no column's way of writing, and no row's source."""
    copy = copy_figure(48.0, None)
    rows = [{"kind": "pinned", "copy": copy}, {"kind": "MemAvailable", "copy": "1.5 TiB"}]
    made = table("T", COLUMNS[:2], rows)
    assert made.rows == [["pinned", "250.00us"], ["MemAvailable", "1.5 TiB"]]
    assert made.sources == [(copy.measurement,), ()]


def test_a_cell_printing_several_figures_sources_each_and_one_printing_none_sources_nothing():
    """check's Line: its Measured cell prints its `sources` (a copy, its floor, a reference);
    a line of words (the PCIe link's) prints no figure, and is no source itself."""
    copy, floor = SimpleNamespace(name="HtoD"), SimpleNamespace(ratio=0.8)
    judged = SimpleNamespace(measured="48.0 GB/s (75%)", sources=(copy, floor, copy))
    link = SimpleNamespace(measured="Gen5 x16", sources=())
    column = Column("Measured", "line", lambda line: line.measured)
    made = table("T", [column], [{"line": judged}, {"line": link}])
    assert made.rows == [["48.0 GB/s (75%)"], ["Gen5 x16"]]
    assert made.sources == [(copy, floor), ()]


def test_a_built_table_keeps_its_columns_and_each_rows_figures_for_pictures():
    copy = copy_figure(48.0, None)
    row = {"kind": "pinned", "copy": copy}
    made = table("T", COLUMNS[:2], [row])
    assert made.columns == list(COLUMNS[:2])
    assert made.figures == [row] and made.figures[0]["copy"] is copy


def test_a_row_of_the_wrong_width_is_refused_naming_both_counts_and_the_table():
    made = Table("Copies", ["Memory", "GB/s", "Ratio"])
    with pytest.raises(ValueError, match=r"^2 cells for 3 columns in 'Copies'$"):
        made.add_row("pinned", "48.0")
    assert made.rows == [] and made.sources == []


def test_a_rows_one_source_is_kept_as_a_tuple_of_one():
    one, two = SimpleNamespace(name="a"), SimpleNamespace(name="b")
    made = Table("T", ["Memory"])
    made.add_row("pinned", source=one)
    made.add_row("mapped", source=(one, two))
    made.add_row("pageable")
    assert made.sources == [(one,), (one, two), ()]


def test_a_chart_draws_at_the_consoles_width_or_prints_its_lines():
    assert Chart("fixed", lines=["a", "b"]).lines_for(80) == ["a", "b"]
    drawn = Chart("drawn", lines=["ignored"], draw=lambda width: ["-" * width])
    assert drawn.lines_for(12) == ["-" * 12]
