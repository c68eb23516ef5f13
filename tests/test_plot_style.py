"""memprof's pictures look the same wherever they are drawn: one colour per memory kind in
every picture, matplotlib's user settings kept out, strings from a result drawn literally,
and a PDF beside the SVG, PNG and HTML."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

from memprof.experiments import load, summarize
from memprof.experiments.pictures import picture
from memprof.output.palette import KIND_COLOURS, OTHERS, colours, kind_of
from memprof.output.plot import DPI, Bar, Bars, Line, Picture, Words
from tests.conftest import FIXTURES
from tests.test_plot import SVG, drawn, pictured

ROOT = Path(__file__).resolve().parent.parent


def colour_of(element: ElementTree.Element) -> str:
    """The colour an SVG element is drawn in: its stroke (a line) or fill (a bar, a dot)."""
    for part in element.iter():
        style = part.get("style") or ""
        found = re.search(r"(?:stroke|fill): (#[0-9a-f]{6})", style)
        if found:
            return found[1]
    raise AssertionError(f"no colour in {element.get('id')}")


def kind_colours(stem: str) -> dict[str, set[str]]:
    """Each memory kind's colours as drawn in a fixture's picture (lines and bars)."""
    d = drawn(stem)
    found: dict[str, set[str]] = {}
    for index, panel in enumerate(d.picture.panels):
        gid = f"p{index}"
        if isinstance(panel, Bars):
            items = [(bar.kind, bar.verdict) for bar in panel.bars]
            prefix = f"{gid}-bar-"
        elif hasattr(panel, "lines") and panel.lines and isinstance(panel.lines[0], Line):
            items = [(line.kind, None) for line in panel.lines if not line.ceiling]
            prefix = f"{gid}-line-"
        else:
            continue
        elements = [e for i, e in d.ids.items() if i.startswith(prefix)]
        for (kind, verdict), element in zip(items, elements, strict=True):
            if kind_of(kind or "") and verdict is None:
                found.setdefault(kind_of(kind), set()).add(colour_of(element))
    return found


def test_each_memory_kind_has_one_colour_in_every_picture():
    """Pinned was orange in sweep and blue in smallcopies; alloc drew two kinds in one."""
    seen: dict[str, set[str]] = {}
    stems = ("h200_sweep", "h200_smallcopies", "h200_alloc", "h200_compare",
             "h200_zerocopy_sweep", "h200_pinned_p20", "h200_managed")  # fmt: skip
    for stem in stems:
        for kind, found in kind_colours(stem).items():
            assert len(found) == 1, (stem, kind, found)
            seen.setdefault(kind, set()).update(found)
    assert {kind: found.pop() for kind, found in seen.items()} == {
        kind: KIND_COLOURS[kind] for kind in seen
    }
    assert {"pinned", "pageable", "device", "managed", "mapped", "vmm"} <= set(seen)
    alloc = kind_colours("h200_alloc")
    assert len({c for found in alloc.values() for c in found}) == len(alloc) >= 10


def test_the_palette_gives_kinds_their_own_colour_and_the_rest_others():
    assert len(set(KIND_COLOURS.values())) == len(KIND_COLOURS)
    assert not set(OTHERS) & set(KIND_COLOURS.values())
    assert colours(["pinned", "batched", "managed+prefetch", None, "gathered"]) == [
        KIND_COLOURS["pinned"], OTHERS[0], KIND_COLOURS["managed"], OTHERS[1], OTHERS[2],
    ]  # fmt: skip
    assert kind_of("managed first touch") == "managed" and kind_of("batched") is None


def test_bars_spanning_twenty_times_or_more_are_dots_on_a_log_axis():
    """A bar's length on a log axis misreads a ratio (a 20x gap drawn as 3x): dots there,
    bars from zero below 20x."""

    def dots(values: list[float]) -> bool:
        shown = Picture("t", [Bars("b", "GB/s", [Bar(f"v{i}", v) for i, v in enumerate(values)])])
        tree = ElementTree.fromstring(shown.svg())
        bar = next(e for e in tree.iter() if e.get("id") == "p0-bar-v0")
        return bool(list(bar.iter(f"{SVG}use")))  # a marker, not a rectangle

    assert dots([1.0, 19.9]) is False
    assert dots([1.0, 20.0]) is True


def _draw_pinned_in(folder: Path, env: dict[str, str]) -> str:
    """The SVG `memprof plot` draws of the pinned fixture, run in `folder` with `env`."""
    target = folder / "pinned.svg"
    subprocess.run(
        [sys.executable, "-m", "memprof", "plot", str(FIXTURES / "h200_pinned_p20.json"), "-o",
         str(target)],
        cwd=folder, env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return target.read_text("utf-8")


def test_the_users_matplotlib_settings_do_not_reach_a_picture(tmp_path):
    """A matplotlibrc in the working folder (text.usetex, another font size and colours) and
    MPLBACKEND=nonsense change nothing: `memprof plot` draws the picture drawn here without
    them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    expected = picture(*_pinned()).svg()
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "matplotlibrc").write_text(
        "text.usetex: True\nfont.size: 20\naxes.facecolor: red\nsvg.fonttype: path\n"
        "axes.prop_cycle: cycler('color', ['k'])\n"
    )
    assert _draw_pinned_in(hostile, {**env, "MPLBACKEND": "nonsense"}) == expected


