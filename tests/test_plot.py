"""memprof plot's pictures, read back from the SVG as a reader would read them.

Every fixture is drawn once; its SVG is parsed (text stays text, every series, bar, cell and
span carries an id) and each panel is checked: its labels, its number of series, and values
read off the picture through its own tick labels, against the figures and tables they came
from, not against the picture's own description only.
"""

from __future__ import annotations

import functools
import math
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

from memprof.experiments import load, summarize
from memprof.experiments.pictures import picture
from memprof.model.ceilings import pcie_ceiling
from memprof.model.formatting import format_gb_per_s, format_ms
from memprof.model.results import Result
from memprof.model.summary import Summary
from memprof.output.export import csv_rows
from memprof.output.plot import Bars, Curves, HeatMap, Picture, Stacked, Timeline, Words
from tests.conftest import FIXTURES, as_printed, render_text, replace

ROOT = Path(__file__).resolve().parent.parent

FIXTURE_PATHS = sorted(FIXTURES.glob("*.json"))
SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class Drawn:
    result: Result
    summary: Summary
    picture: Picture
    svg: str
    ids: dict[str, ElementTree.Element]


def draw(result: Result) -> Drawn:
    summary = summarize(result)
    return _saved(result, summary, picture(result, summary))


def _saved(result: Result, summary: Summary, shown: Picture) -> Drawn:
    svg = shown.svg()
    tree = ElementTree.fromstring(svg)
    return Drawn(result, summary, shown, svg, {e.get("id"): e for e in tree.iter() if e.get("id")})


@functools.cache
def pictured(stem: str) -> tuple[Result, Summary, Picture]:
    """A fixture's picture, its Figure drawn when first asked for but not saved: a test of the
    Figure alone (test_plot_style's text_faults) does without the SVG, half the time."""
    result = load(FIXTURES / f"{stem}.json")
    summary = summarize(result)
    return result, summary, picture(result, summary)


@functools.cache
def drawn(stem: str) -> Drawn:
    return _saved(*pictured(stem))


# -- reading a picture -------------------------------------------------------------------------


def texts(element: ElementTree.Element) -> list[str]:
    return ["".join(t.itertext()).strip() for t in element.iter(f"{SVG}text")]


def with_prefix(ids: dict, prefix: str) -> list[ElementTree.Element]:
    """The elements whose id starts with `prefix`, in drawing order."""
    return [element for gid, element in ids.items() if gid.startswith(prefix)]


UNITS_MS = {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}
UNITS_BYTES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def tick_value(label: str) -> float:
    """A tick label as a number: '4 KiB' -> 4096 bytes, '10 us' -> 0.01 ms, '1,000' -> 1000,
    '40%' -> 40."""
    number, _, unit = label.replace(",", "").removesuffix("%").partition(" ")
    if unit in UNITS_MS:
        return float(number) * UNITS_MS[unit]
    if unit in UNITS_BYTES:
        return float(number) * UNITS_BYTES[unit]
    assert not unit, label
    return float(number)


def scale(axes: ElementTree.Element, which: str):
    """The axis `which` ('x' or 'y') of a panel: an SVG coordinate -> the value it stands for,
    read from the labelled ticks (log or linear, as their spacing says)."""
    ticks = []
    for group in axes.iter(f"{SVG}g"):
        if not group.get("id", "").startswith(f"{which}tick_"):
            continue
        label = " ".join(texts(group)).strip()
        if label:
            use = next(group.iter(f"{SVG}use"))
            ticks.append((float(use.get(which)), tick_value(label)))
    assert len(ticks) >= 2, f"fewer than two labelled {which} ticks"
    ticks.sort()
    (c1, v1), (c2, v2) = ticks[0], ticks[-1]
    linear = any(v == 0 for _, v in ticks) or (len(ticks) >= 3 and _evenly_spaced(ticks))
    if linear:
        return lambda c: v1 + (c - c1) * (v2 - v1) / (c2 - c1)
    return lambda c: v1 * (v2 / v1) ** ((c - c1) / (c2 - c1))


def tick_positions(axes: ElementTree.Element, which: str) -> dict[str, float]:
    """Each labelled tick's label -> its coordinate."""
    found = {}
    for group in axes.iter(f"{SVG}g"):
        if group.get("id", "").startswith(f"{which}tick_") and texts(group):
            found[" ".join(texts(group))] = float(next(group.iter(f"{SVG}use")).get(which))
    return found


def _evenly_spaced(ticks: list[tuple[float, float]]) -> bool:
    (c1, v1), (c2, v2), (c3, v3) = ticks[:3]
    return math.isclose((v3 - v2) / (v2 - v1), (c3 - c2) / (c2 - c1), rel_tol=1e-3)


def markers(line: ElementTree.Element) -> list[tuple[float, float]]:
    """The (x, y) of each marker of a drawn line: one per point."""
    return [(float(u.get("x")), float(u.get("y"))) for u in line.iter(f"{SVG}use")]


def text_y(element: ElementTree.Element) -> float:
    """Where a text is drawn, vertically (its baseline)."""
    text = next(element.iter(f"{SVG}text"))
    return float(text.get("y"))


def text_x(element: ElementTree.Element) -> float:
    return float(next(element.iter(f"{SVG}text")).get("x"))


def bar_end(element: ElementTree.Element) -> float:
    """Where a bar ends, or where its dot stands (bars drawn as dots on a log axis)."""
    dots = markers(element)
    return dots[0][0] if dots else max(x for x, _ in path_points(element))


def bar_middle(element: ElementTree.Element) -> float:
    dots = markers(element)
    return dots[0][1] if dots else sum(y for _, y in path_points(element)[:4]) / 4


def path_points(element: ElementTree.Element) -> list[tuple[float, float]]:
    d = next(element.iter(f"{SVG}path")).get("d")
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=2e-4)


def csv_of(result: Result, summary: Summary) -> dict[int, dict]:
    """Each measurement's CSV row (the figures the tables show), by the measurement's id."""
    rows = [
        row
        for row in csv_rows(result, summary.figures)
        if row["group"] not in ("line", "copies", "gap")
    ]
    return {id(f.measurement): row for f, row in zip(summary.figures, rows, strict=True)}


