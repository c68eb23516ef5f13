import numpy as np

from memprof.core.verify import SUCCESS, compare_arrays


def test_equal_arrays_pass_with_the_seed_message():
    values = np.arange(10, dtype=np.float32)
    check = compare_arrays("sum", values.copy(), values)
    assert check.passed and check.detail == SUCCESS == "Check result success!"
    assert check.elements == 10


def test_first_mismatch_is_named():
    expected = np.arange(10, dtype=np.float32)
    actual = expected.copy()
    actual[3] = 99
    actual[7] = 1
    check = compare_arrays("sum", actual, expected)
    assert not check.passed
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
    assert check.detail == "shape (3,) != (4,)" and check.elements == 4
    assert not check.passed
