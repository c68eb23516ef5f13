"""docs/python-api.md is true: its Python blocks run in a real Jupyter kernel, as a notebook,
against the results recorded in tests/fixtures, and show what the page says they show.

Blocks whose first line says `# needs a GPU` are left out (no GPU here); every other block
runs, in order, in one kernel whose working folder holds `tests/` (a link to this checkout's)
and this checkout first on the path.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memprof.experiments import load, summarize

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "python-api.md"
NEEDS_A_GPU = "# needs a GPU"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks() -> list[str]:
    return BLOCK.findall(PAGE.read_text())


def test_the_page_marks_only_what_needs_a_gpu():
    found = blocks()
    on_gpu = [block for block in found if block.startswith(NEEDS_A_GPU)]
    assert len(on_gpu) == 1 and "memprof.run(" in on_gpu[0]
    assert not any("memprof.run(" in block for block in found if block not in on_gpu)


def test_the_page_runs_in_a_jupyter_kernel(tmp_path, monkeypatch):
    for package in ("nbformat", "nbclient", "ipykernel"):
        pytest.importorskip(package, reason=f"{package} is not installed (the test extra)")
    import nbformat
    from nbclient import NotebookClient

    code = [block for block in blocks() if not block.startswith(NEEDS_A_GPU)]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("COLUMNS", "100")
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    shown = [_outputs(cell) for cell in notebook.cells]
    assert not [text for cell in shown for kind, text in cell if kind == "error"]
    said = dict(zip(code, shown, strict=True))

    def output(start: str, kind: str) -> str:
        cell = said[next(block for block in code if block.startswith(start))]
        found = [text for mime, text in cell if mime == kind]
        assert found, (start, kind, cell)
        return "\n".join(found)

    first = output("import memprof\n\nsweep", "text/html")
    sweep = load(ROOT / "tests" / "fixtures" / "h200_sweep.json")
    assert f"memprof sweep on NVIDIA H200, {sweep.created_at}" in first
    assert first.count("<details>") == len(summarize(sweep).tables)  # a line per table
    pivot = output("frame = sweep.to_frame()", "text/plain")
    assert "zerocopy" in pivot and "67108864" in pivot  # the largest sizes' GB/s by kind
    by_gpu = output("names = ", "text/plain")  # each GPU's fastest copies by kind
    for stem, gpu in (("h200_pinned_p20", 0), ("h200x2_pinned_p20_device1", 1)):
        result = load(ROOT / "tests" / "fixtures" / f"{stem}.json")
        pinned = result.find("h2d", "pinned", "gpu")
        rate = next(f.gb_per_s for f in summarize(result).figures if f.measurement is pinned)
        assert re.search(rf"^{gpu}\s+pageable .*\n\s+pinned\s+{rate:.6f}$", by_gpu, re.M)
    svg = output("memprof.plot(sweep)", "image/svg+xml")
    assert "GB/s host → device against size" in svg
    assert "Copy engine, peer access on (cuMemcpyPeerAsync over the link), GB/s" in output(
        "picture = ", "text/plain"
    )
    assert (tmp_path / "peer.png").read_bytes()[:4] == b"\x89PNG"
    assert "within noise" in output("before = ", "text/plain")


def _outputs(cell) -> list[tuple[str, str]]:
    """(kind, text) of each output of a cell: 'error', 'stream', or a MIME type."""
    found = []
    for out in cell.outputs:
        if out.output_type == "error":
            found.append(("error", "\n".join(out.traceback)))
        elif out.output_type == "stream":
            found.append(("text/plain", out.text))
        else:
            found += [(mime, str(text)) for mime, text in out.get("data", {}).items()]
    return found