# -- every fixture -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: p.stem)
def test_every_fixture_is_drawn_and_reads_back(path: Path):
    d = drawn(path.stem)
    assert f"memprof {d.result.command}:" in " ".join(texts(d.ids["figure_1"]))
    rows = csv_of(d.result, d.summary)
    assert d.picture.panels
    for index, panel in enumerate(d.picture.panels):
        axes, gid = d.ids[f"p{index}"], f"p{index}"
        words = texts(axes)
        assert any(panel.title[:40] in word for word in words), panel.title
        CHECKS[type(panel)](panel, axes, d.ids, gid, words, rows)


def check_curves(panel: Curves, axes, ids, gid, words, rows) -> None:
    assert panel.x_label in words and panel.y_label in words
    measured = [line for line in panel.lines if not line.ceiling]
    ceilings = [line for line in panel.lines if line.ceiling]
    drawn_lines = with_prefix(ids, f"{gid}-line-")
    assert len(drawn_lines) == len(measured) and measured
    assert len(with_prefix(ids, f"{gid}-ceiling-")) == len(ceilings)
    assert {line.in_legend for line in panel.lines} <= set(words)  # the legend names each
    x_of, y_of = scale(axes, "x"), scale(axes, "y")
    for line, element in zip(measured, drawn_lines, strict=True):
        points = markers(element)
        assert len(points) == len(line.points)
        for (x, y), (sx, sy) in zip(line.points, points, strict=True):
            assert close(x_of(sx), x) and close(y_of(sy), y), (line.label, x, y)
        sources = line.sources or [None] * len(line.points)
        for (_, y), source in zip(line.points, sources, strict=True):
            if source is None:
                continue  # a sum of several (smallcopies' gathered way): its own test
            row = rows[id(source)]  # the figure it is: its GB/s, or its median time
            assert y in (row["gb_per_s"], row["median_ms"])


def check_bars(panel: Bars, axes, ids, gid, words, rows) -> None:
    assert any(word.startswith(panel.value_label) for word in words)
    bars = with_prefix(ids, f"{gid}-bar-")
    assert len(bars) == len(panel.bars)
    x_of = scale(axes, "x")
    middles, labels = [], with_prefix(ids, f"{gid}-label-")
    values = with_prefix(ids, f"{gid}-value-")
    whiskers = iter(with_prefix(ids, f"{gid}-spread-"))
    marks = {kind: iter(with_prefix(ids, f"{gid}-{kind}-")) for kind in ("expected", "ceiling")}
    bound = [path_points(ids[f"{gid}-reference"])[0][0]] if f"{gid}-reference" in ids else []
    for bar, element, label, value in zip(panel.bars, bars, labels, values, strict=True):
        assert close(x_of(bar_end(element)), bar.value), bar.label
        middles.append(bar_middle(element))
        assert abs(text_y(label) - middles[-1]) < 4, bar.label  # the label beside its bar
        assert abs(text_y(value) - middles[-1]) < 4, bar.label  # and its value
        end = bar_end(element)  # the value just right of its bar (or whisker), or of a mark
        crossed = [markers(next(marks[k]))[0][0] for k in marks if getattr(bar, k)] + bound
        if bar.spread is not None:
            ends = [x for x, _ in path_points(next(whiskers))]  # the run's noise, both ways
            assert close(x_of(ends[0]), bar.spread[0]) and close(x_of(ends[1]), bar.spread[1])
            end = max(end, *ends)
        assert any(0 < text_x(value) - x < 6 for x in [end, *crossed]), bar.label
        if bar.source is not None:
            row = rows[id(bar.source)]
            assert bar.value in (row["gb_per_s"], row["median_ms"])
    assert next(whiskers, None) is None  # a whisker only where a bar has a spread
    assert middles == sorted(middles)  # the first bar on top, as a table reads
    for kind in ("expected", "ceiling"):
        assert len(with_prefix(ids, f"{gid}-{kind}-")) == sum(
            bool(getattr(bar, kind)) for bar in panel.bars
        )


def check_heat_map(panel: HeatMap, axes, ids, gid, words, rows) -> None:
    assert panel.row_label in words and panel.column_label in words
    for r, row in enumerate(panel.values):
        for c, value in enumerate(row):
            shown = texts(ids[f"{gid}-cell-{r}-{c}"])[0]
            assert shown == ("-" if value is None else format_gb_per_s(value))


