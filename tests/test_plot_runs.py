"""`memprof plot A.json B.json ...`: runs of one command on one picture, read back from the SVG
as tests/test_plot.py reads one run's: every value drawn is one a report of its run prints,
each run's noise is the band `memprof diff` judges a change by, and every run is told apart
by its line style or hatch, never by a colour of its own (a colour is a memory kind's)."""

from __future__ import annotations

import functools
import re
import shutil
import xml.etree.ElementTree as ElementTree

import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

import memprof
from memprof.cli import app
from memprof.errors import InvalidArgument
from memprof.experiments import load, summarize
from memprof.experiments.pictures import overlay, run_labels
from memprof.model.statistics import NOISE_SIGMAS, median_noise
from memprof.output.plot import Bars, Curves, Words
from tests.conftest import FIXTURES
from tests.test_plot import (
    CHECKS,
    SVG,
    Drawn,
    close,
    drawn_values,
    path_points,
    printed,
    scale,
    texts,
    with_prefix,
)
from tests.test_plot_style import colour_of, text_faults

# Two runs of each command that draws curves or bars: a recording of today against an older
# one (or another GPU's: h100_sweep_link_changed), the fleet's GPUs against each other.
PAIRS = [
    ("h200_sweep", "legacy_v2_sweep"),
    ("h200_sweep", "h100_sweep_link_changed"),
    ("h200_compare", "legacy_v2_compare"),
    ("h200_managed", "legacy_v2_managed"),
    ("h200_alloc", "legacy_v2_alloc"),
    ("h200_smallcopies", "legacy_v3_smallcopies"),
    ("h200_zerocopy_sweep", "legacy_v2_zerocopy_sweep"),
    ("h200_pinned_p20", "legacy_v2_pinned_p20"),
    ("h200_streams", "legacy_v2_streams"),
    ("h200x2_peer", "legacy_v2_h200x2_peer"),
    ("fleet/h200x4_check_gpu0", "fleet/h200x4_check_gpu1"),
]


@functools.cache
def drawn_runs(stems: tuple[str, ...]) -> Drawn:
    """The picture of runs of these fixtures (each loaded once: the CSV rows read back are
    by measurement)."""
    results = runs_of(stems)
    summaries = [summarize(result) for result in results]
    shown = overlay(results, summaries, run_labels(results))
    svg = shown.svg()
    tree = ElementTree.fromstring(svg)
    ids = {e.get("id"): e for e in tree.iter() if e.get("id")}
    return Drawn(results[0], summaries[0], shown, svg, ids)


@pytest.mark.parametrize("stems", PAIRS, ids="+".join)
def test_two_runs_are_drawn_and_read_back(stems):
    """Each panel read back as one run's is (its values through its ticks, its labels, its
    bars' order, each value at its own bar), on a picture that says which run is which."""
    d = drawn_runs(stems)
    runs = d.picture.panels[0]
    assert isinstance(runs, Words) and runs.title == "Runs"
    said = " ".join(texts(d.ids["p0"]))
    for number, result in enumerate(runs_of(stems)):
        assert f"[{number + 1}]" in said and result.created_at in said
    assert "the reference" in said
    for index, panel in enumerate(d.picture.panels):
        axes, gid = d.ids[f"p{index}"], f"p{index}"
        CHECKS[type(panel)](panel, axes, d.ids, gid, texts(axes), csv_rows(stems))


@functools.cache
def csv_rows(stems: tuple[str, ...]) -> dict[int, dict]:
    """Every run's CSV rows by measurement id (tests/test_plot.csv_of of each)."""
    from tests.test_plot import csv_of

    rows: dict[int, dict] = {}
    for result in runs_of(stems):
        rows.update(csv_of(result, summarize(result)))
    return rows


@functools.cache
def runs_of(stems: tuple[str, ...]):
    return [load(FIXTURES / f"{stem}.json") for stem in stems]


