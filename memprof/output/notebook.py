"""A Result as a notebook shows it (Result._repr_html_): a headline, a line per table (click
it for the table), the failed checks and the conclusions. HTML only, no script, nothing
fetched; every string literal, then escaped (a name may hold `<script>`: shown, never run).
"""

from __future__ import annotations

import html

from memprof.model.formatting import plural
from memprof.model.results import Result
from memprof.model.summary import Summary, Table
from memprof.output.literal import literal


def text(value: object) -> str:
    """Any value from a result as HTML text."""
    return html.escape(literal(str(value)))


def headline(result: Result) -> str:
    """memprof COMMAND on GPU, date, measurements, verified: one line."""
    gpu = result.gpu_name or "no GPU recorded"
    failed = [check for check in result.checks if not check.passed]
    verdict = f"{len(failed)} checks FAILED" if failed else "verified"
    return (
        f"memprof {result.command} on {gpu}, {result.created_at} ({result.host}): "
        f"{plural(len(result.measurements), 'measurement')}, {verdict}"
    )


def summary_html(result: Result, summary: Summary) -> str:
    """The HTML a notebook shows for `result`, from its summary's tables and conclusions."""
    parts = [f'<div class="memprof-result">\n<p><b>{text(headline(result))}</b></p>']
    parts += [_table(table) for table in summary.tables]
    lines = [*(f"FAIL: {line}" for line in summary.failed), *summary.conclusions]
    if lines:
        parts.append("<ul>" + "".join(f"<li>{text(line)}</li>" for line in lines) + "</ul>")
    parts.append("</div>")
    return "\n".join(parts)


def table_lines(summary: Summary) -> list[str]:
    """A line per table: its title and how many rows it has, literally (for a repr)."""
    return [f"{literal(t.title)} ({plural(len(t.rows), 'row')})" for t in summary.tables]


def _table(table: Table) -> str:
    """A table as one line (its title and size), the whole table inside it."""
    head = "".join(f"<th>{text(header)}</th>" for header in table.headers)
    rows = "".join(
        "<tr>" + "".join(f"<td>{text(cell)}</td>" for cell in row) + "</tr>" for row in table.rows
    )
    notes = "".join(f"<p><small>{text(note)}</small></p>" for note in table.notes)
    size = plural(len(table.rows), "row")
    return (
        f"<details><summary>{text(table.title)} ({size})</summary>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}</details>"
    )