def check_timeline(panel: Timeline, axes, ids, gid, words, rows) -> None:
    spans = with_prefix(ids, f"{gid}-span-")
    assert len(spans) == len(panel.spans)
    assert set(panel.kinds.values()) <= set(words) and set(panel.lanes) <= set(words)
    x_of, lanes = scale(axes, "x"), tick_positions(axes, "y")
    for span, element in list(zip(panel.spans, spans, strict=True))[:: max(1, len(spans) // 4)]:
        xs, ys = zip(*path_points(element)[:4], strict=True)
        assert close(x_of(min(xs)) + 1, span.start_ms + 1) and close(x_of(max(xs)), span.end_ms)
        assert abs(sum(ys) / 4 - lanes[panel.lanes[span.lane]]) < 1  # on its stream's row


def check_stacked(panel: Stacked, axes, ids, gid, words, rows) -> None:
    """Each bin's parts read back through the axes' ticks: where the bin lies, and each
    part's share of it, stacked in order (the last part, idle, up to where the bars stop)."""
    from memprof.output.plot import stacked_scale

    assert set(panel.parts.values()) <= set(words)
    assert len(with_prefix(ids, f"{gid}-mark-number-")) == len(panel.marks)
    x_of, y_of = scale(axes, "x"), scale(axes, "y")
    shares = [[100 * ms / panel.width_ms(k) for ms in one] for k, one in enumerate(panel.bins)]
    _, cut = stacked_scale(shares)
    for at, part in enumerate(panel.parts):
        drawn = with_prefix(ids, f"{gid}-part-{part}-")
        assert len(drawn) == len(panel.bins)
        for k, element in enumerate(drawn):
            xs, ys = zip(*path_points(element)[:4], strict=True)
            low, high = sorted((y_of(min(ys)), y_of(max(ys))), key=float)
            below = math.fsum(shares[k][:at])
            assert math.isclose(low, min(below, cut), abs_tol=1e-3 * cut), (part, k)
            expected = min(shares[k][at], max(cut - below, 0))
            assert math.isclose(high - low, expected, abs_tol=1e-3 * cut), (part, k)
            start = k * panel.bin_ms
            assert math.isclose(x_of(min(xs)), start, abs_tol=1e-4 * panel.until_ms)
            assert math.isclose(
                x_of(max(xs)), start + panel.width_ms(k), abs_tol=1e-4 * panel.until_ms
            )


def check_words(panel: Words, axes, ids, gid, words, rows) -> None:
    assert len(with_prefix(ids, f"{gid}-words-")) == len(panel.lines)


CHECKS = {
    Curves: check_curves,
    Bars: check_bars,
    HeatMap: check_heat_map,
    Timeline: check_timeline,
    Stacked: check_stacked,
    Words: check_words,
}


# -- every value drawn is one a table prints -----------------------------------------------------


@functools.cache
def printed(stem: str) -> frozenset[str]:
    """Every figure `memprof report` prints of a fixture: each word of its text (tables,
    profile, notes) and each table cell as nvprof writes times (a "(us)" column's 16.720 as
    16.720us)."""
    d = drawn(stem)
    words = set(re.split(r"[\s|]+", render_text(d.result, width=2000)))
    for one in d.summary.tables:
        for row in one.rows:
            words.update(
                as_printed(c, h).rstrip("*†") for c, h in zip(row, one.headers, strict=True)
            )
    return frozenset(words)


def as_table_prints(value: float, unit: str) -> str:
    return format_gb_per_s(value) if unit == "GB/s" else format_ms(value)


def drawn_values(d: Drawn) -> list[tuple[str, str]]:
    """(what, as the tables would print it) of every value the picture draws, each read back
    from the SVG: a bar's value as written beside it (its length checked against it by
    check_bars), a line's point through the axis' ticks, a heat map's cell as written."""
    found = []
    for index, panel in enumerate(d.picture.panels):
        gid, axes = f"p{index}", d.ids[f"p{index}"]
        if isinstance(panel, Bars):
            for bar, element in zip(panel.bars, with_prefix(d.ids, f"{gid}-value-"), strict=True):
                shown = texts(element)[0].removeprefix(f"{bar.verdict} ").removesuffix(" GB/s")
                found.append((bar.label, shown))
            if panel.reference is not None:  # the link, as memprof.model.ceilings declares it
                assert panel.reference.value == pcie_ceiling(d.result).gb_per_s
        elif isinstance(panel, Curves):
            x_of, y_of = scale(axes, "x"), scale(axes, "y")
            for kind in ("line", "ceiling"):
                lines = [line for line in panel.lines if line.ceiling == (kind == "ceiling")]
                for line, element in zip(lines, with_prefix(d.ids, f"{gid}-{kind}-"), strict=True):
                    for (x, y), (sx, sy) in zip(
                        line.points, markers(element) or path_points(element), strict=True
                    ):
                        assert close(x_of(sx), x) and close(y_of(sy), y), (line.label, x, y)
                        found.append((line.label, as_table_prints(y, panel.y_unit)))
        elif isinstance(panel, HeatMap):
            for r, row in enumerate(panel.values):
                for c, value in enumerate(row):
                    if value is not None:
                        found.append((f"{r},{c}", texts(d.ids[f"{gid}-cell-{r}-{c}"])[0]))
    return found


@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: p.stem)
def test_every_value_a_picture_draws_is_one_the_report_prints(path: Path):
    """Issue 36: a number reaches a user as one number, in the table and in the picture.
    (A time line draws the chunks the run recorded, which no table lists one by one.)"""
    d = drawn(path.stem)
    words = printed(path.stem)
    unprinted = [
        (what, value)
        for what, value in drawn_values(d)
        if value not in words and f"{float(value.replace(',', '')):,.0f}" not in words
    ]  # 4814 is printed 4,814 too
    assert unprinted == []


def test_a_value_no_table_prints_is_found_out():
    """The test above fails where a picture draws its own figure (the plant: a bar's value
    10% off)."""
    d = drawn("h200x2_hostlink")
    bars = d.picture.panels[0].bars
    moved = replace_bar_value(d, 0, bars[0].value * 1.1)
    assert [
        what for what, value in drawn_values(moved) if value not in printed("h200x2_hostlink")
    ] == [bars[0].label]


def replace_bar_value(d: Drawn, index: int, value: float) -> Drawn:
    import copy

    shown = copy.deepcopy(d.picture)
    shown.__dict__.pop("_figure", None)
    shown.panels[0].bars[index].value = value
    svg = shown.svg()
    tree = ElementTree.fromstring(svg)
    ids = {e.get("id"): e for e in tree.iter() if e.get("id")}
    return Drawn(d.result, d.summary, shown, svg, ids)


def test_zerocopy_draws_its_two_tables_and_no_copy_of_its_own():
    """The zerocopy picture drew pageable copies at CUPTI's DMA-only speed, level with
    pinned, while the calls moved 11.4 GB/s; no table prints a copy's GB/s: it draws the
    zero-copy read GB/s and each path's time end to end, as its tables print them."""
    d = drawn("h200_zerocopy_sweep")
    reads = d.picture.panels[0]
    assert not any(m.operation in ("h2d", "d2h") for line in reads.lines for m in line.sources)
    kernels = table(d.summary, "sumArrays on device memory")
    size, gb_per_s = point(d, 0, "line", "zero-copy read", 4)
    assert (round(size), format_gb_per_s(gb_per_s)) == (1 << 20, "46.9")
    assert cell(kernels, "1 MiB", "Zero-copy read GB/s") == "46.9"
    ends = table(d.summary, "End to end")
    for label, column in (("pageable path", "Pageable"), ("zero-copy path", "Zero-copy")):
        size, each_ms = point(d, 1, "line", label, 4)
        assert (round(size), format_ms(each_ms)) == (1 << 20, cell(ends, "1 MiB", column))


def test_hostlink_tells_alone_from_all_at_once():
    d = drawn("h200x2_hostlink")
    labels = [bar.label for bar in d.picture.panels[0].bars]
    assert labels[:2] == [
        "GPU 0, host → device: Alone, GB/s",
        "GPU 0, host → device: All at once, GB/s",
    ]
    assert len(set(labels)) == len(labels)
    assert texts(d.ids["p0-value-GPU_0_host_device_Alone_GB_s"]) == ["55.0 GB/s"]
    assert texts(d.ids["p0-value-GPU_0_host_device_All_at_once_GB_s"]) == ["55.2 GB/s"]


def test_managed_draws_the_link_and_says_which_figure_is_above_it():
    d = drawn("h200_managed")
    axes = d.ids["p0"]
    words = " ".join(texts(axes))
    assert "dashed: PCIe, one direction, 63.0 GB/s" in words
    x_of = scale(axes, "x")
    link = path_points(d.ids["p0-reference"])[0][0]
    assert format_gb_per_s(x_of(link)) == "63.0"
    above = d.picture.panels[1]
    assert above.lines == [
        "cuMemAdvise accessed-by: first launch: 72.1 GB/s, above PCIe, one direction (63.0 GB/s)"
    ]


def test_only_a_figure_above_its_ceiling_is_named_above_it():
    from memprof.experiments.pictures import _with_exceeded
    from memprof.output.plot import Bar, Reference

    bars = [Bar("at", 63.0), Bar("over", 63.1), Bar("own", 10.0, ceiling=9.9)]
    panels = _with_exceeded([Bars("t", "GB/s", bars, reference=Reference(63.0, "link"))])
    assert panels[1].lines == [
        "over: 63.1 GB/s, above link (63.0 GB/s)",
        "own: 10.0 GB/s, above its ceiling (9.90 GB/s)",
    ]
    assert len(_with_exceeded([Bars("t", "GB/s", bars[:1], reference=Reference(63, "x"))])) == 1


# -- each command's picture against its tables -----------------------------------------------


def table(summary: Summary, title: str):
    return next(t for t in summary.tables if t.title.startswith(title))


def cell(found, row_label: str, column: str) -> str:
    """A table's cell as nvprof prints it, its column named without its unit ("pinned" for
    "pinned (ms)")."""
    row = next(row for row in found.rows if row[0] == row_label)
    names = [re.sub(r" \((ns|us|ms|s)\)$", "", header) for header in found.headers]
    index = names.index(column)
    return as_printed(row[index], found.headers[index])


def table_with(summary: Summary, title: str, column: str):
    """The table whose title starts with `title` and that has the column `column`."""
    return next(
        t
        for t in summary.tables
        if t.title.startswith(title)
        and column in [re.sub(r" \((ns|us|ms|s)\)$", "", header) for header in t.headers]
    )


def point(d: Drawn, panel: int, kind: str, label: str, index: int) -> tuple[float, float]:
    """Point `index` of the line `label` of panel `panel`, read off the picture."""
    lines = [line for line in d.picture.panels[panel].lines if line.ceiling == (kind == "ceiling")]
    element = with_prefix(d.ids, f"p{panel}-{kind}-")[[x.label for x in lines].index(label)]
    x, y = (markers(element) or path_points(element))[index]
    axes = d.ids[f"p{panel}"]
    return scale(axes, "x")(x), scale(axes, "y")(y)


def test_sweep_draws_a_line_per_kind_and_the_link_and_staging_ceilings():
    d = drawn("h200_sweep")
    bandwidth = table(d.summary, "Bandwidth host → device")
    others = table(d.summary, "Pinned memory allocated other ways, host → device")
    kinds = {kind for kind in bandwidth.headers[1:] + others.headers[1:] if kind != "staging"}
    assert len(with_prefix(d.ids, "p0-line-")) == len(kinds) == 7
    assert texts(d.ids["p0"]).count("pinned") == 1  # one legend entry per kind
    size, gb_per_s = point(d, 0, "line", "pinned", 12)  # 2^20 floats: the 13th size
    assert round(size) == 4 << 20
    assert format_gb_per_s(gb_per_s) == cell(bandwidth, "4 MiB", "pinned")
    _, registered = point(d, 0, "line", "registered", 12)
    assert format_gb_per_s(registered) == cell(others, "4 MiB", "registered")
    size, staging = point(d, 0, "ceiling", "staging ceiling", 0)
    assert round(size) == 1 << 10
    assert format_gb_per_s(staging) == cell(bandwidth, "1 KiB", "staging")
    _, link = point(d, 1, "ceiling", "PCIe ceiling, 63.0 GB/s", 0)  # one value: named
    assert close(link, pcie_ceiling(d.result).gb_per_s)


def test_peer_draws_each_method_as_the_tables_print_it():
    d = drawn("h200x2_peer")
    heat_maps = [panel for panel in d.picture.panels if isinstance(panel, HeatMap)]
    assert len(heat_maps) == 5
    for index, panel in enumerate(heat_maps):
        printed = next(t for t in d.summary.tables if t.title == panel.title)  # no internal id
        for r, row in enumerate(printed.rows):
            for c, value in enumerate(row[1:]):
                assert texts(d.ids[f"p{index}-cell-{r}-{c}"]) == [value], (panel.title, r, c)
        assert texts(d.ids[f"p{index}-scale-words"]) == [
            "colour: 0 to the NVLink ceiling, 478 GB/s"  # as the report's notes say it
        ]
        assert panel.scale_max == heat_maps[0].scale_max  # one scale for every map
    assert "= 478 GB/s per direction" in render_text(d.result, width=2000)


def test_peer_colours_run_to_the_ceiling_or_to_the_fastest_figure_above_it():
    from memprof.experiments.pictures import peer_panels
    from memprof.model.ceilings import Ceiling
    from memprof.model.figures import Figure

    d = drawn("h200x2_peer")

    def scale_with(ceiling_gb_per_s: float | None) -> str:
        def changed(f: Figure) -> Figure:
            if f.ceiling is None:
                return f
            ceiling = None if ceiling_gb_per_s is None else Ceiling(ceiling_gb_per_s, "NVLink", "")
            return replace_figure(f, ceiling)

        summary = Summary(figures_of=lambda: [changed(f) for f in d.summary.figures])
        return peer_panels(d.result, summary)[0].scale_words

    assert scale_with(393.5) == "0 to the NVLink ceiling, 394 GB/s"
    assert scale_with(392.5) == "0 to the fastest, 393 GB/s"  # a ceiling below a figure
    assert scale_with(None) == "0 to the fastest, 393 GB/s"


def replace_figure(f, ceiling):
    import dataclasses

    return dataclasses.replace(f, ceiling=ceiling)


def peer_scale(stem: str, ceiling_of) -> tuple[str, float]:
    """Peer's colour scale (its words and top) with each figure's ceiling as ceiling_of says."""
    from memprof.experiments.pictures import peer_panels

    result, summary, _ = pictured(stem)
    changed = [replace_figure(f, ceiling_of(f)) for f in summary.figures]
    panels = peer_panels(result, Summary(tables=summary.tables, figures_of=lambda: changed))
    assert len({panel.scale_max for panel in panels}) == 1  # one scale for every map
    return panels[0].scale_words, panels[0].scale_max


@pytest.mark.parametrize("stem", ["h200x2_peer", "h200x4_peer"])
def test_peer_colours_run_to_the_highest_ceiling_of_any_method(stem):
    """Each method's figures carry their own ceiling: the scale is the highest of them all,
    whichever method carries it (the last method's is not the only one read)."""
    from memprof.experiments.peer import METHODS
    from memprof.model.ceilings import Ceiling

    with_ceilings = [m for m in METHODS if m != "ce_off"]  # staged through the host: none known
    for raised in with_ceilings:

        def ceiling_of(f, raised=raised):
            if f.ceiling is None:
                return None
            top = 600.0 if f.measurement.operation == raised else f.ceiling.gb_per_s
            return Ceiling(top, "NVLink", "")

        assert peer_scale(stem, ceiling_of) == ("0 to the NVLink ceiling, 600 GB/s", 600.0), raised


@pytest.mark.parametrize("stem", ["h200x2_peer", "h200x4_peer", "legacy_v2_h200x2_peer"])
def test_peer_colours_run_to_a_ceiling_exactly_as_fast_as_the_fastest_figure(stem):
    """A ceiling equal to the fastest figure names the ceiling; a hair below it, the figure."""
    from memprof.experiments.peer import METHODS
    from memprof.model.ceilings import Ceiling

    _, summary, _ = pictured(stem)
    fastest = max(f.gb_per_s for f in summary.figures if f.measurement.operation in METHODS)
    shown = format_gb_per_s(fastest)
    assert shown in {cell for table in summary.tables for row in table.rows for cell in row}

    def at(top):
        return lambda f: Ceiling(top, "NVLink", "") if f.measurement.operation in METHODS else None

    assert peer_scale(stem, at(fastest)) == (f"0 to the NVLink ceiling, {shown} GB/s", fastest)
    below = math.nextafter(fastest, 0)
    assert peer_scale(stem, at(below)) == (f"0 to the fastest, {shown} GB/s", fastest)
    above = math.nextafter(fastest, math.inf)
    assert peer_scale(stem, at(above)) == (f"0 to the NVLink ceiling, {shown} GB/s", above)


@pytest.mark.parametrize("stem", ["h200x2_peer", "h200x4_peer", "legacy_v2_h200x2_peer"])
def test_peer_without_a_bandwidth_figure_draws_its_tables_as_words(stem):
    """A peer Result holding only its latency chain (load refuses such a file; the Python API
    may still draw one) draws the latency table as the report prints it, not an empty map."""
    from memprof.experiments.peer import METHODS
    from memprof.experiments.pictures import peer_panels

    result = load(FIXTURES / f"{stem}.json")
    latency = [m for m in result.measurements if m.operation not in METHODS]
    assert latency and len(latency) < len(result.measurements)
    only_latency = replace(result, measurements=latency)
    summary = summarize(only_latency)
    panels = peer_panels(only_latency, summary)
    (printed,) = summary.tables
    assert [type(panel) for panel in panels] == [Words]
    assert panels[0].title == printed.title
    assert panels[0].lines == [" | ".join(row) for row in printed.rows]
    assert len(printed.rows) == len(result.extra.devices)


def test_check_draws_each_judged_figure_against_its_least_expected():
    d = drawn("h200_check")
    verdicts = table(d.summary, "Health of GPU 0")
    bars = d.picture.panels[1].bars
    assert [bar.label for bar in bars][:2] == ["Pinned host → device", "Pinned device → host"]
    axes = d.ids["p1"]
    x_of = scale(axes, "x")
    expected = with_prefix(d.ids, "p1-expected-")
    for index, what in enumerate(("Pinned host → device", "Pinned device → host")):
        row = next(row for row in verdicts.rows if row[1] == what)
        measured, least = row[2].split(" GB/s")[0], row[3].split(" GB/s")[0].removeprefix(">= ")
        assert texts(d.ids[with_prefix_id(d.ids, "p1-value-", index)]) == [f"PASS {measured} GB/s"]
        mark_x = markers(expected[index])[0][0]
        assert format_gb_per_s(x_of(mark_x)) == least
    words = " ".join(texts(d.ids["p0"]))
    for row in verdicts.rows:
        assert f"{row[0]}  {row[1]}" in words


def with_prefix_id(ids: dict, prefix: str, index: int) -> str:
    return [gid for gid in ids if gid.startswith(prefix)][index]


def test_a_failed_check_line_is_drawn_red_and_says_fail():
    result = load(FIXTURES / "h200_check.json")
    slow = [
        replace(m, throughput_ms=[t * 2 for t in m.throughput_ms])
        if (m.operation, m.group) == ("h2d", "gpu")
        else m
        for m in result.measurements
    ]
    d = draw(replace(result, measurements=slow))
    first = with_prefix(d.ids, "p1-bar-")[0]
    assert "#d62728" in next(first.iter(f"{SVG}path")).get("style")
    assert texts(d.ids[with_prefix_id(d.ids, "p1-value-", 0)])[0].startswith("FAIL ")
    passed = with_prefix(d.ids, "p1-bar-")[1]
    assert "#2ca02c" in next(passed.iter(f"{SVG}path")).get("style")


def test_smallcopies_draws_the_per_copy_table():
    d = drawn("h200_smallcopies")
    per_copy = table(d.summary, "128 copies host → device: wall clock per copy")
    for way in [re.sub(r" \((ns|us|ms|s)\)$", "", header) for header in per_copy.headers[1:]]:
        size, each_ms = point(d, 0, "line", way, 0)
        assert (round(size), format_ms(each_ms)) == (4096, cell(per_copy, "4 KiB", way))


def test_alloc_draws_the_allocate_and_free_tables():
    d = drawn("h200_alloc")
    for panel, title in ((0, "Allocate time"), (1, "Free time")):
        for kind in ("pageable", "pinned", "vmm"):
            printed = table_with(d.summary, title, kind)
            size, median_ms = point(d, panel, "line", kind, -1)
            assert round(size) == 1 << 30
            assert format_ms(median_ms) == cell(printed, "1 GiB", kind)


def test_streams_draws_every_chunk_of_every_mode_on_its_stream():
    d = drawn("h200_streams")
    timelines = d.result.extra.timelines
    for index, mode in enumerate(("serial", "overlapped", "pageable")):
        timeline = getattr(timelines, mode)
        spans = with_prefix(d.ids, f"p{index}-span-")
        assert len(spans) == len(timeline) == 3 * d.result.parameters.streams
        lanes = 1 if mode == "serial" else d.result.parameters.streams
        assert [w for w in texts(d.ids[f"p{index}"]) if w.startswith("stream ")] == [
            f"stream {lane}" for lane in range(lanes)
        ]
        last = max(timeline, key=lambda row: row[4])
        x_of = scale(d.ids[f"p{index}"], "x")
        assert close(max(x_of(x) for s in spans for x, _ in path_points(s)), last[4])
        rows = tick_positions(d.ids[f"p{index}"], "y")
        for span, (lane, _, stage, start, end) in zip(spans, timeline, strict=True):
            xs, ys = zip(*path_points(span)[:4], strict=True)
            assert abs(sum(ys) / 4 - rows[f"stream {lane}"]) < 1  # on the stream it ran on
            assert f"-{stage}-" in span.get("id")
            assert close(x_of(min(xs)) + 1, start + 1) and close(x_of(max(xs)), end)


def test_a_trace_draws_the_gpu_rows_of_its_profile():
    from memprof.output.profile import profile_rows

    d = drawn("h200_trace_torch")
    gpu_rows = [row for row in profile_rows(d.result.measurements) if row.group == "GPU activities"]
    assert [bar.label for bar in d.picture.panels[0].bars] == [row.name for row in gpu_rows]
    values = [texts(e)[0] for e in with_prefix(d.ids, "p0-value-")]
    assert values == [format_ms(row.stats.total_ms) for row in gpu_rows]


def test_a_trace_draws_the_source_lines_that_spent_its_gpu_time():
    """Issue 25: the picture of a trace reads its lines, the most GPU time first."""
    from memprof.experiments.pictures import MOST_LINES
    from memprof.model.lines import lines_of

    d = drawn("h200_trace_torch")
    timed = sorted(
        (line for line in lines_of(d.result) if line.gpu_ms_each), key=lambda s: -s.gpu_ms
    )
    assert 0 < len(timed) <= MOST_LINES
    panel = d.picture.panels[1]
    assert panel.title == "GPU time by source line"  # all of them drawn: no count said
    labels = [texts(e)[0] for e in with_prefix(d.ids, "p1-label-")]
    assert labels == [f"{line.place} {line.activity}" for line in timed]
    assert labels[0] == "torch_copies.py:42 HtoD pageable -> device"
    values = [texts(e)[0] for e in with_prefix(d.ids, "p1-value-")]
    assert values == [format_ms(line.gpu_ms) for line in timed]
    fewer = draw(
        replace(
            d.result, extra=replace(d.result.extra, lines=d.result.extra.lines[:1], timeline=None)
        )
    )
    assert len(fewer.picture.panels) == 3 and len(fewer.picture.panels[1].bars) == 1
    no_lines = replace(d.result.extra, lines=[], timeline=None)
    assert [type(p) for p in draw(replace(d.result, extra=no_lines)).picture.panels] == [
        Bars,
        Words,  # no timeline: why not (its own test)
    ]


def test_many_source_lines_are_cut_to_the_most_and_the_title_says_of_how_many(monkeypatch):
    import memprof.experiments.pictures as pictures

    monkeypatch.setattr(pictures, "MOST_LINES", 2)
    d = draw(load(FIXTURES / "h200_trace_torch.json"))
    assert d.picture.panels[1].title == "GPU time by source line: the 2 with the most, of 4"
    assert len(d.picture.panels[1].bars) == 2


@pytest.mark.parametrize(
    ("decades", "subs"),
    [(2.9, (1.0, 2.0, 5.0)), (3.0, (1.0, 2.0, 5.0)), (3.1, (1.0, 3.0)), (4.5, (1.0, 3.0)),
     (4.6, (1.0,)), (9.0, (1.0,))],
)  # fmt: skip
def test_a_log_axis_over_more_decades_has_fewer_ticks_in_each(decades, subs):
    from memprof.output.plot import _log_subs

    assert _log_subs(decades) == subs


def test_every_panel_title_starts_at_the_pictures_left_edge():
    """Not where the row labels end: the trace's title ran past the right edge from there."""
    from memprof.output.plot import EDGE_INCHES

    for stem in ("h200_trace_torch", "h200_compare", "h200_streams"):
        d = drawn(stem)
        tree = ElementTree.fromstring(d.svg)
        starts = {
            "".join(t.itertext()): float(t.get("x"))
            for t in tree.iter(f"{SVG}text")
            if t.get("x") is not None  # a rotated axis label is placed by its transform
        }
        for panel in d.picture.panels:
            assert close(starts[panel.title], EDGE_INCHES * 72), (stem, panel.title)


def test_a_command_without_its_own_picture_draws_the_gb_per_s_its_tables_show():
    d = drawn("h200_pinned_p20")
    transfers = table(d.summary, "Transfers of 4 MiB")
    labels = [bar.label for bar in d.picture.panels[0].bars]
    x_of = scale(d.ids["p0"], "x")
    for kind, direction in (("pinned", "host → device"), ("pageable", "device → host")):
        index = labels.index(f"{kind}, {direction}")
        right = bar_end(with_prefix(d.ids, "p0-bar-")[index])
        row = next(row for row in transfers.rows if row[:2] == [kind, direction])
        assert format_gb_per_s(x_of(right)) == row[transfers.headers.index("GB/s")]
    assert not any("cuMemHostAlloc" in label for label in labels)  # a time, not a GB/s


def test_a_table_drawn_as_bars_draws_every_time_it_shows_marked_near_the_floor_or_not():
    """alloc of one size draws its tables (default_panels): a call printed near its floor
    ("1.1770*") is a figure of the table as any other, drawn under its row and column."""
    from memprof.experiments.pictures import default_panels

    d = drawn("h200_alloc")
    calls = table(d.summary, "Stream-ordered allocation")
    drawn_bars = next(p for p in default_panels(d.result, d.summary) if p.title == calls.title)
    names = [re.sub(r" \((ns|us|ms|s)\)$", "", header) for header in calls.headers]
    shown = [
        (f"{row[0]}: {name}", as_printed(cell, header).rstrip("*"))
        for row in calls.rows
        for cell, header, name in zip(row[1:], calls.headers[1:], names[1:], strict=True)
        if cell != "-"
    ]
    assert any(cell.endswith("*") for row in calls.rows for cell in row)
    assert [(bar.label, format_ms(bar.value)) for bar in drawn_bars.bars] == shown


def test_info_draws_the_ceilings_its_table_prints():
    """info's picture was its tables typed out in monospace."""
    d = drawn("h200_info")
    facts = table(d.summary, "Device 0")
    bandwidth = next(row[1] for row in facts.rows if row[0].startswith("Device memory bandwidth"))
    link = next(row[1] for row in facts.rows if row[0] == "PCIe link during the run")
    values = [texts(e)[0] for e in with_prefix(d.ids, "p0-value-")]
    assert values == ["4814 GB/s", "63.0 GB/s"]
    assert bandwidth.startswith("4,814 GB/s") and "63.0 GB/s per direction" in link


def test_a_result_without_measurements_or_ceilings_is_drawn_as_its_tables(monkeypatch):
    import memprof.experiments.pictures as pictures
    import memprof.model.ceilings as ceilings

    monkeypatch.setattr(ceilings, "hbm_ceiling", lambda facts: None)
    monkeypatch.setattr(pictures, "pcie_ceiling", lambda result: None)
    d = draw(load(FIXTURES / "h200_info.json"))
    assert all(isinstance(panel, Words) for panel in d.picture.panels)
    assert [panel.title for panel in d.picture.panels] == [t.title for t in d.summary.tables]


def _pictures_tool():
    """tools/pictures.py, which draws docs/img: what it draws is what these tests compare."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pictures", ROOT / "tools" / "pictures.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


# docs/img's pictures, each its own case: test_toy runs only the toy's on its tree with a toy
_TOOL = _pictures_tool()
DOCS_PICTURES = {name: (stem,) for name, stem in _TOOL.chosen().items()} | _TOOL.RUNS


@pytest.mark.parametrize("name", DOCS_PICTURES)
def test_the_pictures_in_the_docs_are_what_the_fixtures_draw_today(name):
    """docs/img is made by tools/pictures.py from these fixtures: run it after a change."""
    import matplotlib

    saved = (ROOT / "docs" / "img" / "pinned.svg").read_text("utf-8")
    drawn_by = re.search(r"Matplotlib v([^,<]+)", saved)
    if drawn_by is None or drawn_by[1] != matplotlib.__version__:
        pytest.skip(
            f"docs/img was drawn by matplotlib {drawn_by[1] if drawn_by else '?'}, this is "
            f"{matplotlib.__version__}: the test extra pins that one (from Python 3.11); "
            "after changing the pin, python tools/pictures.py"
        )
    from memprof.api import picture_of

    stems = DOCS_PICTURES[name]
    if len(stems) == 1:
        now = drawn(stems[0]).svg
    else:
        now = picture_of([load(FIXTURES / f"{stem}.json") for stem in stems]).svg()
    saved = (ROOT / "docs" / "img" / f"{name}.svg").read_text("utf-8")
    assert _same_drawing(saved, now), "run python tools/pictures.py"


def test_the_pictures_tool_refuses_a_picture_it_does_not_draw(capsys):
    """`python tools/pictures.py uva` draws a new command's picture alone (test_toy's toy)."""
    with pytest.raises(SystemExit, match=r"^pictures: error: no picture none is drawn$"):
        _TOOL.main(["--check", "pinned", "none"])
    assert capsys.readouterr().out == ""


SVG_NUMBER = re.compile(r"-?\d+\.\d+")


def _same_drawing(saved: str, drawn_now: str) -> bool:
    """Two SVGs of one drawing: the same text, but for matplotlib's ids (hashes of what str()
    makes of a clip path, numpy's repr included) renamed by first appearance, and coordinates
    within a millionth of an inch of each other (numpy 2.5 and 2.4 round 206.039063 apart)."""
    saved, drawn_now = _named_in_order(saved), _named_in_order(drawn_now)
    numbers = [SVG_NUMBER.findall(svg) for svg in (saved, drawn_now)]
    return (
        SVG_NUMBER.sub("#", saved) == SVG_NUMBER.sub("#", drawn_now)
        and len(numbers[0]) == len(numbers[1])
        and all(abs(float(a) - float(b)) <= 72e-6 for a, b in zip(*numbers, strict=True))
    )


def _named_in_order(svg: str) -> str:
    names: dict[str, str] = {}
    return re.sub(
        r"\b[mp][0-9a-f]{10}\b", lambda found: names.setdefault(found[0], f"id{len(names)}"), svg
    )


def test_streams_modes_share_one_time_axis():
    """The three modes were each drawn on a time axis of its own, so 7 ms of pinned copies
    looked as long as 70 ms of pageable ones."""
    d = drawn("h200_streams")
    ticks = [tick_positions(d.ids[f"p{index}"], "x") for index in range(3)]
    assert ticks[0] == ticks[1] == ticks[2] and "70 ms" in ticks[0]
    ends = [max(span.end_ms for span in panel.spans) for panel in d.picture.panels]
    assert ends[2] > 4 * ends[1]  # drawn to one scale, the pageable run is the longest by far


def test_compare_draws_a_panel_per_operation_with_a_bar_per_memory_kind():
    """compare was drawn as every driver call's bar without its headline GB/s: now each GB/s
    column of its table is a panel, each kind's cell a bar, as printed."""
    d = drawn("h200_compare")
    printed_table = table(d.summary, "Every memory kind")
    columns = [h for h in printed_table.headers if h.endswith("GB/s")]
    assert [panel.title.split(": ")[-1] for panel in d.picture.panels] == columns
    for index, column in enumerate(columns):
        at = printed_table.headers.index(column)
        shown = {row[0]: row[at] for row in printed_table.rows if row[at] != "-"}
        labels = [texts(e)[0] for e in with_prefix(d.ids, f"p{index}-label-")]
        values = [texts(e)[0].removesuffix(" GB/s") for e in with_prefix(d.ids, f"p{index}-value-")]
        assert dict(zip(labels, values, strict=True)) == shown, column


