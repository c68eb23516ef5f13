"""Draws Results in the terminal with rich: nvprof's profile layout, summary tables, checks.

Fitted to the console's width (a name, word or number is never cut or folded: what does not
fit moves to its own line or table) and encoding. A Result may come from anyone: every string
reaches rich as a Text (never parsed for markup) through console_text (literally).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from memprof.model.ceilings import OVER
from memprof.model.formatting import format_ms, format_percent, plural
from memprof.model.gpustate import describe_all
from memprof.model.results import Check, Result
from memprof.model.statistics import repetitions_words
from memprof.model.summary import Summary, Table
from memprof.output.console import ERROR_HANDLER
from memprof.output.literal import literal
from memprof.output.profile import UNIFIED_MEMORY_HEADERS, profile_rows, unified_memory_rows

PROFILE_COLUMNS = ("Type", "Time(%)", "Time", "Calls", "Avg", "Min", "Max", "Name")
_GAP = "  "  # between profile columns, as nvprof
_NAME_INDENT = 4  # where a name on a line of its own starts
_MIN_TABLE_COLUMN = 4  # narrower text columns are not worth a wrapped cell

# box.SIMPLE_HEAD drawn with "-": rich's own ASCII fallback would draw a full grid.
ASCII_SIMPLE_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def console_text(console: Console) -> Callable[[str], str]:
    """Every string render.py prints goes through it: literally (a hostile name never drives
    the terminal), with ASCII look-alikes where the console's encoding cannot show it
    (LC_ALL=C or PYTHONIOENCODING=ascii never ends in a UnicodeEncodeError)."""
    try:
        encoding = codecs.lookup(console.encoding).name
    except LookupError:
        encoding = "ascii"
    if encoding.startswith("utf"):
        return literal
    return lambda text: literal(text).encode(encoding, ERROR_HANDLER).decode(encoding)


# -- the profile -------------------------------------------------------------------------------


def profile_lines(result: Result, width: int, safe: Callable[[str], str] = str) -> list[str]:
    """The profile as nvprof prints it, in the first of four layouts that fits `width`: a
    line per row; each name on its own line; each group's title too; the numbers over several
    lines. A name wider than the console is printed whole for the terminal to wrap."""
    rows = profile_rows(result.measurements)
    groups = [f"{row.group}:" for row in rows]
    names = [safe(row.name) for row in rows]
    numbers = [
        [format_percent(row.time_fraction), format_ms(row.stats.total_ms), str(row.stats.count)]
        + [format_ms(ms) for ms in (row.stats.mean_ms, row.stats.min_ms, row.stats.max_ms)]
        for row in rows
    ]
    number_headers = list(PROFILE_COLUMNS[1:-1])
    figures = Figures([number_headers, *numbers])
    numbers_width = figures.width()
    type_width = max([len(PROFILE_COLUMNS[0])] + [len(group) for group in groups])
    name_width = max([len(PROFILE_COLUMNS[-1])] + [cell_len(name) for name in names])
    type_fits = type_width + len(_GAP) + numbers_width <= width
    one_line = type_fits and type_width + 2 * len(_GAP) + numbers_width + name_width <= width

    def row(label: str, cells: list[str], name: str) -> list[str]:
        """A row (the headers' too) in the layout chosen: its type column only where it fits."""
        if one_line:
            return [label.ljust(type_width) + _GAP + figures.line(cells) + _GAP + name]
        if type_fits:
            return [label.ljust(type_width) + _GAP + figures.line(cells), *_name_line(name, width)]
        split = [_GAP + line for line in figures.lines(cells, width - len(_GAP))]
        return [*split, *_name_line(name, width)]

    lines = row(PROFILE_COLUMNS[0], number_headers, PROFILE_COLUMNS[-1])
    previous = None
    for group, name, cells in zip(groups, names, numbers, strict=True):
        label = group if group != previous else ""
        previous = group
        if not type_fits and label:
            lines.append(label)
        lines += row(label, cells, name)
    return [line.rstrip() for line in lines]


class Figures:
    """Columns of figures, each right-aligned to its widest cell, two spaces apart; where a
    row is wider than the room it goes over several lines, split between figures."""

    def __init__(self, rows: list[list[str]]) -> None:
        self.widths = [max(cell_len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(self, cells: list[str], columns: list[int] | None = None) -> str:
        columns = list(range(len(self.widths))) if columns is None else columns
        return _GAP.join(" " * (self.widths[i] - cell_len(cells[i])) + cells[i] for i in columns)

    def width(self, columns: list[int] | None = None) -> int:
        columns = list(range(len(self.widths))) if columns is None else columns
        return sum(self.widths[i] for i in columns) + len(_GAP) * (len(columns) - 1)

    def lines(self, cells: list[str], room: int) -> list[str]:
        """The cells over lines of as many figures as fit in `room`, at least one each."""
        chunks: list[list[int]] = [[]]
        for column in range(len(self.widths)):
            if chunks[-1] and self.width([*chunks[-1], column]) > room:
                chunks.append([])
            chunks[-1].append(column)
        return [self.line(cells, columns) for columns in chunks]


def _name_line(name: str, width: int) -> list[str]:
    """A name on a line of its own, indented where it fits, else from the first column, and
    wrapped between words where even that is wider than the console."""
    indent = min(_NAME_INDENT, max(0, width - cell_len(name)))
    if cell_len(name) <= width:
        return [" " * indent + name]
    import textwrap

    return textwrap.wrap(
        name, max(width, 20), subsequent_indent=" " * _NAME_INDENT, break_on_hyphens=False
    )


# -- summary tables ----------------------------------------------------------------------------


@dataclass
class TablePart:
    """A share of a summary table's columns: a rich table, or lines with each label above its
    figure (a console too narrow for a label beside one figure)."""

    title: str
    table: RichTable | None = None
    lines: list[Text] = field(default_factory=list)


def summary_table(
    table: Table, width: int, table_box: box.Box = box.SIMPLE_HEAD
) -> list[TablePart]:
    """A summary table as rich tables that fit `width`: text cells wrap between words, then
    the columns are split over tables that each repeat the label column (_column_parts)."""
    parts = []
    for columns in _column_parts(table, width):
        widths = _fitted_widths(table, columns, width)
        if widths is not None and sum(widths) + _overhead(len(columns)) > width:
            rule = table_box.head_row_horizontal
            parts += [TablePart("", lines=_stacked(table, c, width, rule)) for c in columns[1:]]
        else:
            parts.append(TablePart("", _rich_table(table, columns, widths, table_box)))
    for index, part in enumerate(parts):
        part.title = table.title if index == 0 else f"{table.title} (continued)"
    return parts


def _stacked(table: Table, column: int, width: int, rule: str) -> list[Text]:
    """One column of a table with each row's label on a line of its own, its figure below."""
    figure_width = max(cell_len(row[column]) for row in table.rows)
    lines = [*_wrapped(Text(table.headers[0], "bold"), width)]
    lines += _wrapped(Text(table.headers[column], "bold"), width - _NAME_INDENT, _NAME_INDENT)
    body = []
    best = set(table.highlighted)
    for index, row in enumerate(table.rows):
        body += _wrapped(Text(row[0]), width)
        # right-aligned under the others, but never pushed past the edge where it fits
        pad = _NAME_INDENT + figure_width - cell_len(row[column])
        figure = Text(" " * min(pad, max(0, width - cell_len(row[column]))))
        figure.append(row[column], "bold green" if (index, column) in best else "")
        body.append(figure)
    widest = max(cell_len(line.plain.rstrip()) for line in [*lines, *body])
    return [*lines, Text(rule * min(widest, width)), *body]


def _overhead(column_count: int) -> int:
    """Characters between the cells of a table drawn by _rich_table: two between columns."""
    return 2 * (column_count - 1)


def _widths(table: Table, column: int) -> tuple[int, int, int]:
    """A column's natural width, body width (once its header wraps) and narrowest (figures
    keep their cells whole; words wrap, a figure with its unit counting as one word)."""
    cells = [row[column] for row in table.rows]
    natural = max(cell_len(cell) for cell in [table.headers[column], *cells])
    words = [
        word
        for cell in [table.headers[column], *cells]
        for word in ([cell] if _FIGURE.fullmatch(cell) else cell.split())
    ]
    minimum = min(max([_MIN_TABLE_COLUMN, *(cell_len(word) for word in words)]), natural)
    body = max([minimum, *(cell_len(cell) for cell in cells)])
    return natural, body, body if _is_numeric_column(table, column) else minimum


def _column_parts(table: Table, width: int) -> list[list[int]]:
    """Column indices of each table to draw: all where they fit with text cells wrapped, else
    the label and as many columns as fit unwrapped, in each share."""
    count = len(table.headers)
    _, body, narrowest = zip(*(_widths(table, column) for column in range(count)), strict=True)
    if sum(narrowest) + _overhead(count) <= width:
        return [list(range(count))]
    parts: list[list[int]] = []
    current = [0]
    for column in range(1, count):
        candidate = [*current, column]
        fits = sum(body[c] for c in candidate) + _overhead(len(candidate)) <= width
        if fits or len(current) == 1:
            current = candidate
        else:
            parts.append(current)
            current = [0, column]
    parts.append(current)
    return parts


def _fitted_widths(table: Table, columns: list[int], width: int) -> list[int] | None:
    """Column widths within `width` (headers wrap first, then the widest text cells), or
    None where the table fits as it is."""
    natural, body, narrowest = zip(*(_widths(table, column) for column in columns), strict=True)
    widths = list(natural)
    available = width - _overhead(len(columns))
    if sum(widths) <= available:
        return None
    for floors in (body, narrowest):
        while sum(widths) > available:
            shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def _is_numeric_column(table: Table, column: int) -> bool:
    """Figures (1.23ms, 45.6, 2.31x, 2^20 (4 MiB), -) align right; words align left."""
    cells = [row[column] for row in table.rows if row[column].strip() not in ("", "-")]
    # a figure, or the words standing for one: a ceiling that does not hold ("over PCIe")
    figures = (cell.lstrip("+-~<>")[:1].isdigit() or cell.startswith(f"{OVER} ") for cell in cells)
    return bool(cells) and all(figures)


# A number, its unit and what it is in brackets: "3.9680us", "4 MiB", "2^20 (4 MiB)"
_FIGURE = re.compile(r"[+\-~<>]?\d\S*( \S+)?( \([^()]*\))?")


def _rich_table(
    table: Table, columns: list[int], widths: list[int] | None, table_box: box.Box
) -> RichTable:
    """The columns as a rich table, without its title: titles wrap at the console's width
    (draw_table), not at the table's, where a long title would fold into a narrow column."""
    rich_table = RichTable(box=table_box, show_edge=False, pad_edge=False, collapse_padding=True)
    for position, column in enumerate(columns):
        rich_table.add_column(
            Text(table.headers[column]),
            justify="right" if column and _is_numeric_column(table, column) else "left",
            width=widths[position] if widths else None,
            overflow="fold",
        )
    best = set(table.highlighted)
    for row_index, row in enumerate(table.rows):
        rich_table.add_row(
            *(
                Text(row[column], style="bold green" if (row_index, column) in best else "")
                for column in columns
            )
        )
    return rich_table


# -- whole results -----------------------------------------------------------------------------


def render_result(
    result: Result, summary: Summary, console: Console, verbose: bool = False
) -> None:
    """Header, profile (nvprof layout), then the summary's tables, checks and conclusions."""
    safe = console_text(console)
    _print_prose(console, safe(_headline(result)), "bold")
    if result.timing is not None and result.timing.host_affinity:
        _print_prose(console, safe(result.timing.host_affinity), "dim")
    for line, warnings in describe_all(result.gpu_states):
        _print_prose(console, safe(line), "dim")
        for warning in warnings:
            _print_prose(console, safe(f"warning: {warning}"), "yellow")
    if summary.show_profile:
        console.print(Text(f"=={result.pid}== Profiling result:"))
        for index, line in enumerate(profile_lines(result, console.width, safe)):
            _print_whole(console, line, style="bold" if index == 0 else "")
        note = summary.timing_note or timing_note(result)
        _print_prose(console, safe(note), "dim")
        unified = unified_memory_lines(result, console.width)
        if unified:
            console.print(Text(f"=={result.pid}== Unified Memory profiling result:"))
            for line in unified:  # figures fit by layout; the notes wrap
                _print_prose(console, safe(line))
    render_summary(summary, console, result.checks, verbose)


def timing_note(result: Result) -> str:
    """How the profile's figures were measured, from what the Result records."""
    timing = result.timing
    only_timed = "only the timed repetitions are counted (Calls = --repeat per operation)"
    if timing is not None and timing.max_noise_pct is not None:
        figures = [m.samples_ms for m in result.measurements if m.operation != "driver_call"]
        most = f"{timing.max_count} times, " if timing.max_count is not None else ""
        only_timed = (
            "only the timed repetitions are counted: each operation until its median's noise "
            f"was below {timing.max_noise_pct:g}%, {most}or for {timing.time_cap_s:g} s "
            f"(median of {repetitions_words(figures)})"
        )
    if timing is None:  # results saved before memprof recorded its timing source
        return (
            "Timing: GPU activities with CUDA events around each operation, API calls with the "
            "host clock around each driver call; warm-up runs are not counted."
        )
    if timing.source == "cupti":
        return (
            "Timing: GPU activities are CUPTI's records of each operation (the GPU's own "
            "duration, as nvprof printed); API calls are CUPTI's records of every driver call "
            f"they made; {only_timed}."
        )
    why = f" ({timing.note})" if timing.note else ""
    overhead = (
        f" less the {timing.event_overhead_ms * 1e3:.2f} us an empty gated event pair measures"
        if timing.event_overhead_ms
        else ""
    )
    return (
        f"Timing: CUDA events{why}: each GPU operation held behind a GPU-side gate, timed "
        f"between two events{overhead}; copies from pageable memory block the host and include "
        f"the driver's staging; API calls with the host clock; {only_timed}. Operations "
        "under about 10 us read 1-2 us longer than the GPU's own record (small copies up to "
        "6 us: events also time the engine's start), so install cupti-python for those."
    )


# What a trace's unified-memory counters are: CUPTI missed the migration a faulting kernel
# causes (the H200's examples/managed_touch.py: 18 ms on 64 MiB, 0 B recorded to the GPU), so
# each figure is at least what happened (memprof.experiments.trace's advice says so too).
LOWER_BOUNDS = (
    "lower bounds: CUPTI's counters can miss the migration a faulting kernel causes, docs/trace.md"
)


def unified_memory_lines(result: Result, width: int | None = None) -> list[str]:
    """nvprof's Unified Memory section (names on lines of their own where rows are wider
    than `width`), or CUPTI's reason for its absence (managed runs)."""
    timing = result.timing
    if timing is None:
        return []
    if timing.unified_memory is None:
        if result.command in ("managed", "trace") and timing.unified_memory_note:
            return [timing.unified_memory_note]
        return []
    rows, cpu_faults = unified_memory_rows(timing.unified_memory)
    if not rows and cpu_faults.endswith(": 0"):
        return []
    table = [list(UNIFIED_MEMORY_HEADERS), *rows]
    figures = Figures([row[:-1] for row in table])
    if width is None or all(figures.width() + 2 + cell_len(r[-1]) <= width for r in table):
        lines = [f"{figures.line(r)}  {r[-1]}" for r in table]
    else:  # the name under its figures, and those over several lines where they must be
        indent = "" if figures.width() <= width else _GAP
        lines = []
        for r in table:
            lines += [indent + text for text in figures.lines(r, width - len(indent))]
            lines += _name_line(r[-1], width)
    lines.append(cpu_faults)
    if result.command == "trace":
        return [*lines, f"(the whole program: CUPTI's counters are process-wide; {LOWER_BOUNDS})"]
    return [*lines, "(whole run, warm-ups included: CUPTI's counters are process-wide)"]


def render_summary(
    summary: Summary, console: Console, checks: list[Check] = (), verbose: bool = False
) -> None:
    """Tables, charts, verification lines and conclusions."""
    safe = console_text(console)
    table_box = box.SIMPLE_HEAD if safe("─") == "─" else ASCII_SIMPLE_HEAD
    for line in summary.header:
        console.print(Text(safe(line), style="yellow"))
    for table in summary.tables:
        console.print()
        draw_table(console, _safe_table(table, safe), table_box)
    for chart in summary.charts:
        console.print()
        _print_prose(console, safe(chart.title), "italic")
        _print_whole(console, *(safe(line) for line in chart.lines_for(console.width)))
        for note in chart.notes:
            _print_prose(console, safe(note), "dim")
    if checks:
        console.print()
        for line, passed in verification_lines(checks, verbose):
            _print_prose(console, safe(line), "green" if passed else "bold red")
    for conclusion in summary.conclusions:
        console.print()
        _print_prose(console, safe(conclusion), "bold")


def verification_lines(checks: list[Check], verbose: bool = False) -> list[tuple[str, bool]]:
    """The lines of a run's verifications, each with whether it passed: one line where all
    matched, else also each that did not; with `verbose`, every verification."""
    if verbose:
        return [(f"{check.name}: {check.detail}", check.passed) for check in checks]
    failed = [check for check in checks if not check.passed]
    matched = len(checks) - len(failed)
    if not failed:
        every = {1: "the result matches", 2: "both results match"}.get(
            len(checks), f"all {len(checks)} results match"
        )
        return [(f"Verified against numpy: {every} (--verbose lists them).", True)]
    said = (
        f"Verified against numpy: {matched} of {plural(len(checks), 'result')} match; these do not:"
    )
    return [(said, False), *((f"{check.name}: {check.detail}", False) for check in failed)]


def draw_table(console: Console, table: Table, table_box: box.Box = box.SIMPLE_HEAD) -> None:
    """A summary table (its strings already made safe) and its notes, fitted to the console."""
    for part in summary_table(table, console.width, table_box):
        _print_prose(console, part.title, "italic")
        if part.table is not None:
            console.print(part.table)
        _print_whole(console, *part.lines)
    for note in table.notes:
        _print_prose(console, note, "dim")


def _print_whole(console: Console, *lines: str | Text, style: str = "") -> None:
    """Preformatted lines, never folded by rich (a longer one wraps in the terminal); all
    in one print, as each costs rich the same whatever it holds."""
    if not lines:
        return
    texts = [line if isinstance(line, Text) else Text(line, style=style) for line in lines]
    console.print(Text("\n").join(texts), no_wrap=True, overflow="ignore", crop=False)


def _print_prose(console: Console, text: str, style: str = "") -> None:
    """A paragraph wrapped between words at the console's width (as rich wraps it), except
    that a word wider than the console (a timestamp at 24 columns) stays whole on its line."""
    _print_whole(console, *_wrapped(Text(text, style), console.width))


_WORD = re.compile(r"\s*\S+\s*")  # a word and the spaces around it, as rich's wrapping sees it
_AFTER_COMMA = re.compile(r"[^,]*,\s*|[^,]+")


def _wrapped(text: Text, width: int, indent: int = 0) -> list[Text]:
    """`text` in lines of at most `width` cells, broken between words as rich breaks them; a
    word wider than a line breaks after its commas (powers=8,9,10,...), else stays whole."""
    breaks, used = [], 0
    for start, piece in _pieces(text.plain, width):
        if used and used + cell_len(piece.rstrip()) > width:
            breaks.append(start)
            used = 0
        used += cell_len(piece)
    lines = list(text.divide(breaks))
    for line in lines:
        line.rstrip_end(width)
    return [Text(" " * indent) + line if indent else line for line in lines]


def _pieces(plain: str, width: int) -> Iterator[tuple[int, str]]:
    """Where a line may break: each word, and after each comma of a word too wide."""
    for word in _WORD.finditer(plain):
        if cell_len(word.group().strip()) <= width or "," not in word.group():
            yield word.start(), word.group()
            continue
        for piece in _AFTER_COMMA.finditer(word.group()):
            yield word.start() + piece.start(), piece.group()


def _safe_table(table: Table, safe: Callable[[str], str]) -> Table:
    return Table(
        safe(table.title),
        [safe(header) for header in table.headers],
        [[safe(cell) for cell in row] for row in table.rows],
        [safe(note) for note in table.notes],
        list(table.highlighted),
    )


def _headline(result: Result) -> str:
    device = result.device
    where = f" on {device.name} (device {device.index})" if device else ""
    parameters = ", ".join(
        f"{k}={_value(v) if (k, v) != ('repeat', None) else 'until the noise target'}"
        for k, v in asdict(result.parameters).items()
    )
    run = f"memprof {result.command}{where}"
    when = f"[{result.host}, {result.created_at}, memprof {result.memprof_version}]"
    return f"{run}: {parameters} {when}" if parameters else f"{run} {when}"


def _value(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
