"""CSV export: one row per measurement, every figure the tables show for it.

The CSV is not computed apart from the tables: both read memprof.model.figures. The test at
the end holds them together over every recorded fixture: each figure printed in a table row
is found, at the printed precision, in the CSV row of a measurement that row shows.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest

from memprof.experiments import load, summarize
from memprof.experiments.check import device_bytes, host_bytes
from memprof.experiments.pinlimit import PHASES, margin_bytes
from memprof.model.formatting import (
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_ratio,
    in_unit,
)
from memprof.model.lines import lines_of
from memprof.model.results import Measurement, Result
from memprof.output.export import CSV_COLUMNS, csv_rows, csv_text
from memprof.output.files import write_text_atomic
from tests.conftest import FIXTURES, load_fixture, replace

FIXTURE_PATHS = sorted(FIXTURES.glob("*.json"))
MARGIN = "Host's margin"


def rows_of(result: Result) -> list[dict]:
    """Each measurement's CSV row, in order (a trace's source-line rows, which follow them,
    left out)."""
    return [
        row
        for row in csv_rows(result, summarize(result).figures)
        if row["group"] not in ("line", "copies", "gap", "derived", "reference")
    ]


def test_a_row_holds_every_statistic_and_figure_in_its_own_column():
    result = load_fixture("pinned_p20")
    copy = next(
        m for m in result.measurements if (m.group, m.operation, m.kind) == ("gpu", "h2d", "pinned")
    )
    row = rows_of(result)[result.measurements.index(copy)]
    batches = sorted(copy.throughput_ms)
    per_copy = batches[len(batches) // 2]  # three batches: the middle one
    samples = sorted(copy.samples_ms)
    middle = len(samples) // 2
    assert row["median_ms"] == pytest.approx((samples[middle - 1] + samples[middle]) / 2)
    assert (row["min_ms"], row["max_ms"], row["calls"]) == (samples[0], samples[-1], 20)
    assert row["per_operation_ms"] == per_copy
    assert row["gb_per_s"] == pytest.approx((4 << 20) / per_copy / 1e6)
    assert row["gb_per_s_from"] == "back-to-back median"
    link = 32 * 16 * 128 / 130 / 8  # Gen5 x16, GB/s per direction
    assert row["ceiling_gb_per_s"] == pytest.approx(link)
    assert row["ceiling_share"] == pytest.approx(row["gb_per_s"] / link)
    assert row["limiter"] == "PCIe"
    assert (row["gpu_index"], row["gpu_pci_bus_id"], row["gpu_name"]) == (
        0,
        result.device.pci_bus_id,
        "NVIDIA H200",
    )
    assert (row["created_at"], row["host"], row["pid"]) == (
        result.created_at,
        result.host,
        result.pid,
    )


def test_a_row_of_what_moves_nothing_has_no_rate():
    result = load_fixture("pinned_p20")
    launch = next(m for m in result.measurements if m.operation == "launch")
    row = rows_of(result)[result.measurements.index(launch)]
    assert (row["bytes"], row["gb_per_s"], row["ceiling_share"], row["limiter"]) == (0, "", "", "")
    assert (row["gb_per_s_from"], row["ceiling_gb_per_s"]) == ("", "")  # no rate, of no time


def test_peer_rows_name_their_source_and_destination_gpu_and_bus():
    result = load(FIXTURES / "h200x2_peer.json")
    rows = rows_of(result)
    on = [row for row in rows if row["operation"] == "ce_on"]
    assert {(row["source_gpu"], row["destination_gpu"]) for row in on} == {(0, 1), (1, 0)}
    buses = {record.index: record.pci_bus_id for record in result.extra.devices}
    assert {row["gpu_pci_bus_id"] for row in on} == set(buses.values())
    for row in on:
        assert row["gpu_pci_bus_id"] == buses[row["source_gpu"]]
        assert row["limiter"] == "NVLink"


def test_each_gpus_rows_carry_that_gpus_own_name_and_bus():
    result = load(FIXTURES / "h200x2_hostlink.json")
    devices = result.extra.devices
    renamed = replace(
        result,
        extra=replace(result.extra, devices=[devices[0], replace(devices[1], name="Other\x1b")]),
    )
    named = {(row["gpu_index"], row["gpu_name"], row["gpu_pci_bus_id"]) for row in rows_of(renamed)}
    assert named == {
        (0, "NVIDIA H200", devices[0].pci_bus_id),
        (1, "Other\\x1b", devices[1].pci_bus_id),  # literally, as every string from a file
    }


def test_a_traced_programs_rows_name_the_gpu_it_ran_on():
    """A trace records no device facts: its rows, source lines too, take the GPU it was asked
    for and the name its run recorded, so two traces on two GPUs are told apart."""
    result = load_fixture("trace_torch")
    rows = csv_rows(result, summarize(result).figures)
    assert {row["group"] for row in rows} == {"gpu", "api", "copies", "gap", "line"}
    assert {(row["gpu_index"], row["gpu_name"]) for row in rows} == {(0, "NVIDIA H200")}
    moved = replace(result, parameters=replace(result.parameters, device=1))
    rows = csv_rows(moved, summarize(moved).figures)
    assert {row["gpu_index"] for row in rows if row["group"] != "gap"} == {1}
    # an idle gap is of the GPU CUPTI recorded it on, as Where the time went shows it
    assert {(row["gpu_index"], row["gpu_name"]) for row in rows if row["group"] == "gap"} == {
        (0, "")
    }


def test_the_csv_file_has_the_header_and_one_row_per_measurement_of_every_result(tmp_path):
    results = [load_fixture("pinned_p20"), load_fixture("uva")]
    path = tmp_path / "out.csv"
    write_text_atomic(path, csv_text(results, [summarize(r).figures for r in results]))
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert len(rows) == sum(len(result.measurements) for result in results)
    assert {row["command"] for row in rows} == {"pinned", "uva"}


def test_a_measurement_without_figures_is_no_row():
    """Rows come from figures: a measurement the summary did not read is still written."""
    result = load_fixture("uva")
    extra = Measurement("api", "cuLaunchKernel", "launch", None, 0, [0.5], "host")
    result.measurements.append(extra)
    assert len(rows_of(result)) == len(result.measurements)


def test_hostlinks_totals_are_rows_naming_each_gpus_copies():
    """Every GPU's GB/s added up is a row of its own, its parts named by GPU, and the total
    at once over the total alone a ratio of those two rows."""
    result = load(FIXTURES / "h200x2_hostlink.json")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    alone = [r for r in rows if r["group"] == "gpu" and r["operation"] == "h2d"]
    together = [r for r in rows if r["group"] == "gpu" and r["operation"] == "h2d_at_once"]
    by_name = {r["name"]: r for r in rows if r["group"] == "derived"}
    total = by_name["h2d, every GPU alone"]
    assert total["operation"] == "total" and "gpu_index" not in total  # of no one GPU
    assert total["gb_per_s"] == pytest.approx(math.fsum(r["gb_per_s"] for r in alone))
    assert total["derived_from"] == (
        "[CUDA memcpy HtoD] (pinned, GPU 0) + [CUDA memcpy HtoD] (pinned, GPU 1)"
    )
    at_once = by_name["h2d, every GPU all at once"]["gb_per_s"]
    assert at_once == pytest.approx(math.fsum(r["gb_per_s"] for r in together))
    assert by_name["h2d, at once / alone"]["ratio"] == pytest.approx(at_once / total["gb_per_s"])
    one = by_name["h2d, GPU 0: at once / alone"]
    assert one["derived_from"] == (
        "[CUDA memcpy HtoD] (h2d, pinned) / [CUDA memcpy HtoD] (h2d_at_once, pinned)"
    )
    assert one["ratio"] == pytest.approx(together[0]["gb_per_s"] / alone[0]["gb_per_s"])


def test_pinlimits_steps_and_held_vs_both_are_rows_of_their_samples():
    """Each step of the climb is a row of that step's call and touch (not their medians), per
    GiB of the half step they pinned; held vs both, the held copy's time over the slower of
    before and after."""
    result = load(FIXTURES / "h200_pinlimit.json")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    by_name = {r["name"]: r for r in rows if r["group"] == "derived"}
    found = {(m.operation, m.kind): m for m in result.measurements if m.group != "api" or m.kind}
    alloc, touch = found["alloc", "pinned"], found["touch", "pinned"]
    half_gib = alloc.bytes / (1 << 30)
    third = by_name["HostAlloc+touch, step 3 (3 GiB pinned)"]
    assert third["median_ms"] == pytest.approx(
        (alloc.samples_ms[2] + touch.samples_ms[2]) / half_gib
    )
    assert third["derived_from"] == "cuMemHostAlloc (pinned) + first touch (pinned)"
    register = found["register", "registered"]
    last = by_name["touch+Register, step 31 (31 GiB pinned)"]
    assert last["median_ms"] == pytest.approx(
        (found["touch", "registered"].samples_ms[30] + register.samples_ms[30]) / half_gib
    )
    for work, operation, group in (("numpy copy", "copy", "host"), ("pageable copy", "h2d", "api")):
        idle, held, after = (  # the pageable copy's time: its call's, the staging included
            next(
                m
                for m in result.measurements
                if (m.operation, m.group) == (f"{operation}_{p}", group)
            ).stats.median_ms
            for p in PHASES
        )
        held_vs_both = next(r for name, r in by_name.items() if name.startswith(work))["ratio"]
        assert held_vs_both == pytest.approx(held / max(idle, after))


def test_a_traces_copy_groups_idle_gaps_and_other_lines_are_rows_of_their_own():
    """What the trace's tables print beyond its measurements and lines: a row per copy
    group (its GB/s over its GPU time), per idle gap (of the timeline's GPU) and per Where
    table's other lines summed, which names them."""
    result = load_fixture("trace_torch")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    copies = [row for row in rows if row["group"] == "copies"]
    assert [row["name"] for row in copies] == [
        f"{g.direction} {g.source} -> {g.destination}" for g in result.extra.copies
    ]
    for row, g in zip(copies, result.extra.copies, strict=True):
        assert row["gb_per_s"] == pytest.approx(g.bytes / g.gpu_ms / 1e6)
        assert (row["calls"], row["blocking_copies"], row["small_copies"]) == (
            g.calls,
            g.blocking_copies,
            g.small_calls,
        )
    gaps = [row for row in rows if row["group"] == "gap"]
    assert len(gaps) == 3 and all(row["idle_ms"] > 0 for row in gaps)
    assert [row["idle_ms"] for row in gaps] == sorted(
        (row["idle_ms"] for row in gaps), reverse=True
    )
    (others,) = [row for row in rows if row["operation"] == "lines"]
    (line,) = [row for row in rows if row["name"] == "torch_copies.py:89 main"]
    assert others["derived_from"] == "torch_copies.py:89 main (program)"
    assert (others["calls"], others["host_ms"], others["gpu_ms"]) == (1, line["host_ms"], "")


# -- every figure a table prints is in the CSV row of a measurement it shows -------------------

# Cells that are not one measurement's figure: a comparison of two (ratios, "vs pageable"), a
# sum or a difference over several (totals, per-GiB), a count or a label.
DERIVED_HEADERS = re.compile(r"vs |/ |(?<![a-z])x\b|ratio|Total|total|per GiB|90%|at$")
TIME = re.compile(r"^\d+(\.\d+)?(ns|us|ms|s)$")
MARK = re.compile(r"[*†]$")  # pools' "*": a call near the floor of its timing
NUMBER = re.compile(r"^\d[\d,]*(\.\d+)?$")
GB_PER_S = re.compile(r"(?<=\d) GB/s$")
SHARE = re.compile(r"^\d+(\.\d)?%( \w+)?$")
BYTES = re.compile(r"^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)$")  # a size in words: 123.1 GiB


def printed_forms(row: dict) -> set[str]:
    """Each figure of a CSV row as a table may print it."""
    forms = {str(row.get("calls"))}
    if row.get("value", "") != "":  # a device fact: a count, flag, version, MHz
        forms |= {str(row["value"]), f"{row['value']:g}"}
    if row.get("per_operation_ms", "") != "":
        forms.add(f"{row['per_operation_ms'] * 1e3:.2f}")  # and per read in µs
    forms |= {str(row.get(column)) for column in ("blocking_copies", "small_copies")}
    times = ("median_ms", "min_ms", "max_ms", "mean_ms", "per_operation_ms")
    # and a traced program's lines, copies and idle gaps
    for column in (*times, "gpu_ms", "host_ms", "start_ms", "idle_ms"):
        if row.get(column, "") == "":
            continue
        forms.add(format_ms(row[column]))
        # a column of mixed units is written in one (memprof.model.summary)
        forms |= {in_unit(format_ms(row[column]), unit) for unit in ("ns", "us", "ms", "s")}
    for column in ("bytes", "moved_bytes"):
        if row.get(column, "") != "":
            forms.add(format_bytes(row[column]))
    if row.get("gb_per_s", "") != "":
        forms |= {format_gb_per_s(row["gb_per_s"]), f"{row['gb_per_s']:,.0f}"}
    if row.get("ratio", "") != "":  # a derived ratio: how many times faster (or a share)
        forms |= {format_ratio(row["ratio"]), f"{row['ratio']:.0%}", f"{row['ratio'] - 1:+.1%}"}
    if row.get("ceiling_gb_per_s", "") != "":  # check's "of PCIe's 63.0"
        forms.add(format_gb_per_s(row["ceiling_gb_per_s"]))
    if row.get("ceiling_share", "") != "":
        share = row["ceiling_share"]
        forms |= {f"{share:.0%}", f"{share:.1%}", f"{share:.0%} {row['limiter']}"}
    return forms


RATIO = re.compile(r"^\d[\d,]*(\.\d+)?x\b")  # 4.93x, 3.2x faster
WITH_UNIT = re.compile(r"\d GB/s")  # a verdict's figure in words: 55.3 GB/s (88%)
CHANGE = re.compile(r"^[+-]\d+(\.\d+)?%$")  # a difference of two figures: +3.1%
# each figure in such words (not a name's digits: Gen5, x16, h200.json)
IN_WORDS = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?%?(?![\w.])")


def figure_cells(table) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    """(row, column, cell) of every cell that prints a figure of its row's sources (a ratio:
    where one is a derived ratio); and of every figure no source declares (a ratio or change
    of no declared ratio, a column of DERIVED_HEADERS of no declared figure)."""
    found, undeclared = [], []
    for r, cells in enumerate(table.rows):
        for c, cell in enumerate(cells):
            if c == 0:
                continue
            cell = MARK.sub("", cell)
            if WITH_UNIT.search(cell) and table.sources[r]:  # words: each figure in them
                found += [(r, c, part) for part in IN_WORDS.findall(cell)]
                continue
            parts = [part.strip() for part in cell.split(",")] if "%" in cell else [cell]
            for part in parts:
                part = GB_PER_S.sub("", part)  # a rate with its unit: pinlimit's host table
                figure = TIME.match(part) or NUMBER.match(part) or SHARE.match(part)
                figure = figure or BYTES.match(part)
                formulas = {getattr(one, "formula", None) for one in table.sources[r]}
                ratio = RATIO.match(part) or CHANGE.match(part) if "ratio" in formulas else None
                if ratio:  # its figure, without the words after it ("3.20x faster", "+3.1%")
                    found.append((r, c, ratio[0]))
                elif figure and (formulas - {None} or not DERIVED_HEADERS.search(table.headers[c])):
                    found.append((r, c, part))
                elif figure or RATIO.match(part) or WITH_UNIT.search(part) or CHANGE.match(part):
                    undeclared.append((r, c, part))
    return found, undeclared


CHECKED: dict[str, int] = {}


def csv_row_finder(result: Result, summary) -> dict[int, dict]:
    """id(source) -> its CSV row: a measurement's, a derived figure's (group "derived"; a
    check's reference figure: "reference"; a retry's copies: "retry"; info's device facts:
    "device"), a traced program's source line, copy group or idle gap ("line", "copies",
    "gap")."""
    rows = csv_rows(result, summary.figures, summary.derived)
    made, traced = ("derived", "reference", "retry", "device"), ("line", "copies", "gap")
    measured = [row for row in rows if row["group"] not in (*made, *traced)]
    derived = [row for row in rows if row["group"] in made]
    found = {id(f.measurement): row for f, row in zip(summary.figures, measured, strict=True)}
    gaps = [  # the gaps the table shows, in its order: the CSV's
        gap
        for t in summary.tables
        if t.title == "Longest idle gaps"
        for row in t.sources
        for gap in row
    ]
    copies = result.extra.copies if result.command == "trace" else []
    for group, sources in (("line", lines_of(result) or []), ("copies", copies), ("gap", gaps)):
        of_group = [row for row in rows if row["group"] == group]
        found |= {id(one): row for one, row in zip(sources, of_group, strict=True)}
    return found | {id(one): row for one, row in zip(summary.derived, derived, strict=True)}


@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: p.stem)
def test_every_printed_figure_is_in_the_csv_row_it_came_from(path: Path):
    CHECKED[path.stem] = tables_against_csv(load(path))