# -- a trace's run over time -------------------------------------------------------------------


TRACES_WITH_TIMELINES = [
    "h200_trace_torch",
    "h200_trace_pycuda",
    "h200_trace_managed",
    "traces/h200_trace_torch_dataloader",
]  # its gaps: a column in ms


@pytest.mark.parametrize("stem", TRACES_WITH_TIMELINES)
def test_a_traces_bins_add_up_to_where_the_time_went(stem):
    """Issue 38, item 6: the picture's bins are cut by the Where table's own rule, so each
    part summed over them is the table's figure; its gaps are the table's, marked where
    they are; its words print the table's cells."""
    from memprof.model.formatting import format_ms

    d = drawn(stem)
    where = table(d.summary, "Where the time went")
    gaps = next((t for t in d.summary.tables if t.title == "Longest idle gaps"), None)
    gap_rows = gaps.rows if gaps is not None else []
    stacked = [p for p in d.picture.panels if isinstance(p, Stacked)]
    assert len(stacked) == len(where.rows) >= 1
    for panel, row in zip(stacked, where.rows, strict=True):
        for at, cell in enumerate(row[1:4]):  # computing, copying, both: every bin holds
            summed = math.fsum(one[at] for one in panel.bins)
            assert format_ms(summed) == cell.split()[0], (panel.title, at)
        at_gpu = [cells for cells in gap_rows if cells[0] == row[0]]
        assert len(panel.marks) == len(at_gpu)
        for mark, cells in zip(panel.marks, at_gpu, strict=True):
            start = as_printed(cells[1], gaps.headers[1])
            length = as_printed(cells[2], gaps.headers[2])
            assert format_ms(mark.start_ms) == start
            assert format_ms(mark.end_ms - mark.start_ms) == length
        index = d.picture.panels.index(panel)
        words = d.picture.panels[index + 1]
        said = " ".join(" ".join(words.lines).split())  # lines joined where they wrapped
        assert all(f"{part} {cell}" in said for part, cell in zip(
            ("computing", "copying", "both at once", "idle"), row[1:], strict=True
        ))  # fmt: skip
        for number, cells in enumerate(at_gpu, 1):  # each time as nvprof writes it
            start, length = (as_printed(cells[i], gaps.headers[i]) for i in (1, 2))
            assert f"{number} idle for {length} at {start}: host at {cells[3]}" in said


