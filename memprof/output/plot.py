"""Pictures of Results: what `memprof plot` and memprof.plot() draw, with matplotlib.

memprof.experiments.pictures chooses what a picture shows (a Picture of panels); this module
only draws it, with matplotlib (an optional extra) but never pyplot, so a notebook's backend
is left as it was. Every element of the SVG has an id naming it (`p1-line-pinned`) and its
text stays text, so tests read a picture back; result strings are drawn literally, never as
TeX or mathtext, with one fixed configuration whatever the user's matplotlibrc says.
"""

from __future__ import annotations

import contextlib
import html
import io
import math
import os
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memprof.errors import InvalidArgument, require_package
from memprof.model.formatting import format_bytes, format_gb_per_s, format_ms
from memprof.output.files import write_bytes_atomic
from memprof.output.literal import literal
from memprof.output.palette import CEILING, IDLE, OTHERS, colours

MATPLOTLIB_AT_LEAST = (3, 7)
FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".html": "html"}
Unit = Literal["GB/s", "ms", "bytes"]  # what a value axis counts: 10^9 bytes/s, ms, bytes

# -- what a picture shows ----------------------------------------------------------------------


@dataclass
class Line:
    """A series of points (x, y); `sources`: the measurement each point is a figure of (empty
    where a point is not one: smallcopies' cost of a way sums a copy and the host's work)."""

    label: str
    points: list[tuple[float, float]]
    ceiling: bool = False  # a bound drawn dashed (the link, staging), not a measured series
    sources: list[Any] = field(default_factory=list)
    kind: str | None = None  # the memory kind it is of: its colour (memprof.output.palette)
    run: int | None = None  # of a picture of several runs: which (0, the reference, dashed)
    band: list[tuple[float, float]] = field(default_factory=list)  # each point's spread

    @property
    def shown(self) -> str:
        return _with_run(self.label, self.run)

    @property
    def in_legend(self) -> str:
        """A series is named once for every run; a bound only one run draws, with its run."""
        return self.label if self.run is not None and not self.ceiling else self.shown


@dataclass
class Curves:
    """Lines over log axes: a figure against size (linear axes from 0 where the sizes are
    steps of one size, as pinlimit's climb, and the message is the figure's drift)."""

    title: str
    x_label: str  # of sizes, in bytes
    y_label: str
    lines: list[Line]
    y_unit: Unit = "GB/s"
    linear: bool = False


@dataclass
class Bar:
    """One bar: a value, what it is, and what it was held to."""

    label: str
    value: float
    expected: float | None = None  # drawn as a mark: what it should reach (check's floor)
    ceiling: float | None = None  # drawn as a mark: what bounds it
    verdict: str | None = None  # PASS, WARN, FAIL: its colour
    source: Any = None  # the measurement it is a figure of, where it is one
    kind: str | None = None  # the memory kind it is of: its colour (memprof.output.palette)
    run: int | None = None  # of a picture of several runs: which (0, the reference, plain)
    spread: tuple[float, float] | None = None  # drawn as a whisker: the run's noise

    @property
    def shown(self) -> str:
        return _with_run(self.label, self.run)


def _with_run(label: str, run: int | None) -> str:
    """A series' or bar's label, tagged with its run's number in a picture of several."""
    return label if run is None else f"{label} [{run + 1}]"


@dataclass
class Reference:
    """A bound drawn across a panel of bars, its value written beside it (the link)."""

    value: float
    words: str  # what it is: "PCIe Gen5 x16, one direction"


@dataclass
class Bars:
    """Horizontal bars, one per thing measured, on a linear axis from 0 (their lengths are
    in the ratio of their values); where values span 20x or more, dots on a log axis instead
    (a bar's length on a log axis says nothing)."""

    title: str
    value_label: str
    bars: list[Bar]
    unit: Unit = "GB/s"
    reference: Reference | None = None


@dataclass
class HeatMap:
    """A value per (row, column): GB/s between GPU pairs. None: not measured."""

    title: str
    row_label: str
    column_label: str
    rows: list[str]
    columns: list[str]
    values: list[list[float | None]]
    scale_max: float  # the brightest colour's value: one scale for every heat map of a picture
    scale_words: str = ""  # what the colour bar's scale runs over: "GB/s, 0 to NVLink's 478"


@dataclass
class Span:
    lane: int
    start_ms: float
    end_ms: float
    what: str  # a key of Timeline.kinds


@dataclass
class Timeline:
    """What ran when, one row per lane (a stream)."""

    title: str
    lanes: list[str]
    spans: list[Span]
    kinds: dict[str, str]  # what -> its legend words
    until_ms: float | None = None  # the time axis' end (one for time lines compared); None: its own


@dataclass
class Mark:
    """A numbered stretch of time above a Stacked panel's bars (a trace's idle gap)."""

    start_ms: float
    end_ms: float
    number: int


@dataclass
class Stacked:
    """Each bin of time's shares, stacked: a trace's GPU computing, copying, both and idle
    (the last part, whose bars are cut a little above the others' tallest stack)."""

    title: str
    bin_ms: float  # each bin's width, the last bin's up to until_ms
    until_ms: float
    parts: dict[str, str]  # a part -> its legend words, bottom first
    bins: list[list[float]]  # each bin's ms of each part, in parts' order
    marks: list[Mark] = field(default_factory=list)

    def width_ms(self, index: int) -> float:
        return min(self.bin_ms, self.until_ms - index * self.bin_ms)