def tables_against_csv(result: Result) -> int:
    """How many printed figures were found in their CSV rows; a figure of no declared
    source, or not in its source's row at the printed precision, fails."""
    summary = summarize(result)
    rows = csv_row_finder(result, summary)
    checked = 0
    for table in summary.tables:
        found, undeclared = figure_cells(table)
        undeclared += [(r, c, cell) for r, c, cell in found if not table.sources[r]]
        assert not undeclared, (
            table.title,
            [f"{table.rows[r][0]}: {cell}" for r, _, cell in undeclared],
        )
        for r, c, cell in found:
            forms = set().union(*(printed_forms(rows[id(m)]) for m in table.sources[r]))
            assert cell in forms, (table.title, table.headers[c], table.rows[r][0], cell)
            checked += 1
    return checked


def test_the_csv_equals_the_tables_over_many_figures():
    """Not vacuous: the test above read thousands of figures across the fixtures."""
    for path in FIXTURE_PATHS:
        if path.stem not in CHECKED:
            test_every_printed_figure_is_in_the_csv_row_it_came_from(path)
    assert sum(CHECKED.values()) > 1000
    assert sum(1 for count in CHECKED.values() if count) >= 30


def test_the_csv_reads_back_as_numbers():
    result = load_fixture("sweep")
    text = csv_text([result], [summarize(result).figures])
    rows = list(csv.DictReader(io.StringIO(text)))
    gb = [float(row["gb_per_s"]) for row in rows if row["gb_per_s"]]
    assert gb and all(math.isfinite(value) and value > 0 for value in gb)


