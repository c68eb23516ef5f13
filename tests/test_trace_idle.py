"""An idle GPU's first verdict tells one-time waits from a step's (issue 38, item 2): the time
before its first work and after its last (start-up, imports, exit), each pause of a tenth of
the run or more, and the rest, in shorter gaps between its work."""

from __future__ import annotations

import itertools

import pytest

from memprof.experiments.trace import LONG_GAP_SHARE, idle_split, summarize, time_verdict
from memprof.model.formatting import format_ms, format_percent
from memprof.model.timeline import NO_LINE, Breakdown, Gap, merged
from tests.conftest import load_trace

LISTED = "Its longest idle gaps are listed with the line the host was at."


def idle(gap_ns: int, outside_ns: int = 500) -> Breakdown:
    """A run of 1000 ns: 10 computing, a gap of gap_ns at 100, the rest outside or between."""
    return Breakdown(0, 1000, 10, 0, 0, [Gap(100, gap_ns, NO_LINE, False)], outside_ns)


@pytest.mark.parametrize(("gap_ns", "named"), [(100, True), (99, False)])
def test_a_pause_is_a_tenth_of_the_run_or_more(gap_ns, named):
    assert LONG_GAP_SHARE == 0.1
    said = idle_split(idle(gap_ns), [])
    assert ("in one pause at" in said) == named
    assert said.startswith("Of the run, 500ns (50.00%) came before its first piece of work")
    rest = 490 - gap_ns if named else 490  # idle 990 = outside 500 + pauses + the rest
    assert f"The other {format_ms(rest / 1e6)} ({rest / 10:.2f}%) of idle time" in said
    assert said.endswith(LISTED)
    if named:
        assert f"{format_ms(gap_ns / 1e6)} (10.00%) in one pause at {format_ms(1e-4)}" in said
        assert "the host at (no recorded call): one-time waits" in said


def test_without_start_up_or_pauses_only_the_gaps_table_is_pointed_to():
    assert idle_split(idle(99, outside_ns=0), []) == LISTED
    assert time_verdict(idle(99, outside_ns=0)).endswith(
        f"can save at most the 1.00% it was busy. {LISTED}"
    )  # busy: the 10 ns of 1000 it computed


def test_an_idle_gpus_split_is_said_whole_with_each_part_in_milliseconds():
    """1.00005 ms before and after its work: ns / 1e6 exactly, at a rounding boundary."""
    pause = Gap(3_000_000, 2_000_000, NO_LINE, False)
    share = Breakdown(0, 20_000_000, 100_010, 0, 0, [pause], 1_000_050)
    assert idle_split(share, []) == (
        "Of the run, 1.0001ms (5.00%) came before its first piece of work or after its last "
        "(imports, start-up, exit); 2.0000ms (10.00%) in one pause at 3.0000ms, the host at "
        "(no recorded call): one-time waits, not each step's. The other 16.900ms (84.50%) of "
        "idle time fell in shorter gaps between its work, a loop's steps' waits among them. "
        f"{LISTED}"
    )


@pytest.mark.parametrize(("outside_ns", "said"), [(1, True), (0, False)])
def test_a_nanosecond_outside_the_gpus_work_is_said(outside_ns, said):
    assert ("came before its first piece" in idle_split(idle(100, outside_ns), [])) == said


@pytest.mark.parametrize(("outside_ns", "said"), [(889, True), (890, False)])
def test_a_nanosecond_of_idle_time_left_in_shorter_gaps_is_said(outside_ns, said):
    """Idle 990 ns: outside_ns and a pause of 100 ns leave 1 ns, or none."""
    split = idle_split(idle(100, outside_ns), [])
    assert ("The other 1ns (0.10%) of idle time" in split) == said
    assert ("The other" in split) == said


