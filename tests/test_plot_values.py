"""The values and scales of pictures a fixture-wide read-back cannot tell apart: each checked
against the table that prints it, and each scale's rule on both sides of its edge (issue 37's
mutation round on memprof/experiments/pictures.py and memprof/output/plot.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

from memprof.model.formatting import format_gb_per_s, format_ms
from memprof.output.plot import Bars, Curves, Line, Picture, Words
from tests.test_plot import pictured

GIB = 1 << 30


def table_of(summary, title: str):
    return next(table for table in summary.tables if table.title.startswith(title))


# -- pinlimit: the climb and the host's copies, as their tables print them ----------------------


def test_pinlimits_climb_is_drawn_as_its_table_prints_each_way_per_gib():
    result, summary, shown = pictured("h200_pinlimit")
    curves = shown.panels[0]
    assert isinstance(curves, Curves)
    assert (curves.title, curves.x_label, curves.y_label) == (
        "Time per GiB as pinned memory grows", "pinned", "ms per GiB"
    )  # fmt: skip
    assert (curves.y_unit, curves.linear) == ("ms", True)
    assert [line.label for line in curves.lines] == [
        "cuMemHostAlloc + touch", "touch + cuMemHostRegister"
    ]  # fmt: skip
    assert not any(line.ceiling for line in curves.lines)
    rows = table_of(summary, "Pinning as it grows").rows
    held = list(result.extra.held_bytes)
    for column, line in enumerate(curves.lines, 2):
        assert [x for x, _ in line.points] == held
        assert [format_ms(y) for _, y in line.points] == [row[column] for row in rows]


def test_pinlimits_host_copies_are_drawn_as_their_table_prints_them_by_phase():
    _, summary, shown = pictured("h200_pinlimit")
    bars = shown.panels[1]
    assert (bars.title, bars.value_label, bars.unit) == (
        "The host's pageable copies", "GB/s (10^9 bytes/s)", "GB/s"
    )  # fmt: skip
    rows = table_of(summary, "What pinning takes from the host").rows
    phases = ("nothing pinned", "all pinned", "freed again")
    expected = [
        (f"{row[0]}, {phase}", row[1 + i]) for row in rows[:2] for i, phase in enumerate(phases)
    ]
    assert [(bar.label, f"{format_gb_per_s(bar.value)} GB/s") for bar in bars.bars] == expected
    assert all(bar.source is not None and bar.ceiling is None for bar in bars.bars)
    assert len(shown.panels) == 2


# -- a linear axis (pinlimit's climb): from 0, a little above the top, whole GiB ticks ---------


def linear_axes(points: list[tuple[float, float]], *more: list[tuple[float, float]]):
    lines = [Line(f"way {i}", p) for i, p in enumerate((points, *more))]
    curves = Curves("climb", "pinned", "ms per GiB", lines, y_unit="ms", linear=True)
    return Picture("t", [curves]).figure().axes[0]


def test_a_linear_axis_runs_from_0_to_a_seventh_above_the_highest_point_of_any_line():
    axes = linear_axes([(GIB, 10.0), (2 * GIB, 40.0)], [(GIB, 20.0), (2 * GIB, 30.0)])
    assert tuple(axes.get_ylim()) == (0, 40.0 * 1.15)
    assert axes.get_xlim()[0] == 0
    assert axes.get_xscale() == axes.get_yscale() == "linear"


@pytest.mark.parametrize(
    ("right", "ticks_gib"),
    [
        (GIB // 2, []),  # less than a GiB: no whole GiB to mark
        (3 * GIB, [1, 2, 3]),
        (4 * GIB - 1, [1, 2, 3]),  # a byte short of 4 GiB: no tick at 4
        (4 * GIB, [1, 2, 3, 4]),  # 4 GiB: still a tick each
        (4 * GIB + 1, [2, 4]),  # past 4: every second GiB
        (8 * GIB, [2, 4, 6, 8]),
        (9 * GIB, [4, 8]),
        (31 * GIB, [8, 16, 24]),  # the fixture's 31 GiB
    ],
)
def test_a_linear_axis_marks_whole_gib_four_at_most(right, ticks_gib):
    axes = linear_axes([(GIB // 4, 1.0), (right, 2.0)])
    assert [int(x) for x in axes.get_xticks()] == [n * GIB for n in ticks_gib]


def test_a_linear_axis_has_six_value_ticks_at_most():
    axes = linear_axes([(GIB, 10.0), (2 * GIB, 46.0)])  # to 52.9: by 10, not by 8
    top = axes.get_ylim()[1]
    assert [y for y in axes.get_yticks() if y <= top] == [0, 10, 20, 30, 40, 50]


def test_a_linear_axis_without_points_is_drawn_empty_from_0_to_1_15_and_1_gib():
    curves = Curves("climb", "pinned", "ms per GiB", [], y_unit="ms", linear=True)
    axes = Picture("t", [curves]).figure().axes[0]
    assert tuple(axes.get_ylim()) == (0, 1.15)
    assert [int(x) for x in axes.get_xticks()] == [GIB]


def test_a_linear_axis_takes_the_rightmost_point_of_any_line():
    axes = linear_axes([(GIB, 1.0), (2 * GIB, 2.0)], [(GIB, 1.0), (8 * GIB, 1.0)])
    assert [int(x) for x in axes.get_xticks()] == [n * GIB for n in (2, 4, 6, 8)]
    assert tuple(axes.get_ylim()) == (0, 2.0 * 1.15)


# -- tick labels: each unit's words, each scale from 0.999 of it -------------------------------


@pytest.mark.parametrize(
    ("value", "unit", "label"),
    [
        (0.0, "GB/s", "0"),
        (-1.0, "ms", "0"),  # below the axis' 0: still 0
        (4096, "bytes", "4 KiB"),
        (0.999, "GB/s", "0.999"),
        (1.0, "GB/s", "1"),
        (999.6, "GB/s", "1,000"),
        (1234.0, "GB/s", "1,234"),
        (2.0, "ms", "2 ms"),
    ],
)
def test_a_tick_is_labelled_in_its_unit(value, unit, label):
    from memprof.output.plot import _tick

    assert _tick(value, unit) == label


@pytest.mark.parametrize(
    ("milliseconds", "label"),
    [
        (1000.0, "1 s"),
        (1e3 * 0.999, "0.999 s"),  # from 0.999 of a second, in seconds
        (998.9, "998.9 ms"),
        (1.0, "1 ms"),
        (0.999, "0.999 ms"),
        (0.9989, "998.9 us"),
        (1e-3 * 0.999, "0.999 us"),
        (1e-6 * 0.999, "0.999 ns"),
        (5e-7, "0.5 ns"),  # below a nanosecond: still nanoseconds
    ],
)
def test_a_time_tick_is_in_the_largest_unit_it_is_0_999_of(milliseconds, label):
    from memprof.output.plot import _time_tick

    assert _time_tick(milliseconds) == label


def test_a_label_is_cut_to_its_limit_with_an_ellipsis_and_kept_literal():
    from memprof.output.plot import LABEL_CHARACTERS, _label

    assert _label("a" * LABEL_CHARACTERS) == "a" * LABEL_CHARACTERS
    assert _label("a" * (LABEL_CHARACTERS + 1)) == "a" * (LABEL_CHARACTERS - 1) + "…"
    assert _label("abcdef", 5) == "abcd…" and _label("abcde", 5) == "abcde"
    assert _label("two\nlines") == "two\\nlines"  # literal: a newline shown as \n


def test_an_svg_id_is_the_label_in_safe_letters_and_unique_in_its_panel():
    from memprof.output.plot import _gid

    taken: set[str] = set()
    assert [_gid(text, taken) for text in ("a b/c", "a b/c", "a b/c", "", "_x.-_")] == [
        "a_b_c", "a_b_c-2", "a_b_c-3", "item", "x.-"
    ]  # fmt: skip
    assert taken == {"a_b_c", "a_b_c-2", "a_b_c-3", "item", "x.-"}


class Limits:
    def __init__(self) -> None:
        self.ylim: tuple[float, float] | None = None

    def set_ylim(self, low: float, high: float) -> None:
        self.ylim = (low, high)


@pytest.mark.parametrize(
    ("values", "ylim"),
    [
        ([], None),  # nothing drawn: matplotlib's own limits
        ([1.3, 3 / 1.3], (1.0, 3.0)),  # a factor 3 apart after the 1.3 margins: kept
        ([1.3, 3.5 / 1.3], (1.0, 3.5)),  # a factor 3.5: kept
        ([1.3, 30.0], (1.0, 39.0)),
    ],
)
def test_a_log_axis_keeps_its_margins_where_they_are_a_factor_3_apart(values, ylim):
    from memprof.output.plot import _spread_log_limits

    axes = Limits()
    _spread_log_limits(axes, values)
    assert axes.ylim == (pytest.approx(ylim) if ylim else None)


def test_a_log_axis_narrower_than_a_factor_3_is_spread_to_3_about_its_middle():
    import math

    from memprof.output.plot import _spread_log_limits

    axes = Limits()
    _spread_log_limits(axes, [1.3, 2.0])  # 1.0 to 2.6: about 1.6125, a factor 3
    middle = math.sqrt(2.6)
    assert axes.ylim == pytest.approx((middle / math.sqrt(3), middle * math.sqrt(3)))
    _spread_log_limits(axes, [1.3, 3 / 1.3 * (1 - 1e-9)])  # just under 3: spread
    assert axes.ylim[1] / axes.ylim[0] == pytest.approx(3.0) and axes.ylim[0] < 1.0


def test_a_picture_is_one_of_its_formats_by_its_name_in_any_case():
    from pathlib import Path

    from memprof.errors import InvalidArgument
    from memprof.output.plot import format_of

    assert [format_of(Path(f"a.{s}")) for s in ("svg", "PNG", "Pdf", "html")] == [
        "svg", "png", "pdf", "html"
    ]  # fmt: skip
    with pytest.raises(InvalidArgument) as refused:
        format_of(Path("out.txt"), "-o")
    assert (
        str(refused.value)
        == "-o out.txt: a picture is one of .svg, .png, .pdf, .html; name the file so"
    )
    with pytest.raises(InvalidArgument) as refused:
        format_of(Path("out.txt"))
    assert str(refused.value).startswith("out.txt: a picture is one of")


# -- zerocopy's array size, managed's link: each where the fixtures never go --------------------


def figure_of(nbytes: int, arrays) -> SimpleNamespace:
    measure = None if arrays == "no measure" else SimpleNamespace(arrays=arrays)
    return SimpleNamespace(measure=measure, measurement=SimpleNamespace(bytes=nbytes))


@pytest.mark.parametrize(
    ("nbytes", "arrays", "size"),
    [
        (12, 3, 4),  # three arrays of 4 bytes
        (10, 3, 3),  # whole bytes, as the tables' Size
        (12, 1, 12),
        (12, 0, 12),  # no count of arrays: its bytes
        (12, None, 12),
        (12, (2, 3), 12),  # one of several counts: its bytes
        (12, "rows", 12),
        (12, "no measure", 12),
    ],
)
def test_an_array_is_its_bytes_over_the_arrays_its_measure_declares_else_its_bytes(
    nbytes, arrays, size
):
    from memprof.experiments.pictures import _array_bytes

    found = _array_bytes(figure_of(nbytes, arrays))
    assert found == size and isinstance(found, int)


def test_managed_without_a_known_link_draws_its_bars_without_one(monkeypatch):
    import memprof.experiments.pictures as pictures

    result, summary, _ = pictured("h200_managed")
    monkeypatch.setattr(pictures, "pcie_ceiling", lambda result: None)
    panels = pictures.managed_panels(result, summary)
    bars = [panel for panel in panels if isinstance(panel, Bars)]
    assert bars and all(panel.reference is None for panel in bars)


def test_managed_without_bars_to_draw_draws_its_tables_as_words(monkeypatch):
    import memprof.experiments.pictures as pictures

    result, summary, _ = pictured("h200_managed")
    monkeypatch.setattr(pictures, "table_panels", lambda summary, tables, by_column=False: [])
    panels = pictures.managed_panels(result, summary)
    assert [panel.title for panel in panels] == [table.title for table in summary.tables]
    assert all(isinstance(panel, Words) for panel in panels)


def test_runs_bars_of_one_label_pair_up_by_their_place_among_that_labels_bars():
    from memprof.experiments.pictures import _grouped_bars
    from memprof.output.plot import Bar

    def run(*values: float) -> Bars:
        return Bars("t", "GB/s", [Bar(label, v) for label, v in zip("aba", values, strict=True)])

    bars = _grouped_bars([(0, run(1.0, 2.0, 3.0)), (1, run(4.0, 5.0, 6.0))]).bars
    assert [(bar.label, bar.run, bar.value) for bar in bars] == [
        ("a", 0, 1.0), ("a", 1, 4.0), ("b", 0, 2.0), ("b", 1, 5.0), ("a", 0, 3.0), ("a", 1, 6.0)
    ]  # fmt: skip


def test_streams_without_a_span_draws_its_modes_on_no_common_axis():
    from memprof.experiments.pictures import streams_panels
    from memprof.experiments.streams import MODES

    timelines = SimpleNamespace(**{mode: [] for mode in MODES})
    result = SimpleNamespace(
        parameters=SimpleNamespace(streams=2),
        extra=SimpleNamespace(timelines=timelines, timeline_source="events"),
    )
    panels = streams_panels(result, None)
    assert len(panels) == len(MODES)
    assert all(panel.spans == [] and panel.until_ms is None for panel in panels)


def test_runs_bars_carry_their_noise_and_the_first_runs_panel_and_a_reference_all_share():
    from memprof.experiments.pictures import _grouped_bars
    from memprof.model.statistics import noise_band
    from memprof.output.plot import Bar, Reference

    _, summary, _ = pictured("h200_managed")
    source = next(f.measurement for f in summary.figures if f.gb_per_s)
    noise = noise_band(source.throughput_ms or source.samples_ms)
    assert noise > 0

    def run(title: str, reference: Reference | None) -> Bars:
        bars = [Bar("a", 10.0, source=source), Bar("b", 20.0)]
        return Bars(title, "GB/s", bars, reference=reference)

    link = Reference(63.0, "link")
    grouped = _grouped_bars([(0, run("first", link)), (1, run("second", Reference(63.0, "link")))])
    assert grouped.title == "first" and grouped.reference == link
    assert [bar.spread for bar in grouped.bars] == [
        (10.0 * (1 - noise), 10.0 * (1 + noise)), (10.0 * (1 - noise), 10.0 * (1 + noise)),
        None, None,
    ]  # fmt: skip
    apart = _grouped_bars([(0, run("first", link)), (1, run("second", Reference(64.0, "x")))])
    assert apart.reference is None  # the runs' links differ: none drawn as all theirs
    assert _grouped_bars([(0, run("first", None)), (1, run("second", None))]).reference is None


# -- a trace's time line: its bins' widths and its share axis at the quiet end ------------------


def test_each_bin_is_its_width_and_the_last_only_what_is_left_of_the_run():
    from memprof.output.plot import Stacked

    parts = {"busy": "busy", "idle": "idle"}
    panel = Stacked("t", 2.0, 5.0, parts, [[1.0, 1.0], [1.0, 1.0], [0.5, 0.5]])
    assert [panel.width_ms(index) for index in range(3)] == [2.0, 2.0, 1.0]  # 5 - 2 * 2
    assert Stacked("t", 0.5, 1.25, parts, []).width_ms(2) == 0.25  # 1.25 - 2 * 0.5


@pytest.mark.parametrize(
    ("shares", "ticks"),
    [
        ([], [0.0, 0.00025, 0.0005, 0.00075, 0.001]),  # no bin: as an idle GPU's
        ([[0.0, 0.0, 0.0, 100.0]], [0.0, 0.00025, 0.0005, 0.00075, 0.001]),  # idle: 0.001% up
        ([[0.0008, 0.0, 0.0, 99.9992]], [0.0, 0.00025, 0.0005, 0.00075, 0.001]),  # 1.25x = floor
        ([[0.1, 0.0, 0.0, 99.9]], [0.0, 0.04, 0.08, 0.12, 0.16]),  # 0.1% busy: up to 0.16%
    ],
)
def test_a_quiet_gpus_share_axis_runs_a_quarter_above_its_busiest_bin_from_0_001(shares, ticks):
    """A GPU busy a hair of its time still shows: the axis runs a quarter above its busiest
    bin, never under 0.001% (an idle GPU's, or a trace of no bins, has that axis)."""
    from memprof.output.plot import stacked_scale

    found, cut = stacked_scale(shares)
    assert found == pytest.approx(ticks) and cut == pytest.approx(ticks[-1])


@pytest.mark.parametrize(
    ("decades", "across_inches", "subs"),
    [
        (4.0, 4 * (0.5 / 0.47), (1.0, 3.0)),  # exactly 0.47 of a decade per label: 1 and 3
        (4.0, 4 * (0.5 / 0.47) * (1 - 1e-9), (1.0,)),  # a hair less: 1 only
        (0.5, 0.9, (1.0, 2.0, 5.0)),  # under a decade: 1.8 inches a decade, room for three
        (0.0, 0.001, (1.0, 2.0, 5.0)),  # one value: no decade to crowd
    ],
)
def test_a_log_axis_under_a_decade_or_at_its_edge_has_the_ticks_its_inches_allow(
    decades, across_inches, subs
):
    from memprof.output.plot import _log_subs

    assert _log_subs(decades, across_inches) == subs


@pytest.mark.parametrize(
    ("values", "labels"),
    [
        ([1.0, 1.6], ["0", "0.25", "0.5", "0.75", "1", "1.25", "1.5", "1.75", "2"]),
        ([3.0, 15.0], ["0", "2.5", "5", "7.5", "10", "12.5", "15", "17.5"]),
        ([10.0, 60.0], ["0", "10", "20", "30", "40", "50", "60", "70"]),
        ([100.0, 400.0], ["0", "100", "200", "300", "400", "500"]),
    ],
)
def test_a_gb_per_s_axis_labels_each_tick_with_its_own_value(values, labels):
    """A tick at 2.5 GB/s reads 2.5, not 2 (nor 7.5 as 8): a value read off the axis is the
    value the bar stands for (a fixture-wide read-back trusts these labels)."""
    from memprof.output.plot import Bar

    bars = [Bar(f"v{index}", value) for index, value in enumerate(values)]
    axes = Picture("t", [Bars("b", "GB/s", bars)]).figure().axes[0]
    low, high = axes.get_xlim()
    ticks = [t for t in axes.get_xticks() if low <= t <= high]
    assert [axes.xaxis.get_major_formatter()(t, 0) for t in ticks] == labels


@pytest.mark.parametrize(
    ("value", "label"),
    [(1.25, "1.25"), (1.5, "1.5"), (2.5, "2.5"), (17.5, "17.5"), (99.5, "99.5"), (100.0, "100")],
)
def test_a_gb_per_s_tick_from_1_keeps_its_fraction_below_100(value, label):
    from memprof.output.plot import _tick

    assert _tick(value, "GB/s") == label


# -- bars: which values set the axis, its scale and its limits, and the words under it ------------


def bars_axes(bars, reference=None):
    """A Bars panel's axes, drawn: its scale, limits and labelled ticks, and the words under it."""
    from memprof.output.plot import Bars

    axes = Picture("t", [Bars("title", "GB/s", bars, reference=reference)]).figure().axes[0]
    low, high = axes.get_xlim()
    ticks = [float(t) for t in axes.get_xticks() if low <= t <= high]
    words = [t.get_text() for t in axes.texts if t.get_text().startswith("GB/s")]
    return axes.get_xscale(), (low, high), ticks, words


def test_bars_axis_runs_from_0_to_1_3_times_the_highest_value_mark_whisker_or_reference():
    from memprof.output.plot import Bar, Reference

    assert bars_axes([Bar("a", 0.0), Bar("b", 5.0), Bar("c", 10.0)])[:2] == ("linear", (0, 13.0))
    assert bars_axes([Bar("a", 0.2), Bar("b", 0.5)])[1] == pytest.approx((0, 0.65))  # under 1
    assert bars_axes([Bar("a", 10.0, expected=30.0)])[1] == pytest.approx((0, 39.0))
    assert bars_axes([Bar("a", 10.0, ceiling=30.0)])[1] == pytest.approx((0, 39.0))
    assert bars_axes([Bar("a", 10.0, spread=(0.0, 12.0))])[1] == pytest.approx((0, 15.6))
    assert bars_axes([Bar("a", 0.5, spread=(0.45, 0.65))])[1] == pytest.approx((0, 0.845))
    assert bars_axes([Bar("a", 10.0)], Reference(12.0, "link"))[1] == pytest.approx((0, 15.6))


def test_bars_a_reference_20_times_the_lowest_bar_turns_them_to_dots_from_half_the_lowest():
    """The reference counts in the span: bars of 1 and 2 GB/s under a 63 GB/s link are dots on a
    log axis from 0.5 (half the lowest) to 4 times the highest, 252."""
    from memprof.output.plot import Bar, Reference

    scale, limits, _, words = bars_axes([Bar("a", 1.0), Bar("b", 2.0)], Reference(63.0, "PCIe"))
    assert (scale, limits) == ("log", pytest.approx((0.5, 252.0)))
    assert words == ["GB/s;  dashed: PCIe, 63.0 GB/s"]
    assert bars_axes([Bar("a", 1.0), Bar("b", 2.0)], Reference(19.9, "x"))[0] == "linear"


@pytest.mark.parametrize(
    ("highest", "ticks"),
    [
        (250.0, [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]),  # 1 to 1000: 3 decades, 1 2 5
        (252.0, [1, 3, 10, 30, 100, 300, 1000]),  # a hair over 3 decades: 1 and 3
    ],
)
def test_bars_as_dots_tick_each_decade_by_the_decades_their_limits_span(highest, ticks):
    from memprof.output.plot import Bar

    scale, limits, found, _ = bars_axes([Bar("a", 2.0), Bar("b", highest)])
    assert (scale, limits) == ("log", pytest.approx((1.0, 4 * highest)))
    assert found == pytest.approx(ticks)


def test_bars_as_dots_beside_long_labels_tick_each_decade_by_the_inches_left():
    """Labels of 48 characters leave 3.45 inches for 2.2 decades: 1 and 3, not 1, 2 and 5."""
    from memprof.output.plot import Bar

    bars = [Bar("x" * 48 + "a", 1.0), Bar("x" * 48 + "b", 20.0)]
    assert bars_axes(bars)[:3] == ("log", pytest.approx((0.5, 80.0)), pytest.approx([1, 3, 10, 30]))


def test_bars_write_each_value_as_the_table_prints_it_and_the_reference_where_it_is():
    from memprof.output.plot import Bar, Bars, Reference

    bars = [Bar("a", 0.5, expected=1.0, verdict="PASS"), Bar("b", 0.75, expected=1.0)]
    panel = Bars("b", "GPU time", bars, unit="ms", reference=Reference(0.9, "x"))
    axes = Picture("t", [panel]).figure().axes[0]
    values = [t.get_text() for t in axes.texts if "value" in (t.get_gid() or "")]
    assert values == [f"PASS {format_ms(0.5)}", format_ms(0.75)] == ["PASS 500.00us", "750.00us"]
    assert [t.get_text() for t in axes.texts][-1] == (
        f"GPU time;  | = the least expected, {format_ms(1.0)};  dashed: x, 900.00us"
    )
    (reference,) = [line for line in axes.lines if line.get_gid() == "p0-reference"]
    assert list(reference.get_xdata()) == [0.9, 0.9]


def test_bars_say_a_mark_shared_by_every_bar_with_its_value_and_marks_that_differ_without():
    from memprof.output.plot import Bar

    one = [Bar("a", 10.0, expected=30.0), Bar("b", 12.0, expected=30.0, ceiling=50.0)]
    assert bars_axes(one)[3] == [
        "GB/s;  | = the least expected, 30.0 GB/s;  | = its ceiling, 50.0 GB/s"
    ]
    two = [Bar("a", 10.0, expected=30.0, ceiling=40.0), Bar("b", 12.0, expected=20.0, ceiling=50.0)]
    assert bars_axes(two)[3] == ["GB/s;  | = the least expected;  | = its ceiling"]
    assert bars_axes([Bar("a", 10.0)])[3] == ["GB/s"]


# -- a time line's spans and a heat map's cells, as drawn ------------------------------------------


@pytest.mark.parametrize(("until_ms", "right"), [(None, 3.06), (10.0, 10.2)])
def test_a_time_line_draws_each_span_where_it_ran_on_its_lane_to_its_own_end_or_the_common(
    until_ms, right
):
    """Each span from its start for its length on its lane (the first on top), coloured by
    its kind (one the legend does not name: grey); the axis to the last end, or the common
    end of the time lines compared, and a fiftieth more."""
    from matplotlib.colors import to_hex

    from memprof.output.plot import Span, Timeline

    spans = [Span(0, 0.0, 1.0, "h2d"), Span(1, 0.5, 2.0, "kernel"), Span(1, 2.0, 3.0, "other")]
    kinds = {"h2d": "copy in", "kernel": "kernel"}
    panel = Timeline("t", ["stream 0", "stream 1"], spans, kinds, until_ms)
    axes = Picture("t", [panel]).figure().axes[0]
    assert axes.get_xlim() == pytest.approx((0, right))
    assert axes.get_ylim() == (1.5, -0.5)
    assert [label.get_text() for label in axes.get_yticklabels()] == ["stream 0", "stream 1"]
    drawn = [
        v for p in axes.patches for v in (p.get_x(), p.get_width(), p.get_y() + p.get_height() / 2)
    ]
    assert drawn == pytest.approx([0.0, 1.0, 0.0, 0.5, 1.5, 1.0, 2.0, 1.0, 1.0])
    fills = [to_hex(p.get_facecolor()) for p in axes.patches]
    assert fills[2] == "#808080" and len({*fills}) == 3
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["copy in", "kernel"]
    empty = Picture("t", [Timeline("t", ["stream 0"], [], kinds)]).figure().axes[0]
    assert empty.get_xlim() == pytest.approx((0, 1.02))  # nothing ran: 1 ms


def test_a_heat_maps_cells_are_the_tables_figures_on_0_to_its_scale_dark_text_from_0_6_of_it():
    from memprof.output.plot import HeatMap

    edge = 0.6 * 500.0
    above = math.nextafter(edge, math.inf)
    values = [[None, edge], [above, 100.0]]  # the colours from 0, not from the lowest
    names = ["GPU 0", "GPU 1"]
    panel = HeatMap("h", "from", "to", names, ["GPU 2", "GPU 3"], values, 500.0, "0 to 500")
    axes = Picture("t", [panel]).figure().axes[0]
    (image,) = axes.images
    assert image.get_clim() == (0.0, 500.0)
    grid = image.get_array().filled(math.nan).tolist()
    assert [[None if math.isnan(v) else v for v in row] for row in grid] == values
    assert [label.get_text() for label in axes.get_xticklabels()] == ["GPU 2", "GPU 3"]
    (scale,) = axes.child_axes  # the colour bar
    said = [t.get_text() for t in scale.texts]
    assert said == ["colour: 0 to 500"]
    cells = [(t.get_text(), t.get_color()) for t in axes.texts if "cell" in (t.get_gid() or "")]
    assert cells == [("-", "0.3"), ("300", "white"), ("300", "black"), ("100", "white")]
    at = [t.get_position() for t in axes.texts if "cell" in (t.get_gid() or "")]
    assert at == [(0, 0), (1, 0), (0, 1), (1, 1)]  # each figure in its column and row
    assert [label.get_text() for label in axes.get_yticklabels()] == ["GPU 0", "GPU 1"]
