"""A value written beside its bar never covers a mark of its row (what the bar should reach,
what bounds it, a panel's dashed bound) and never strays from its bar: read back from each
drawn picture's own boxes, as a PNG lays them out (issue 36: "55.5 G|B/s")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

from memprof.experiments import load, summarize
from memprof.experiments.pictures import overlay, run_labels
from memprof.output.plot import DPI, VALUE_GAP_POINTS, Bar, Bars, Picture, Reference
from tests.conftest import FIXTURES
from tests.test_plot import pictured

POINT = DPI / 72  # pixels in a point, as a PNG is drawn


@dataclass
class Row:
    """One bar's row as drawn, in pixels: where its bar (dot, whisker) ends, where its value
    would begin beside it, its value's text and box (its white background), and its marks'
    strokes (x0, x1, y0, y1 each)."""

    name: str
    end: float
    beside: float
    text: tuple[float, float, float, float]
    box: tuple[float, float, float, float]
    marks: list[tuple[float, float, float, float]]

    def near(self, x0: float, gap: float) -> list[tuple[float, float, float, float]]:
        """The marks within `gap` of the value's text, were it begun at x0."""
        x1 = x0 + self.text[1] - self.text[0]
        return [
            m for m in self.marks
            if m[0] - gap < x1 and x0 < m[1] + gap and overlap(self.text, m, 2)
        ]  # fmt: skip


def overlap(a: tuple[float, ...], b: tuple[float, ...], axis: int) -> bool:
    return min(a[axis + 1], b[axis + 1]) > max(a[axis], b[axis])


def stroke(line, x: float, y0: float, y1: float) -> tuple[float, float, float, float]:
    """A mark's stroke: matplotlib's extent of a "|" marker is its size across, its stroke
    only its edge's width."""
    half = line.get_markeredgewidth() / 2 * POINT
    return (x - half, x + half, y0, y1)


def rows_of(shown: Picture) -> list[Row]:
    """Each bar's row in every Bars panel of a picture, laid out as its PNG is."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from memprof.output.plot import _fixed_settings

    if not any(isinstance(panel, Bars) for panel in shown.panels):
        return []
    figure = shown.figure()
    figure.set_dpi(DPI)
    canvas = FigureCanvasAgg(figure)
    rows = []
    with _fixed_settings(matplotlib):
        figure.draw_without_rendering()
        renderer = canvas.get_renderer()
        for index, panel in enumerate(shown.panels):
            if not isinstance(panel, Bars):
                continue
            gid = f"p{index}"
            axes = next(a for a in figure.axes if a.get_gid() == gid)
            values = [t for t in axes.texts if (t.get_gid() or "").startswith(f"{gid}-value-")]
            lines = {line.get_gid(): line for line in axes.get_lines()}
            reference = lines.get(f"{gid}-reference")
            log = axes.get_xscale() == "log"
            for y, (bar, text) in enumerate(zip(panel.bars[::-1], values[::-1], strict=True)):
                assert text.get_position()[1] == y  # the rows' order: the first bar on top
                box = text.get_bbox_patch().get_window_extent(renderer)
                inner = text.get_window_extent(renderer)
                marks = []
                for kind in ("expected", "ceiling"):
                    found = [
                        line for name, line in lines.items()
                        if (name or "").startswith(f"{gid}-{kind}-")
                        and line.get_ydata()[0] == y
                    ]  # fmt: skip
                    assert len(found) == bool(getattr(bar, kind)), (bar.label, kind)
                    for line in found:
                        x, _ = axes.transData.transform((line.get_xdata()[0], y))
                        extent = line.get_window_extent(renderer)
                        marks.append(stroke(line, x, extent.y0, extent.y1))
                if reference is not None:
                    x, _ = axes.transData.transform((reference.get_xdata()[0], y))
                    frame = axes.bbox
                    half = reference.get_linewidth() / 2 * POINT
                    marks.append((x - half, x + half, frame.y0, frame.y1))
                after = max([bar.value, *(bar.spread or ())])
                end, _ = axes.transData.transform((max(after, axes.get_xlim()[0]), y))
                rows.append(
                    Row(
                        f"{gid} {bar.shown}", end, end + (5 if log else VALUE_GAP_POINTS) * POINT,
                        (inner.x0, inner.x1, inner.y0, inner.y1), (box.x0, box.x1, box.y0, box.y1),
                        marks,
                    )
                )  # fmt: skip
            frame = axes.bbox
            for row in rows:
                if row.name.startswith(f"{gid} "):
                    assert row.box[1] <= frame.x1, f"past the frame: {row.name}"
    return rows


def faults(shown: Picture) -> list[str]:
    """Every value whose box covers a mark of its row or whose text comes within a gap of one,
    begins left of its bar's end, moved though it came near no mark beside its bar, or moved
    further than just past the marks it did."""
    found, gap = [], VALUE_GAP_POINTS * POINT
    for row in rows_of(shown):
        x0 = row.text[0]
        if any(overlap(row.box, m, 0) and overlap(row.box, m, 2) for m in row.marks):
            found.append(f"on a mark: {row.name}")
        if row.near(x0, gap - 0.5):
            found.append(f"within a gap of a mark: {row.name}")
        if x0 < row.end - 0.5:
            found.append(f"before its bar's end: {row.name}")
        if not row.near(row.beside, gap) and abs(x0 - row.beside) > 0.5:
            found.append(f"moved from its bar: {row.name}")
        passed = max((m[1] for m in row.marks if m[1] <= x0), default=row.end)
        if row.near(row.beside, gap) and x0 - passed > gap + 1:  # the dashed bound: 1 point
            found.append(f"further than just past the marks it came near: {row.name}")
    return found


STEMS = sorted(p.stem for p in FIXTURES.glob("*.json"))


@pytest.mark.parametrize("stem", STEMS)
def test_no_value_covers_a_mark_or_strays_from_its_bar(stem):
    """hostlink's and compare's 55.5 GB/s ran across their bars' ceiling (63.0), whose mark
    poked out above and below the text's white box as "55.5 G|B/s"."""
    assert faults(pictured(stem)[2]) == []