def test_a_checks_csv_holds_the_figures_its_verdicts_judged():
    """One number: each throughput line's expected GB/s (a "floor" row), its reference (a
    "reference" row named as the line it judges) and both at once's shares (ratio rows) are
    the figures the verdict compared."""
    from memprof.experiments import check

    result = load(FIXTURES / "h200_check.json")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    reference, _ = check.reference_in_use(result)
    found = {line.what: line for line in check.lines(result, reference)}
    floors = {row["derived_from"]: row for row in rows if row["operation"] == "floor"}
    assert floors["[CUDA memcpy HtoD] (pinned)"]["gb_per_s"] == pytest.approx(
        0.85 * 63.01538461538462
    )
    assert floors["[CUDA memcpy HtoD] (pinned)"]["ceiling_share"] == 0.85
    judged = found["Pinned host → device"].judged[0]
    assert floors["[CUDA memcpy HtoD] (pinned)"]["gb_per_s"] == judged[2]
    assert (
        floors["[CUDA memcpy DtoD] (device)"]["gb_per_s"]
        == found["Device copy (read + write)"].judged[0][2]
    )
    kept = {row["operation"]: row for row in rows if row["group"] == "reference"}
    assert set(kept) == {"h2d", "d2h", "d2d"}
    assert kept["h2d"]["name"] == "[CUDA memcpy HtoD]"
    assert kept["h2d"]["gb_per_s"] == check.known_good(result, reference)["h2d"]
    shares = [row for row in rows if row["operation"] == "ratio"]
    both = found["Both directions at once"].judged
    assert [row["ratio"] for row in shares] == pytest.approx([j[1] / (j[2] / 0.8) for j in both])
    assert shares[0]["derived_from"] == (
        "[CUDA memcpy HtoD] (h2d, pinned) / [CUDA memcpy HtoD] (h2d_at_once, pinned)"
    )


