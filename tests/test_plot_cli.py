"""`memprof plot` and memprof.plot(): where pictures go, what they refuse, what they need.

A picture is written like every output (memprof.output.files): checked before any work,
never over an input, atomically; without matplotlib, one line says how to install it.
"""

from __future__ import annotations

import errno
import re
import shutil
import sys
import xml.etree.ElementTree as ElementTree

import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib", reason="memprof plot needs matplotlib (the plot extra)")

import memprof
from memprof import api
from memprof.cli import app
from memprof.errors import (
    InvalidArgument,
    MissingPackage,
    _release,
    install_command,
    require_package,
)
from memprof.experiments import load
from memprof.output import plot as plot_module
from tests.conftest import FIXTURES, replace

SMALL = FIXTURES / "h200_device.json"  # a quick picture


def invoke(*arguments: str):
    return CliRunner().invoke(app, list(arguments))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "run.json"
    shutil.copy(SMALL, path)
    return path


def test_the_picture_goes_beside_the_result_by_default(source):
    ran = invoke("plot", str(source))
    assert ran.exit_code == 0, ran.output
    picture = source.with_suffix(".svg")
    assert ElementTree.parse(picture).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert ran.output.strip() == f"saved {picture}"


def test_a_png_is_a_png(source, tmp_path):
    target = tmp_path / "run.png"
    assert invoke("plot", str(source), "-o", str(target)).exit_code == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_html_picture_is_one_page_that_fetches_nothing(source, tmp_path):
    target = tmp_path / "run.html"
    assert invoke("plot", str(source), "--output", str(target)).exit_code == 0
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1
    assert "<title>memprof device: NVIDIA H200," in page
    for fetching in ("<script", "<link", "src=", "@import", 'href="http'):
        assert fetching not in page
    assert not re.search(r"url\((?!#)", page)  # only the page's own clip paths
    assert not re.search(r"<!DOCTYPE svg|<\?xml", page)  # the SVG's own header is left out


def test_a_picture_is_never_written_over_its_input(tmp_path):
    source = tmp_path / "run.svg"  # a result saved under a picture's name
    shutil.copy(SMALL, source)
    before = source.read_bytes()
    ran = invoke("plot", str(source))
    assert ran.exit_code == 2
    assert "would overwrite the input" in ran.output
    assert source.read_bytes() == before
    link = tmp_path / "link.svg"
    link.symlink_to(source)
    ran = invoke("plot", str(source), "-o", str(link))
    assert ran.exit_code == 2 and source.read_bytes() == before


@pytest.mark.parametrize(
    "name, message",
    [
        ("run.jpg", "a picture is one of .svg, .png, .pdf, .html"),
        ("missing/run.svg", "does not exist"),
        ("folder/", "names a directory"),
    ],
)
def test_a_destination_that_cannot_be_a_picture_is_refused_before_any_work(
    source, tmp_path, name, message
):
    ran = invoke("plot", str(source), "-o", str(tmp_path / name) + ("/" * name.endswith("/")))
    assert ran.exit_code == 2
    assert ran.output.count("\n") == 1 and message in ran.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_result_read_from_a_pipe_needs_a_picture_name(source):
    ran = invoke("plot", "/dev/stdin")
    assert ran.exit_code == 2
    assert "give -o FILE.svg" in ran.output


def test_a_file_that_is_no_result_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    ran = invoke("plot", str(bad))
    assert ran.exit_code == 2 and ran.output.count("\n") == 1
    assert not (tmp_path / "bad.svg").exists()


def test_a_picture_that_could_not_be_written_is_exit_5(source, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plot_module, "write_bytes_atomic", full)
    ran = invoke("plot", str(source))
    assert ran.exit_code == 5
    assert ran.output.strip() == (
        f"memprof: error: {source.with_suffix('.svg')}: not saved: No space left on device"
    )


