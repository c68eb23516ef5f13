"""memprof.model.timeline's arithmetic at its edges: where the time went (breakdown), the line
the host was at in a gap (host_line), the run in bins (over_time) and the refusal of rows
naming no name. Made-up timelines of a few events, each built so that the rule and the
plausible slip give different figures (the recorded traces are tested in test_trace_*.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprof.model.schema import SchemaError
from memprof.model.timeline import (
    NO_LINE,
    Breakdown,
    Timeline,
    breakdown,
    breakdown_of,
    host_line,
    merged,
    over_time,
)


def timeline_of(gpu: list[tuple], api: list[tuple] = ()) -> Timeline:
    """gpu: (category, start_ns, end_ns, device); api: (start_ns, end_ns, line)."""
    return Timeline(
        1,
        0,
        ["k", "call"],
        [(c, 0, start, end - start, device, 7, 0, -1) for c, start, end, device in gpu],
        [(1, start, end - start, 1, line) for start, end, line in api],
    )


def test_a_row_naming_no_name_is_refused_where_it_is():
    rows = [(0, 0, 0, 1, 0, 7, 0, -1), (0, 1, 0, 1, 0, 7, 0, -1)]
    with pytest.raises(SchemaError) as refused:
        Timeline(1, 0, ["k"], gpu=rows).check_consistency()
    assert str(refused.value) == "gpu[1][1] is 1, but there are 1 names"
    with pytest.raises(SchemaError) as refused:
        Timeline(1, 0, ["k"], api=[(0, 0, 1, 1, -1), (2, 0, 1, 1, -1)]).check_consistency()
    assert str(refused.value) == "api[1][0] is 2, but there are 1 names"


def test_work_that_touches_is_one_stretch_with_no_gap_between():
    """A copy starting as a kernel ends leaves the GPU no idle gap of 0 ns to name."""
    assert merged([(10, 20), (0, 10)]) == [(0, 20)]
    (share,) = breakdown(timeline_of([(0, 0, 10, 0), (1, 10, 20, 0)]), 100)
    assert share.gaps == [] and (share.computing_ns, share.copying_ns) == (10, 10)


def test_a_share_of_no_wall_time_is_zero_and_of_one_ns_is_the_part():
    assert Breakdown(0, 0, 0, 0, 0, []).share(0) == 0.0
    assert Breakdown(0, 1, 1, 0, 0, []).share(1) == 1.0


def test_the_wall_is_the_gpus_work_where_the_hosts_clock_said_less():
    """CUPTI's clock and the host's are not one: work from 10 to 50 ns is 40 ns of wall even
    where the host timed the program at 25."""
    (share,) = breakdown(timeline_of([(0, 10, 20, 0), (0, 30, 50, 0)]), 25)
    assert (share.wall_ns, share.outside_ns, share.idle_ns) == (40, 0, 10)
    (share,) = breakdown(timeline_of([(0, 10, 20, 0), (0, 30, 50, 0)]), 100)
    assert (share.wall_ns, share.outside_ns, share.idle_ns) == (100, 60, 70)


def test_a_saved_trace_is_broken_down_over_its_wall_time_in_ns():
    timeline = timeline_of([(0, 0, 10, 0)])
    (share,) = breakdown_of(SimpleNamespace(extra=SimpleNamespace(timeline=timeline, wall_s=1.5)))
    assert share.wall_ns == 1_500_000_000
    assert breakdown_of(SimpleNamespace(extra=SimpleNamespace())) == []  # not a trace's Extra
    assert breakdown_of(SimpleNamespace(extra=SimpleNamespace(timeline=None, wall_s=1.0))) == []


# host_line: calls are (start_ns, end_ns, line); the gap is [10, 50)


def test_a_call_ending_as_the_gap_starts_is_the_last_one_before_it():
    assert host_line([(2, 10, 5)], 10, 50) == (5, False)


def test_a_call_after_the_gap_is_not_the_one_before_it():
    assert host_line([(60, 70, 6)], 10, 50) == (NO_LINE, False)
    assert host_line([(2, 8, 5), (60, 70, 6)], 10, 50) == (5, False)


def test_a_call_overlapping_the_gap_by_one_ns_is_during_it():
    assert host_line([(2, 8, 5), (49, 60, 6)], 10, 50) == (6, True)


def test_of_calls_ending_together_before_the_gap_the_last_recorded_is_named():
    assert host_line([(0, 8, 5), (4, 8, 6)], 10, 50) == (6, False)


# over_time


def test_the_bins_end_with_the_last_gpu_event_where_it_ends_last():
    """Device 3's copy from 40 to 90 ns ends after every call: the bins reach 90 ns."""
    (binned,) = over_time(timeline_of([(1, 40, 90, 3)], [(0, 20, -1)]), at_most=10)
    assert (binned.device, binned.end_ns, binned.bin_ns) == (3, 90, 10)
    assert sum(part[1] for part in binned.parts) == 50


def test_a_timeline_without_events_has_no_bins():
    assert over_time(Timeline(1, 0)) == []