def test_the_runs_read_back_are_the_runs_drawn():
    """A picture's series are each run's own measurements (the CSV rows read back above
    are by measurement), so the pairs' checks read the drawn runs, not the fixtures again."""
    d = drawn_runs(("h200_sweep", "legacy_v2_sweep"))
    sources = {id(m) for p in d.picture.panels if isinstance(p, Curves) for x in p.lines
               for m in x.sources}  # fmt: skip
    assert sources <= set(csv_rows(("h200_sweep", "legacy_v2_sweep")))


@pytest.mark.parametrize("stems", PAIRS, ids="+".join)
def test_every_value_two_runs_draw_is_one_a_report_of_its_run_prints(stems):
    """Issue 36 for several runs: a value drawn is one `memprof report` prints of its own run
    (a line's points through the ticks, a bar's value as written beside it)."""
    d = drawn_runs(stems)
    everything = frozenset().union(*(printed(stem) for stem in stems))
    unprinted = [
        (what, value)
        for what, value in drawn_values(d)
        if value not in everything and f"{float(value.replace(',', '')):,.0f}" not in everything
    ]
    assert unprinted == []


def band_values(d: Drawn, index: int, line) -> list[float]:
    """The values a line's band spans, read back from its outline through the y ticks."""
    axes = d.ids[f"p{index}"]
    y_of = scale(axes, "y")
    band = d.ids[f"p{index}-band-{re.sub(r'[^A-Za-z0-9_.-]+', '_', line.shown).strip('_')}"]
    shift = float(next(band.iter(f"{SVG}use")).get("y"))  # the outline is drawn where used
    return [y_of(y + shift) for _, y in path_points(band)]


def noise_of(m) -> float:
    return NOISE_SIGMAS * median_noise(m.throughput_ms or m.samples_ms)


def test_each_runs_band_is_its_noise_as_diff_judges_a_change():
    """Each point's band: its value times 1 -/+ 3x its median's noise (what `memprof diff`
    calls a change beyond), from the samples that run kept; not min..max, not another run's."""
    d = drawn_runs(("h200_sweep", "legacy_v2_sweep"))
    index, panel = next((i, p) for i, p in enumerate(d.picture.panels) if isinstance(p, Curves))
    for line in panel.lines:
        if line.ceiling:
            assert not line.band
            continue
        expected = [
            max(0.0, y * (1 + sign * noise_of(m)))
            for (_, y), m in zip(line.points, line.sources, strict=True)
            for sign in (-1, 1)
        ]
        found = band_values(d, index, line)
        assert all(any(close(v, f) for f in found) for v in expected), line.shown
        assert all(any(close(v, f) for v in expected) for f in found), line.shown
    noisy = [x for x in panel.lines if x.band and any(hi / lo > 1.01 for lo, hi in x.band)]
    assert {x.run for x in noisy} == {0, 1}  # bands wide enough to see, in both runs


def test_a_band_wider_than_its_figure_starts_at_0():
    """alloc's medians of 3: noise of 100% and more, whose lower edge would be below 0."""
    d = drawn_runs(("h200_alloc", "legacy_v2_alloc"))
    lines = [x for p in d.picture.panels if isinstance(p, Curves) for x in p.lines]
    wide = [
        (low, y)
        for x in lines
        for (low, _), (_, y), m in zip(x.band, x.points, x.sources, strict=True)
        if noise_of(m) >= 1
    ]
    assert wide and all(low == 0 for low, _ in wide)
    narrow = [
        low for x in lines for (low, _), m in zip(x.band, x.sources, strict=True) if noise_of(m) < 1
    ]
    assert narrow and all(low > 0 for low in narrow)


def test_a_line_without_a_measurement_per_point_has_no_band():
    """smallcopies' cost of a way sums a copy and the host's work: no one median's noise."""
    d = drawn_runs(("h200_smallcopies", "legacy_v3_smallcopies"))
    lines = [x for p in d.picture.panels if isinstance(p, Curves) for x in p.lines]
    assert lines and all(not x.band for x in lines)
    assert not [gid for gid in d.ids if "-band-" in gid]