def test_the_drawn_idle_is_the_tables_but_for_what_lies_outside_the_recorded_events():
    from memprof.model.timeline import breakdown, over_time

    d = drawn("h200_trace_torch")
    timeline = d.result.extra.timeline
    (share,) = breakdown(timeline, round(d.result.extra.wall_s * 1e9))
    (binned,) = over_time(timeline)
    drawn_idle = sum(binned.idle_ns(k) for k in range(len(binned.parts)))
    assert share.idle_ns - drawn_idle == share.wall_ns - binned.end_ns > 0  # start-up, exit
    (panel,) = [p for p in d.picture.panels if isinstance(p, Stacked)]
    assert math.isclose(math.fsum(one[3] for one in panel.bins), drawn_idle / 1e6)
    assert close(panel.until_ms, binned.end_ns / 1e6)


def test_a_trace_saved_without_a_timeline_is_drawn_with_why_it_has_no_run_over_time():
    """Decided: draw what the file holds (its GPU time by activity and by line) and say in
    words why the run over time is not drawn, rather than refuse the whole picture."""
    from memprof.output.timeline import timeline_missing

    d = drawn("legacy_v2_trace_pycuda")
    assert not any(isinstance(p, Stacked) for p in d.picture.panels)
    last = d.picture.panels[-1]
    assert isinstance(last, Words) and last.title == "Where the time went"
    assert " ".join(last.lines) == timeline_missing(d.result)
    assert isinstance(d.picture.panels[0], Bars)


