"""A trace's stacked shares and a sweep's curves as drawn, read back from the Figure built from
Panels (no fixture): each value, share, mark, colour and word where it was given, and each
rule on both sides of its edge (issue 37's mutation round on memprof/output/plot.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

from memprof.output.palette import IDLE, KIND_COLOURS, OTHERS
from memprof.output.plot import (
    LEGEND_BELOW_POINTS,
    MARK_POINTS,
    Curves,
    Line,
    Mark,
    Picture,
    Stacked,
)

PARTS = {"compute": "computing", "copy": "copying", "both": "both", "idle": "idle"}


def drawn(panel):
    return Picture("t", [panel]).figure().axes[0]


def shift_points(text, axes) -> tuple[float, float]:
    """How far a text on axes' coordinates is drawn from its place, in points."""
    at = text.get_position()
    moved = text.get_transform().transform(at) - axes.transAxes.transform(at)
    return tuple(round(float(v) * 72 / axes.figure.dpi, 6) for v in moved)


def flat(nested) -> list[float]:
    return [float(v) for one in nested for v in (flat(one) if hasattr(one, "__len__") else [one])]


def texts(axes) -> dict[str, str]:
    return {t.get_text(): t for t in axes.texts}


# -- a trace's stacked shares ------------------------------------------------------------------


def stacked(marks=(), bins=None):
    bins = bins or [[0.2, 0.1, 0.0, 1.7], [0.4, 0.0, 0.1, 1.5], [0.1, 0.1, 0.0, 0.8]]
    return drawn(Stacked("where the time went", 2.0, 5.0, PARTS, bins, list(marks)))


def test_stacked_draws_each_parts_share_of_its_own_bin_on_the_last_and_idle_up_to_the_cut():
    """Each part's share of its bin's own width (the last bin 1 ms of 5 in bins of 2), stacked
    in the parts' order from 0; idle only up to the cut, 32% (a quarter above the busiest
    25%); computing, copying and both in the next colours no kind takes, idle light grey."""
    from matplotlib.colors import to_hex

    axes = stacked()
    rectangles = [(r.get_x(), r.get_width(), r.get_y(), r.get_height()) for r in axes.patches]
    assert flat(rectangles) == pytest.approx(flat([
        (0, 2, 0, 10), (2, 2, 0, 20), (4, 1, 0, 10),  # computing
        (0, 2, 10, 5), (2, 2, 20, 0), (4, 1, 10, 10),  # copying
        (0, 2, 15, 0), (2, 2, 20, 5), (4, 1, 20, 0),  # both
        (0, 2, 15, 17), (2, 2, 25, 7), (4, 1, 20, 12),  # idle, cut at 32
    ]))  # fmt: skip
    fills = [to_hex(r.get_facecolor()) for r in axes.patches[::3]]
    assert fills == [*OTHERS[:3], to_hex(IDLE)]
    assert {r.get_linewidth() for r in axes.patches} == {0}
    assert [r.get_gid() for r in axes.patches[:4]] == [
        "p0-part-compute-0", "p0-part-compute-1", "p0-part-compute-2", "p0-part-copy-0"
    ]  # fmt: skip
    assert axes.get_xlim() == (0, 5)
    assert axes.xaxis.get_major_formatter()(0.5, 0) == "500 us"  # time, in its own unit
    assert list(axes.get_yticks()) == [0, 8, 16, 24, 32]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["0%", "8%", "16%", "24%", "32%"]
    assert axes.get_ylim() == (0, 32)  # no marks: the cut at the top
    assert [t.get_text() for t in axes.get_legend().get_texts()] == list(PARTS.values())
    assert [to_hex(h.get_facecolor()) for h in axes.get_legend().legend_handles] == fills
    legend = axes.get_legend()  # in a row under the axis label, its right end at the axes'
    assert (legend._loc, legend._ncols, legend.borderaxespad, legend.get_frame_on()) == (
        1, 4, 0, False
    )  # fmt: skip
    under = axes.transAxes.transform((1, 0)) - (0, LEGEND_BELOW_POINTS * axes.figure.dpi / 72)
    assert tuple(legend.get_bbox_to_anchor().bounds[:2]) == pytest.approx(tuple(under))
    said = texts(axes)
    below = said["time from the first recorded event, in bins of 2 ms; idle drawn up to 32%"]
    assert shift_points(below, axes) == (0, -19)
    assert shift_points(said["share of each bin"], axes) == (-34, 0)
    assert "where the time went" in said


