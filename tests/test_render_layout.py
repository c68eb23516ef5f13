"""The profile and the summary tables fit the console they are given: width and encoding.

Every recorded result is rendered at 60, 80 and 120 columns, at the width of piped output
(160) and at rich's default (None): a name is never cut or folded, no number column is lost
or folded, and nothing but a name wider than the console itself is wider than the console.
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import asdict

import pytest
from rich.console import Console

from memprof.experiments import summarize
from memprof.experiments.info import InfoParams
from memprof.model.formatting import format_ms, format_percent
from memprof.model.summary import Table
from memprof.output.console import ERROR_HANDLER
from memprof.output.profile import profile_rows
from memprof.output.render import (
    ASCII_SIMPLE_HEAD,
    PROFILE_COLUMNS,
    console_text,
    draw_table,
    profile_lines,
    render_result,
    summary_table,
)
from tests.conftest import FIXTURES, load_fixture

NAMES = sorted(path.stem.removeprefix("h200_") for path in FIXTURES.glob("h200_*.json"))
WIDTHS = [60, 80, 120, 160, None]


@functools.cache  # tests read the same renderings: 62 of 166 were made again
def rendered(name: str, width: int | None) -> tuple[str, int]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    result = load_fixture(name)
    render_result(result, summarize(result), console)
    return console.file.getvalue(), console.width


def profile_section(text: str, pid: int) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"=={pid}== Profiling result:")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Timing:"))
    return lines[start + 1 : end]


def shows_profile(name: str) -> bool:
    result = load_fixture(name)
    return summarize(result).show_profile


PROFILED = [name for name in NAMES if shows_profile(name)]


@pytest.mark.parametrize("width", WIDTHS, ids=str)
@pytest.mark.parametrize("name", PROFILED)
def test_profile_names_and_numbers_stay_whole(name, width):
    result = load_fixture(name)
    text, columns = rendered(name, width)
    section = profile_section(text, result.pid)
    stripped = [line.strip() for line in section]
    tokens_per_line = [line.split() for line in section]
    joined = [" ".join(stripped[i : i + n]) for n in (2, 3) for i in range(len(stripped))]
    for row in profile_rows(result.measurements):
        # the whole display name on one line (alone, or ending nvprof's one-line row), or,
        # wider than the console, on two lines broken between words
        whole = any(line == row.name or line.endswith("  " + row.name) for line in stripped)
        wrapped = columns is not None and len(row.name) > columns and row.name in joined
        assert whole or wrapped, row.name
        stats = row.stats
        figures = [
            format_percent(row.time_fraction),
            format_ms(stats.total_ms),
            str(stats.count),
            format_ms(stats.mean_ms),
            format_ms(stats.min_ms),
            format_ms(stats.max_ms),
        ]
        assert any(_contains_run(tokens, figures) for tokens in tokens_per_line), figures
    for line in section:
        assert columns is None or len(line) <= columns, line


def _contains_run(tokens: list[str], run: list[str]) -> bool:
    return any(tokens[i : i + len(run)] == run for i in range(len(tokens) - len(run) + 1))


@pytest.mark.parametrize("name", PROFILED)
def test_profile_keeps_nvprof_line_per_row_where_it_fits(name):
    result = load_fixture(name)
    text, _ = rendered(name, 250)
    section = profile_section(text, result.pid)
    assert section[0].split() == list(PROFILE_COLUMNS)
    rows = profile_rows(result.measurements)
    assert len(section) == 1 + len(rows)
    for line, row in zip(section[1:], rows, strict=True):
        assert line.endswith("  " + row.name)
    groups = [line.split(":")[0] for line in section[1:] if not line.startswith(" ")]
    assert groups == list(dict.fromkeys(row.group for row in rows))


def test_at_80_columns_names_go_under_their_numbers():
    result = load_fixture("zerocopy_p20")
    lines = profile_lines(result, 80)
    assert lines[0].split() == list(PROFILE_COLUMNS[:-1])
    assert lines[1] == "    Name"
    device_kernel = "sumArraysGPU(float*, float*, float*, int) (device)"
    index = lines.index("    " + device_kernel)
    row = next(r for r in profile_rows(result.measurements) if r.name == device_kernel)
    assert lines[index - 1].split()[-6:] == [
        format_percent(row.time_fraction),
        format_ms(row.stats.total_ms),
        str(row.stats.count),
        format_ms(row.stats.mean_ms),
        format_ms(row.stats.min_ms),
        format_ms(row.stats.max_ms),
    ]
    assert lines[2].startswith("GPU activities:")
    assert max(len(line) for line in lines) <= 80


def test_at_60_columns_the_group_title_takes_its_own_line():
    result = load_fixture("pinned_p20")
    lines = profile_lines(result, 60)
    assert "GPU activities:" in lines and "API calls:" in lines
    assert lines[0].split() == list(PROFILE_COLUMNS[1:-1])
    assert "    [CUDA memcpy HtoD] (pageable)" in lines
    assert max(len(line) for line in lines) <= 60


def wrapped_in(name: str, lines: list[str]) -> bool:
    """Whether `name` stands in the lines whole, or broken between words over a few."""
    stripped = [line.strip() for line in lines]
    return any(name == " ".join(stripped[i : i + n]) for n in (1, 2, 3) for i in range(len(lines)))


def test_a_name_wider_than_the_console_wraps_between_words_within_it():
    result = load_fixture("managed")
    longest = max((row.name for row in profile_rows(result.measurements)), key=len)
    assert len(longest) > 80
    lines = profile_lines(result, 80)
    assert longest not in lines and wrapped_in(longest, lines)
    assert all(len(line) <= 80 for line in lines)
    lines = profile_lines(result, len(longest) + 2)
    assert "  " + longest in lines  # shifted left just enough to fit


def test_at_40_columns_no_column_vanishes():
    result = load_fixture("pinned_p20")
    text, _ = rendered("pinned_p20", 40)
    for row in profile_rows(result.measurements):
        assert wrapped_in(row.name, text.splitlines())
        assert format_ms(row.stats.max_ms) in text
    assert "Calls" in text and "Max" in text


# -- summary tables ----------------------------------------------------------------------------


def _tables():
    for name in NAMES:
        result = load_fixture(name)
        for table in summarize(result).tables:
            yield pytest.param(table, id=f"{name}:{table.title[:20]}")


def _draw(table: Table, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    draw_table(console, Table(table.title, table.headers, table.rows, [], table.highlighted))
    return console.file.getvalue().splitlines()


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("table", list(_tables()))
def test_summary_tables_fit_and_never_fold_a_figure(table, width):
    lines = _draw(table, width)
    assert max(len(line.rstrip()) for line in lines) <= width
    for column, _ in enumerate(table.headers):
        cells = [row[column] for row in table.rows]
        figures = all(cell[:1].isdigit() or cell == "-" for cell in cells)
        for cell in cells:
            if figures or re.fullmatch(r"2\^\d+ \(\d+ [KMG]?i?B\)", cell):  # whole on one line
                assert any(re.search(rf"(^|\s){re.escape(cell)}(\s|$)", line) for line in lines)
            else:  # text wraps between words, never inside one
                for word in cell.split():
                    assert any(word in line.split() for line in lines), word
    rows_seen = [line for line in lines if line.startswith(table.rows[0][0].split()[0])]
    assert rows_seen


def test_a_wide_table_is_split_with_its_label_column_repeated():
    table = Table("Allocate", ["Size"] + [f"kind{i}" for i in range(8)])
    for power in (16, 20):
        table.add_row(f"2^{power} (x)", *(f"{power}{i}.123ms" for i in range(8)))
    parts = summary_table(table, 60)
    assert len(parts) == 2
    assert [len(part.table.columns) for part in parts] == [5, 5]
    assert [str(part.table.columns[0].header) for part in parts] == ["Size", "Size"]
    assert parts[1].title == "Allocate (continued)"
    lines = _draw(table, 60)
    assert sum(line.startswith("2^16 (x)") for line in lines) == 2
    assert len(summary_table(table, 200)) == 1


def test_text_columns_wrap_between_words_and_figures_stay_whole():
    table = Table("Flags", ["Flag", "Value", "Decides", "Peak"])
    table.add_row(
        "canMapHostMemory",
        "1",
        "mapped (zero-copy) host memory, a long tail",
        "4,814 GB/s (2 x 3201)",
    )
    table.add_row("managedMemory", "0", "managed memory", "63.0 GB/s (Gen5 x16)")
    [part] = summary_table(table, 60)
    lines = _draw(table, 60)
    assert max(len(line.rstrip()) for line in lines) <= 60
    assert any(line.startswith("canMapHostMemory") and " 1 " in line for line in lines)
    assert any(line.endswith("4,814 GB/s (2 x 3201)") for line in lines)
    assert any(line.endswith("63.0 GB/s (Gen5 x16)") for line in lines)
    for word in table.rows[0][2].split():
        assert any(word in line.split() for line in lines)
    justify = [column.justify for column in part.table.columns]
    assert justify == ["left", "right", "left", "right"]


def test_best_cells_stay_highlighted_in_every_share():
    table = Table("T", ["Kind"] + [f"column{i}" for i in range(6)])
    table.add_row("a", *(f"{i}1.2345678" for i in range(6)))
    table.add_row("b", *(f"{i}2.3456789" for i in range(6)))
    table.highlighted = [(1, 1), (0, 6)]
    parts = summary_table(table, 40)
    assert len(parts) > 1
    styles = {}
    for part in parts:
        headers = [str(c.header) for c in part.table.columns]
        for position, column in enumerate(part.table.columns):
            for row, cell in enumerate(column.cells):
                styles[headers[position], row] = str(cell.style)
    assert styles["column0", 1] == "bold green"
    assert styles["column5", 0] == "bold green"
    assert styles["column0", 0] == ""


# -- encodings ---------------------------------------------------------------------------------


def _ascii_console(width: int) -> tuple[Console, io.BytesIO]:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    return Console(file=stream, width=width, color_system=None), raw


@pytest.mark.parametrize("width", [80, 160])
@pytest.mark.parametrize("name", NAMES)
def test_every_result_renders_on_an_ascii_console(name, width):
    console, raw = _ascii_console(width)
    result = load_fixture(name)
    render_result(result, summarize(result), console)
    console.file.flush()
    text = raw.getvalue().decode("ascii")  # nothing but ASCII was written
    utf8 = rendered(name, width)[0]
    # the same words, the few non-ASCII characters replaced (a replacement can move a wrap)
    expected = utf8.replace("→", "->").replace("…", "...")
    assert _words(text) == _words(expected)


def _words(text: str) -> list[str]:
    return sorted(word for word in text.split() if set(word) - set("-─"))


def test_ascii_console_gets_arrows_and_a_plain_rule():
    console, raw = _ascii_console(80)
    result = load_fixture("pinned_p20")
    render_result(result, summarize(result), console)
    console.file.flush()
    text = raw.getvalue().decode("ascii")
    assert "pinned    host -> device" in text
    assert re.search(r"^-{20,}$", text, re.MULTILINE)


def test_console_text_replaces_only_what_the_encoding_cannot_show():
    sample = "5 µs → 3× ≈ … ☃"
    ascii_console = Console(file=io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    latin_console = Console(file=io.TextIOWrapper(io.BytesIO(), encoding="latin-1"))
    utf8_console = Console(file=io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert console_text(ascii_console)(sample) == "5 us -> 3x ~ ... ?"
    assert console_text(latin_console)(sample) == "5 µs -> 3× ~ ... ?"
    assert console_text(utf8_console)(sample) == sample


def test_tables_and_error_lines_use_one_ascii_lookalike_for_each_character():
    """A table cell on an ASCII console and a line written to an ASCII stream (an error, a
    note) read the same: "GPU 0 <-> GPU 1", never "GPU 0 ? GPU 1" in one of them."""
    sample = "GPU 0 ↔ GPU 1, “90°”, ✓ ‘ok’"
    ascii_console = Console(file=io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors=ERROR_HANDLER)
    stream.write(sample)
    stream.flush()
    written = stream.buffer.getvalue().decode("ascii")
    assert console_text(ascii_console)(sample) == written == "GPU 0 <-> GPU 1, \"90 deg\", ok 'ok'"


def test_ascii_box_draws_only_the_header_rule():
    table = Table("T", ["Kind", "GB/s"])
    table.add_row("pinned", "55.3")
    console, raw = _ascii_console(40)
    draw_table(console, table, ASCII_SIMPLE_HEAD)
    console.file.flush()
    assert raw.getvalue().decode("ascii").splitlines()[1:] == [
        "Kind    GB/s",
        "------------",
        "pinned  55.3",
    ]


# -- exact boundaries --------------------------------------------------------------------------


def test_each_profile_layout_is_used_down_to_the_last_column_it_fits():
    result = load_fixture("pinned_p20")
    one_line = max(len(line) for line in profile_lines(result, 500))
    assert profile_lines(result, one_line)[0].endswith("  Name")
    below = profile_lines(result, one_line - 1)
    assert below[1] == "    Name" and below[0].startswith("Type")
    with_type = len(below[0])  # "Type ... Max": the widest line of this layout
    assert max(len(line) for line in below) == with_type
    assert profile_lines(result, with_type)[0].startswith("Type")
    grouped = profile_lines(result, with_type - 1)
    assert grouped[0].startswith("  Time(%)") and "GPU activities:" in grouped
    # nvprof's spacing: two spaces between columns, the numbers right-aligned under headers
    assert one_line == len("GPU activities:") + 2 + len(grouped[0].strip()) + 2 + len(
        "sumArraysGPU(float*, float*, float*, int)"
    )


def test_columns_are_packed_into_a_share_up_to_the_exact_width():
    table = Table("T", ["Kind", "aaaa", "bbbb", "cccc"])
    table.add_row("k", "1.00", "2.00", "3.00")  # each column 4 wide, 2 between columns
    assert len(summary_table(table, 4 * 4 + 3 * 2)) == 1
    for width in (4 * 4 + 3 * 2 - 1, 3 * 4 + 2 * 2):  # the first share is exactly 16 wide
        parts = summary_table(table, width)
        assert [[str(c.header) for c in part.table.columns] for part in parts] == [
            ["Kind", "aaaa", "bbbb"],
            ["Kind", "cccc"],
        ]


def test_a_table_wraps_its_text_rather_than_split_while_that_fits_exactly():
    table = Table("T", ["Kind", "Note", "GB/s"])
    table.add_row("k", "aaaa bbbb cccc", "1.00")  # narrowest: 4 + 4 + 4, 2 between columns
    assert len(summary_table(table, 16)) == 1
    assert len(summary_table(table, 15)) == 2


def test_a_column_too_wide_to_sit_beside_the_label_goes_under_it():
    table = Table("T", ["Kind", "a", "b"])
    table.add_row("pinned", "1" * 14, "2" * 14)
    table.highlighted = [(0, 2)]
    parts = summary_table(table, 20)
    assert [part.table for part in parts] == [None, None]
    assert [[line.plain for line in part.lines] for part in parts] == [
        ["Kind", "    a", "─" * 18, "pinned", "    " + "1" * 14],
        ["Kind", "    b", "─" * 18, "pinned", "    " + "2" * 14],
    ]
    assert [str(span.style) for span in parts[1].lines[-1].spans] == ["bold green"]
    assert [part.title for part in parts] == ["T", "T (continued)"]
    fits = Table("T", ["Kind", "a"], [["pinned", "1" * 12]])
    assert summary_table(fits, 20)[0].table is not None  # 6 + 2 + 12: side by side


def test_the_widest_text_column_wraps_first():
    table = Table("T", ["Kind", "Short note", "Long note"])
    table.add_row("pinned", "two words", "many more words than the other column has")
    [part] = summary_table(table, 50)
    widths = [column.width for column in part.table.columns]
    assert widths[:2] == [6, 9] and sum(widths) + 4 == 50  # the header "Short note" wraps
    assert summary_table(table, 200)[0].table.columns[2].width is None  # fits: rich's own widths
    exact = 6 + 10 + len(table.rows[0][2]) + 4
    assert summary_table(table, exact)[0].table.columns[2].width is None
    long_note = len(table.rows[0][2])
    for width, expected in [(exact - 1, [6, 9, long_note]), (exact - 2, [6, 9, long_note - 1])]:
        assert [column.width for column in summary_table(table, width)[0].table.columns] == expected


# -- what surrounds the tables -----------------------------------------------------------------


def test_headline_names_the_gpu_and_parameters_when_there_are_some():
    result = load_fixture("pinned_p20")
    text, _ = rendered("pinned_p20", 300)
    assert text.splitlines()[0] == (
        "memprof pinned on NVIDIA H200 (device 0): "
        + ", ".join(f"{k}={v}" for k, v in asdict(result.parameters).items())
        + f" [{result.host}, {result.created_at}, memprof {result.memprof_version}]"
    )
    summary = summarize(result)
    result.device = None
    result.parameters = InfoParams()  # a command without parameters
    console = Console(width=300, file=io.StringIO(), color_system=None)
    render_result(result, summary, console)
    assert console.file.getvalue().splitlines()[0] == (
        f"memprof pinned [{result.host}, {result.created_at}, memprof {result.memprof_version}]"
    )


def test_failed_checks_are_red_and_passed_ones_green():
    result = load_fixture("register")
    result.checks[1].passed = False
    result.checks[1].detail = "mismatch at 7"
    console = Console(width=200, file=io.StringIO(), color_system="standard", force_terminal=True)
    render_result(result, summarize(result), console, verbose=True)
    lines = console.file.getvalue().splitlines()
    failed = next(line for line in lines if "mismatch at 7" in line)
    passed = next(line for line in lines if result.checks[0].detail in line)
    assert "\x1b[1;31m" in failed and "\x1b[32m" in passed
    header = next(line for line in lines if "Time(%)" in line)
    assert header.startswith("\x1b[1m")


@pytest.mark.parametrize("width", [60, 80, 120, 160])
def test_unified_memory_section_fits_with_every_counter_name_whole(width):
    from memprof.output.render import unified_memory_lines

    result = load_fixture("managed")
    wide = unified_memory_lines(result)
    lines = unified_memory_lines(result, width)
    widest = max(len(line) for line in wide[:-2])
    if width >= widest:
        assert lines == wide
        return
    assert max(len(line) for line in lines[:-2]) <= width
    assert lines[-2:] == wide[-2:]  # CPU page faults and the note
    for row in wide[1:-2]:
        numbers, name = row.rsplit("  ", 1)
        at = lines.index(numbers)  # every figure of the row on one line
        assert lines[at + 1] == "    " + name.strip()
    assert "    Gpu page fault groups" in lines


@pytest.mark.parametrize("width", [40, 50])
def test_unified_memory_figures_wider_than_the_console_go_over_indented_lines(width):
    from memprof.output.render import unified_memory_lines

    result = load_fixture("managed")
    wide = unified_memory_lines(result)
    lines = unified_memory_lines(result, width)
    assert min(len(row.rsplit("  ", 1)[0]) for row in wide[:-2]) > width  # each must split
    assert lines[-2:] == wide[-2:]
    body, at = lines[:-2], 0
    for row in wide[:-2]:
        numbers, name = row.rsplit("  ", 1)
        shown = []
        while body[at] != "    " + name.strip():  # its figures, then its name
            assert body[at].startswith("  ") and len(body[at]) <= width
            shown.append(body[at])
            at += 1
        assert len(shown) > 1 and " ".join(shown).split() == numbers.split()
        at += 1
    assert at == len(body)


@pytest.mark.parametrize("width", [60, 80])
@pytest.mark.parametrize("name", NAMES)
def test_only_names_and_preformatted_charts_are_wider_than_the_console(name, width):
    result = load_fixture(name)
    text, _ = rendered(name, width)
    summary = summarize(result)
    allowed = {row.name for row in profile_rows(result.measurements)}
    allowed |= {line for chart in summary.charts for line in chart.lines}
    for line in text.splitlines():
        assert len(line.rstrip()) <= width or line in allowed, line
