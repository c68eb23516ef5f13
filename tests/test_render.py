"""Rendering Results recorded on the GPU machine (tests/fixtures) on a machine without one."""

import re
import statistics
from pathlib import Path

from rich.console import Console

from memprof.experiments import load as load_result
from memprof.experiments import pinned, summarize, zerocopy
from memprof.model.formatting import bandwidth_gb_per_s, format_bytes, format_gb_per_s, format_ms
from memprof.output.render import PROFILE_COLUMNS, render_result
from tests.conftest import array_bytes

FIXTURES = Path(__file__).parent / "fixtures"


def rendered(name: str, width: int = 200, **options) -> str:
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    result = load_result(FIXTURES / name)
    render_result(result, summarize(result), console, **options)
    return console.export_text()


def test_pinned_profile_is_laid_out_like_nvprof():
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    text = rendered("h200_pinned_p20.json")
    lines = text.splitlines()
    title = lines.index(f"=={result.pid}== Profiling result:")
    header = lines[title + 1].split()
    assert header == list(PROFILE_COLUMNS)
    first_gpu = lines[title + 2]
    assert first_gpu.startswith("GPU activities:")
    api_line = next(line for line in lines if line.startswith("API calls:"))
    # nvprof's row: Time(%) Time Calls Avg Min Max Name
    pattern = r"^\s*(GPU activities:|API calls:)?\s+\d+\.\d\d%\s+\S+\s+\d+\s+\S+\s+\S+\s+\S+\s+\S"
    for line in (first_gpu, api_line):
        assert re.match(pattern, line), line
    h2d_pinned = result.find("h2d", "pinned", "gpu").stats
    row = next(line for line in lines if line.rstrip().endswith("[CUDA memcpy HtoD] (pinned)"))
    cells = row.split()
    assert cells[1:7] == [
        format_ms(h2d_pinned.total_ms),
        str(h2d_pinned.count),
        format_ms(h2d_pinned.mean_ms),
        format_ms(h2d_pinned.min_ms),
        format_ms(h2d_pinned.max_ms),
        "[CUDA",
    ]


def test_pinned_transfer_table_comes_from_the_samples():
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    nbytes = array_bytes(result)
    transfers = pinned.summarize(result).tables[0]
    assert len(transfers.rows) == 6  # pageable, pinned, then the staging rows
    for kind, direction, label in [
        ("pageable", "h2d", "host → device"),
        ("pageable", "d2h", "device → host"),
        ("pinned", "h2d", "host → device"),
        ("pinned", "d2h", "device → host"),
    ]:
        row = next(r for r in transfers.rows if r[:2] == [kind, label])
        gpu, call = result.find(direction, kind, "gpu"), result.find(direction, kind, "api")
        per_copy = (gpu.throughput_stats or gpu.stats).median_ms
        pageable = result.find(direction, "pageable", "gpu")
        pageable_per_copy = (pageable.throughput_stats or pageable.stats).median_ms
        assert row[2:6] == [
            # a pageable copy: its call's (CUPTI records its DMA alone, the data staged)
            format_ms(statistics.median((call if kind == "pageable" else gpu).samples_ms)),
            format_ms(statistics.median(call.samples_ms)),
            format_gb_per_s(bandwidth_gb_per_s(nbytes, per_copy)),
            f"{pageable_per_copy / per_copy:.2f}x",
        ]
    for direction, label in (("h2d", "host → device"), ("d2h", "device → host")):
        staging = result.find(f"staging_{direction}", "pageable", "host")
        row = next(r for r in transfers.rows if r[:2] == ["staging", label])
        assert row[2:] == [
            format_ms(statistics.median(staging.samples_ms)),
            "-",
            format_gb_per_s(bandwidth_gb_per_s(nbytes, staging.throughput_stats.median_ms)),
            "-",
            "-",
        ]
    text = rendered("h200_pinned_p20.json")
    assert "Verified against numpy: both results match (--verbose lists them)." in text
    assert "GB/s (10^9 bytes/s)" in text


def test_pinned_conclusion_is_drawn_from_measured_numbers():
    result = load_result(FIXTURES / "h200_pinned_p20.json")
    [conclusion] = pinned.summarize(result).conclusions
    # bandwidth is throughput: the per-copy time of back-to-back copies
    speedup = (
        result.find("h2d", "pageable", "gpu").throughput_stats.median_ms
        / result.find("h2d", "pinned", "gpu").throughput_stats.median_ms
    )
    assert f"{speedup:.2f}x faster" in conclusion
    assert "pays off from" in conclusion


def test_zerocopy_sweep_has_one_row_per_size_and_no_profile():
    result = load_result(FIXTURES / "h200_zerocopy_sweep.json")
    text = rendered("h200_zerocopy_sweep.json")
    assert "Profiling result" not in text
    summary = zerocopy.summarize(result)
    kernels, paths = summary.tables
    sizes = [format_bytes(4 << p) for p in result.parameters.powers]
    assert [row[0] for row in kernels.rows] == [row[0] for row in paths.rows] == sizes
    # device memory, zero-copy and pageable paths, at every size
    checks = 3 * len(result.parameters.powers)
    assert f"Verified against numpy: all {checks} results match" in text
    assert "63.0 GB/s per direction" in text  # the recorded PCIe Gen5 x16 link


def test_zerocopy_conclusion_counts_the_sizes_where_it_won():
    result = load_result(FIXTURES / "h200_zerocopy_sweep.json")
    wins = []
    for power in result.parameters.powers:
        nbytes = 3 * (4 << power)
        device = result.find("end_to_end", "device", "span", nbytes).stats.median_ms
        zero = result.find("end_to_end", "mapped", "span", nbytes).stats.median_ms
        if zero < device:
            wins.append(power)
    headline = zerocopy.summarize(result).conclusions[0]
    if 0 < len(wins) < len(result.parameters.powers):
        assert f"at {len(wins)} of {len(result.parameters.powers)} sizes" in headline
        assert ", ".join(f"2^{p}" for p in wins) in headline


def test_zerocopy_single_size_shows_its_profile():
    text = rendered("h200_zerocopy_p20.json")
    assert "Profiling result:" in text
    assert "sumArraysGPU(float*, float*, float*, int) (mapped)" in text
    assert "sumArraysGPU(float*, float*, float*, int) (device)" in text


def test_info_shows_capabilities_and_theoretical_bandwidths():
    text = rendered("h200_info.json")
    for flag in (
        "canMapHostMemory",
        "unifiedAddressing",
        "managedMemory",
        "concurrentManagedAccess",
        "pageableMemoryAccess",
        "asyncEngineCount",
        "concurrentKernels",
    ):
        assert flag in text
    assert "4,814 GB/s (3201 MHz, 6016-bit bus)" in text
    assert "Gen5 x16: 63.0 GB/s per direction" in text
    assert "[sysfs]" in text  # square brackets are text, never rich markup
    assert "Profiling result" not in text
