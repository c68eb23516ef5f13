"""What tests/test_verdicts_*.py share: a recorded fixture with one figure moved to either
side of a verdict's threshold, and the words the summary then says, found by table title,
column header and row label (never by position, so a table that gains a column or a row
still reads the same cell).

Figures are moved by scaling the recorded samples of the measurements that make them
(samples_ms, throughput_ms, events_ms alike, so they still agree): GB/s is divided by the
factor, a time multiplied. The scale is computed from the recorded figure, so the figure
lands where the test wants it whatever the recording says. Edits are made on the loaded
Result (tests.conftest.replace), never on the fixture files.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path

from memprof.experiments import summarize
from memprof.model.results import Measurement, Result
from memprof.model.summary import Summary, Table
from tests.conftest import _loaded, as_printed, replace

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> Result:
    """A Result recorded on the GPU machine, by its file name without .json: loaded (and
    checked) once, each test given its own Result object (edits never change it in place)."""
    return _loaded(FIXTURES / f"{name}.json")


def matches(
    m: Measurement,
    group: str | None = None,
    operation: str | None = None,
    kind: str | None = None,
    nbytes: int | None = None,
    gpus: tuple[int, ...] | None = None,
) -> bool:
    return (
        (group is None or m.group == group)
        and (operation is None or m.operation == operation)
        and (kind is None or m.kind == kind)
        and (nbytes is None or m.bytes == nbytes)
        and (gpus is None or m.gpus == gpus)
    )


def the(result: Result, **match) -> Measurement:
    """The one measurement that matches."""
    found = [m for m in result.measurements if matches(m, **match)]
    assert len(found) == 1, (match, len(found))
    return found[0]


def edited(result: Result, edit: Callable[[Measurement], Measurement | None], **match) -> Result:
    """A copy of the result with edit() applied to every measurement that matches (None
    from edit drops it); at least one must match."""
    found, measurements = 0, []
    for m in result.measurements:
        if matches(m, **match):
            found += 1
            m = edit(m)
            if m is None:
                continue
        measurements.append(m)
    assert found, f"no measurement matches {match}"
    return replace(result, measurements=measurements)


def times(m: Measurement, factor: float) -> Measurement:
    """The measurement with every timed sample multiplied by factor."""
    return replace(
        m,
        samples_ms=[s * factor for s in m.samples_ms],
        throughput_ms=[s * factor for s in m.throughput_ms],
        events_ms=[s * factor for s in m.events_ms],
    )


def scaled(result: Result, factor: float, **match) -> Result:
    """Every matching measurement's samples multiplied by factor (its GB/s divided by it)."""
    return edited(result, lambda m: times(m, factor), **match)


def with_samples(result: Result, samples_ms: list[float], **match) -> Result:
    """Every matching measurement's single-operation samples replaced (no batches)."""

    def single(m: Measurement) -> Measurement:
        return replace(m, samples_ms=list(samples_ms), events_ms=[])

    return edited(result, single, **match)


def per_operation_ms(m: Measurement) -> float:
    """What a figure is made of: the median of the back-to-back batches, else of the samples."""
    return statistics.median(m.throughput_ms or m.samples_ms)


def gb_per_s(nbytes: float, milliseconds: float) -> float:
    return nbytes / (milliseconds / 1e3) / 1e9


def with_states(result: Result, **changes) -> Result:
    """The result with every GPU state's fields changed ."""
    states = [replace(state, **changes) for state in result.gpu_states or []]
    assert states, "the fixture records no GPU state"
    return replace(result, gpu_states=states)


def with_state(result: Result, index: int, **changes) -> Result:
    """The result with GPU `index`'s state changed."""
    states = [
        replace(state, **changes) if state.index == index else state
        for state in result.gpu_states or []
    ]
    return replace(result, gpu_states=states)


# -- reading what the summary says --------------------------------------------------------


def table(summary: Summary, title: str) -> Table:
    """The one table whose title contains `title`."""
    found = [t for t in summary.tables if title in t.title]
    assert len(found) == 1, (title, [t.title for t in summary.tables])
    return found[0]


def header_index(t: Table, header: str) -> int:
    """Where the column `header` is: its header exactly, or `header` with the unit a column of
    times is written in ("pinned" finds "pinned (us)")."""
    found = [
        i
        for i, name in enumerate(t.headers)
        if name == header or re.fullmatch(re.escape(header) + r" \((ns|us|ms|s)\)", name)
    ]
    assert len(found) == 1, (t.title, header, t.headers)
    return found[0]


def column(t: Table, header: str) -> list[str]:
    """The column's cells, each time as nvprof prints it (as_printed)."""
    index = header_index(t, header)
    return [as_printed(row[index], t.headers[index]) for row in t.rows]


def cell(t: Table, header: str, *labels: str) -> str:
    """The cell under `header` of the one row whose first cells are `labels`, a time as
    nvprof prints it (as_printed: "1.0000ms" where the column is written in us)."""
    rows = [row for row in t.rows if row[: len(labels)] == list(labels)]
    assert len(rows) == 1, (t.title, labels, [row[: len(labels)] for row in t.rows])
    index = header_index(t, header)
    return as_printed(rows[0][index], t.headers[index])


def conclusion(summary: Summary, words: str) -> str:
    """The one conclusion that contains `words`."""
    found = [line for line in summary.conclusions if words in line]
    assert len(found) == 1, (words, summary.conclusions)
    return found[0]


def said(result: Result) -> str:
    """Every conclusion of the result's summary, one text."""
    return "\n".join(summarize(result).conclusions)


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel)


def cell_where(t: Table, key_header: str, key: str, header: str) -> str:
    """The cell under `header` of the one row whose `key_header` cell is `key`."""
    index = header_index(t, key_header)
    rows = [row for row in t.rows if row[index] == key]
    assert len(rows) == 1, (t.title, key, [row[index] for row in t.rows])
    found = header_index(t, header)
    return as_printed(rows[0][found], t.headers[found])