def test_infos_link_below_its_maximum_prints_two_declared_rates():
    """The NVML row of a link that ran below its maximum prints both rates: each is a device
    fact, a CSV row, so the table holds to the CSV there too."""
    result = load(FIXTURES / "h200_info.json")
    (state,) = result.gpu_states
    slow = replace(result, gpu_states=[replace(state, pcie_generation=4)])
    summary = summarize(slow)
    (row,) = [cells for cells in summary.tables[0].rows if cells[0] == "PCIe link during the run"]
    assert "31.5 GB/s per direction instead of 63.0 GB/s" in row[1]
    assert tables_against_csv(slow) >= 10
    rates = {r["name"]: r["gb_per_s"] for r in csv_rows(slow, [], summary.derived)}
    assert rates["PCIe link during the run (per direction) [NVML]"] == pytest.approx(31.5, 0.01)


def test_a_retried_checks_csv_holds_the_attempts_its_table_shows():
    """--retries: the table shows the attempt that decided each line; its copies are rows of
    group "retry" (as a measurement's, named for the attempt), and every figure of the table
    is in them: the GB/s and share a retry measured, its floor's and its shares at once."""
    from tests.test_check_gates import retried, retry

    result = load(FIXTURES / "h200_check.json")
    result = retried(result, retry(result, "h2d", 1, h2d=50.0), retry(result, "at_once", 1))
    summary = summarize(result)
    assert "50.0 GB/s (79%)" in summary.tables[0].rows[1]
    assert tables_against_csv(result) == 22
    rows = csv_rows(result, summary.figures, summary.derived)
    again = [row for row in rows if row["group"] == "retry"]
    assert [(row["operation"], row["derived_from"]) for row in again] == [
        ("h2d", "retry 1"),
        ("h2d_at_once", "retry 1"),
        ("d2h_at_once", "retry 1"),
        ("h2d", "retry 1"),
        ("d2h", "retry 1"),
    ]
    assert again[0]["gb_per_s"] == pytest.approx(50.0)
    assert again[0]["ceiling_share"] == pytest.approx(50.0 / 63.01538461538462)
    shares = [row for row in rows if row["operation"] == "ratio"]
    assert all(" / " in row["derived_from"] for row in shares)


