"""hostlink, portable and `pinned --device 1` as recorded on the two-GPU H200, rendered on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprof.experiments import hostlink, portable
from memprof.experiments import load as load_result
from memprof.model.formatting import bandwidth_gb_per_s, format_gb_per_s, format_ms
from memprof.model.results import Result
from tests.conftest import array_bytes, render_text

FIXTURES = Path(__file__).parent / "fixtures"


def recorded(name: str) -> Result:
    return load_result(FIXTURES / f"h200x2_{name}.json")


def _throughput_gb_per_s(result: Result, operation: str, kind: str, gpu: int) -> float:
    [measurement] = [
        m for m in result.measurements if (m.operation, m.kind, m.gpus) == (operation, kind, (gpu,))
    ]
    return bandwidth_gb_per_s(measurement.bytes, measurement.throughput_stats.median_ms)


def test_hostlink_figures_are_batch_throughput_and_totals_their_sums():
    result = recorded("hostlink")
    cells = hostlink.figures(result)
    assert set(cells) == {
        (mode, direction, index)
        for mode in hostlink.MODES
        for direction in hostlink.DIRECTIONS
        for index in (0, 1)
    }
    for (mode, direction, gpu), gb_per_s in cells.items():
        operation = direction if mode == "alone" else f"{direction}_at_once"
        measured = _throughput_gb_per_s(result, operation, "pinned", gpu)
        assert gb_per_s == pytest.approx(measured)
    alone, together = hostlink.totals(result, "h2d")
    assert alone == pytest.approx(cells["alone", "h2d", 0] + cells["alone", "h2d", 1])
    assert together == pytest.approx(cells["together", "h2d", 0] + cells["together", "h2d", 1])


@pytest.mark.parametrize("width", [60, 80, 120])
def test_hostlink_renders_whole_with_its_totals_and_verdicts(width):
    result = recorded("hostlink")
    text = render_text(result, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    for direction in hostlink.DIRECTIONS:
        alone, together = hostlink.totals(result, direction)
        assert format_gb_per_s(together) in text
        assert f"{together / alone:.0%} of the {format_gb_per_s(alone)} GB/s" in " ".join(
            text.split()
        )
    assert "Verified against numpy: all 8 results match" in " ".join(text.split())
    assert "==" not in text.split("Pinned copies")[1]  # no profile for a two-GPU table


def test_portable_figures_cover_both_buffers_from_both_gpus():
    result = recorded("portable")
    cells = portable.figures(result)
    assert len(cells) == len(portable.BUFFERS) * len(portable.DIRECTIONS) * 2
    for (buffer, direction, gpu), gb_per_s in cells.items():
        assert gb_per_s == pytest.approx(_throughput_gb_per_s(result, direction, buffer, gpu))


@pytest.mark.parametrize("width", [60, 80, 120])
def test_portable_table_keeps_one_line_per_row_at_80_columns_and_more(width):
    result = recorded("portable")
    summary = portable.summarize(result)
    text = render_text(result, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    if width >= 80:
        for row in summary.tables[0].rows:
            assert any(row[0] in line and row[-1] in line for line in text.splitlines())
    flat = " ".join(text.split())
    assert flat.count("PORTABLE changed nothing here") == 2  # one verdict per direction


def test_pinned_on_device_1_names_it_and_separates_one_copy_from_throughput():
    result = recorded("pinned_p20_device1")
    text = render_text(result, width=80)
    assert "(device 1)" in text.splitlines()[0]
    nbytes = array_bytes(result)
    copy = result.find("h2d", "pinned", "gpu")
    one_copy = format_ms(copy.stats.median_ms)
    throughput = format_gb_per_s(bandwidth_gb_per_s(nbytes, copy.throughput_stats.median_ms))
    assert throughput != format_gb_per_s(bandwidth_gb_per_s(nbytes, copy.stats.median_ms))
    [row] = [line for line in text.splitlines() if line.startswith("pinned    host → device")]
    assert one_copy in row and f" {throughput} " in row
    assert all(
        m.stats.count == result.parameters.repeat
        for m in result.measurements
        if m.group == "api" and m.name == "cuMemHostAlloc"
    )


@pytest.mark.parametrize("name", ["hostlink", "portable"])
def test_a_file_with_no_copy_figures_is_one_line_exit_2(tmp_path, name):
    import json

    from typer.testing import CliRunner

    from memprof import cli

    data = json.loads((FIXTURES / f"h200x2_{name}.json").read_text())
    data["measurements"] = [m for m in data["measurements"] if m["group"] != "gpu"]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    outcome = CliRunner().invoke(cli.app, ["report", str(path)])
    assert outcome.exit_code == 2
    assert f"which every {name} run records" in outcome.output
    assert len(outcome.output.splitlines()) == 1