def test_settings_made_in_the_same_process_do_not_reach_a_picture():
    import matplotlib

    shown = picture(*_pinned())
    expected = shown.svg()
    again = picture(*_pinned())
    hostile = {
        "text.usetex": True,
        "font.size": 20,
        "axes.facecolor": "red",
        "font.family": "serif",
    }
    with matplotlib.rc_context(hostile):
        assert again.svg() == expected
        assert matplotlib.rcParams["font.size"] == 20  # the user's, after the picture
    assert matplotlib.rcParams["text.usetex"] is False


def _pinned():
    result = load(FIXTURES / "h200_pinned_p20.json")
    return result, summarize(result)


def test_a_name_with_tex_in_it_is_drawn_as_written():
    import matplotlib

    names = ["$x^2$ kernel", r"\frac{a}{b} $\alpha$"]
    shown = Picture("$y$", [Bars("$t$", "GB/s", [Bar(name, 1.0 + i) for i, name in
                                                 enumerate(names)])])  # fmt: skip
    with matplotlib.rc_context({"text.usetex": True}):
        svg = shown.svg()
    words = ["".join(t.itertext()) for t in ElementTree.fromstring(svg).iter(f"{SVG}text")]
    assert set(names) | {"$y$", "$t$"} <= set(words)


def test_a_picture_is_saved_as_pdf_too(tmp_path):
    shown = picture(*_pinned())
    target = tmp_path / "pinned.pdf"
    shown.save(target)
    data = target.read_bytes()
    assert data.startswith(b"%PDF-") and b"CreationDate" not in data
    assert shown.pdf() == data  # the same bytes every time


def text_faults(shown: Picture) -> list[str]:
    """Every text of a drawn picture that reaches past the picture's edges, and every pair of
    texts that overlap ("100 us300 us")."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from memprof.output.plot import _fixed_settings

    figure = shown.figure()
    figure.set_dpi(DPI)  # as a PNG is drawn: text at 7.5 points takes whole pixels per letter
    canvas = FigureCanvasAgg(figure)
    with _fixed_settings(matplotlib):
        # lays out as canvas.draw() does, without painting a pixel: the same boxes for every
        # fixture (compared) in 40% of the time
        figure.draw_without_rendering()
        renderer = canvas.get_renderer()
        hidden = set()  # the labels of ticks outside an axis' limits: made, never drawn
        for axes in figure.findobj(matplotlib.axes.Axes):  # colour bars inside panels too
            for axis in (axes.xaxis, axes.yaxis):
                drawn_ticks = set(axis._update_ticks()) if axes.axison else set()
                for tick in axis.majorTicks + axis.minorTicks:
                    if tick not in drawn_ticks:
                        hidden.update((tick.label1, tick.label2))
        boxes = [
            (text.get_text(), text.get_window_extent(renderer))
            for text in figure.findobj(Text)
            if text.get_visible() and text.get_text() and text not in hidden
        ]
    edge, found = figure.bbox, []
    for words, box in boxes:
        if box.x0 < edge.x0 - 0.5 or box.x1 > edge.x1 + 0.5 or box.y0 < edge.y0 - 0.5:
            found.append(f"cut: {words}")
    for index, (words, box) in enumerate(boxes):
        for other, beside in boxes[index + 1 :]:
            across = min(box.x1, beside.x1) - max(box.x0, beside.x0)
            up = min(box.y1, beside.y1) - max(box.y0, beside.y0)
            if across > 1 and up > 1:  # more than a pixel each way
                found.append(f"overlap: {words} / {other}")
    return found


@pytest.mark.parametrize("stem", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_no_text_is_cut_or_runs_into_another(stem):
    """Values and verdicts were cut at the frame (check's longest verdict, a dot's value);
    tick labels ran into each other."""
    assert text_faults(pictured(stem)[2]) == []


def test_texts_past_the_edge_or_on_each_other_are_found(monkeypatch):
    import memprof.output.plot as plot

    shown = Picture("t", [Words("w", ["x" * 200])], width_inches=3.0)
    assert text_faults(shown) == [f"cut: {'x' * 99}…"]
    monkeypatch.setattr(plot, "ROW_INCHES", 0.02)  # bars too close for their labels
    crowded = Picture("t", [Bars("b", "GB/s", [Bar("one", 1.0), Bar("two", 2.0)])])
    assert "overlap: one / two" in text_faults(crowded)


def test_a_log_axis_beside_long_labels_has_fewer_ticks_so_they_do_not_meet():
    """The H200's DataLoader trace: its source lines' bars, 7.6 us to 877 us beside labels
    of 48 characters, wrote '100 us' into '200 us' on an axis 3.4 inches wide."""
    label = "torch_dataloader.py:84 (other thread) DtoD device -> device"
    found = (0.876545, 0.292224, 0.246463, 0.073853, 0.030402, 0.028573, 0.007552)  # its ms
    bars = [Bar(f"{label} {i}", ms) for i, ms in enumerate(found)]
    shown = Picture("t", [Bars("GPU time by source line", "GPU time", bars, unit="ms")])
    assert text_faults(shown) == []


@pytest.mark.parametrize(
    ("decades", "across_inches", "subs"),
    [(3.0, 5.0, (1.0, 2.0, 5.0)), (3.0, 4.99, (1.0, 3.0)), (2.6, 3.45, (1.0, 3.0)),
     (4.0, 4.26, (1.0, 3.0)), (4.0, 4.25, (1.0,))],
)  # fmt: skip
def test_a_narrow_log_axis_has_fewer_ticks_in_each_decade(decades, across_inches, subs):
    from memprof.output.plot import _log_subs

    assert _log_subs(decades, across_inches) == subs
