import math

import pytest

from memprof.model.formatting import (
    bandwidth_gb_per_s,
    format_bytes,
    format_gb_per_s,
    format_ms,
    format_nvprof_time,
    format_percent,
    format_ratio,
    plural,
)


# Every pair below is printed by nvprof in the seed documents (shared/seeds/000, 001).
@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (41_022, "41.022us"),
        (5_768_800, "5.7688ms"),
        (127_270_000, "127.27ms"),
        (291_240_000, "291.24ms"),
        (1_537, "1.5370us"),
        (3_873, "3.8730us"),
        (128_580, "128.58us"),
        (666, "666ns"),
        (118, "118ns"),
        (2_368, "2.3680us"),
        (385_750, "385.75us"),
    ],
)
def test_times_are_formatted_as_nvprof_prints_them(nanoseconds, text):
    assert format_nvprof_time(nanoseconds) == text


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0ns"),
        (999.4, "999ns"),
        (999.6, "1.0000us"),  # rounds up into the next unit, never "1000ns"
        (999_996, "1.0000ms"),  # never "1000.00us"
        (9_999_950, "10.000ms"),  # five significant digits after rounding up
        (12_345_678_901, "12.346s"),
        (1.5e12, "1500.0s"),
        (9_999.96e9, "10000s"),  # rounding adds a digit: one decimal fewer, none left
        (123_456e9, "123456s"),
    ],
)
def test_unit_boundaries_keep_five_significant_digits(nanoseconds, text):
    assert format_nvprof_time(nanoseconds) == text


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_impossible_durations_are_refused(bad):
    with pytest.raises(ValueError, match="not a duration"):
        format_nvprof_time(bad)


def test_milliseconds_and_percentages():
    assert format_ms(5.7688) == "5.7688ms"
    assert format_ms(0.000666) == "666ns"
    assert format_percent(0.6601) == "66.01%"
    assert format_percent(1) == "100.00%"
    assert format_percent(0.00004) == "0.00%"


def test_bandwidth_is_decimal_gigabytes_per_second():
    assert bandwidth_gb_per_s(1e9, 1000) == pytest.approx(1.0)
    assert bandwidth_gb_per_s(16 << 20, 1.0) == pytest.approx(16.777216)
    assert bandwidth_gb_per_s(1, 0) == math.inf


def test_bandwidth_text():
    assert format_gb_per_s(3012.4) == "3012"
    assert format_gb_per_s(25.33) == "25.3"
    assert format_gb_per_s(1.234) == "1.23"
    assert format_gb_per_s(0.5123) == "0.512"
    assert format_gb_per_s(math.inf) == "-"


@pytest.mark.parametrize(
    ("value", "text"),
    [(9.996, "10.0"), (9.9999999, "10.0"), (99.96, "100"), (0.99996, "1.00"), (9.994, "9.99")],
)
def test_bandwidth_rounding_into_the_next_decade_keeps_three_digits(value, text):
    assert format_gb_per_s(value) == text


def test_ratio_text():
    assert format_ratio(2.3149) == "2.31x"
    assert format_ratio(math.nan) == "-"


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (100, "100 B"), (4096, "4 KiB"), (16 << 20, "16 MiB"), (3 << 29, "1.5 GiB")],
)
def test_bytes_use_binary_units(count, text):
    assert format_bytes(count) == text


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (1023, "1023 B"),  # both sides of every 1024 boundary
        (1024, "1 KiB"),
        (1025, "1.001 KiB"),
        ((1 << 20) - 1024, "1023 KiB"),
        (1 << 20, "1 MiB"),
        ((1 << 30) - (1 << 20), "1023 MiB"),
        (1 << 30, "1 GiB"),
        (1 << 40, "1 TiB"),
        (1 << 50, "1024 TiB"),  # no unit beyond TiB
        (-1023, "-1023 B"),
        (-2048, "-2 KiB"),
        (1536.0, "1.5 KiB"),
    ],
)
def test_bytes_change_unit_at_1024(count, text):
    assert format_bytes(count) == text


@pytest.mark.parametrize(
    ("gb_per_s", "text"),
    [
        (100.0, "100"),  # both sides of each boundary
        (99.94, "99.9"),
        (100.4, "100"),
        (10.0, "10.0"),
        (9.994, "9.99"),
        (1.0, "1.00"),
        (0.9994, "0.999"),
        (0.0, "0.000"),
    ],
)
def test_bandwidth_digits_change_at_100_10_and_1(gb_per_s, text):
    assert format_gb_per_s(gb_per_s) == text


def test_bandwidth_of_zero_or_negative_time_is_infinite():
    assert bandwidth_gb_per_s(1e9, -1.0) == math.inf
    assert bandwidth_gb_per_s(0, 1.0) == 0.0
    assert bandwidth_gb_per_s(2e9, 500) == pytest.approx(4.0)


def test_not_finite_bandwidth_and_ratios_print_a_dash():
    assert format_gb_per_s(math.nan) == "-"
    assert format_gb_per_s(-math.inf) == "-"
    assert format_ratio(math.inf) == "-"
    assert format_ratio(0.4749) == "0.47x"
    assert format_ratio(10.0) == "10.00x"


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (1000, "1.0000us"),
        (999_949, "999.95us"),
        (1_000_000, "1.0000ms"),
        (999_990_000, "999.99ms"),
        (999_995_000, "1.0000s"),  # rounds up into seconds
        (100_000, "100.00us"),
        (99_999, "99.999us"),
    ],
)
def test_time_unit_boundaries(nanoseconds, text):
    assert format_nvprof_time(nanoseconds) == text


def test_milliseconds_are_exactly_a_million_nanoseconds():
    # half a nanosecond from where 999ns rounds into microseconds: a scale off by one part
    # in a million crosses it
    assert format_ms(0.0009994995) == "999ns"
    assert format_ms(0.0009995005) == "1.0000us"


def test_bandwidth_divides_by_exactly_ten_to_the_nine():
    assert bandwidth_gb_per_s(1e9, 1000) == 1.0
    assert bandwidth_gb_per_s(3e9, 1000) == 3.0


def test_a_fraction_of_a_byte_below_a_kib_prints_whole_bytes():
    assert format_bytes(100.7) == "100 B"
    assert format_bytes(0.25) == "0 B"


@pytest.mark.parametrize(
    ("count", "singular", "plural_form", "text"),
    [
        (1, "copy", "copies", "1 copy"),
        (2, "copy", "copies", "2 copies"),
        (0, "GPU", None, "0 GPUs"),
        (1, "GPU", None, "1 GPU"),
        (2, "GPU", None, "2 GPUs"),
        (-1, "byte", None, "-1 bytes"),
    ],
)
def test_the_noun_agrees_with_its_count(count, singular, plural_form, text):
    assert plural(count, singular, plural_form) == text