@pytest.mark.parametrize(
    ("busiest_ms", "cut", "words"),
    [(1.6, 100, ""), (1.2, 80, "; idle drawn up to 80%")],  # 80% busy: 100% is the cut
)
def test_stacked_says_where_idle_is_cut_only_below_100(busiest_ms, cut, words):
    axes = stacked(bins=[[busiest_ms, 0.0, 0.0, 2.0 - busiest_ms]])
    assert axes.get_ylim()[1] == pytest.approx(cut)
    assert axes.patches[-1].get_height() == pytest.approx(cut - 50 * busiest_ms)
    assert f"time from the first recorded event, in bins of 2 ms{words}" in texts(axes)


def test_stacked_numbers_each_mark_above_the_bars_from_its_start_to_its_end_one_row_each():
    """Each mark a row of MARK_POINTS from the top, the first highest, its number just left
    of its start; the value axis grows so the bars stay under the marks' strip."""
    axes = stacked([Mark(1.0, 3.0, 7), Mark(4.0, 4.5, 9)])
    height_points = axes.get_position().height * axes.figure.get_figheight() * 72
    strip_points = 2 * MARK_POINTS + 4
    assert axes.get_ylim()[1] == pytest.approx(32 * height_points / (height_points - strip_points))
    rows = [1 - MARK_POINTS * (row + 0.5) / height_points for row in (0, 1)]
    lines = [(list(line.get_xdata()), list(line.get_ydata())) for line in axes.lines]
    assert flat(lines) == pytest.approx(flat([([1, 3], [rows[0]] * 2), ([4, 4.5], [rows[1]] * 2)]))
    assert [(line.get_marker(), line.get_markersize()) for line in axes.lines] == [("|", 6)] * 2
    assert [(line.get_color(), line.get_linewidth()) for line in axes.lines] == [("black", 1.2)] * 2
    assert [line.get_gid() for line in axes.lines] == ["p0-mark-7", "p0-mark-9"]
    numbers = [t for t in axes.texts if t.get_text() in ("7 ", "9 ")]
    assert flat(t.get_position() for t in numbers) == pytest.approx([1, rows[0], 4, rows[1]])
    assert [(t.get_ha(), t.get_va(), t.get_fontsize()) for t in numbers] == [
        ("right", "center", 7)
    ] * 2  # fmt: skip
    assert [t.get_gid() for t in numbers] == ["p0-mark-number-7", "p0-mark-number-9"]
    for artist in [*axes.lines, *numbers]:  # along time, up the axes from its bottom
        screen = artist.get_transform().transform((4, rows[1]))
        wanted = (axes.transData.transform((4, 0))[0], axes.transAxes.transform((0, rows[1]))[1])
        assert tuple(screen) == pytest.approx(wanted)
    one = stacked([Mark(1.0, 3.0, 7)])
    height_points = one.get_position().height * one.figure.get_figheight() * 72
    assert one.get_ylim()[1] == pytest.approx(32 * height_points / (height_points - 14))


# -- a sweep's curves: lines, bounds, bands, legend and axes -------------------------------------


def curves(lines, linear=False):
    return drawn(Curves("sweep", "size", "GB/s", lines, linear=linear))


def line_data(axes) -> list[tuple]:
    return [
        (line.get_gid(), line.get_label(), list(line.get_xdata()), list(line.get_ydata()))
        for line in axes.lines
    ]