@pytest.mark.parametrize(
    "stems", [("h200_sweep", "legacy_v2_sweep"), ("h200_smallcopies", "legacy_v3_smallcopies")]
)
def test_the_reference_is_dashed_the_others_not_and_each_series_keeps_its_colour(stems):
    """A memory kind's colour (sweep) and a series of no kind's (smallcopies' ways), the same
    in every run; the runs differ by line style, the reference's dashed."""
    d = drawn_runs(stems)
    index, panel = next((i, p) for i, p in enumerate(d.picture.panels) if isinstance(p, Curves))
    elements = with_prefix(d.ids, f"p{index}-line-")
    measured = [x for x in panel.lines if not x.ceiling]
    colours: dict[str, set[str]] = {}
    for line, element in zip(measured, elements, strict=True):
        style = next(element.iter(f"{SVG}path")).get("style")
        assert ("stroke-dasharray" in style) == (line.run == 0), line.shown
        colours.setdefault(line.label, set()).add(colour_of(element))
    assert all(len(found) == 1 for found in colours.values()), colours
    assert len({c for found in colours.values() for c in found}) == len(colours)
    legend = texts(d.ids[f"p{index}"])
    for label in colours:  # a series named once, for every run
        assert legend.count(label) == 1 and f"{label} [1]" not in legend


def test_the_runs_bars_are_told_apart_by_hatch_not_colour():
    d = drawn_runs(("h200_compare", "legacy_v2_compare"))
    panel = d.picture.panels[1]
    elements = with_prefix(d.ids, "p1-bar-")
    by_label: dict[str, set[str]] = {}
    for bar, element in zip(panel.bars, elements, strict=True):
        style = next(element.iter(f"{SVG}path")).get("style")
        hatch = re.search(r"fill: url\(#(h[0-9a-f]+)\)", style)
        assert bool(hatch) == (bar.run == 1), bar.shown  # run 2 hatched
        if hatch:  # a pattern: white lines over the kind's colour
            colour = next(d.ids[hatch[1]].iter(f"{SVG}rect")).get("fill")
        else:
            colour = colour_of(element)
        by_label.setdefault(bar.label, set()).add(colour)
    assert all(len(found) == 1 for found in by_label.values()), by_label
    assert len({c for found in by_label.values() for c in found}) == len(by_label)


def test_the_runs_dots_are_told_apart_by_their_shape():
    """Bars spanning 20x are dots on a log axis (check's): a hatch cannot say the run there."""
    d = drawn_runs(("fleet/h200x4_check_gpu0", "fleet/h200x4_check_gpu1"))
    index, panel = next((i, p) for i, p in enumerate(d.picture.panels) if isinstance(p, Bars))
    shapes: dict[int, set[str]] = {}
    for bar, element in zip(panel.bars, with_prefix(d.ids, f"p{index}-bar-"), strict=True):
        used = next(element.iter(f"{SVG}use")).get("{http://www.w3.org/1999/xlink}href")
        shapes.setdefault(bar.run, set()).add(d.ids[used.lstrip("#")].get("d"))
    assert sorted(shapes) == [0, 1] and all(len(found) == 1 for found in shapes.values())
    assert shapes[0] != shapes[1]
    said = " ".join(texts(d.ids["p0"]))
    assert "round dots" in said and "square dots" in said


def test_a_ceiling_the_runs_share_is_drawn_once_one_they_do_not_with_its_run():
    d = drawn_runs(("h200_sweep", "legacy_v2_sweep"))
    ceilings = [x for p in d.picture.panels if isinstance(p, Curves) for x in p.lines if x.ceiling]
    assert [x.shown for x in ceilings if x.run is None].count("PCIe ceiling, 63.0 GB/s") == 2
    assert {x.shown for x in ceilings if x.run is not None} == {"staging ceiling [1]"}


@pytest.mark.parametrize("stems", [*PAIRS, ("h200_sweep",) * 3], ids="+".join)
def test_no_text_of_a_picture_of_runs_is_cut_or_runs_into_another(stems):
    assert text_faults(drawn_runs(stems).picture) == []


