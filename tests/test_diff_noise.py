"""`memprof diff`: rows matched by what they measure, changes marked only beyond noise."""

from __future__ import annotations

import math

import pytest

from memprof.model.results import Measurement, Result
from memprof.model.statistics import median_noise
from memprof.output.diff import CHANGE_NOTE, MIN_CHANGE, change_of, compare, noise
from tests.conftest import load_fixture


def measurement(samples_ms, name="[CUDA memcpy HtoD]", kind="pinned", nbytes=4 << 20):
    return Measurement(
        group="gpu", name=name, operation="h2d", kind=kind, bytes=nbytes, samples_ms=samples_ms
    )


def run(*measurements, command="pinned", host="a-host") -> Result:
    return Result(
        command=command,
        parameters={},
        device=None,
        measurements=list(measurements),
        host=host,
        created_at="2026-01-01T00:00:00+00:00",
    )


def changes(first: Result, second: Result) -> list[str]:
    [table] = diff(first, second).tables
    return [row[-1] for row in table.rows]


def test_noise_is_three_times_the_two_medians_combined_noise():
    a = [0.9, 1.1]  # median 1, MAD 0.1: noise 1.2533 x 1.4826 x 0.1 / sqrt(2) / 1
    b = [1.8, 2.2]  # the same relative noise
    one = math.sqrt(math.pi / 2) * 1.4826 * 0.1 / math.sqrt(2)
    assert median_noise(a) == pytest.approx(one) == pytest.approx(median_noise(b))
    assert noise(a, b) == pytest.approx(3 * math.hypot(one, one))
    assert noise(a, b) == pytest.approx(0.5574, abs=1e-4)


def test_the_noise_of_a_median_falls_with_more_samples_and_ignores_an_outlier():
    assert median_noise([0.9, 1.1] * 8) == pytest.approx(median_noise([0.9, 1.1]) / math.sqrt(8))
    assert median_noise([1.0, 1.0, 1.0, 1.0, 50.0]) == 0.0  # the median did not move
    assert median_noise([1.0]) == 0.0 and median_noise([0.0, 0.0, 3.0]) == 0.0


def test_noise_never_falls_below_two_percent():
    steady = [1.0, 1.0, 1.0]
    assert MIN_CHANGE == 0.02
    assert noise(steady, steady) == 0.02
    assert noise(steady, [1.0, 1.001]) == 0.02  # 3x its noise is only 0.2% here


@pytest.mark.parametrize(
    ("b_ms", "change"),
    [
        (1.03, "B slower"),
        (1.01, "within noise"),
        (0.99, "within noise"),
        (0.97, "B faster"),
        (0.5, "B faster"),
        (2.0, "B slower"),
    ],
)
def test_a_change_is_marked_beyond_two_percent_for_steady_runs(b_ms, change):
    assert changes(run(measurement([1.0] * 3)), run(measurement([b_ms] * 3))) == [change]


def diff(first, second, *options, **named):
    """What `memprof diff` shows of two runs."""
    return compare(first, second, *options, **named).summary


def test_a_noisy_run_needs_a_larger_change():
    noisy_a = measurement([0.9, 1.1])  # 3x its noise, combined with a steady B: about 39%
    assert changes(run(noisy_a), run(measurement([1.3] * 2))) == ["within noise"]
    assert changes(run(noisy_a), run(measurement([1.5] * 2))) == ["B slower"]
    assert changes(run(noisy_a), run(measurement([0.5] * 2))) == ["B faster"]


def test_rows_show_bytes_both_medians_and_the_ratio():
    a = measurement([1.0, 2.0, 9.0])  # median 2, mean 4: noisy, so no change is marked
    b = measurement([3.0, 4.0, 8.0])  # median 4, mean 5
    [table] = diff(run(a), run(b)).tables
    assert table.rows == [
        [
            "[CUDA memcpy HtoD] (pinned) [gpu]",
            "4 MiB",
            "2.0000ms",
            "4.0000ms",
            "2.000x",
            "within noise",
        ]
    ]
    no_bytes = measurement([1.0], name="cuLaunchKernel", kind=None, nbytes=0)
    [table] = diff(run(no_bytes), run(no_bytes)).tables
    assert table.rows[0][:2] == ["cuLaunchKernel [gpu]", "-"]