@dataclass
class Words:
    """Lines of text: verdicts, or the facts of a command that measures nothing."""

    title: str
    lines: list[str]


Panel = Curves | Bars | HeatMap | Timeline | Stacked | Words


@dataclass(repr=False)
class Picture:
    """A Result's picture: a title and panels, top to bottom, drawn only when asked for."""

    title: str
    panels: list[Panel]
    width_inches: float = 7.5

    def figure(self) -> Any:
        """The matplotlib Figure (drawn once)."""
        drawn = self.__dict__.get("_figure")
        if drawn is None:
            drawn = self.__dict__["_figure"] = draw(self)
        return drawn

    def svg(self) -> str:
        return _saved(self, "svg").decode("utf-8")

    def png(self) -> bytes:
        return _saved(self, "png")

    def html(self) -> str:
        """A small page holding the SVG: self-contained, nothing fetched from a network."""
        svg = self.svg()
        svg = svg[svg.index("<svg") :]  # without the XML declaration and DOCTYPE
        title = html.escape(literal(self.title))
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{title}</title>\n"
            "<style>body { font-family: sans-serif; margin: 1em; } svg { max-width: 100%; "
            "height: auto; }</style>\n</head>\n<body>\n"
            f"{svg}\n</body>\n</html>\n"
        )

    def pdf(self) -> bytes:
        return _saved(self, "pdf")

    def save(self, path: Path) -> None:
        """Write the picture in the format its name ends with (FORMATS), atomically."""
        kind = format_of(path)
        data = self.html() if kind == "html" else _saved(self, kind)
        write_bytes_atomic(path, data.encode("utf-8") if isinstance(data, str) else data)

    _repr_svg_ = svg  # a notebook shows the picture itself

    def __repr__(self) -> str:
        kinds = ", ".join(type(panel).__name__ for panel in self.panels)
        return f"<memprof picture: {self.title!r}, panels: {kinds}>"


def format_of(path: Path, option: str = "") -> str:
    """'svg', 'png', 'pdf' or 'html', by the file's name; InvalidArgument for any other."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        choices = ", ".join(FORMATS)
        named = f"{option} {path}" if option else str(path)
        raise InvalidArgument(f"{named}: a picture is one of {choices}; name the file so")
    return kind


# -- drawing ---------------------------------------------------------------------------------------

RC = {  # over matplotlib's own defaults (rcParamsDefault), never the user's settings
    "svg.fonttype": "none",  # text stays text: readable, searchable, read back by the tests
    "svg.hashsalt": "memprof",  # the same ids every time: pictures re-made differ only if drawn so
    "pdf.fonttype": 42,  # TrueType in PDFs: text a reader can select
    "text.parse_math": False,  # a kernel name with $ in it is text, never mathtext
    "text.usetex": False,  # nor TeX
    "font.size": 8,
    "legend.fontsize": 7,
}
MARKERS = ("o", "s", "^", "D")  # the next ten lines of a panel take the next marker
# a picture of several runs: each run's lines and bars (the first, the reference, dashed)
RUN_STYLES = (("--", "dashed"), ("-", "solid"), (":", "dotted"), ("-.", "dash-dotted"))
RUN_HATCHES = (  # a bar's hatch, a dot's marker (bars drawn as dots), in words
    ("", "o", "plain bars, round dots"),
    ("////", "s", "hatched //// bars, square dots"),
    ("....", "^", "dotted .... bars, triangle dots"),
    ("xxxx", "D", "crossed xxxx bars, diamond dots"),
)
CEILING_STYLES = ("--", ":", "-.")
# marks on bars: what a bar was expected to reach (black), what bounds it (grey)
MARKS = (("expected", "the least expected", "black"), ("ceiling", "its ceiling", "0.4"))
MARK_POINTS_ACROSS = 1.5  # a mark's stroke: a value beside it keeps a gap from it
VALUE_POINTS = 7  # a value's text beside its bar
VALUE_GAP_POINTS = 3  # from a bar's end (a mark, a whisker) to its value
# a value stays readable where the grid's lines run under it (pad: the box's margin, points)
VALUE_BACKGROUND = {"facecolor": "white", "edgecolor": "none", "pad": 0.3}
VERDICT_COLOURS = {"PASS": "#2ca02c", "WARN": "#ff9f0e", "FAIL": "#d62728"}
DPI = 150  # a PNG's dots per inch
GIB = 1 << 30
DOTS_FROM = 20  # bars whose values span this ratio or more are drawn as dots on a log axis
LABEL_CHARACTERS = 48  # longer labels (kernel names) are cut, the end marked with …
TITLE_CHARACTERS = 88  # a panel's title across the picture, at 9 points bold
WORDS_CHARACTERS = 100  # a line of words across the picture, at 7.5 points monospace (a PNG's
# pixels: 10 a letter)
# The layout, in inches: the picture's title, each panel's title above it, its axis labels
# below; every panel's left edge where the longest row label ends.
TOP_INCHES = 0.4
TITLE_INCHES = 0.3
BELOW_INCHES = 0.5
ROW_INCHES = 0.22  # a bar's height
LANE_INCHES = 0.3  # a stream's
CELL_INCHES = (0.95, 0.35)  # a heat map's cell
CURVES_INCHES = 2.4
STACKED_INCHES = 1.8
MARK_POINTS = 10  # a Stacked panel's marks: each its own row above the bars, from the top
CHARACTER_INCHES = 0.075  # a label's character at 8 points, at most about (capitals too)
LOG_LABEL_INCHES = 0.5  # a log axis' tick label ("100 us") and room beside it
EDGE_INCHES = 0.3
LEGEND_BELOW_POINTS = 32  # a time line's legend, below its axis and axis label


def matplotlib_for(purpose: str = "memprof plot") -> Any:
    """matplotlib, or MissingPackage (exit 3), imported without MPLBACKEND (which it refuses
    where that names no backend; memprof needs none: it never draws through pyplot)."""
    backend = os.environ.pop("MPLBACKEND", None)
    try:
        return require_package("matplotlib", MATPLOTLIB_AT_LEAST, "plot", purpose)
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend


@contextlib.contextmanager
def _fixed_settings(matplotlib: Any) -> Any:
    """matplotlib's own defaults and RC while a picture is drawn or saved, not the user's."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # matplotlib's own, not the user's file (backend aside)
        matplotlib.rcParams.update(RC)
        yield


