"""compare's recommendations and best marks, from the recorded H200 run
(tests/fixtures/h200_compare.json), each use's ways costed here from the samples:
- a way's time is the sum of its steps, each step's median time times how often the use
  makes it (a buffer the GPU reads 10 times: one copy and 10 reads);
- the first-listed way within 5% of the fastest is recommended, the others named after;
- each column's best figure is marked (largest GB/s, smallest allocation time).
"""

from __future__ import annotations

import statistics

import pytest

from memprof.experiments import compare, summarize
from memprof.experiments.compare import sentence
from memprof.model.formatting import format_ms
from memprof.model.results import Result
from tests.conftest import as_printed
from tests.verdict_tools import conclusion, fixture, scaled, table

# Each use, its ways in order of preference, and their steps: (kind, operation, times).
USES = {
    "Data the GPU uses once": {
        "pinned copy": [("pinned", "h2d", 1), ("device", "kernel_read", 1)],
        "zero-copy": [("mapped", "kernel_read", 1)],
        "managed": [("managed first touch", "kernel_read", 1)],
    },
    "Data the GPU reads 10 times": {
        "device memory": [("pinned", "h2d", 1), ("device", "kernel_read", 10)],
        "managed": [("managed first touch", "kernel_read", 1),
                    ("managed resident", "kernel_read", 9)],
        "zero-copy": [("mapped", "kernel_read", 10)],
    },
    "Data the CPU writes and the GPU consumes": {
        "pinned": [("pinned", "host_write", 1), ("pinned", "h2d", 1)],
        "writecombined": [("writecombined", "host_write", 1), ("writecombined", "h2d", 1)],
        "mapped": [("mapped", "host_write", 1), ("mapped", "kernel_read", 1)],
        "pageable": [("pageable", "host_write", 1), ("pageable", "h2d", 1)],
    },
    "Results the CPU reads back": {
        "pinned": [("pinned", "d2h", 1), ("pinned", "host_read", 1)],
        "pageable": [("pageable", "d2h", 1), ("pageable", "host_read", 1)],
        "managed": [("managed first touch", "host_read", 1)],
        "writecombined": [("writecombined", "d2h", 1), ("writecombined", "host_read", 1)],
    },
}  # fmt: skip


def recorded() -> Result:
    return fixture("h200_compare")


def step_ms(result: Result, kind: str, operation: str) -> float:
    """A step's median; a pageable copy's is its call's (the host clock around it, the
    driver's staging included), never CUPTI's record of its DMA alone."""
    groups = ("api",) if (kind, operation) in (("pageable", "h2d"), ("pageable", "d2h")) else (
        "gpu", "host")  # fmt: skip
    (m,) = [
        m
        for m in result.measurements
        if m.kind == kind and m.operation == operation and m.group in groups
    ]
    return statistics.median(m.samples_ms)


def totals(result: Result, use: str) -> dict[str, float]:
    return {
        way: sum(times * step_ms(result, kind, operation) for kind, operation, times in steps)
        for way, steps in USES[use].items()
    }


# never the advice, however fast it measured (docs/write-combined.md: never read it on the CPU)
FORBIDDEN = {("Results the CPU reads back", "writecombined")}


def recommended(found: dict[str, float], use: str) -> tuple[str, list[str]]:
    allowed = {way: ms for way, ms in found.items() if (use, way) not in FORBIDDEN}
    fastest = min(allowed.values())
    equal = [way for way, ms in allowed.items() if ms <= fastest * 1.05]
    return equal[0], equal[1:]


@pytest.mark.parametrize("use", list(USES))
def test_each_use_recommends_the_first_way_within_five_percent_of_the_fastest(use):
    result = recorded()
    found = totals(result, use)
    choice, also = recommended(found, use)
    line = conclusion(summarize(result), use + ":")
    assert f"({format_ms(found[choice])} for 64 MiB; " in line
    others = ", ".join(
        f"{way} {format_ms(ms)}"
        for way, ms in sorted(found.items(), key=lambda i: i[1])
        if way != choice
    )
    assert f"; {others})" in line
    assert ("came within 5%, as good here" in line) == bool(also)
    hid = (use, "writecombined") in FORBIDDEN and found["writecombined"] <= 1.05 * found[choice]
    assert ("hid the write-combined trap" in line) == hid


def test_a_copy_slow_enough_hands_ten_reads_to_managed_memory():
    # the pinned copy 12x slower: one copy and 10 reads now cost more than migrating once
    result = scaled(recorded(), 12.0, group="gpu", operation="h2d", kind="pinned")
    found = totals(result, "Data the GPU reads 10 times")
    assert recommended(found, "Data the GPU reads 10 times")[0] == "managed"
    line = conclusion(summarize(result), "Data the GPU reads 10 times:")
    assert line.startswith(
        "Data the GPU reads 10 times: managed memory (migrates once, then resident) "
        f"({format_ms(found['managed'])} for 64 MiB; "
    )


READ_BACK = {
    "pinned": "copy them into pinned memory",
    "pageable": "copy them into numpy memory",
    "managed": "leave them in managed memory and read them there",
    "writecombined": "copy them into write-combined memory",
}


