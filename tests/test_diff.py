"""`memprof diff` on small runs built here: medians, the noise threshold, matching, odd samples."""

import math

import pytest

from memprof.model.results import Measurement, Result
from memprof.output.diff import compare, differences
from tests.conftest import replace

KIB, MIB = 1 << 10, 1 << 20
# Median 1.0, mean 1.075, relative standard deviation 0.206: skewed, as real timings are. The
# noise of its median: MAD 0.05, so 1.2533 x 1.4826 x 0.05 / sqrt(4) = 0.0465.
SKEWED = [0.9, 1.0, 1.0, 1.4]


def run(*measurements: Measurement, command: str = "pinned") -> Result:
    return Result(command=command, parameters={}, device=None, measurements=list(measurements))


def h2d(samples_ms: list[float], nbytes: int = MIB) -> Measurement:
    return Measurement("gpu", "[CUDA memcpy HtoD]", "h2d", "pinned", nbytes, list(samples_ms))


def rows(first: Result, second: Result) -> list[list[str]]:
    return diff(first, second).tables[0].rows


def only_row(first: Result, second: Result) -> dict[str, str]:
    (row,) = rows(first, second)
    headers = diff(first, second).tables[0].headers
    return dict(zip(headers, row, strict=True))


def test_the_ratio_is_of_medians_not_means():
    # A: median 1.0, mean 1.75. B: median 2.0, mean 2.15. Means would say 1.229x.
    row = only_row(run(h2d([1.0, 1.0, 1.0, 4.0])), run(h2d([2.0, 2.0, 2.0, 2.6])))
    assert row["B / A"] == "2.000x"
    assert row["A median"] == "1.0000ms"
    assert row["B median"] == "2.0000ms"


def test_a_row_names_its_measurement_and_bytes_under_their_headers():
    row = only_row(run(h2d(SKEWED)), run(h2d(SKEWED)))
    assert (row["Measurement"], row["Bytes"]) == ("[CUDA memcpy HtoD] (pinned) [gpu]", "1 MiB")


def test_runs_whose_parameters_are_a_dict_are_compared_by_them_too():
    """Results built in Python (memprof.api) may hold their parameters as a dict."""

    def buffered(host_buffer: str) -> Result:
        return Result("pinned", {"host_buffer": host_buffer}, None, [h2d(SKEWED)])

    assert differences(buffered("numpy"), buffered("numpy")) == []
    assert differences(buffered("numpy"), buffered("hugepages")) == [
        "host buffer: A numpy, B hugepages."
    ]


@pytest.mark.parametrize(
    ("factor", "change"),
    [
        # Both medians' noise 0.0465: combined (root of the sum of squares) 0.0657, three
        # times that 0.197. Added instead of combined: 0.279; the larger alone: 0.139.
        (1.1, "within noise"),  # beyond one combined noise, within three
        (1.17, "within noise"),  # beyond two, and beyond three of either run alone
        (0.81, "within noise"),
        (1.21, "B slower"),  # 0.21: beyond three combined, within three added
        (2.2, "B slower"),
        (0.78, "B faster"),
    ],
)
def test_a_change_must_exceed_three_times_the_combined_noise(factor, change):
    row = only_row(run(h2d(SKEWED)), run(h2d([s * factor for s in SKEWED])))
    assert row["Change"] == change
    assert row["B / A"] == f"{factor:.3f}x"


@pytest.mark.parametrize(
    ("b_ms", "change"),
    [
        (1.05, "B slower"),  # 5%: above the 2% floor (a 20% floor would call it noise)
        (0.95, "B faster"),
        (1.03, "B slower"),
        (1.01, "within noise"),  # 1%: under the floor even for perfectly quiet runs
        (0.99, "within noise"),
    ],
)
def test_quiet_runs_change_beyond_a_two_percent_floor(b_ms, change):
    # One sample each: no spread, so only the floor decides.
    assert only_row(run(h2d([1.0])), run(h2d([b_ms])))["Change"] == change


def test_the_conclusion_counts_each_verdict():
    first = run(h2d([1.0], KIB), h2d([1.0], MIB), h2d([1.0], 4 * MIB), h2d([1.0], 8 * MIB))
    second = run(h2d([2.0], KIB), h2d([0.5], MIB), h2d([0.5], 4 * MIB), h2d([1.0], 8 * MIB))
    assert diff(first, second).conclusions[0] == (
        "4 measurements in both runs: B was faster in 2, slower in 1, and within noise in 1."
    )


