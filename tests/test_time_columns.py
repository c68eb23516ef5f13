"""A column of times is read down: where its units change mid-column, the whole table is
written one unit per column, named in the header, each time with the digits it had."""

from __future__ import annotations

from memprof.model.formatting import in_unit
from memprof.model.summary import Table, one_time_unit_per_column


def table(*rows: tuple[str, ...], headers=("Size", "Median", "Min")) -> Table:
    made = Table("times", list(headers))
    for row in rows:
        made.add_row(*row)
    return made


def test_a_column_of_mixed_units_takes_its_median_unit_and_keeps_every_digit():
    mixed = table(("4 KiB", "16.720us", "658ns"), ("4 MiB", "9.5137ms", "9.1000ms"))
    written = one_time_unit_per_column(mixed)
    assert written.headers == ["Size", "Median (ms)", "Min (ms)"]
    assert written.rows == [["4 KiB", "0.016720", "0.000658"], ["4 MiB", "9.5137", "9.1000"]]


def test_the_unit_is_the_one_most_of_the_column_is_printed_in():
    mostly_us = table(("a", "1.0000ms", "1us"), ("b", "20.000us", "1us"), ("c", "30.000us", "1us"))
    assert one_time_unit_per_column(mostly_us).headers[1] == "Median (us)"
    assert [row[1] for row in mostly_us.rows] == ["1000.0", "20.000", "30.000"]


def test_a_table_of_one_unit_per_column_is_left_as_it_was():
    plain = table(("4 KiB", "16.720us", "658ns"), ("4 MiB", "19.000us", "700ns"))
    assert one_time_unit_per_column(plain).headers == ["Size", "Median", "Min"]
    assert plain.rows[0] == ["4 KiB", "16.720us", "658ns"]


def test_marks_dashes_and_words_stay_as_they_are():
    marked = table(
        ("a", "16.720us*", "-"), ("b", "9.5137ms", "-"), headers=("Size", "Median", "Note")
    )
    written = one_time_unit_per_column(marked)
    assert written.headers == ["Size", "Median (ms)", "Note"]
    assert [row[1:] for row in written.rows] == [["0.016720*", "-"], ["9.5137", "-"]]


def test_tables_that_share_their_header_list_each_get_one_unit():
    headers = ["Size", "Median", "Min"]  # one list, as an experiment builds several tables
    first, second = Table("a", headers), Table("b", headers)
    first.add_row("x", "16.720us", "1.0000ms")
    second.add_row("x", "1.0000s", "2.0000ms")
    for made in (first, second):
        made.add_row("y", "9.5137ms", "5ns")
        one_time_unit_per_column(made)
    assert first.headers == ["Size", "Median (ms)", "Min (us)"]
    assert second.headers == ["Size", "Median (ms)", "Min (ms)"]
    assert headers == ["Size", "Median", "Min"]


def test_in_unit_moves_the_point_only():
    assert in_unit("658ns", "us") == "0.658"
    assert in_unit("16.720us", "ms") == "0.016720"
    assert in_unit("9.5137ms", "us") == "9513.7"
    assert in_unit("1.2000s", "ms") == "1200.0"


def test_the_first_column_names_the_row_and_is_never_converted():
    # labels that read as times (an interval swept): left alone, and no reason to convert
    named = table(("1ms", "16.720us", "1ns"), ("10us", "19.000us", "2ns"))
    assert one_time_unit_per_column(named).headers == ["Size", "Median", "Min"]
    assert named.rows[1] == ["10us", "19.000us", "2ns"]
    mixed = one_time_unit_per_column(table(("1ms", "16.720us", "1ns"), ("10us", "9.5137ms", "1ns")))
    assert mixed.headers == ["Size", "Median (ms)", "Min (ns)"]
    assert [row[0] for row in mixed.rows] == ["1ms", "10us"]


def test_a_dash_in_a_column_of_mixed_units_is_skipped_not_a_reason_to_keep_them():
    gapped = table(("a", "16.720us", "1us"), ("b", "-", "1us"), ("c", "9.5137ms", "1us"))
    written = one_time_unit_per_column(gapped)
    assert written.headers[1] == "Median (ms)"
    assert [row[1] for row in written.rows] == ["0.016720", "-", "9.5137"]


def test_a_column_of_words_between_columns_of_times_leaves_the_later_ones_converted():
    rows = (("a", "16.720us", "pinned", "658ns"), ("b", "9.5137ms", "mapped", "9.1000ms"))
    written = one_time_unit_per_column(table(*rows, headers=("Size", "Median", "Kind", "Min")))
    assert written.headers == ["Size", "Median (ms)", "Kind", "Min (ms)"]
    assert written.rows[1] == ["b", "9.5137", "mapped", "9.1000"]