def test_every_gpu_of_a_trace_is_drawn_on_one_time_axis():
    result = load(FIXTURES / "h200_trace_torch.json")
    timeline = result.extra.timeline
    second = [(*row[:4], 1, *row[5:]) for row in timeline.gpu[: len(timeline.gpu) // 2]]
    two = replace(result, extra=replace(result.extra, timeline=replace(timeline, gpu=[
        *timeline.gpu, *second
    ])))  # fmt: skip
    d = draw(two)
    stacked = [p for p in d.picture.panels if isinstance(p, Stacked)]
    assert [p.title.split()[1] for p in stacked] == ["0", "1"]
    assert stacked[0].until_ms == stacked[1].until_ms and stacked[0].bin_ms == stacked[1].bin_ms
    assert text_faults_of(d) == []


def text_faults_of(d: Drawn) -> list[str]:
    from tests.test_plot_style import text_faults

    return text_faults(d.picture)


def test_a_mostly_idle_gpus_bars_stop_a_quarter_above_its_busiest_bin():
    """The DataLoader's GPU was busy at most 13% of a bin: bars up to 100% would show its
    work as a line. Its idle is drawn up to the cut, which the axis label says."""
    from memprof.output.plot import stacked_scale

    result = load(FIXTURES / "h200_trace_torch.json")
    timeline = result.extra.timeline
    spread = [(*row[:2], row[2] * 40, *row[3:]) for row in timeline.gpu]  # 40x the idle
    api = [(row[0], row[1] * 40, *row[2:]) for row in timeline.api]
    d = draw(replace(result, extra=replace(result.extra, timeline=replace(
        timeline, gpu=spread, api=api
    ))))  # fmt: skip
    (index,) = [i for i, p in enumerate(d.picture.panels) if isinstance(p, Stacked)]
    panel = d.picture.panels[index]
    shares = [[100 * ms / panel.width_ms(k) for ms in one] for k, one in enumerate(panel.bins)]
    ticks, cut = stacked_scale(shares)
    busiest = max(math.fsum(one[:3]) for one in shares)
    assert busiest * 1.25 <= cut < 100 and ticks[-1] == cut
    assert f"idle drawn up to {cut:g}%" in " ".join(texts(d.ids[f"p{index}"]))
    check_stacked(panel, d.ids[f"p{index}"], d.ids, f"p{index}", texts(d.ids[f"p{index}"]), {})
    assert text_faults_of(d) == []


@pytest.mark.parametrize(
    ("busiest", "cut"),
    [(12.8, 16.0), (12.81, 20.0), (64.0, 80.0), (64.01, 100.0), (80.0, 100.0), (100.0, 100.0)],
)
def test_the_bars_stop_at_the_round_share_a_quarter_above_the_busiest_bin(busiest, cut):
    """On each side of a round share (16% for up to 12.8% busy, then 20%), and 100% at most."""
    from memprof.output.plot import stacked_scale

    ticks, found = stacked_scale([[busiest / 2, 0, busiest / 2, 100 - busiest], [1, 1, 1, 97]])
    assert found == cut and ticks[0] == 0 and ticks[-1] == cut