def test_rows_are_matched_by_size_too():
    first = run(h2d([1.0], KIB), h2d([100.0], MIB))
    second = run(h2d([1.0], KIB), h2d([300.0], 4 * MIB))
    (row,) = rows(first, second)
    assert row[1] == "1 KiB"
    assert row[4] == "1.000x"
    assert diff(first, second).conclusions[-1] == (
        "Unmatched: 1 only in A ([CUDA memcpy HtoD] (pinned) [gpu], 1 MiB), "
        "1 only in B ([CUDA memcpy HtoD] (pinned) [gpu], 4 MiB)."
    )


def test_every_size_of_one_operation_gets_its_own_row():
    first = run(h2d([1.0], KIB), h2d([100.0], MIB))
    second = run(h2d([2.0], KIB), h2d([100.0], MIB))
    table = rows(first, second)
    assert [(row[1], row[4]) for row in table] == [("1 KiB", "2.000x"), ("1 MiB", "1.000x")]


def test_runs_of_different_commands_are_said_to_be():
    conclusions = diff(run(h2d([1.0])), run(h2d([1.0]), command="sweep")).conclusions
    assert "The runs are of different commands (pinned, sweep)." in conclusions


@pytest.mark.parametrize(
    ("a_ms", "b_ms", "ratio", "change"),
    [
        (0.0, 0.0, "1.000x", "within noise"),  # neither took measurable time
        (0.0, 1.0, "-", "B slower"),  # no finite ratio to show
        (1.0, 0.0, "0.000x", "B faster"),
    ],
)
def test_zero_medians_are_compared_without_dividing_by_zero(a_ms, b_ms, ratio, change):
    row = only_row(run(h2d([a_ms])), run(h2d([b_ms])))
    assert (row["B / A"], row["Change"]) == (ratio, change)


def diff(first, second, *options, **named):
    """What `memprof diff` shows of two runs."""
    return compare(first, second, *options, **named).summary


@pytest.mark.parametrize("bad", [[math.nan], [1.0, math.inf], [-1.0], []])
def test_samples_that_cannot_be_trusted_give_a_row_not_a_crash(bad):
    """Loading refuses such files; diff of Results made in memory must still not crash."""
    first = run(h2d([1.0], KIB), h2d([1.0], MIB))
    second = run(h2d([1.0], KIB), h2d(bad, MIB))
    summary = diff(first, second)
    assert summary.tables[0].rows[1][4:] == ["-", "no valid samples"]
    assert summary.conclusions[0].endswith("slower in 0, and within noise in 1.")
    assert "1 measurement had no valid samples to compare." in summary.conclusions
    # the figures after it are still compared
    first_bad = run(h2d(bad, KIB), h2d([1.0], MIB))
    assert [row.change() for row in compare(first_bad, first).rows] == [
        "no valid samples",
        "within noise",
    ]
    # still a gpu figure: --only gpu keeps it, and says it could not be compared
    chosen = compare(first, second, only=["gpu"])
    assert [row.change() for row in chosen.rows] == ["within noise", "no valid samples"]


def test_measurements_of_different_gpus_are_rows_of_their_own():
    """A two-GPU run holds the same operation once per GPU or pair: none may hide another."""
    from memprof.experiments import load
    from tests.conftest import FIXTURES

    peer = load(FIXTURES / "h200x2_peer.json")
    summary = diff(peer, peer)
    assert len(summary.tables[0].rows) == len(peer.measurements)
    names = {row[0] for row in summary.tables[0].rows}
    assert any("GPU 0 → GPU 1" in name for name in names)
    assert any("GPU 1 → GPU 0" in name for name in names)
    assert summary.conclusions[0].startswith(f"{len(peer.measurements)} measurements in both")


def test_each_gpus_measurement_is_compared_with_the_same_gpus_whatever_the_order():

    from memprof.experiments import load
    from tests.conftest import FIXTURES

    peer = load(FIXTURES / "h200x2_peer.json")
    reordered = replace(peer, measurements=peer.measurements[::-1])
    gpu_rows = [row for row in diff(peer, reordered).tables[0].rows if row[0].endswith("[gpu]")]
    assert len(gpu_rows) == sum(m.group == "gpu" for m in peer.measurements)
    assert {row[4] for row in gpu_rows} == {"1.000x"}
