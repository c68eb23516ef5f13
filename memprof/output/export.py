"""Results as CSV, for spreadsheets, scripts and DataFrames: one row per measurement, each
figure the tables show for it, computed once (memprof.model.figures), never here.

Text cells are written literally (memprof.output.literal): people `cat` a CSV, so a control
character in a hostile result's name is written as its escape, never obeyed by the terminal.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from memprof.model.device import DeviceFact
from memprof.model.figures import GIB, Derived, Figure
from memprof.model.lines import lines_of
from memprof.model.results import Result
from memprof.output.literal import literal

# Each column with its type in a DataFrame (memprof.output.frames). Units in the names: ms,
# bytes, GB/s (10^9 bytes per second); a share is a fraction (0.85). What each column and group
# of rows holds: docs/formats.md.
CSV_COLUMNS: dict[str, type] = {
    "command": str,
    "created_at": str,
    "host": str,
    "pid": int,
    "gpu_index": int,
    "gpu_pci_bus_id": str,
    "gpu_name": str,
    "source_gpu": int,
    "destination_gpu": int,
    "group": str,
    "name": str,
    "operation": str,
    "kind": str,
    "bytes": int,
    "moved_bytes": int,
    "calls": int,
    "timing_source": str,
    "median_ms": float,
    "min_ms": float,
    "max_ms": float,
    "mean_ms": float,
    "stdev_ms": float,
    "per_operation_ms": float,
    "gb_per_s": float,
    "gb_per_s_from": str,
    "ceiling_gb_per_s": float,
    "ceiling_share": float,
    "limiter": str,
    "ratio": float,
    "value": float,
    "derived_from": str,
    # a trace's source lines (group "line"), copies by memory kind ("copies"), idle gaps ("gap")
    "source_file": str,
    "source_line": int,
    "source_function": str,
    "gpu_ms": float,
    "host_ms": float,
    "callers": str,
    "blocking_copies": int,
    "small_copies": int,
    "start_ms": float,
    "idle_ms": float,
}


def csv_rows(
    result: Result, figures: Sequence[Figure], derived: Sequence[Derived] = ()
) -> list[dict[str, object]]:
    """A row per measurement of `result` (its summary's figures), then each derived figure's."""
    run = {
        "command": literal(result.command),
        "created_at": literal(result.created_at),
        "host": literal(result.host),
        "pid": result.pid,
        "gpu_name": literal(result.gpu_name or ""),
    }
    own = result.gpu_index
    if own is not None:  # a trace's source lines too are of the run's GPU
        run |= {"gpu_index": own, "gpu_pci_bus_id": _bus_id(result, own)}
    names = {record.index: record.name for record in getattr(result.extra, "devices", None) or []}

    def row_of(one: Figure) -> dict[str, object]:
        m, stats = one.measurement, one.stats
        gpus = m.gpus or ((own,) if own is not None else ())
        gpu = gpus[0] if gpus else ""
        ceiling = one.ceiling
        return {
            **run,
            "gpu_index": gpu,
            "gpu_pci_bus_id": _bus_id(result, gpu),
            "gpu_name": literal(names[gpu]) if gpu in names else run["gpu_name"],
            "source_gpu": m.gpus[0] if len(m.gpus) == 2 else "",
            "destination_gpu": m.gpus[1] if len(m.gpus) == 2 else "",
            "group": literal(m.group),
            "name": literal(m.name),
            "operation": literal(m.operation),
            "kind": literal(m.kind or ""),
            "bytes": m.bytes,
            "moved_bytes": _blank(one.moved_bytes),
            "calls": stats.count,
            "timing_source": m.source,
            "median_ms": stats.median_ms,
            "min_ms": stats.min_ms,
            "max_ms": stats.max_ms,
            "mean_ms": stats.mean_ms,
            "stdev_ms": stats.stdev_ms,
            "per_operation_ms": one.per_operation_ms,
            "gb_per_s": _blank(one.gb_per_s),
            "gb_per_s_from": _basis(one) if one.gb_per_s is not None else "",
            "ceiling_gb_per_s": ceiling.gb_per_s if ceiling is not None else "",
            "ceiling_share": _blank(one.share),
            "limiter": ceiling.limiter if ceiling is not None else "",
        }

    rows = [row_of(one) for one in figures]
    rows_of = {id(f.measurement): row for f, row in zip(figures, rows, strict=True)}
    traced = _trace_rows(result, run, own)
    lines = [row for row in traced if row["group"] == "line"]
    rows_of |= {id(line): row for line, row in zip(lines_of(result) or [], lines, strict=True)}
    made = []
    for one in derived:  # a derived figure's parts come before it
        if isinstance(one, DeviceFact):  # memprof info's: a row of its own
            row = {**run, "group": "device", "name": literal(one.name), "operation": "fact"}
            row |= {c: _blank(getattr(one, c)) for c in ("value", "bytes", "gb_per_s")}
        elif one.formula == "attempt":  # a retry's copies: their own row, as a measurement's
            row = {**row_of(one.parts[0]), "group": "retry", "derived_from": one.name}
            rows_of[id(one.parts[0].measurement)] = row
        else:
            row = _derived_row(one, rows_of)
        rows_of[id(one)] = row
        made.append(row)
    return rows + made + traced


FORMULA_FIGURES = {  # what a Derived figure's row holds, by its formula
    "sum": ("median_ms", "per_operation_ms"),
    "chunks": ("moved_bytes", "median_ms", "per_operation_ms", "gb_per_s"),
    "mean": ("median_ms", "per_operation_ms"),
    "overlap": ("median_ms", "per_operation_ms"),
    "per_gib": ("median_ms", "per_operation_ms"),
    "steady": ("median_ms", "per_operation_ms"),
    "total": ("gb_per_s",),
    "ratio": ("ratio",),
    "lines": ("calls", "bytes", "gpu_ms", "host_ms"),
    "reach": (),  # its bytes: its one part's, the size a curve reaches 90% of its peak from
}


DERIVED_FROM = {"ratio": " / ", "overlap": ", ", "mean": ", "}  # how a row names its parts


def _derived_row(one: Derived, rows_of: dict[int, dict[str, object]]) -> dict[str, object]:
    """A Derived figure's row: the run, GPU, kind and bytes its parts share, its figure, its
    parts named (a part itself derived: by its own row)."""
    parts = [rows_of[id(getattr(part, "measurement", part))] for part in one.parts]
    shared = (*list(CSV_COLUMNS)[:7], "kind", "bytes")
    if one.formula in ("floor", "reference"):  # a GB/s of the line its one part is measured in
        (part,) = parts
        ceiling = one.parts[0].ceiling if one.formula == "floor" else None
        named = {"group": "derived", "name": literal(one.name), "operation": "floor"}
        if one.formula == "reference":  # named as the line it judges
            named = {"group": "reference", "name": part["name"], "operation": part["operation"]}
        return {
            **{c: part[c] for c in (*shared, "source_gpu", "destination_gpu")},
            **named,
            "gb_per_s": _blank(one.gb_per_s),
            "ceiling_gb_per_s": ceiling.gb_per_s if ceiling is not None else "",
            "ceiling_share": one.share if ceiling is not None else "",
            "limiter": ceiling.limiter if ceiling is not None else "",
            "derived_from": _part_name(part, False, False),
        }
    row = {
        c: parts[0][c]
        for c in shared
        if c in parts[0] and all(p.get(c) == parts[0][c] for p in parts)
    }
    operations = {(p["name"], p["operation"]) for p in parts}
    operations_differ = len(operations) > len({p["name"] for p in parts})
    named = [_part_name(part, "gpu_index" not in row, operations_differ) for part in parts]
    return {
        **row,
        "group": "derived",
        "name": literal(one.name),
        "operation": one.formula,
        **({"bytes": GIB} if one.formula == "per_gib" else {}),
        **({"bytes": sum(p["bytes"] for p in parts)} if one.formula == "chunks" else {}),
        **{column: _blank(figure_of(one, column)) for column in FORMULA_FIGURES[one.formula]},
        **_ceiling_columns(one),
        "derived_from": DERIVED_FROM.get(one.formula, " + ").join(named),
    }


def _ceiling_columns(one: Derived) -> dict[str, object]:
    """A derived GB/s's ceiling, its share of it and its limiter, where it has one."""
    ceiling = one.ceiling
    gb_per_s = one.gb_per_s if ceiling is not None else None
    if ceiling is None or gb_per_s is None or ceiling.gb_per_s <= 0:
        return {}
    return {
        "ceiling_gb_per_s": ceiling.gb_per_s,
        "ceiling_share": gb_per_s / ceiling.gb_per_s,
        "limiter": ceiling.limiter,
    }


def figure_of(one: Derived, column: str) -> object:
    """A derived figure's value for its CSV column."""
    return one.line_total(column) if one.formula == "lines" else getattr(one, column)


def _part_name(row: dict[str, object], gpu: bool, operation: bool) -> str:
    """A derived figure's part as derived_from names it: its name, memory kind and, where
    parts of one name differ in it, its operation, where they are of several GPUs, its GPU."""
    named = [row["operation"]] if operation else []
    named += [row["kind"]] if row.get("kind") else []
    if gpu and row.get("gpu_index", "") != "":
        named.append(f"GPU {row['gpu_index']}")
    return f"{row['name']} ({', '.join(map(str, named))})" if named else str(row["name"])


def _trace_rows(result: Result, run: dict[str, object], own: int | None) -> list[dict[str, object]]:
    """A trace's copies by memory kind, idle gaps and source lines, in the CSV's columns."""
    from memprof.output.where import copy_group_rows, gap_rows, where_rows

    copies = getattr(result.extra, "copies", None) if result.command == "trace" else None
    return [
        *({**run, "group": "copies", **row} for row in copy_group_rows(copies or [])),
        *(
            {  # of the GPU CUPTI recorded, as the Where the time went table shows it
                **run,
                "group": "gap",
                **row,
                "gpu_pci_bus_id": _bus_id(result, row["gpu_index"]),
                "gpu_name": run["gpu_name"] if row["gpu_index"] == own else "",
            }
            for row in gap_rows(result)
        ),
        *({**run, "group": "line", **row} for row in where_rows(result)),
    ]


def _blank(value: object) -> object:
    return "" if value is None else value


def _basis(one: Figure) -> str:
    """Which time a GB/s is of, in the words a script can filter on."""
    best = one.measure is not None and one.measure.at == "best"
    if one.call_ms is not None and not one.back_to_back:
        return "the call median"  # a staged copy: its call's, not CUPTI's record of its DMA
    if one.back_to_back:
        return "back-to-back best" if best else "back-to-back median"
    return "one operation best" if best else "one operation median"


def _bus_id(result: Result, gpu: object) -> str:
    """The PCI bus id of GPU `gpu` of the run, where the Result records it."""
    device = result.device
    if device is not None and device.index == gpu:
        return literal(device.pci_bus_id)
    for record in getattr(result.extra, "devices", None) or []:
        if record.index == gpu:
            return literal(record.pci_bus_id)
    state = result.gpu_state(gpu) if isinstance(gpu, int) else None
    return literal(state.pci_bus_id) if state is not None else ""


def csv_text(
    results: Sequence[Result],
    figures: Sequence[Sequence[Figure]],
    derived: Sequence[Sequence[Derived | DeviceFact]] | None = None,
) -> str:
    """The CSV file's whole text: a header, then every result's rows (csv_rows)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, restval="")
    writer.writeheader()
    derived = derived or [()] * len(results)
    for result, found, made in zip(results, figures, derived, strict=True):
        writer.writerows(csv_rows(result, found, made))
    return buffer.getvalue()