def test_without_matplotlib_one_line_says_how_to_install_it(source, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    ran = invoke("plot", str(source))
    assert ran.exit_code == 3
    assert ran.output.strip() == (
        "memprof: error: memprof plot needs matplotlib, which is not installed: "
        + install_command('"matplotlib>=3.7"', "plot")
    )
    assert install_command("x", "plot").endswith("[plot]'")  # this checkout's own extra
    assert not source.with_suffix(".svg").exists()
    with pytest.raises(ImportError, match=r"memprof.plot\(\) needs matplotlib"):
        memprof.plot(load(source))


@pytest.mark.parametrize(
    "version, refused", [("3.6.3", True), ("3.6", True), ("3.7", False), ("3.11.2", False)]
)
def test_a_matplotlib_older_than_3_7_is_refused(monkeypatch, version, refused):
    import matplotlib

    monkeypatch.setattr(matplotlib, "__version__", version)
    if refused:
        with pytest.raises(MissingPackage, match=f"needs matplotlib 3.7 or later, not {version}"):
            plot_module.matplotlib_for()
    else:
        assert plot_module.matplotlib_for() is matplotlib


def test_versions_are_read_by_their_leading_numbers():
    assert _release("3.11.2rc1") == (3, 11, 2)
    assert _release("2.0.0.dev0+g1") == (2, 0, 0)
    assert _release("unknown") == ()
    with pytest.raises(MissingPackage):  # a version it cannot read is not new enough
        require_package("math", (1,), "x", "test")  # math has no __version__


def test_memprof_plot_returns_the_picture_and_saves_it_where_asked(tmp_path):
    result = load(SMALL)
    picture = memprof.plot(result, tmp_path / "device.html")
    assert picture._repr_svg_().startswith("<?xml")
    assert "<svg" in (tmp_path / "device.html").read_text()
    with pytest.raises(InvalidArgument, match="a picture is one of"):
        memprof.plot(result, tmp_path / "device.gif")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["device.html"]


HOSTILE = "$x^2$ <script>\x1b&"


def test_strings_from_a_file_are_drawn_literally_never_obeyed():
    """A kernel name is the traced program's: TeX markup stays text (no mathtext error), a
    control character is shown as its escape, markup is escaped by the SVG writer."""
    result = load(FIXTURES / "h200_trace_torch.json")
    named = [
        replace(m, name=HOSTILE) if m.operation == "kernel" else m for m in result.measurements
    ]
    svg = api.picture_of([replace(result, measurements=named)]).svg()
    tree = ElementTree.fromstring(svg)
    assert not list(tree.iter("{http://www.w3.org/2000/svg}script"))
    words = ["".join(t.itertext()) for t in tree.iter("{http://www.w3.org/2000/svg}text")]
    assert "$x^2$ <script>\\x1b&" in words
    assert "\x1b" not in svg


def test_the_default_picture_replaces_no_file_only_one_named_with_o(tmp_path):
    """`plot run.json` names run.svg itself: where a file (or a link) has that name, it is
    refused and left as it was; `-o run.svg` replaces it."""
    source = tmp_path / "run.json"
    shutil.copy(SMALL, source)
    assert invoke("plot", str(source)).exit_code == 0
    picture = tmp_path / "run.svg"
    picture.write_text("the user's own drawing")
    ran = invoke("plot", str(source))
    assert ran.exit_code == 2 and ran.stderr.count("\n") == 1
    assert f"{picture} already exists: give -o {picture} to replace it" in ran.stderr
    assert picture.read_text() == "the user's own drawing"
    picture.unlink()
    picture.symlink_to(tmp_path / "elsewhere.svg")  # dangling: writing would create it
    assert invoke("plot", str(source)).exit_code == 2
    assert not (tmp_path / "elsewhere.svg").exists()
    picture.unlink()
    picture.write_text("the user's own drawing")
    assert invoke("plot", str(source), "-o", str(picture)).exit_code == 0
    assert picture.read_text().startswith("<?xml")


def test_a_name_of_no_picture_format_is_refused_naming_its_option(source, tmp_path):
    ran = invoke("plot", str(source), "-o", str(tmp_path / "run.jpeg"))
    assert ran.exit_code == 2 and ran.stderr.count("\n") == 1
    assert f"--output {tmp_path / 'run.jpeg'}: a picture is one of" in ran.stderr
    result = memprof.load(source)
    for name, words in (("run.jpeg", "a picture is one of"), ("no/run.svg", "does not exist")):
        with pytest.raises(InvalidArgument) as refused:
            memprof.plot(result, tmp_path / name)
        said = str(refused.value)
        assert said.startswith(f"memprof.plot: path {tmp_path / name}: ") and words in said