@pytest.mark.parametrize("a_samples", [[0.0], [0.0, 0.0, 3.0]])  # median 0 (mean 1)
def test_a_zero_median_in_a_is_an_infinite_ratio_not_a_crash(a_samples):
    [table] = diff(run(measurement(a_samples)), run(measurement([1.0]))).tables
    assert table.rows[0][-1] == "B slower"


def test_two_zero_medians_are_no_change_whatever_the_means():
    [table] = diff(run(measurement([0.0])), run(measurement([0.0, 0.0, 3.0]))).tables
    assert table.rows[0][-2:] == ["1.000x", "within noise"]  # B's mean of 1 does not count


def test_a_row_without_valid_samples_still_shows_the_other_runs_median():
    skewed = measurement([1.0, 2.0, 9.0])  # median 2, mean 4
    [table] = diff(run(skewed), run(measurement([math.nan]))).tables
    assert table.rows[0][1:] == ["4 MiB", "2.0000ms", "-", "-", "no valid samples"]


def test_rows_match_only_at_the_same_size_and_kind():
    a = run(
        measurement([1.0], nbytes=1 << 20),
        measurement([4.0], nbytes=4 << 20),
        measurement([4.0], nbytes=4 << 20, kind="pageable"),
    )
    b = run(measurement([2.0], nbytes=4 << 20), measurement([2.0], nbytes=16 << 20))
    summary = diff(a, b)
    [table] = summary.tables
    assert len(table.rows) == 1 and table.rows[0][1] == "4 MiB"
    assert table.rows[0][-1] == "B faster"
    assert summary.conclusions[-1] == (
        "Unmatched: 2 only in A ([CUDA memcpy HtoD] (pinned) [gpu], 1 MiB; [CUDA memcpy HtoD] "
        "(pageable) [gpu], 4 MiB), 1 only in B ([CUDA memcpy HtoD] (pinned) [gpu], 16 MiB)."
    )


def test_rows_of_only_one_run_are_counted():
    a = run(measurement([1.0], nbytes=1 << 20), measurement([1.0], nbytes=4 << 20))
    b = run(measurement([1.0], nbytes=4 << 20))
    assert diff(a, b).conclusions[-1].startswith("Unmatched: 1 only in A (")
    assert diff(a, b).conclusions[-1].endswith("1 MiB), 0 only in B.")
    assert diff(b, a).conclusions[-1].startswith("Unmatched: 0 only in A, 1 only in B (")
    assert len(diff(b, b).conclusions) == 1


def test_conclusion_counts_faster_slower_and_unchanged():
    kinds = ["pinned", "pageable", "mapped", "registered"]
    a = run(*(measurement([1.0] * 3, kind=k) for k in kinds))
    b = run(
        *(measurement([t] * 3, kind=k) for t, k in zip([0.5, 0.6, 1.5, 1.0], kinds, strict=True))
    )
    summary = diff(a, b)
    assert summary.conclusions == [
        "4 measurements in both runs: B was faster in 2, slower in 1, and within noise in 1."
    ]
    assert summary.show_profile is False


def test_runs_of_different_commands_are_named():
    conclusions = diff(run(measurement([1.0])), run(measurement([1.0]), command="zerocopy"))
    assert "different commands (pinned, zerocopy)" in conclusions.conclusions[1]
    assert len(diff(run(measurement([1.0])), run(measurement([1.0]))).conclusions) == 1