def test_a_retrys_row_describes_its_copies_as_the_first_attempts_row_does():
    """A retry's copies are the same copies as its line's first attempt, a device copy's of
    the device copy's size (1 GiB here, the host copies' 64 MiB): its CSV row says so, the
    same name, kind, bytes and basis, and only its timings and GB/s its own."""
    from tests.test_check_gates import retried, retry

    result = load(FIXTURES / "h200_check.json")
    assert host_bytes(result) != device_bytes(result)
    result = retried(
        result,
        retry(result, "h2d", 1, h2d=50.0),
        retry(result, "at_once", 1, h2d_at_once=20.0),
        retry(result, "d2d", 1, d2d=3e3),
    )
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    first = {r["operation"]: r for r in rows if r["group"] == "gpu"}
    again = [r for r in rows if r["group"] == "retry"]
    assert len(again) == 1 + 4 + 1
    same = ("name", "kind", "bytes", "moved_bytes", "calls", "timing_source", "gb_per_s_from")
    same += ("ceiling_gb_per_s", "limiter")
    for row in again:
        assert {key: row[key] for key in same} == {
            key: first[row["operation"]][key] for key in same
        }
    assert first["d2d"]["gb_per_s_from"] == "back-to-back median"
    rates = {row["operation"]: row["gb_per_s"] for row in again}
    assert rates["d2d"] == pytest.approx(3e3) and rates["h2d_at_once"] == pytest.approx(20.0)


def test_pinlimits_memavailable_cells_are_the_csv_rows_they_came_from():
    """Each step's MemAvailable in the climb table, and the host table's before and at the
    top, is a CSV row of that table row's sources whose bytes format_bytes prints as the
    cell: the step's reading, not another's."""
    result = load(FIXTURES / "h200_pinlimit.json")
    summary = summarize(result)
    rows = csv_row_finder(result, summary)
    extra = result.extra
    climb, host = (t for t in summary.tables if t.title.startswith(("Pinning", "What pinning")))
    assert len(climb.rows) == len(extra.available_bytes) == 31
    for step, (cells, sources) in enumerate(zip(climb.rows, climb.sources, strict=True), 1):
        facts = [rows[id(one)] for one in sources if rows[id(one)]["group"] == "device"]
        ((name, nbytes),) = [(row["name"], row["bytes"]) for row in facts]
        cell = cells[1]
        assert name.startswith(f"MemAvailable after step {step} (")
        assert nbytes == extra.available_bytes[step - 1] and cell == format_bytes(nbytes)
    ((_, idle), (_, top)) = [
        (rows[id(one)]["name"], rows[id(one)]["bytes"]) for one in host.sources[-1]
    ]
    assert (idle, top) == (extra.available_idle_bytes, extra.available_bytes[-1])
    assert host.rows[-1][1:3] == [format_bytes(idle), format_bytes(top)]
    text = csv_text([result], [summary.figures], [summary.derived])
    written = [row for row in csv.DictReader(io.StringIO(text)) if row["group"] == "device"]
    limits = extra.limits  # the limits table's sizes first, each a row of its own
    sizes = [limits.mem_total_bytes, limits.mem_available_bytes]
    sizes += [margin_bytes(limits.mem_total_bytes), extra.cap_bytes]
    assert [int(row["bytes"]) for row in written] == [*sizes, *extra.available_bytes, idle]
    assert [row["name"] for row in written[:4]] == ["MemTotal", "MemAvailable", MARGIN, "Cap"]
    assert {row["operation"] for row in written} == {"fact"}  # what a script filters them by