def test_curves_draw_each_point_above_0_on_log_axes_and_each_bound_dashed_grey_in_turn():
    """Points at size 0 or figure 0 are left out (a log axis has no 0) with their band; each
    series and its band in its kind's colour (not matplotlib's first), a bound grey, dashed,
    dotted, dash-dotted, thin, unmarked."""
    from matplotlib.colors import to_hex

    band = [(0, 0), (1, 1), (8, 12), (30, 50)]
    managed = [(0, 5.0), (1024, 0.0), (4096, 10.0), (65536, 40.0)]
    lines = [
        Line("managed", managed, band=band, kind="managed"),
        Line("link", [(1024, 50.0), (65536, 50.0)], ceiling=True),
        Line("staging", [(1, 25.0), (65536, 25.0)], ceiling=True),
        Line("mine", [(1, 0.5), (65536, 30.0)]),  # below 1: drawn
        Line("hbm", [(1, 60.0), (65536, 60.0)], ceiling=True),
    ]
    axes = curves(lines)
    assert (axes.get_xscale(), axes.xaxis.get_transform().base) == ("log", 2)
    assert (axes.get_yscale(), axes.yaxis.get_transform().base) == ("log", 10)
    assert line_data(axes) == [
        ("p0-line-managed", "managed", [4096, 65536], [10, 40]),
        ("p0-ceiling-link", "link", [1024, 65536], [50, 50]),
        ("p0-ceiling-staging", "staging", [1, 65536], [25, 25]),
        ("p0-line-mine", "mine", [1, 65536], [0.5, 30]),
        ("p0-ceiling-hbm", "hbm", [1, 65536], [60, 60]),
    ]
    styles = [(line.get_linestyle(), line.get_color(), line.get_linewidth()) for line in axes.lines]
    assert styles == [
        ("-", KIND_COLOURS["managed"], 1.3), ("--", "0.4", 1), (":", "0.4", 1),
        ("-", OTHERS[0], 1.3), ("-.", "0.4", 1),
    ]  # fmt: skip
    markers = [(line.get_marker(), line.get_markersize()) for line in axes.lines]
    assert [markers[0], markers[3]] == [("o", 3)] * 2
    assert markers[1][0] in (None, "None", "")
    (filled,) = axes.collections
    (path,) = filled.get_paths()
    corners = {tuple(float(v) for v in corner) for corner in path.vertices}
    assert corners == {(4096, 8), (4096, 12), (65536, 30), (65536, 50)}
    assert (filled.get_alpha(), filled.get_gid()) == (0.18, "p0-band-managed")
    assert (to_hex(filled.get_facecolor()[0]), filled.get_linewidth()) == (
        KIND_COLOURS["managed"], 0
    )  # fmt: skip
    assert [t.get_text() for t in axes.get_legend().get_texts()] == [
        "managed", "link", "staging", "mine", "hbm"
    ]  # fmt: skip
    said = texts(axes)
    assert shift_points(said["size"], axes) == (0, -19)
    assert shift_points(said["GB/s"], axes) == (-42, 0)
    ticks = (axes.xaxis.get_major_formatter(), axes.yaxis.get_major_formatter())
    assert (ticks[0](4096, 0), ticks[1](2.5, 0), ticks[1](1500, 0)) == ("4 KiB", "2.5", "1,500")
    gridline = axes.yaxis.get_gridlines()[0]
    assert (gridline.get_visible(), gridline.get_color(), gridline.get_linewidth()) == (
        True, "0.9", 0.6
    )  # fmt: skip
    assert list(axes.xaxis.get_minor_locator().tick_values(1, 1 << 20)) == []


def test_curves_of_runs_dash_each_run_and_name_each_series_once_in_its_colour_and_marker():
    """Run 1 dashed, 2 solid, 3 dotted; one legend entry per series (kind and label), not
    per run, drawn solid; a bound one run draws named with its run."""
    from matplotlib.colors import to_hex

    points = [(1024, 1.0), (4096, 2.0)]
    lines = [
        Line("pinned", points, kind="pinned", run=0),
        Line("pinned", points, kind="pinned", run=1),
        Line("pinned", points, kind="pinned", run=2),
        Line("pinned", points, kind=None, run=0),  # the same label, no kind: its own series
        Line("link", points, ceiling=True, run=0),
    ]
    axes = curves(lines)
    assert [line.get_linestyle() for line in axes.lines[:4]] == ["--", "-", ":", "--"]
    colours = [line.get_color() for line in axes.lines[:4]]
    assert colours == [KIND_COLOURS["pinned"]] * 3 + [OTHERS[0]]
    legend = axes.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["pinned", "pinned", "link [1]"]
    handles = legend.legend_handles
    assert [to_hex(h.get_color()) for h in handles] == [
        KIND_COLOURS["pinned"], OTHERS[0], to_hex("0.4")
    ]  # fmt: skip
    assert [h.get_linestyle() for h in handles] == ["-", "-", "--"]
    assert [(h.get_marker(), h.get_markersize(), h.get_linewidth()) for h in handles[:2]] == [
        ("o", 3, 1.3)
    ] * 2  # fmt: skip
    assert (legend._loc, legend.get_frame_on()) == (2, False)  # upper left, right of the axes
    assert tuple(legend.get_bbox_to_anchor().bounds[:2]) == pytest.approx(
        tuple(axes.transAxes.transform((1.01, 1)))
    )


def test_curves_take_the_next_marker_for_each_ten_series_and_start_again_after_forty():
    points = [(1024, 1.0), (4096, 2.0)]
    axes = curves([Line(f"way {i}", points) for i in range(41)])
    markers = [line.get_marker() for line in axes.lines]
    assert markers == ["o"] * 10 + ["s"] * 10 + ["^"] * 10 + ["D"] * 10 + ["o"]
    assert [line.get_color() for line in axes.lines[9:12]] == [OTHERS[9], OTHERS[0], OTHERS[1]]


def test_curves_without_lines_have_no_legend_and_on_linear_axes_no_log_scale():
    assert curves([]).get_legend() is None
    axes = drawn(
        Curves("climb", "pinned", "ms per GiB", [Line("way", [(1 << 30, 2.0)])], "ms", True)
    )
    assert (axes.get_xscale(), axes.get_yscale()) == ("linear", "linear")
    assert axes.get_ylim() == pytest.approx((0, 2.3))  # from 0, a seventh above the top
    assert axes.yaxis.get_major_formatter()(0.5, 0) == "500 us"  # the panel's own unit