def test_title_names_each_run_by_its_gpu_or_else_its_host():
    recorded = load_fixture("pinned_p20")
    [table] = diff(recorded, run(measurement([1.0]), host="laptop")).tables
    assert table.title == (
        f"memprof pinned: A = NVIDIA H200 ({recorded.created_at}), "
        "B = laptop (2026-01-01T00:00:00+00:00)"
    )
    [table] = diff(run(measurement([1.0]), host="laptop"), recorded).tables
    assert table.title.startswith("memprof pinned: A = laptop (")
    assert table.title.endswith(f"B = NVIDIA H200 ({recorded.created_at})")


@pytest.mark.parametrize(
    ("ratio", "noise_share", "change"),
    [
        (1.5, 0.5, "within noise"),  # exactly at the noise: not beyond it
        (1.5, 0.4375, "B slower"),
        (0.5, 0.5, "within noise"),
        (0.5, 0.4375, "B faster"),
    ],
)
def test_a_ratio_exactly_at_the_noise_is_within_it(ratio, noise_share, change):
    assert change_of(ratio, noise_share) == change


def test_unmatched_names_three_and_counts_the_rest():
    sizes = [1 << 10, 1 << 20, 4 << 20, 16 << 20]
    b = run(measurement([1.0], kind="mapped"))
    three = diff(run(*(measurement([1.0], nbytes=n) for n in sizes[:3])), b)
    assert three.conclusions[-1] == (
        "Unmatched: 3 only in A ([CUDA memcpy HtoD] (pinned) [gpu], 1 KiB; "
        "[CUDA memcpy HtoD] (pinned) [gpu], 1 MiB; [CUDA memcpy HtoD] (pinned) [gpu], 4 MiB), "
        "1 only in B ([CUDA memcpy HtoD] (mapped) [gpu], 4 MiB)."
    )
    assert compare(run(*(measurement([1.0], nbytes=n) for n in sizes[:3])), b).only_b == [
        "[CUDA memcpy HtoD] (mapped) [gpu], 4 MiB"
    ]
    four = diff(run(*(measurement([1.0], nbytes=n) for n in sizes)), b)
    assert compare(b, run(*(measurement([1.0], nbytes=n) for n in sizes))).only_a == [
        "[CUDA memcpy HtoD] (mapped) [gpu], 4 MiB"
    ]
    assert four.conclusions[-1].startswith("Unmatched: 4 only in A ([CUDA memcpy HtoD] (pinned)")
    assert "(pinned) [gpu], 4 MiB and 1 more), 1 only in B (" in four.conclusions[-1]


def test_the_notes_say_what_a_change_is_and_what_each_runs_medians_are_of():
    a = run(measurement([1.0] * 5), measurement([2.0] * 5, nbytes=1 << 20))
    b = run(measurement([1.0, 1.1, 1.3]), measurement([2.0] * 3, nbytes=1 << 20))
    [table] = diff(a, b).tables
    spread = f"{median_noise([1.0, 1.1, 1.3]):.1%}"
    assert table.notes == [
        CHANGE_NOTE,
        f"A's medians: of 5, noise at most 0.0%. B's: of 3, noise at most {spread}.",
    ]


def test_the_short_table_says_how_many_rows_within_noise_it_left_out():
    one_quiet = diff(run(measurement([1.0])), run(measurement([1.0])), verbose=False)
    assert (
        "The 1 measurement within noise is not listed: --verbose lists every row."
        in one_quiet.conclusions
    )
    sizes = (1 << 20, 4 << 20)
    two = run(*(measurement([1.0], nbytes=n) for n in sizes))
    assert (
        "The 2 measurements within noise are not listed: --verbose lists every row."
        in diff(two, two, verbose=False).conclusions
    )


def test_the_short_table_leaves_out_source_lines_within_noise_too():
    trace = load_fixture("trace_torch")
    titles = [table.title for table in diff(trace, trace).tables]
    assert any(title.startswith("Source lines") for title in titles)
    short = [table.title for table in diff(trace, trace, verbose=False).tables]
    assert not any(title.startswith("Source lines") for title in short)