def draw(picture: Picture) -> Any:
    """The picture as a Figure, laid out by hand in inches (constrained layout would draw
    everything twice, doubling a picture's time)."""
    matplotlib = matplotlib_for()
    from matplotlib.figure import Figure

    panels, width = picture.panels, picture.width_inches
    own_left = (Words, Stacked)  # panels left where their own labels need, not at the bars'
    left = max([_left_inches(panel) for panel in panels if not isinstance(panel, own_left)] or [0])
    left = max(left, EDGE_INCHES)
    heights = [TITLE_INCHES + _inside_inches(panel) + _below_inches(panel) for panel in panels]
    height = TOP_INCHES + math.fsum(heights) + 0.1
    with _fixed_settings(matplotlib):
        figure = Figure(figsize=(width, height))
        figure.suptitle(_label(picture.title, 100), fontsize=10, y=1 - 0.12 / height, va="top")
        top = height - TOP_INCHES
        for index, panel in enumerate(panels):
            top -= TITLE_INCHES
            inside = _inside_inches(panel)
            start = max(_left_inches(panel), EDGE_INCHES) if isinstance(panel, own_left) else left
            across = width - start - _right_inches(panel)
            if isinstance(panel, HeatMap):  # its cells keep their size
                across = min(across, CELL_INCHES[0] * max(len(panel.columns), 1))
            box = (start / width, (top - inside) / height, across / width, inside / height)
            axes = figure.add_axes(box)
            axes.set_gid(f"p{index}")
            _no_automatic_placing(axes)
            DRAWERS[type(panel).__name__](axes, panel, f"p{index}")
            top -= inside + _below_inches(panel)
    return figure


# Each kind of panel's height inside its axes, and the room left of it for its row labels
# (bars, lanes, GPUs) and axis label
INSIDE_INCHES: dict[str, Callable[[Any], float]] = {
    "Bars": lambda panel: 0.15 + ROW_INCHES * len(panel.bars),
    "Timeline": lambda panel: 0.2 + LANE_INCHES * len(panel.lanes),
    "Stacked": lambda panel: STACKED_INCHES,
    "Words": lambda panel: 0.17 * max(len(panel.lines), 1),
    "HeatMap": lambda panel: max(0.7, CELL_INCHES[1] * len(panel.rows)),
    "Curves": lambda panel: CURVES_INCHES,
}
LEFT_INCHES: dict[str, Callable[[Any], float]] = {
    "Bars": lambda panel: 0.15 + CHARACTER_INCHES * _characters(bar.shown for bar in panel.bars),
    "Timeline": lambda panel: 0.15 + CHARACTER_INCHES * _characters(panel.lanes),
    "HeatMap": lambda panel: 0.45 + CHARACTER_INCHES * _characters(panel.rows),
    "Words": lambda panel: EDGE_INCHES,
}


def _inside_inches(panel: Panel) -> float:
    return INSIDE_INCHES[type(panel).__name__](panel)


def _left_inches(panel: Panel) -> float:
    return LEFT_INCHES.get(type(panel).__name__, lambda panel: 0.8)(panel)


def _below_inches(panel: Panel) -> float:
    if isinstance(panel, Timeline | Stacked):  # its legend stands under its axis label
        return BELOW_INCHES + LEGEND_BELOW_POINTS / 72 - 0.15
    return 0.1 if isinstance(panel, Words) else BELOW_INCHES


def _characters(labels: Iterable[str]) -> int:
    return max((len(_label(label)) for label in labels), default=0)


def _right_inches(panel: Panel) -> float:
    """Room right of a panel: a curve's legend stands there."""
    if isinstance(panel, Curves):
        return 0.55 + CHARACTER_INCHES * _characters(line.in_legend for line in panel.lines)
    return EDGE_INCHES


