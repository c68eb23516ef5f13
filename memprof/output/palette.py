"""The colours of memprof's pictures: one per memory kind, the same in every picture; a
series of no kind (a trace's activities) takes the next of OTHERS, which no kind uses.
"""

from __future__ import annotations

KIND_COLOURS = {
    "pinned": "#1f77b4",  # blue
    "pageable": "#ff7f0e",  # orange
    "device": "#2ca02c",  # green
    "managed": "#d62728",  # red
    "mapped": "#9467bd",  # purple
    "writecombined": "#8c564b",  # brown
    "registered": "#e377c2",  # pink
    "portable": "#17becf",  # cyan
    "zerocopy": "#bcbd22",  # olive
    "uva": "#aec7e8",  # light blue
    "pool": "#98df8a",  # light green
    "pool_kept": "#1b5e20",  # dark green
    "vmm": "#ffbb78",  # light orange
}
OTHERS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
          "#5254a3", "#b5cf6b", "#e7ba52", "#ad494a", "#a55194")  # fmt: skip
IDLE = "0.88"  # time in which nothing was done: a trace's idle GPU, light grey
CEILING = "0.4"  # a bound drawn dashed: the link, staging, HBM


def kind_of(label: str) -> str | None:
    """The memory kind a series or measurement is of ('managed' for 'managed+prefetch'),
    None where it is of none."""
    base = label.split("+")[0].split(" ")[0]
    return base if base in KIND_COLOURS else None


def colours(kinds: list[str | None]) -> list[str]:
    """A colour for each series, by its kind: a kind's own colour; the series of no kind
    (None, or a name no kind has) each the next of OTHERS, in order."""
    chosen, others = [], 0
    for kind in kinds:
        found = KIND_COLOURS.get(kind_of(kind) or "") if kind else None
        if found is None:
            found = OTHERS[others % len(OTHERS)]
            others += 1
        chosen.append(found)
    return chosen