def test_the_dataloaders_first_verdict_is_its_start_up_and_its_first_batch():
    """The H200's DataLoader run: GPU work on 4.9 s of a 9.8 s run, and 4.2 s of that with
    the pinning thread's first allocation, before the first batch arrived; its 40 steps'
    waits are the rest. Each figure recomputed here from the timeline's own rows."""
    result = load_trace("torch_dataloader")
    timeline = result.extra.timeline
    busy = merged([(row[2], row[2] + row[3]) for row in timeline.gpu])
    wall_ns = round(result.extra.wall_s * 1e9)
    outside_ns = wall_ns - (busy[-1][1] - busy[0][0])
    gaps = sorted(((b[0] - a[1], a[1]) for a, b in itertools.pairwise(busy)), reverse=True)
    (pause_ns, pause_at), next_ns = gaps[0], gaps[1][0]
    assert pause_ns >= LONG_GAP_SHARE * wall_ns > next_ns  # one pause, and only one
    rest_ns = sum(gap for gap, _ in gaps[1:])
    verdict = summarize(result).conclusions[1]

    def part(ns: int) -> str:
        return f"{format_ms(ns / 1e6)} ({format_percent(ns / wall_ns)})"

    assert verdict.startswith("GPU 0 sat idle 99.70% of the program's 9.8013s")
    assert (
        f"Of the run, {part(outside_ns)} came before its first piece of work or after its "
        f"last (imports, start-up, exit); {part(pause_ns)} in one pause at "
        f"{format_ms(pause_at / 1e6)}, the host at torch/utils/data/_utils/pin_memory.py:57 "
        "(library) (alloc): one-time waits, not each step's. "
        f"The other {part(rest_ns)} of idle time fell in shorter gaps"
    ) in verdict
    assert (outside_ns + pause_ns) / wall_ns > 0.9 > 0.1 > rest_ns / wall_ns


def test_every_pause_is_named_and_only_the_rest_is_a_steps():
    gaps = [Gap(100, 200, NO_LINE, False), Gap(400, 150, NO_LINE, False)]
    said = idle_split(Breakdown(0, 1000, 10, 0, 0, gaps, 0), [])
    assert said.startswith("Of the run, 200ns (20.00%) in one pause at 100ns, the host at")
    assert "; 150ns (15.00%) in one pause at 400ns" in said
    assert "one-time waits, not each step's. The other 640ns (64.00%) of idle time" in said


def test_a_run_idle_only_outside_its_work_says_no_other_gap_and_lists_none():
    said = idle_split(Breakdown(0, 1000, 10, 0, 0, [], 990), [])
    assert said == (
        "Of the run, 990ns (99.00%) came before its first piece of work or after its last "
        "(imports, start-up, exit): a one-time wait, not each step's."
    )
    assert time_verdict(Breakdown(0, 1000, 10, 0, 0, [], 0)).endswith("it was busy.")


@pytest.mark.parametrize(
    ("parts_ns", "said"),
    [
        (
            (6_000_000, 1_000_000, 500_000),
            "GPU 0 computed 60.00% of the program's 10.000ms (copying alone 10.00%, both at "
            "once 5.00%, idle 25.00%): its kernels set the run's length; the copies below can "
            "save at most the 10.00% spent copying alone.",
        ),
        (
            (1_000_000, 6_000_000, 500_000),
            "GPU 0 copied, computing nothing, 60.00% of the program's 10.000ms (computing "
            "alone 10.00%, both at once 5.00%, idle 25.00%): its copies set the run's length, "
            "so the advice on copies below is where its time is.",
        ),
        (
            (2_000_000, 1_000_000, 6_000_000),
            "GPU 0 copied while it computed for 60.00% of the program's 10.000ms (computing "
            "alone 20.00%, copying alone 10.00%, idle 10.00%): its copies hide behind its "
            "kernels, which set the run's length.",
        ),
    ],
)
def test_a_busy_gpus_verdict_names_the_part_that_set_the_runs_length(parts_ns, said):
    """No fixture's GPU computed, copied or did both most of its run: each sentence here."""
    assert time_verdict(Breakdown(0, 10_000_000, *parts_ns, [])) == said
