import numpy as np
import pytest

from memprof.core import verify
from memprof.core.verify import SUCCESS, compare_arrays, compare_constant


def test_equal_arrays_pass_with_the_seed_message():
    values = np.arange(10, dtype=np.float32)
    check = compare_arrays("sum", values.copy(), values)
    assert check == verify.Check("sum", True, 10, SUCCESS)
    assert SUCCESS == "Check result success!"


def test_first_mismatch_is_named():
    expected = np.arange(10, dtype=np.float32)
    actual = expected.copy()
    actual[3] = 99
    actual[7] = 1
    check = compare_arrays("sum", actual, expected)
    assert check.passed is False and check.name == "sum" and check.elements == 10
    assert "2 of 10 elements differ" in check.detail
    assert "first at index 3" in check.detail
    assert "99" in check.detail


def test_unwritten_poisoned_elements_never_pass():
    expected = np.ones(4, dtype=np.float32)
    actual = expected.copy()
    actual[-1] = np.frombuffer(b"\xff\xff\xff\xff", dtype=np.float32)[0]  # the 0xFF poison
    assert not compare_arrays("sum", actual, expected).passed


def test_shape_mismatch_fails():
    assert not compare_arrays("sum", np.ones(3), np.ones(4)).passed


def test_the_mismatch_names_the_host_value_then_the_gpu_value_as_numbers():
    expected = np.arange(10, dtype=np.float32) / 4
    actual = expected.copy()
    actual[5] = 7.5
    detail = compare_arrays("sum", actual, expected).detail
    assert detail.endswith("first at index 5: host 1.25, gpu 7.5")  # not np.float32(1.25)
    actual[5] = np.nan  # a poisoned element the kernel never wrote
    assert compare_arrays("sum", actual, expected).detail.endswith("host 1.25, gpu nan")


def test_a_shape_mismatch_says_both_shapes_in_order():
    check = compare_arrays("sum", np.ones(3), np.ones(4))
    assert check == verify.Check("sum", False, 4, "shape (3,) != (4,)")


def test_arrays_of_two_dimensions_are_compared_element_by_element_in_order():
    """The index of a mismatch is flat, and the values beside it are that element's (the
    old code indexed the first axis with the flat index: an IndexError, or a row)."""
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert compare_arrays("grid", expected.copy(), expected) == verify.Check(
        "grid", True, 12, SUCCESS
    )
    actual = expected.copy()
    actual[1, 2] = 99
    assert compare_arrays("grid", actual, expected) == verify.Check(
        "grid",
        False,
        12,
        "Arrays do not match! 1 of 12 elements differ; first at index 6: host 6.0, gpu 99.0",
    )


@pytest.mark.parametrize("threads", [1, 3])  # one part, or parts compared at once
@pytest.mark.parametrize("size", [1, 3, 4, 5, 6, 7, 13])
def test_a_comparison_a_chunk_at_a_time_finds_any_element_wrong_or_nan(size, threads, monkeypatch):
    monkeypatch.setattr(verify, "EQUAL_CHUNK", 4)  # several chunks, the last one short (1-3)
    monkeypatch.setattr(verify, "PARALLEL_BYTES", 1)  # every array here is large
    monkeypatch.setattr(verify, "THREADS", threads)
    expected = np.arange(1, size + 1, dtype=np.float32)
    assert compare_arrays("sum", expected.copy(), expected).passed
    for place in range(size):
        for wrong in (np.float32(0.5), np.float32(np.nan)):
            actual = expected.copy()
            actual[place] = wrong
            check = compare_arrays("sum", actual, expected)
            assert not check.passed and f"first at index {place}:" in check.detail
    both_nan = expected.copy()
    both_nan[-1] = np.nan
    assert not compare_arrays("sum", both_nan, both_nan.copy()).passed  # NaN equals nothing


def test_an_empty_comparison_passes():
    assert compare_arrays("sum", np.ones(0, np.float32), np.ones(0, np.float32)).passed


# -- compare_constant: gigabytes against one byte value, eight bytes at a time ------------------


@pytest.mark.parametrize("value", [0, 0x5A, 0xFF])
@pytest.mark.parametrize("size", [1, 7, 8, 9, 64, 1000])
def test_bytes_all_of_the_value_pass_and_one_other_byte_anywhere_fails(value, size):
    data = np.full(size, value, np.uint8)
    assert compare_constant("c", data, value) == verify.Check("c", True, size, SUCCESS)
    for where in sorted({0, size // 2, size - 1, size // 8 * 8 - 1, size // 8 * 8}):
        if not 0 <= where < size:
            continue
        bad = data.copy()
        bad[where] ^= 0x01  # one bit of one byte: in the words, in the tail, at either end
        found = compare_constant("c", bad, value)
        assert not found.passed and found.elements == size, (size, where)
        assert f"1 of {size} elements differ; first at index {where}:" in found.detail


def test_a_buffer_not_aligned_to_eight_bytes_is_compared_byte_by_byte():
    backing = np.full(33, 7, np.uint8)
    unaligned = backing[1:] if backing[1:].ctypes.data % 8 else backing[3:]
    assert unaligned.ctypes.data % 8 != 0
    assert compare_constant("c", unaligned, 7).passed
    unaligned[-1] = 8
    assert "first at index" in compare_constant("c", unaligned, 7).detail


def test_every_chunk_is_compared_and_a_late_mismatch_counts_over_the_whole(monkeypatch):
    monkeypatch.setattr(verify, "CHUNK_BYTES", 16)
    data = np.full(100, 3, np.uint8)
    assert compare_constant("c", data, 3).passed
    data[[70, 99]] = 4
    found = compare_constant("c", data, 3)
    assert found.detail.startswith("Arrays do not match! 2 of 100 elements differ; first at")
    assert "index 70" in found.detail


def test_a_constant_of_wider_elements_is_read_as_their_bytes():
    data = np.zeros(10, np.float32)
    assert compare_constant("c", data, 0).passed and compare_constant("c", data, 0).elements == 40
    data[9] = 1.0  # bytes 00 00 80 3f: the last two differ
    assert "2 of 40 elements differ; first at index 38" in compare_constant("c", data, 0).detail


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("size", [1, 7, 8, 17, 1000])
def test_bytes_all_of_the_value_never_take_the_element_by_element_comparison(
    offset, size, monkeypatch
):
    """compare_constant's eight-bytes-at-a-time pass decides a match alone: the element-by-element
    comparison (an array-sized temporary, several passes) is for a mismatch's detail only."""
    monkeypatch.setattr(verify, "CHUNK_BYTES", 64)  # several chunks, each aligned as the whole

    def slow(*_: object) -> None:
        raise AssertionError("compare_constant fell back to compare_arrays on a match")

    monkeypatch.setattr(verify, "compare_arrays", slow)
    for value in (0, 0x5A, 0xFF):
        data = np.full(size + offset, value, np.uint8)[offset:]
        assert compare_constant("c", data, value) == verify.Check("c", True, size, SUCCESS)


def test_a_constant_of_two_dimensions_is_read_as_its_bytes_in_order():
    data = np.zeros((3, 5), np.float32)
    assert compare_constant("c", data, 0) == verify.Check("c", True, 60, SUCCESS)
    data[2, 4] = 1.0  # bytes 56-59: 00 00 80 3f
    assert "2 of 60 elements differ; first at index 58" in compare_constant("c", data, 0).detail