def _curves(axes: Any, panel: Curves, gid: str) -> None:
    _title(axes, panel.title)
    if not panel.linear:
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
    names: set[str] = set()
    ceilings = 0
    measured = [line for line in panel.lines if not line.ceiling]
    colour_of, series = _series_colours(measured)
    for line in panel.lines:
        kept = [i for i, (x, y) in enumerate(line.points) if x > 0 and y > 0]
        xs, ys = [line.points[i][0] for i in kept], [line.points[i][1] for i in kept]
        if line.ceiling:
            style = CEILING_STYLES[ceilings % len(CEILING_STYLES)]
            (drawn,) = axes.plot(xs, ys, linestyle=style, color=CEILING, linewidth=1)
            ceilings += 1
        else:
            colour = colour_of[id(line)]
            marker = MARKERS[series[id(line)] // len(OTHERS) % len(MARKERS)]
            style = "-" if line.run is None else RUN_STYLES[line.run % len(RUN_STYLES)][0]
            (drawn,) = axes.plot(
                xs, ys, marker=marker, markersize=3, linewidth=1.3, color=colour, linestyle=style
            )
            if line.band:  # the run's noise about each point, translucent
                band = axes.fill_between(
                    xs, [line.band[i][0] for i in kept], [line.band[i][1] for i in kept],
                    color=colour, alpha=0.18, linewidth=0,
                )  # fmt: skip
                band.set_gid(_gid(f"{gid}-band-{line.shown}", names))
        drawn.set_label(_label(line.in_legend))
        drawn.set_gid(_gid(f"{gid}-{'ceiling' if line.ceiling else 'line'}-{line.shown}", names))
    _x_label(axes, panel.x_label)
    _y_label(axes, panel.y_label, 42)
    (_linear_axes if panel.linear else _log_axes)(axes, panel)
    _ticks(axes.xaxis, "bytes")
    _ticks(axes.yaxis, panel.y_unit)
    axes.grid(True, which="major", color="0.9", linewidth=0.6)
    if panel.lines:
        axes.legend(handles=_legend(axes, panel), loc="upper left", bbox_to_anchor=(1.01, 1),
                    frameon=False)  # fmt: skip


def _legend(axes: Any, panel: Curves) -> list[Any]:
    """A legend entry per series, not per run (the runs' line styles are said in words).
    Every line drawn is a series' (a label from "_", matplotlib's hidden, is a result's too)."""
    drawn = axes.get_lines()
    shown, seen = [], set()
    for line, handle in zip(panel.lines, drawn, strict=True):
        if line.run is None or line.ceiling:
            shown.append(handle)
        elif (line.kind, line.label) not in seen:
            seen.add((line.kind, line.label))
            (proxy,) = axes.plot([], [], color=handle.get_color(), marker=handle.get_marker(),
                                 markersize=3, linewidth=1.3, label=handle.get_label())  # fmt: skip
            shown.append(proxy)
    return shown


def _series_colours(items: list[Any]) -> tuple[dict[int, str], dict[int, int]]:
    """Each line's or bar's colour and its series' place, by id: a series (kind and label)
    has one colour in every run."""
    keys = {id(item): (item.kind, item.label) for item in items}
    unique = list(dict.fromkeys(keys.values()))
    chosen = dict(zip(unique, colours([kind for kind, _ in unique]), strict=True))
    places = {key: index for index, key in enumerate(unique)}
    return {i: chosen[key] for i, key in keys.items()}, {i: places[key] for i, key in keys.items()}


def _linear_axes(axes: Any, panel: Curves) -> None:
    from matplotlib.ticker import MaxNLocator

    top = max((y for line in panel.lines for _, y in line.points), default=1.0)
    axes.set_ylim(0, top * 1.15)
    axes.set_xlim(left=0)
    right = max((x for line in panel.lines for x, _ in line.points), default=GIB)
    step = GIB << max(0, math.ceil(math.log2(max(right / GIB, 1) / 4)))  # whole GiB, 4 at most
    axes.set_xticks(range(step, int(right) + 1, step))
    axes.yaxis.set_major_locator(MaxNLocator(6))


def _log_axes(axes: Any, panel: Curves) -> None:
    from matplotlib.ticker import LogLocator, NullLocator

    sizes = [x for line in panel.lines for x, _ in line.points if x > 0]
    spread = math.log2(max(sizes) / min(sizes)) if sizes else 0
    axes.xaxis.set_major_locator(LogLocator(base=4 if spread <= 14 else 16))  # <= 8 labels
    axes.xaxis.set_minor_locator(NullLocator())  # each tick costs: none unlabelled
    axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_minor_locator(NullLocator())
    _spread_log_limits(axes, [y for line in panel.lines for _, y in line.points if y > 0])


def _no_automatic_placing(axes: Any) -> None:
    """Fixed places for matplotlib's own (empty) title and axis labels: placing them measures
    every tick label, a fifth of a picture's time."""
    axes.set_title("", y=1.0)
    axes.xaxis.set_label_coords(0.5, -0.1)
    axes.yaxis.set_label_coords(-0.1, 0.5)


def _points(axes: Any, x: float, y: float) -> Any:
    """A shift of (x, y) points, for a transform."""
    from matplotlib.transforms import ScaledTranslation

    return ScaledTranslation(x / 72, y / 72, axes.figure.dpi_scale_trans)


def _title(axes: Any, text: str) -> None:
    """A panel's title, from the picture's left edge, however wide the row labels are."""
    from matplotlib.transforms import blended_transform_factory

    figure = axes.figure
    edge = EDGE_INCHES / figure.get_figwidth()
    across = blended_transform_factory(figure.transFigure, axes.transAxes)
    axes.text(
        edge, 1, _label(text, TITLE_CHARACTERS), transform=across + _points(axes, 0, 5),
        ha="left", va="bottom", fontsize=9, fontweight="bold",
    )  # fmt: skip


def _x_label(axes: Any, text: str) -> None:
    """An axis label under the tick labels."""
    axes.text(0.5, 0, text, transform=axes.transAxes + _points(axes, 0, -19), ha="center", va="top")


def _y_label(axes: Any, text: str, left_points: float) -> None:
    """An axis label `left_points` left of the axes, beyond its tick labels."""
    axes.text(
        0, 0.5, text, transform=axes.transAxes + _points(axes, -left_points, 0), ha="right",
        va="center", rotation=90,
    )  # fmt: skip


def _log_subs(decades: float, across_inches: float = math.inf) -> tuple[float, ...]:
    """Ticks within each decade of a log axis `across_inches` wide: 1, 2, 5 or fewer, so
    labels never meet ("100 us" takes half an inch; 1 to 2 is 0.3 of a decade, 1 to 3 half)."""
    per_decade = across_inches / max(decades, 1e-9)
    if decades <= 3 and per_decade >= LOG_LABEL_INCHES / 0.3:
        return (1.0, 2.0, 5.0)
    if decades <= 4.5 and per_decade >= LOG_LABEL_INCHES / 0.47:
        return (1.0, 3.0)
    return (1.0,)


def _spread_log_limits(axes: Any, values: list[float]) -> None:
    """Y limits a factor 3 or more apart, so a log axis always shows labelled ticks."""
    if not values:
        return
    low, high = min(values) / 1.3, max(values) * 1.3
    if high / low < 3:
        middle = math.sqrt(low * high)
        low, high = middle / math.sqrt(3), middle * math.sqrt(3)
    axes.set_ylim(low, high)


def _bars(axes: Any, panel: Bars, gid: str) -> None:
    from matplotlib.ticker import LogLocator, NullLocator

    _title(axes, panel.title)
    values = [bar.value for bar in panel.bars if bar.value > 0]
    reference = [panel.reference.value] if panel.reference is not None else []
    everything = values + reference
    everything += [v for bar in panel.bars for v in (bar.expected, bar.ceiling) if v]
    everything += [v for bar in panel.bars for v in bar.spread or () if v > 0]
    dots = bool(values) and max(everything) / min(everything) >= DOTS_FROM
    base = min(everything) / 2 if dots else 0.0
    across = axes.get_position().width * axes.figure.get_figwidth()
    beside = 5 if dots else VALUE_GAP_POINTS  # from a dot's centre, a bar's end
    places = [(max(bar.value, base, *(bar.spread or ())), beside) for bar in panel.bars]
    top = max(everything, default=1.0) * (4 if dots else 1.3)
    if values:
        places, top = _value_places(panel, base, top, 72 * across, beside, dots)
    if dots:
        axes.set_xscale("log")
        decades = math.log10(top / base)  # the limits set below
        axes.xaxis.set_major_locator(LogLocator(base=10, subs=_log_subs(decades, across)))
        axes.xaxis.set_minor_locator(NullLocator())  # each tick costs: none unlabelled
    _ticks(axes.xaxis, panel.unit)
    positions = list(range(len(panel.bars)))[::-1]  # the first bar on top
    names: set[str] = set()
    colour_of, _ = _series_colours(panel.bars)
    fills = [VERDICT_COLOURS.get(bar.verdict or "") or colour_of[id(bar)] for bar in panel.bars]
    if dots:  # a dot at each value, on a faint line from the axis: no length to misread
        axes.hlines(positions, base, [bar.value for bar in panel.bars], color="0.85", lw=0.8)
        for y, bar, fill in zip(positions, panel.bars, fills, strict=True):
            marker = "o" if bar.run is None else RUN_HATCHES[bar.run % len(RUN_HATCHES)][1]
            (dot,) = axes.plot([bar.value], [y], linestyle="none", marker=marker, markersize=5,
                               color=fill)  # fmt: skip
            dot.set_gid(_gid(f"{gid}-bar-{bar.shown}", names))
    else:
        runs = {}  # a picture of several runs: each run's hatch, in white
        if any(bar.run is not None for bar in panel.bars):
            hatches = [RUN_HATCHES[(bar.run or 0) % len(RUN_HATCHES)][0] for bar in panel.bars]
            runs = {"hatch": hatches, "edgecolor": "white", "linewidth": 0}
        rectangles = axes.barh(
            positions, [bar.value for bar in panel.bars], height=0.6, color=fills, **runs
        )
        for bar, rectangle in zip(panel.bars, rectangles, strict=True):
            rectangle.set_gid(_gid(f"{gid}-bar-{bar.shown}", names))
    for y, bar, (x, gap_points) in zip(positions, panel.bars, places, strict=True):
        for kind, _, colour in MARKS:
            mark = getattr(bar, kind)
            if mark:
                (drawn,) = axes.plot([mark], [y], linestyle="none", marker="|", markersize=11,
                                     markeredgewidth=MARK_POINTS_ACROSS, color=colour)  # fmt: skip
                drawn.set_gid(_gid(f"{gid}-{kind}-{bar.shown}", names))
        if bar.spread is not None:  # a whisker over the run's noise, capped at both ends
            (whisker,) = axes.plot(list(bar.spread), [y, y], color="black", linewidth=0.8,
                                   marker="|", markersize=5)  # fmt: skip
            whisker.set_gid(_gid(f"{gid}-spread-{bar.shown}", names))
        axes.text(
            x, y, _value_words(bar, panel.unit), va="center", fontsize=VALUE_POINTS,
            transform=axes.transData + _points(axes, gap_points, 0), bbox=VALUE_BACKGROUND,
            gid=_gid(f"{gid}-value-{bar.shown}", names),
        )  # fmt: skip
    if panel.reference is not None:
        line = axes.axvline(panel.reference.value, color=CEILING, linestyle="--", linewidth=1)
        line.set_gid(f"{gid}-reference")
    axes.set_yticks([])  # the labels as plain text: a tick per bar costs ten times as much
    left_of_axes = axes.get_yaxis_transform()  # x in the axes' width, y in the bars'
    for y, bar in zip(positions, panel.bars, strict=True):
        axes.text(
            -0.01, y, _label(bar.shown), transform=left_of_axes, ha="right", va="center",
            gid=_gid(f"{gid}-label-{bar.shown}", names),
        )  # fmt: skip
    axes.set_ylim(-0.6, len(panel.bars) - 0.4)
    marks = []
    for name, words, _ in MARKS:
        found = {getattr(bar, name) for bar in panel.bars if getattr(bar, name)}
        if len(found) == 1:  # one value for every bar: said
            marks.append(f"{words}, {_value_text(found.pop(), panel.unit)}")
        elif found:
            marks.append(words)
    words = panel.value_label + "".join(f";  | = {words}" for words in marks)
    if panel.reference is not None:
        reference = panel.reference
        words += f";  dashed: {reference.words}, {_value_text(reference.value, panel.unit)}"
    _x_label(axes, words)
    if values:
        axes.set_xlim(base, top)
    axes.grid(True, axis="x", color="0.9", linewidth=0.6)
    axes.set_axisbelow(True)


def _value_places(
    panel: Bars, base: float, top: float, across_points: float, beside_points: float, dots: bool
) -> tuple[list[tuple[float, float]], float]:
    """Where each bar's value is written, as (x, points right of x), and the value axis' end:
    `top`, or further where a value needs the room (a further end moves each value on a log
    axis, so it is found again from there)."""
    scaled = (lambda x: math.log(x / base)) if dots else (lambda x: x - base)
    widths = _text_points([_value_words(bar, panel.unit) for bar in panel.bars], VALUE_POINTS)
    bounds = [panel.reference.value] if panel.reference is not None else []
    for _ in range(8):  # twice at most, in every recorded picture
        places, needed = [], 0.0
        per_unit = across_points / scaled(top)  # points along the axis per unit of scaled(x)
        for bar, width in zip(panel.bars, widths, strict=True):
            marks = sorted([*bounds, *(v for v in (bar.expected, bar.ceiling) if v)])
            after = max(bar.value, base, *(bar.spread or ()))  # its own bar's (whisker's) end
            at = lambda x, per_unit=per_unit: per_unit * scaled(x)  # noqa: E731
            x, gap = _value_place(after, marks, width, at, beside_points)
            places.append((x, gap))
            # its end a gap inside the frame: scaled(top) >= scaled(x) * across / room
            room = across_points - gap - width - VALUE_BACKGROUND["pad"] - VALUE_GAP_POINTS
            needed = max(needed, scaled(x) * across_points / max(room, across_points / 4))
        wanted = base * math.exp(needed) if dots else base + needed
        if wanted <= top * (1 + 1e-9):
            break
        top = wanted
    return places, top


def _value_place(
    after: float, marks: list[float], width_points: float, at: Callable[[float], float],
    beside_points: float,
) -> tuple[float, float]:  # fmt: skip
    """Where a value `width_points` wide is written, as (x, points right of x): beside its bar's
    end `after`, else just right of the last of `marks` (in order) it would come within a gap
    of there ("55.5 G|B/s", "51.3 GB/s|"), so the bar, each mark and the number are all seen.
    `at`: an x's points along the axis."""
    clear = MARK_POINTS_ACROSS / 2 + VALUE_GAP_POINTS  # from a mark's middle to a value
    place = (after, beside_points)
    for mark in marks:
        begin = at(place[0]) + place[1]
        if at(mark) - clear < begin + width_points and begin < at(mark) + clear:
            place = (mark, clear)
    return place


def _text_points(texts: list[str], size_points: float) -> list[float]:
    """Each text's width in points, as a PNG draws it (its hinting widens it a little)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer, font = RendererAgg(1, 1, DPI), FontProperties(size=size_points)
    widths = [renderer.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts]
    return [width * 72 / DPI for width in widths]


def _heat_map(axes: Any, panel: HeatMap, gid: str) -> None:
    import numpy as np

    _title(axes, panel.title)
    grid = np.array([[math.nan if v is None else v for v in row] for row in panel.values])
    image = axes.imshow(grid, cmap="viridis", aspect="auto", vmin=0, vmax=panel.scale_max)
    image.set_gid(f"{gid}-image")
    bar = axes.inset_axes((1.04, 0, 0.04, 1))  # the colour scale, right of the cells
    axes.figure.colorbar(image, cax=bar)
    bar.tick_params(labelsize=7)
    bar.set_gid(f"{gid}-scale")
    if panel.scale_words:
        bar.text(
            1, 0.5, f"colour: {panel.scale_words}", transform=bar.transAxes + _points(axes, 28, 0),
            ha="left", va="center", fontsize=7, gid=f"{gid}-scale-words",
        )  # fmt: skip
    for r, row in enumerate(panel.values):
        for c, value in enumerate(row):
            bright = value is not None and value > 0.6 * panel.scale_max
            axes.text(
                c, r, "-" if value is None else format_gb_per_s(value),
                ha="center", va="center", fontsize=8,
                color="0.3" if value is None else ("black" if bright else "white"),
                gid=f"{gid}-cell-{r}-{c}",
            )  # fmt: skip
    axes.set_xticks(range(len(panel.columns)), [_label(c) for c in panel.columns])
    axes.set_yticks(range(len(panel.rows)), [_label(r) for r in panel.rows])
    _x_label(axes, panel.column_label)
    _y_label(axes, panel.row_label, 8 + 72 * CHARACTER_INCHES * _characters(panel.rows))


def _timeline(axes: Any, panel: Timeline, gid: str) -> None:
    _title(axes, panel.title)
    fills = dict(zip(panel.kinds, colours([None] * len(panel.kinds)), strict=True))
    names: set[str] = set()
    spans = panel.spans
    rectangles = axes.barh(
        [span.lane for span in spans], [span.end_ms - span.start_ms for span in spans],
        left=[span.start_ms for span in spans], height=0.7, edgecolor="white", linewidth=0.4,
        color=[fills.get(span.what, "0.5") for span in spans],
    )  # fmt: skip
    for index, (span, rectangle) in enumerate(zip(spans, rectangles, strict=True)):
        rectangle.set_gid(_gid(f"{gid}-span-{span.lane}-{span.what}-{index}", names))
    axes.set_yticks(range(len(panel.lanes)), [_label(lane) for lane in panel.lanes])
    axes.set_ylim(len(panel.lanes) - 0.5, -0.5)  # the first lane on top
    _x_label(axes, "time from the run's first operation")
    _ticks(axes.xaxis, "ms")
    until_ms = panel.until_ms or max((span.end_ms for span in panel.spans), default=1)
    axes.set_xlim(0, until_ms * 1.02)
    _legend_below(axes, fills, panel.kinds)


def _legend_below(axes: Any, fills: dict[str, str], words: dict[str, str]) -> None:
    """A time line's legend, under its axis label: a patch of each part's colour."""
    from matplotlib.patches import Patch

    axes.legend(
        handles=[Patch(color=fills[part], label=said) for part, said in words.items()],
        loc="upper right", bbox_to_anchor=(1, 0), frameon=False, ncols=len(words),
        borderaxespad=0, bbox_transform=axes.transAxes + _points(axes, 0, -LEGEND_BELOW_POINTS),
    )  # fmt: skip


def _stacked(axes: Any, panel: Stacked, gid: str) -> None:
    from matplotlib.ticker import FuncFormatter
    from matplotlib.transforms import blended_transform_factory

    _title(axes, panel.title)
    fills = dict(zip(panel.parts, [*colours([None] * (len(panel.parts) - 1)), IDLE], strict=True))
    lefts = [index * panel.bin_ms for index in range(len(panel.bins))]
    widths = [panel.width_ms(index) for index in range(len(panel.bins))]
    shares = [
        [100 * ms / width for ms in one] for one, width in zip(panel.bins, widths, strict=True)
    ]
    ticks, cut = stacked_scale(shares)
    bottoms = [0.0] * len(panel.bins)
    names: set[str] = set()
    for at, part in enumerate(panel.parts):
        heights = [min(one[at], cut - bottom) for one, bottom in zip(shares, bottoms, strict=True)]
        drawn = axes.bar(lefts, heights, widths, bottom=bottoms, align="edge", linewidth=0,
                         color=fills[part])  # fmt: skip
        for index, rectangle in enumerate(drawn):
            rectangle.set_gid(_gid(f"{gid}-part-{part}-{index}", names))
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    height_points = axes.get_position().height * axes.figure.get_figheight() * 72
    strip_points = MARK_POINTS * len(panel.marks) + (4 if panel.marks else 0)
    axes.set_ylim(0, cut * height_points / (height_points - strip_points))  # marks above
    axes.set_yticks(ticks)
    axes.set_xlim(0, panel.until_ms)
    across = blended_transform_factory(axes.transData, axes.transAxes)
    for row, mark in enumerate(panel.marks):
        height = 1 - MARK_POINTS * (row + 0.5) / height_points
        (line,) = axes.plot([mark.start_ms, mark.end_ms], [height, height], transform=across,
                            color="black", linewidth=1.2, marker="|", markersize=6)  # fmt: skip
        line.set_gid(_gid(f"{gid}-mark-{mark.number}", names))
        axes.text(
            mark.start_ms, height, f"{mark.number} ", transform=across, ha="right",
            va="center", fontsize=7, gid=_gid(f"{gid}-mark-number-{mark.number}", names),
        )  # fmt: skip
    _ticks(axes.xaxis, "ms")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%"))
    cut_words = f"; idle drawn up to {cut:g}%" if cut < 100 else ""
    bins = f"in bins of {_time_tick(panel.bin_ms)}{cut_words}"
    _x_label(axes, f"time from the first recorded event, {bins}")
    _y_label(axes, "share of each bin", 34)
    _legend_below(axes, fills, panel.parts)


def stacked_scale(shares: list[list[float]]) -> tuple[list[float], float]:
    """A Stacked panel's y ticks in %, and its cut: a round share a quarter above the tallest
    stack but idle, 100% at most, so a GPU busy 2% of a bin shows as more than a line."""
    from matplotlib.ticker import MaxNLocator

    tallest = max((math.fsum(one[:-1]) for one in shares), default=0.0)
    top = max(tallest * 1.25, 1e-3)
    ticks = [float(t) for t in MaxNLocator(4).tick_values(0, top) if t >= 0]
    cut = min(100.0, ticks[-1])
    return [t for t in ticks if t < cut] + [cut], cut


def _words(axes: Any, panel: Words, gid: str) -> None:
    axes.set_axis_off()
    _title(axes, panel.title)
    count = max(len(panel.lines), 1)
    for index, line in enumerate(panel.lines):
        axes.text(
            0, 1 - (index + 0.5) / count, _label(line, WORDS_CHARACTERS), transform=axes.transAxes,
            va="center", fontsize=7.5, family="monospace", gid=f"{gid}-words-{index}",
        )  # fmt: skip


DRAWERS = {
    "Curves": _curves,
    "Bars": _bars,
    "HeatMap": _heat_map,
    "Timeline": _timeline,
    "Stacked": _stacked,
    "Words": _words,
}


def _saved(picture: Picture, kind: str) -> bytes:
    matplotlib = matplotlib_for()
    buffer = io.BytesIO()
    metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(kind, {"Software": None})
    with _fixed_settings(matplotlib):
        picture.figure().savefig(buffer, format=kind, dpi=DPI, metadata=metadata)
    return buffer.getvalue()


# -- words on a picture ----------------------------------------------------------------------------


def _label(text: str, limit: int = LABEL_CHARACTERS) -> str:
    """A result's string as drawn: literal, one line, at most `limit` characters."""
    shown = literal(text).replace("\n", " ")
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


_NOT_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def _gid(text: str, taken: set[str]) -> str:
    """An SVG id from a label (letters, digits, _ . -), unique within the picture's panel."""
    base = _NOT_ID.sub("_", text).strip("_") or "item"
    gid, number = base, 1
    while gid in taken:
        number += 1
        gid = f"{base}-{number}"
    taken.add(gid)
    return gid


def _tick(value: float, unit: Unit) -> str:
    """A tick's label: sizes as 4 KiB, times as 10 us, GB/s as plain numbers (a tick at 2.5
    or 17.5 keeps its fraction: below 100 a linear axis steps by 2.5 as often as by 2)."""
    if value <= 0:
        return "0"
    if unit == "bytes":
        return format_bytes(value)
    if unit == "ms":
        return _time_tick(value)
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ticks(axis: Any, unit: Unit) -> None:
    """An axis' tick labels in `unit` (_tick)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: _tick(v, unit)))


def _time_tick(milliseconds: float) -> str:
    for scale, name in ((1e3, "s"), (1.0, "ms"), (1e-3, "us"), (1e-6, "ns")):
        if milliseconds >= scale * 0.999:
            return f"{milliseconds / scale:g} {name}"
    return f"{milliseconds / 1e-6:g} ns"


def _value_words(bar: Bar, unit: Unit) -> str:
    """What is written beside a bar: its value, after its verdict where it has one."""
    shown = _value_text(bar.value, unit)
    return f"{bar.verdict} {shown}" if bar.verdict else shown


def _value_text(value: float, unit: Unit) -> str:
    """A bar's value as the tables print it: 53.4 GB/s, 78.0us."""
    return format_ms(value) if unit == "ms" else f"{format_gb_per_s(value)} GB/s"


def wrapped(text: str, indent: str = "") -> list[str]:
    """A long line as several for a Words panel, the later ones indented by `indent`."""
    return textwrap.wrap(literal(text), WORDS_CHARACTERS, subsequent_indent=indent) or [""]