@pytest.mark.parametrize(("largest", "base"), [(1 << 15, 4), ((1 << 15) + 2, 16)])  # from 2
def test_a_log_size_axis_ticks_every_4x_over_14_doublings_or_fewer_else_every_16x(largest, base):
    axes = curves([Line("way", [(2, 1.5), (largest, 2.0)]), Line("zero", [(0, 1.0), (4, 0.0)])])
    assert axes.xaxis.get_major_locator()._base == base
    assert list(axes.yaxis.get_major_locator()._subs) == [1, 2, 5]
    assert axes.yaxis.get_major_locator()._base == 10
    assert list(axes.yaxis.get_minor_locator().tick_values(1, 1000)) == []
    # from the least figure above 0 (at any size) to the most, 1.3x beyond each
    assert axes.get_ylim() == pytest.approx((1 / 1.3, 2.6))


# -- a picture's layout, in inches -------------------------------------------------------------


def test_a_picture_lays_its_panels_out_top_to_bottom_in_inches_left_where_its_labels_end():
    """Bars, a heat map (and curves, time lines) start where the longest row label ends, 1.35
    inches for 16 letters; a stacked panel at its own 0.8, words at the 0.3 edge; each its
    title's 0.3 above, its room below; a heat map's cells keep 0.95 inches each."""
    from memprof.output.plot import Bar, Bars, HeatMap, Words

    bars = Bars("bars", "GB/s", [Bar("a" * 16, 1.0), Bar("b", 2.0)])
    shares = Stacked("shares", 1.0, 1.0, PARTS, [[0.1, 0.1, 0.1, 0.7]])
    words = Words("words", ["one", "two"])
    heat = HeatMap("heat", "from", "to", ["GPU 0", "GPU 1"], ["GPU 0", "GPU 1"], [[1, 2]] * 2, 2)
    title = "x" * 101
    figure = Picture(title, [bars, shares, words, heat]).figure()
    width, height = figure.get_figwidth(), figure.get_figheight()
    below_stacked = 0.5 + 32 / 72 - 0.15
    assert (width, height) == pytest.approx((7.5, 0.4 + 1.39 + 2.1 + below_stacked + 0.74 + 1.6))
    boxes = [
        (a.get_position().x0 * width, a.get_position().y0 * height, a.get_position().width * width)
        for a in figure.axes[:4]
    ]
    top = height - 0.4 - 0.3  # the picture's title, the first panel's
    bottoms = [top - 0.59, top - 1.09 - 0.3 - 1.8]
    bottoms.append(bottoms[1] - below_stacked - 0.3 - 0.34)
    bottoms.append(bottoms[2] - 0.1 - 0.3 - 0.7)  # 0.6: its room below and 0.1 under it
    assert flat(boxes) == pytest.approx(
        flat(zip([1.35, 0.8, 0.3, 1.35], bottoms, [5.85, 6.4, 6.9, 1.9], strict=True))
    )
    heights = [a.get_position().height * height for a in figure.axes[:4]]
    assert heights == pytest.approx([0.59, 1.8, 0.34, 0.7])
    assert [a.get_gid() for a in figure.axes[:4]] == ["p0", "p1", "p2", "p3"]
    said = figure._suptitle
    assert (said.get_text(), said.get_position()[1]) == ("x" * 99 + "…", 1 - 0.12 / height)
    assert (said.get_fontsize(), said.get_va()) == (10, "top")


def test_curves_draw_and_name_a_series_whose_label_begins_with_an_underscore():
    """A label from a saved result is drawn literally, "_Z3fooPv" too (matplotlib hides
    labels from "_" only where it picks a legend's entries itself)."""
    points = [(1024, 1.0), (4096, 2.0)]
    lines = [Line("_Z3fooPv", points), Line("b", points), Line("_Z3fooPv", points, run=0)]
    axes = curves(lines)
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["_Z3fooPv", "b", "_Z3fooPv"]


def test_a_curves_panel_leaves_room_at_its_right_for_its_legends_longest_name():
    """0.55 inches and 0.075 a letter of "way 10" right of the axes, 0.8 left of them."""
    lines = [Line("way", [(1024, 1.0)]), Line("way 10", [(1024, 2.0)])]
    axes = curves(lines)
    width = axes.figure.get_figwidth()
    box = axes.get_position()
    assert (box.x0 * width, box.width * width) == pytest.approx((0.8, 7.5 - 0.8 - 0.55 - 0.45))


def test_a_heat_map_of_one_column_is_one_cell_wide():
    from memprof.output.plot import HeatMap

    axes = drawn(HeatMap("heat", "from", "to", ["GPU 0"], ["GPU 1"], [[1.0]], 2.0))
    assert axes.get_position().width * axes.figure.get_figwidth() == pytest.approx(0.95)
