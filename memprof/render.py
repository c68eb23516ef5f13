"""Draws Results in the terminal with rich: nvprof's profile layout, summary tables, checks.

Renderers never touch CUDA: they take a Result (fresh or loaded from JSON).
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from memprof.experiments import EXPERIMENTS
from memprof.formatting import format_ms, format_percent
from memprof.profile import profile_rows
from memprof.results import Check, Result
from memprof.summary import Summary, Table

PROFILE_COLUMNS = ("Type", "Time(%)", "Time", "Calls", "Avg", "Min", "Max", "Name")


def profile_table(result: Result) -> RichTable:
    """The profile as nvprof prints it: groups, Time(%), total, calls, avg/min/max, name."""
    rows = []
    previous_group = None
    for row in profile_rows(result.measurements):
        stats = row.stats
        rows.append(
            [
                f"{row.group}:" if row.group != previous_group else "",
                format_percent(row.time_fraction),
                format_ms(stats.total_ms),
                str(stats.count),
                format_ms(stats.mean_ms),
                format_ms(stats.min_ms),
                format_ms(stats.max_ms),
                row.name,
            ]
        )
        previous_group = row.group
    table = RichTable(box=None, show_edge=False, pad_edge=False, header_style="bold")
    _add_columns(table, list(PROFILE_COLUMNS), rows, wrap_last=True)
    return table


def summary_table(table: Table) -> RichTable:
    rich_table = RichTable(
        title=table.title, title_justify="left", box=box.SIMPLE_HEAD, min_width=len(table.title)
    )
    _add_columns(rich_table, table.headers, table.rows, wrap_last=False, best=table.highlighted)
    return rich_table


def _add_columns(
    table: RichTable,
    headers: list[str],
    rows: list[list[str]],
    wrap_last: bool,
    best: list[tuple[int, int]] = (),
) -> None:
    """Numbers never wrap or get cut: each column is at least as wide as its widest cell.

    Cells are plain Text, so names like "[CUDA memcpy HtoD]" are never read as markup.
    """
    for index, header in enumerate(headers):
        is_label = index == 0 or (wrap_last and index == len(headers) - 1)
        widest = max((len(row[index]) for row in rows), default=0)
        table.add_column(
            header,
            justify="left" if is_label else "right",
            min_width=None if wrap_last and index == len(headers) - 1 else min(widest, 40),
            overflow="fold",
        )
    for row_index, row in enumerate(rows):
        table.add_row(
            *(
                Text(cell, style="bold green" if (row_index, column) in best else "")
                for column, cell in enumerate(row)
            )
        )


def render_result(result: Result, console: Console, show_profile: bool | None = None) -> None:
    """Header, profile (nvprof layout), summary tables, verification and conclusions."""
    summary: Summary = EXPERIMENTS[result.command].summarize(result)
    console.print(Text(_headline(result), style="bold"))
    if show_profile if show_profile is not None else summary.show_profile:
        console.print(f"=={result.pid}== Profiling result:", highlight=False)
        console.print(profile_table(result))
        console.print(
            Text(
                "Timing: GPU activities with CUDA events around each operation, API calls with "
                "the host clock around each driver call; warm-up runs are not counted.",
                style="dim",
            )
        )
    render_summary(summary, console, result.checks)


def render_summary(summary: Summary, console: Console, checks: list[Check] = ()) -> None:
    """Tables, charts, verification lines and conclusions."""
    for table in summary.tables:
        console.print()
        console.print(summary_table(table))
        for note in table.notes:
            console.print(Text(note, style="dim"))
    for chart in summary.charts:
        console.print()
        console.print(Text(chart.title, style="italic"))
        for line in chart.lines:
            console.print(Text(line), no_wrap=True, overflow="ignore", crop=False)
        for note in chart.notes:
            console.print(Text(note, style="dim"))
    if checks:
        console.print()
        for check in checks:
            style = "green" if check.passed else "bold red"
            console.print(Text(f"{check.name}: {check.detail}", style=style))
    for conclusion in summary.conclusions:
        console.print()
        console.print(Text(conclusion, style="bold"))


def _headline(result: Result) -> str:
    device = result.device
    where = f" on {device.name} (device {device.index})" if device else ""
    parameters = ", ".join(f"{k}={_value(v)}" for k, v in result.parameters.items())
    run = f"memprof {result.command}{where}"
    when = f"[{result.host}, {result.created_at}, memprof {result.memprof_version}]"
    return f"{run}: {parameters} {when}" if parameters else f"{run} {when}"


def _value(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