@pytest.mark.parametrize(("slower", "wins"), [(1.04, True), (1.06, False)])
def test_a_way_listed_first_wins_within_five_percent_and_loses_beyond(slower, wins):
    """Results the CPU reads back: pinned is listed first; its copy moved so that its whole
    cost is `slower` x the fastest other way's, which takes over beyond 5% (write-combined
    memory never does: the recording's is faster, and said to have hidden its trap)."""
    result = recorded()
    use = "Results the CPU reads back"
    found = totals(result, use)
    others = {w: ms for w, ms in found.items() if w != "pinned" and (use, w) not in FORBIDDEN}
    fastest_other = min(others, key=others.get)
    copy = step_ms(result, "pinned", "d2h")
    wanted = slower * others[fastest_other] - step_ms(result, "pinned", "host_read")
    result = scaled(result, wanted / copy, group="gpu", operation="d2h", kind="pinned")
    line = conclusion(summarize(result), "Results the CPU reads back:")
    choice = "pinned" if wins else fastest_other
    assert line.startswith(f"Results the CPU reads back: {READ_BACK[choice]} (")
    assert ("came within 5%, as good here" in line) == wins
    assert "; writecombined was faster only because this platform hid the write-combined " in line


def test_each_columns_best_figure_is_marked():
    result = recorded()
    t = table(summarize(result), "Every memory kind")
    for column, header in enumerate(t.headers[1:], start=1):
        values = {}
        for index, row in enumerate(t.rows):
            if row[column] != "-":
                values[index] = row[column]
        marked = [r for r, c in t.highlighted if c == column]
        assert len(marked) == 1, header
        best = marked[0]
        if header.startswith("Allocate"):  # a time: the smallest is best
            times = {i: milliseconds(as_printed(v, header)) for i, v in values.items()}
            assert times[best] == min(times.values())
        else:
            numbers = {i: float(v.replace(",", "")) for i, v in values.items()}
            assert numbers[best] == max(numbers.values()), header


def milliseconds(text: str) -> float:
    """A time cell ('3.9440us', '22.140ms') in ms."""
    for unit, scale in (("ms", 1.0), ("us", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if text.endswith(unit):
            return float(text.removesuffix(unit)) * scale
    raise ValueError(text)


# Two ways of one use, each a single step of 10^9 bytes: a way's time is 1000 / its GB/s ms.
TWO_WAYS = (
    ("first", "use the first", (("a", "op", 1),)),
    ("second", "use the second", (("b", "op", 1),)),
)


def test_a_way_exactly_five_percent_slower_is_as_good_and_one_past_it_is_not():
    """The first-listed way at exactly 1.05x the fastest (1050 ms against 1000) is within 5%
    and recommended; at 1050.1 ms (5.01%) the faster way is."""
    at = sentence("Use", TWO_WAYS, {("a", "op"): 100 / 105, ("b", "op"): 1.0}, 10**9)
    assert at == (
        "Use: use the first (1.0500s for 953.7 MiB; second 1.0000s); second came within 5%, "
        "as good here."
    )
    past = sentence("Use", TWO_WAYS, {("a", "op"): 1000 / 1050.1, ("b", "op"): 1.0}, 10**9)
    assert past == "Use: use the second (1.0000s for 953.7 MiB; first 1.0501s)."


def test_a_ways_time_is_its_bytes_over_its_gb_per_s_to_the_last_digit_shown():
    """1 MB at 1 / 1.0000500001 GB/s takes 1.0000500001 ms: 1.0001ms, where a billionth
    less (a GB of 10^9 + 1 bytes) would say 1.0000ms."""
    line = sentence("Use", TWO_WAYS, {("a", "op"): 1 / 1.0000500001, ("b", "op"): 0.5}, 10**6)
    assert line == "Use: use the first (1.0001ms for 976.6 KiB; second 2.0000ms)."


def test_every_way_within_five_percent_but_the_choice_is_named():
    three = (*TWO_WAYS, ("third", "use the third", (("c", "op", 1),)))
    line = sentence("Use", three, {("a", "op"): 1.0, ("b", "op"): 1.0, ("c", "op"): 1.0}, 10**9)
    assert line == (
        "Use: use the first (1.0000s for 953.7 MiB; second 1.0000s, third 1.0000s); second and "
        "third came within 5%, as good here."
    )


def test_a_trap_as_fast_as_the_choice_came_within_five_percent_and_was_not_faster():
    """Results read back from write-combined memory exactly as fast as from pinned (2 s each):
    the trap came within 5%; only a faster one 'was faster'."""
    use, ways = "Results the CPU reads back", dict(compare.USES)["Results the CPU reads back"]
    rates = {(kind, op): 1.0 for kind in ("pinned", "writecombined") for op in ("d2h", "host_read")}
    assert sentence(use, ways, rates, 10**9) == (
        "Results the CPU reads back: copy them into pinned memory (2.0000s for 953.7 MiB; "
        "writecombined 2.0000s); writecombined came within 5% only because this platform hid "
        "the write-combined trap: where the memory is really write-combined, CPU reads of it "
        "are many times slower, so never read it back (docs/write-combined.md)."
    )