# by the command the file names (what load keeps): loading all 57 took every worker 0.6 s
SWEEPS = [path for path in FIXTURE_PATHS if json.loads(path.read_text())["command"] == "sweep"]


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_a_sweeps_sizes_in_words_are_the_bytes_of_the_csv_rows_they_came_from(path: Path):
    """One truth: a sweep's "at" (the peak's size) and "90% of peak from" are the bytes of a
    CSV row of the table row's sources (the latter a derived "reach" row), and that row is
    where the CSV's own GB/s of the curve first reaches 90% of its peak."""
    result = load(path)
    summary = summarize(result)
    rows = csv_row_finder(result, summary)
    measured = [row for row in rows.values() if row["group"] == "gpu"]
    shape = next(t for t in summary.tables if t.title.startswith("Per kind"))
    at, ninety = shape.headers.index("at"), shape.headers.index("90% of peak from")
    directions = {"host → device": "h2d", "device → host": "d2h"}
    assert shape.rows
    for cells, sources in zip(shape.rows, shape.sources, strict=True):
        curve = sorted(
            (row["bytes"], row["gb_per_s"])
            for row in measured
            if (row["kind"], row["operation"]) == (cells[0], directions[cells[1]])
        )
        peak = max(gb for _, gb in curve)
        first = next(nbytes for nbytes, gb in curve if gb >= 0.9 * peak)
        (reach,) = [rows[id(one)] for one in sources if rows[id(one)]["operation"] == "reach"]
        assert reach["bytes"] == first
        floats = (first // 4).bit_length() - 1
        assert cells[ninety] == f"2^{floats} ({format_bytes(reach['bytes'])})"
        peak_bytes = next(nbytes for nbytes, gb in curve if gb == peak)
        assert cells[at].endswith(f"({format_bytes(peak_bytes)})")
        assert peak_bytes in {rows[id(one)]["bytes"] for one in sources}


# -- each derived row's own columns: what its formula holds and nothing it does not ----------


def derived_rows(stem: str) -> list[dict]:
    result = load(FIXTURES / f"{stem}.json")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    return [row for row in rows if row["group"] in ("derived", "reference")]


def test_a_checks_expected_rate_names_its_ceiling_and_its_reference_none():
    """A floor row is a share of its line's ceiling: it names that ceiling's GB/s and limiter
    (PCIe's 63.0 for a host copy, HBM's for the device copy); a reference row is the known-good
    machine's figure, of no ceiling, and says none."""
    rows = derived_rows("h200_check")
    floors = {row["derived_from"]: row for row in rows if row["operation"] == "floor"}
    pcie = 32 * 16 * 128 / 130 / 8
    for name in ("[CUDA memcpy HtoD] (pinned)", "[CUDA memcpy DtoH] (pinned)"):
        assert floors[name]["ceiling_gb_per_s"] == pytest.approx(pcie)
        assert floors[name]["limiter"] == "PCIe"
    device = floors["[CUDA memcpy DtoD] (device)"]
    assert device["limiter"] == "HBM"
    assert device["gb_per_s"] == pytest.approx(0.8 * device["ceiling_gb_per_s"])
    kept = [row for row in rows if row["group"] == "reference"]
    assert len(kept) == 3
    assert all((row["ceiling_gb_per_s"], row["ceiling_share"], row["limiter"]) == ("", "", "")
               for row in kept)  # fmt: skip


def test_a_per_gib_row_is_of_one_gib_and_a_ratios_of_its_parts_bytes():
    """bytes says what a derived time is of: pinlimit's steps per GiB are of 1 GiB (their
    parts of half a GiB, or a registered 15.5 GiB, each), a ratio of two copies of 64 MiB is
    of 64 MiB (not their 128 MiB together), and only chunks add their parts' bytes up."""
    result = load(FIXTURES / "h200_pinlimit.json")
    summary = summarize(result)
    rows = csv_rows(result, summary.figures, summary.derived)
    steps = [one for one in summary.derived if getattr(one, "formula", "") == "per_gib"]
    assert 1 << 30 not in {part.measurement.bytes for one in steps for part in one.parts}
    per_gib = [row for row in rows if row["operation"] == "per_gib"]
    assert len(per_gib) == len(steps) > 0
    assert {row["bytes"] for row in per_gib} == {1 << 30}
    ratios = [row for row in derived_rows("h200_check") if row["operation"] == "ratio"]
    assert [row["bytes"] for row in ratios] == [64 << 20, 64 << 20]
    (chunks,) = [row for row in derived_rows("h200_streams") if row["operation"] == "chunks"][:1]
    assert chunks["bytes"] == 4 * (64 << 20)


def chunked(**part_changes) -> tuple[Result, list, list]:
    """The streams run's figures and derived ones, its first chunks figure's parts changed."""
    from memprof.model.figures import Derived

    result = load(FIXTURES / "h200_streams.json")
    summary = summarize(result)
    one = next(d for d in summary.derived if d.formula == "chunks")
    parts = tuple(replace(part, **part_changes) for part in one.parts)
    return result, summary.figures, [Derived(one.name, parts, "chunks")]


def test_chunks_without_a_rate_or_of_a_ceiling_of_nothing_have_no_share_of_it():
    """A chunks figure's ceiling columns need its GB/s and a ceiling above 0 GB/s: chunks that
    took no measurable time (no GB/s), or a link read as 0 GB/s, give a row without ceiling,
    share or limiter, never a crash or a share of nothing."""
    from memprof.model.ceilings import Ceiling

    result, figures, made = chunked()
    (row,) = csv_rows(result, figures, made)[len(figures) :]
    assert row["ceiling_share"] == pytest.approx(row["gb_per_s"] / row["ceiling_gb_per_s"])
    assert row["limiter"] == "PCIe"
    for changes in ({"per_operation_ms": 0.0}, {"ceiling": Ceiling(0.0, "PCIe", "read as 0")}):
        result, figures, made = chunked(**changes)
        (row,) = csv_rows(result, figures, made)[len(figures) :]
        assert (row.get("ceiling_gb_per_s"), row.get("ceiling_share"), row.get("limiter")) == (
            None,
            None,
            None,
        ), changes
    assert row["gb_per_s"] > 0  # the rate itself is kept where its ceiling is nothing
    result, figures, made = chunked(ceiling=Ceiling(0.5, "slow", "just above nothing"))
    (row,) = csv_rows(result, figures, made)[len(figures) :]
    assert (row["ceiling_gb_per_s"], row["limiter"]) == (0.5, "slow")
    assert row["ceiling_share"] == pytest.approx(row["gb_per_s"] / 0.5)


def test_the_csv_ends_each_record_with_crlf():
    """As RFC 4180 and Python's csv module write it (and a spreadsheet reads it): the text
    keeps csv.writer's line ends, not a newline translation's."""
    result = load_fixture("uva")
    text = csv_text([result], [summarize(result).figures])
    assert text.count("\r\n") == len(result.measurements) + 1
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")


def test_a_result_without_its_figures_is_refused_not_dropped():
    """csv_text pairs each result with its figures and derived figures: one list shorter than
    the results is an error, never a result's rows silently left out."""
    results = [load_fixture("pinned_p20"), load_fixture("uva")]
    figures = [summarize(r).figures for r in results]
    with pytest.raises(ValueError, match="zip"):
        csv_text(results, figures[:1])
    with pytest.raises(ValueError, match="zip"):
        csv_text(results, figures, [()])


def basis_of(stem: str, operation: str, kind: str, nbytes: int, **changes) -> str:
    """gb_per_s_from of the first figure of `stem` of that operation, kind and size (its
    Figure changed by `changes`: a figure no fixture records)."""
    import dataclasses

    result = load(FIXTURES / f"{stem}.json")
    (one,) = [
        f
        for f in summarize(result).figures
        if (f.measurement.operation, f.measurement.kind, f.measurement.bytes, f.measurement.group)
        == (operation, kind, nbytes, "gpu")
    ][:1]
    (row,) = csv_rows(result, [dataclasses.replace(one, **changes)])
    return row["gb_per_s_from"]


@pytest.mark.parametrize(
    ("stem", "operation", "kind", "nbytes", "changes", "basis"),
    [  # each where the other bases' conditions differ from its own
        ("h200_pinned_p20", "h2d", "pageable", 4 << 20, {}, "back-to-back median"),  # a call too
        ("legacy_v2_zerocopy_sweep", "h2d", "pageable", 4096, {}, "the call median"),
        ("h200_sweep", "h2d", "pinned", 1024, {"back_to_back": False}, "one operation median"),
        ("h200_device", "d2d", "device", 256 << 20, {}, "one operation best"),
        ("h200_device", "d2d", "device", 256 << 20, {"back_to_back": True}, "back-to-back best"),
    ],
)
def test_a_rate_names_the_time_it_is_of(stem, operation, kind, nbytes, changes, basis):
    """gb_per_s_from says which time a GB/s divides: a staged copy's call where its batches
    were not timed, else its back-to-back batches' or one operation's, median or best (as its
    measure reads it): a script filters on these words."""
    assert basis_of(stem, operation, kind, nbytes, **changes) == basis


def test_a_part_with_no_kind_is_named_by_its_name_alone():
    """derived_from qualifies a part only with what it has: driver calls and kernels have no
    memory kind, so a figure made of them names each bare, not 'cuLaunchKernel ()'."""
    from memprof.model.figures import Derived

    result = load_fixture("pinned_p20")
    figures = summarize(result).figures
    launch, kernel = (
        next(f for f in figures if f.measurement.operation == operation)
        for operation in ("launch", "kernel")
    )
    assert launch.measurement.kind is None and kernel.measurement.kind is None
    made = Derived("launch and kernel", (launch, kernel), "sum")
    (row,) = csv_rows(result, figures, [made])[len(figures) :]
    assert row["derived_from"] == "cuLaunchKernel + sumArraysGPU(float*, float*, float*, int)"
    assert row["median_ms"] == pytest.approx(launch.median_ms + kernel.median_ms)


def test_a_derived_row_names_a_copys_source_gpu_only_with_its_destination():
    """A pair's expected rate (a floor row) is of one direction: it names both GPUs as its
    copy's row does; a row of several copies names neither half of a pair alone."""
    rows = derived_rows("h200x2_check_pairs")
    floors = [row for row in rows if row["operation"] == "floor"]
    assert [(row["source_gpu"], row["destination_gpu"]) for row in floors] == [(0, 1), (1, 0)]
    for row in rows:
        assert ("source_gpu" in row) == ("destination_gpu" in row), row["name"]


def test_each_derived_time_is_both_its_median_and_its_per_operation_time():
    """A mean, an ideal overlap and a steady loop are times of one operation: their rows hold
    them in median_ms and per_operation_ms alike (a script reads either, as for a measurement),
    and name their parts with commas, since none of them is their sum."""
    from statistics import median

    result = load(FIXTURES / "h200_alloc.json")
    summary = summarize(result)
    rows = csv_row_finder(result, summary)
    steady = [one for one in summary.derived if getattr(one, "formula", "") == "steady"]
    assert steady
    for one in steady:
        loop = median(one.parts[0].measurement.samples_ms[1:])  # the first, cold, left out
        assert (rows[id(one)]["median_ms"], rows[id(one)]["per_operation_ms"]) == (loop, loop)
    result = load(FIXTURES / "h200_streams.json")
    summary = summarize(result)
    rows = csv_row_finder(result, summary)
    for formula in ("mean", "overlap"):
        made = [one for one in summary.derived if one.formula == formula]
        assert made, formula
        for one in made:
            row = rows[id(one)]
            times = [part.per_operation_ms for part in one.parts]
            if formula == "mean":
                assert row["per_operation_ms"] == pytest.approx(math.fsum(times) / len(times))
            assert row["median_ms"] == row["per_operation_ms"] < math.fsum(times), formula
            assert row["derived_from"].count(", ") >= len(one.parts) - 1
            assert " + " not in row["derived_from"], formula


def test_a_figure_of_several_source_lines_holds_their_bytes_added_up():
    """A "lines" row (Where's other lines summed) holds its lines' calls, bytes and times added
    up: the bytes of two lines that copied 40 MiB and 168.2 MiB, not one of them or none."""
    from memprof.model.figures import Derived

    result = load_fixture("trace_torch")
    summary = summarize(result)
    copies = [line for line in lines_of(result) if line.bytes][:3:2]
    assert len({line.bytes for line in copies}) == 2
    made = Derived("two lines", tuple(copies), "lines")
    row = csv_rows(result, summary.figures, [made])[len(summary.figures)]
    assert (row["name"], row["operation"]) == ("two lines", "lines")
    assert row["bytes"] == copies[0].bytes + copies[1].bytes == (40 << 20) + 176365568
    assert row["calls"] == copies[0].calls + copies[1].calls == 74
    assert row["host_ms"] == pytest.approx(copies[0].host_ms + copies[1].host_ms)


def test_each_rows_bus_id_is_what_the_result_recorded_of_its_gpu_wherever_it_did():
    """gpu_pci_bus_id comes from the run's device facts, else the several GPUs' list, else
    the GPU's NVML state (a trace records no device facts): each alone is enough, and a GPU
    none of them records has none."""
    result = replace(load_fixture("pinned_p20"), gpu_states=[])  # the device facts alone
    assert {row["gpu_pci_bus_id"] for row in rows_of(result)} == {"0000:00:06.0"}
    result = replace(load(FIXTURES / "h200x2_hostlink.json"), gpu_states=[])
    rows = rows_of(result)
    assert {(row["gpu_index"], row["gpu_pci_bus_id"]) for row in rows} == {
        (0, "0000:00:06.0"),
        (1, "0000:00:07.0"),  # from extra.devices alone
    }
    (state,) = load_fixture("pinned_p20").gpu_states
    trace = replace(load_fixture("trace_torch"), gpu_states=[replace(state, pci_bus_id="b\x1b")])
    assert trace.device is None
    rows = csv_rows(trace, summarize(trace).figures)
    assert {row["gpu_pci_bus_id"] for row in rows} == {"b\\x1b"}  # literally
    moved = replace(trace, parameters=replace(trace.parameters, device=1))
    rows = csv_rows(moved, summarize(moved).figures)
    assert {(row["gpu_index"], row["gpu_pci_bus_id"]) for row in rows} == {(1, ""), (0, "b\\x1b")}


def test_a_trace_whose_gpu_name_was_not_read_has_rows_of_no_gpu_name():
    """A traced program's run that could not read its GPU's name: its rows say none, not a
    placeholder a script would take for a GPU."""
    trace = load_fixture("trace_torch")
    unnamed = replace(trace, extra=replace(trace.extra, gpu_name=""))
    assert unnamed.gpu_name is None
    rows = csv_rows(unnamed, summarize(unnamed).figures)
    assert {row["group"] for row in rows} == {"gpu", "api", "copies", "gap", "line"}
    assert {row["gpu_name"] for row in rows} == {""}


def test_a_result_of_no_recorded_gpu_has_rows_of_none():
    """A Result built in Python with no device facts and no GPU asked for (memprof.api): its
    rows name no GPU, index, bus or name, rather than fail or make one up."""
    from memprof.model.figures import figures

    copy = Measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", 1 << 20, [0.1, 0.3])
    result = Result("pinned", {}, None, [copy], host="a-host")
    assert result.gpu_index is None
    (row,) = csv_rows(result, figures(result, []))
    assert (row["gpu_index"], row["gpu_pci_bus_id"], row["gpu_name"]) == ("", "", "")
    assert (row["name"], row["bytes"], row["median_ms"]) == ("[CUDA memcpy HtoD]", 1 << 20, 0.2)