def test_runs_whose_labels_coincide_are_numbered():
    same = runs_of(("h200_sweep", "h200_sweep"))
    first, second = run_labels(same)
    assert first.endswith(" #1") and second.endswith(" #2") and first[:-3] == second[:-3]
    assert run_labels(runs_of(("h200_sweep", "legacy_v2_sweep")))[0].endswith("+00:00")


# -- the command and the API -----------------------------------------------------------------


def invoke(*arguments: str):
    return CliRunner().invoke(app, list(arguments))


@pytest.fixture
def two(tmp_path):
    paths = []
    for stem in ("h200_device", "legacy_v2_device"):
        paths.append(tmp_path / f"{stem}.json")
        shutil.copy(FIXTURES / f"{stem}.json", paths[-1])
    return paths


def test_memprof_plot_draws_two_runs_labelled_as_asked(two, tmp_path):
    target = tmp_path / "cmp.svg"
    ran = invoke("plot", *map(str, two), "-o", str(target), "--label", "before",
                 "--label", "after $x$")  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert ran.output.strip() == f"saved {target}"
    words = texts(ElementTree.parse(target).getroot())
    assert "memprof device: 2 runs" in words
    assert any(w.startswith("[1]") and w.endswith(": before") for w in words)
    assert any(w.startswith("[2]") and w.endswith(": after $x$") for w in words)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--label", "one"], "--label: 1 given for 2 runs: give one per run"),
        (["--label", "a", "--label", "b", "--label", "c"], "--label: 3 given for 2 runs"),
    ],
)
def test_a_label_per_file_or_none(two, tmp_path, arguments, message):
    ran = invoke("plot", *map(str, two), "-o", str(tmp_path / "cmp.svg"), *arguments)
    assert ran.exit_code == 2 and ran.output.count("\n") == 1 and message in ran.output
    assert not (tmp_path / "cmp.svg").exists()


def test_runs_of_different_commands_are_refused_naming_both(two, tmp_path):
    other = tmp_path / "sweep.json"
    shutil.copy(FIXTURES / "h200_sweep.json", other)
    ran = invoke("plot", str(two[0]), str(other), "-o", str(tmp_path / "cmp.svg"))
    assert ran.exit_code == 2 and ran.output.count("\n") == 1
    assert f"{two[0]} is a device run and {other} a sweep run" in ran.output
    assert not (tmp_path / "cmp.svg").exists()


def test_several_runs_need_a_name_and_never_write_over_an_input(two, tmp_path):
    ran = invoke("plot", *map(str, two))
    assert ran.exit_code == 2 and "give -o FILE.svg" in ran.output
    second = tmp_path / "second.svg"  # a result saved under a picture's name
    two[1].rename(second)
    before = second.read_bytes()
    ran = invoke("plot", str(two[0]), str(second), "-o", str(second))
    assert ran.exit_code == 2 and "would overwrite the input" in ran.output
    assert second.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([two[0].name, second.name])


def test_memprof_plot_draws_a_list_of_results(two, tmp_path):
    a, b = (memprof.load(path) for path in two)
    shown = memprof.plot([a, b], tmp_path / "cmp.png", labels=["A", "B"])
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    assert shown.title == "memprof device: 2 runs"
    assert memprof.plot([a], labels=["A"]).title == "memprof device: 1 run"
    with pytest.raises(InvalidArgument, match="labels: 1 given for 2 runs"):
        memprof.plot([a, b], labels=["A"])
    with pytest.raises(TypeError, match="labels must be a list of str"):
        memprof.plot([a, b], labels="AB")
    with pytest.raises(TypeError, match=r"results\[1\] must be a Result"):
        memprof.plot([a, str(two[1])])
    second = two[1].rename(two[1].with_suffix(".svg"))  # saved under a picture's name
    with pytest.raises(InvalidArgument, match="would overwrite the input"):
        memprof.plot([a, memprof.load(second)], second)
    sweep = memprof.load(FIXTURES / "h200_sweep.json")
    with pytest.raises(InvalidArgument, match=r"results\[0\] is a device run and results\[1\]"):
        memprof.plot([a, sweep])