def test_a_value_two_marks_and_a_dashed_bound_touch_passes_each_and_stays_in_the_frame():
    """Marks of one row close together (check's floor under a ceiling), a whisker over a
    run's noise, a panel's dashed bound: the value passes each it touches, on either axis."""
    close_marks = [
        Bar("both marks", 50.0, expected=52.0, ceiling=54.0),
        Bar("a whisker", 40.0, ceiling=47.0, spread=(38.0, 44.0)),
        Bar("past its bound", 70.0, expected=52.0),
        Bar("short", 5.0, expected=52.0),
    ]
    bound = Reference(60.0, "a bound")
    linear = Picture("t", [Bars("linear", "GB/s", close_marks, reference=bound)])
    dots = Picture("t", [Bars("dots", "GB/s", [*close_marks, Bar("tiny", 0.5)], reference=bound)])
    for shown in (linear, dots):
        assert faults(shown) == []
        moved = {row.name for row in rows_of(shown) if row.text[0] > row.beside + 0.5}
        assert moved == {"p0 both marks", "p0 a whisker"}


@pytest.mark.parametrize(
    ("marks", "place"),
    [
        ([16.8], (0.0, 3.0)),  # the text (3 to 13) ends a gap (3) short of its stroke (0.75)
        ([16.7], (16.7, 3.75)),  # within a gap of it: past it, a gap from its stroke
        ([-0.8], (0.0, 3.0)),  # a gap left of the text
        ([-0.7], (-0.7, 3.75)),  # within a gap of its left
        ([14.0, 31.4], (31.4, 3.75)),  # past one (17.75 to 27.75), within a gap of the next
        ([14.0, 31.6], (14.0, 3.75)),  # past one, a gap short of the next
    ],
)
def test_a_value_moves_past_a_mark_only_where_it_would_come_within_a_gap_of_it(marks, place):
    from memprof.output.plot import _value_place

    assert _value_place(0.0, marks, 10.0, lambda x: x, 3.0) == pytest.approx(place)


@pytest.mark.parametrize(
    "stems",
    [
        ("h200_compare", "legacy_v2_compare"),
        ("h200_managed", "legacy_v2_managed"),
        ("fleet/h200x4_check_gpu0", "fleet/h200x4_check_gpu1"),
    ],
    ids="+".join,
)
def test_no_value_of_several_runs_covers_a_mark_or_strays_from_its_bar(stems):
    """Runs' bars carry whiskers over their noise (compare's, managed's), their values written
    past them, and marks (check's floors)."""
    results = [load(FIXTURES / f"{stem}.json") for stem in stems]
    shown = overlay(results, [summarize(r) for r in results], run_labels(results))
    bars = [bar for panel in shown.panels if isinstance(panel, Bars) for bar in panel.bars]
    assert any(bar.spread or bar.expected or bar.ceiling for bar in bars)
    assert faults(shown) == []
