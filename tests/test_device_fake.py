"""device runs on the stand-in GPU (tests/fakegpu.py, whose stream.cu kernels compute what the
source says): the memory it asks for before it allocates, every measurement it records in
order (what, its bytes, --repeat samples and never the warm-up's), each kernel's grid and
arrays, each verification by name, passing and failing on either side of its limit, and its
progress step by step. The figures and sentences are test_verdicts_kinds'."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from memprof.core import memory
from memprof.experiments import device
from tests.fakegpu import FakeFunction, FakeSession
from tests.test_kinds_fake import REPEAT, WARMUP, checked, recorded, run_on_fake

MULTIPROCESSORS = 3  # not the fake session's 132: the run reads the device's facts
KERNELS = ("copy", "mul", "add", "triad", "dot")


def run_device(monkeypatch, launches: list | None = None, **params):
    """run_on_fake of device; `launches`, where given, gets each kernel launch as (name,
    grid, block, arguments)."""
    if launches is not None:
        real_call = FakeFunction.prepared_async_call

        def call(self, grid, block, stream, *arguments):
            launches.append((self.name, grid, block, arguments))
            return real_call(self, grid, block, stream, *arguments)

        monkeypatch.setattr(FakeFunction, "prepared_async_call", call)
    return run_on_fake("device", monkeypatch, multiprocessors=MULTIPROCESSORS, **params)


@pytest.mark.parametrize(
    ("dtype", "suffix", "itemsize", "ctype", "dot_limit"),
    [("float32", "f32", 4, "float", "1e-04"), ("float64", "f64", 8, "double", "1e-11")],
)
def test_device_times_copy_memset_and_each_kernel_of_its_dtype(
    dtype, suffix, itemsize, ctype, dot_limit, monkeypatch
):
    launches: list = []
    asked, measurements, checks, steps = run_device(monkeypatch, launches, power=10, dtype=dtype)
    nbytes, size = itemsize << 10, f"{itemsize * 1024 >> 10} KiB"
    assert asked == [{"device_bytes": 3 * nbytes, "host_bytes": 7 * nbytes}]
    signatures = {
        "copy": f"{ctype}*, {ctype}*",
        "mul": f"{ctype}*, {ctype}*, {ctype}",
        "add": f"{ctype}*, {ctype}*, {ctype}*",
        "triad": f"{ctype}*, {ctype}*, {ctype}*, {ctype}",
        "dot": f"{ctype}*, {ctype}*, {ctype}*",
    }
    arrays = {"copy": 2, "mul": 2, "add": 3, "triad": 3, "dot": 2}
    assert recorded(measurements) == [
        ("api", "cuMemcpyDtoDAsync", "d2d", "device", nbytes, REPEAT),
        ("gpu", "[CUDA memcpy DtoD]", "d2d", "device", nbytes, REPEAT),
        ("api", "cuMemsetD8Async", "memset", "device", nbytes, REPEAT),
        ("gpu", "[CUDA memset]", "memset", "device", nbytes, REPEAT),
        ("api", "cuLaunchKernel", "launch", None, 0, 5 * REPEAT),
        *(
            ("gpu", f"stream_{k}_{suffix}({signatures[k]}, long long)", "kernel", "device",
             arrays[k] * nbytes, REPEAT)
            for k in KERNELS
        ),
    ]  # fmt: skip
    assert checked(checks) == [
        ("copy c = a", True, 1024),
        ("mul b = s*c", True, 1024),
        ("add c = a + b", True, 1024),
        ("triad a = b + s*c", True, 1024),
        ("dot sum(a*b)", True, 1024),
        ("a after the timed runs", True, 1024),
    ]
    assert checks[4].detail.endswith(f"(limit {dot_limit}) against numpy in float64")
    assert checks[5].detail == "all finite"
    assert steps == [
        (f"device memory, {size}: verifying the kernels", 0, 3),
        (f"device memory, {size}: cuMemcpyDtoD and cuMemset", 1, 3),
        (f"device memory, {size}: STREAM kernels", 2, 3),
        ("done", 3, 3),
    ]
    # verified once, then warm-up and timed rounds, every kernel in BabelStream's order
    names = [name for name, *_ in launches]
    assert names == [f"stream_{k}_{suffix}" for k in KERNELS] * (1 + WARMUP + REPEAT)
    # 16-byte packs: 4 float32 or 2 float64 a thread, 256 threads a block, at least one
    elementwise = (1024 // (16 // itemsize)) // 256
    for name, grid, block, arguments in launches:
        dot = name.startswith("stream_dot")
        assert grid == ((MULTIPROCESSORS * 8 if dot else elementwise), 1), name
        assert block == (256, 1, 1) and arguments[-1] == 1024, name


def test_each_kernel_gets_its_own_arrays_and_the_scalar_of_its_dtype(monkeypatch):
    launches: list = []
    run_device(monkeypatch, launches, power=10, dtype="float32")
    first = {name.split("_")[1]: arguments for name, _, _, arguments in launches[:5]}
    a, c = first["copy"][:2]
    b = first["mul"][0]
    partial = first["dot"][2]
    assert len({a, b, c, partial}) == 4
    assert first["mul"][1:3] == (c, np.float32(0.4)) and type(first["mul"][2]) is np.float32
    assert first["add"][:3] == (a, b, c)
    assert first["triad"][:4] == (a, b, c, np.float32(0.4))
    assert first["dot"][:2] == (a, b)


@pytest.mark.parametrize("power", [5, 6, 7])
def test_the_grids_have_at_least_one_block_however_small_the_arrays(power, monkeypatch):
    launches: list = []
    run_device(monkeypatch, launches, power=power, dtype="float64")
    # 2^power float64 in 16-byte packs: 2^(power-1) threads, under one block of 256
    assert {grid for name, grid, *_ in launches if "dot" not in name} == {(1, 1)}


@pytest.mark.parametrize(
    ("dtype", "error", "passed"),
    [("float32", 0.5e-4, True), ("float32", 2e-4, False), ("float64", 0.5e-11, True),
     ("float64", 2e-11, False)],
)  # fmt: skip
def test_dot_is_checked_against_its_dtypes_limit(dtype, error, passed, monkeypatch):
    real_call = FakeFunction.prepared_async_call
    dots = []

    def off(self, grid, block, stream, *arguments):
        real_call(self, grid, block, stream, *arguments)
        if self.name.startswith("stream_dot") and not dots:  # the verifying round's
            dots.append(1)
            ctype = np.float32 if dtype == "float32" else np.float64
            partial = np.ctypeslib.as_array(
                (np.ctypeslib.as_ctypes_type(ctype) * 1).from_address(int(arguments[2]))
            )
            partial[0] = partial[0] * (1 + error)

    monkeypatch.setattr(FakeFunction, "prepared_async_call", off)
    _, _, checks, _ = run_device(monkeypatch, power=10, dtype=dtype)
    dot = checks[4]
    assert (dot.name, dot.passed) == ("dot sum(a*b)", passed)
    assert dot.detail.startswith(f"relative error {error:.2e}"[:18]), dot.detail
    assert [check.passed for check in checks if check is not dot] == [True] * 5


def test_a_kernel_that_computes_wrong_fails_its_check_alone(monkeypatch):
    real_call = FakeFunction.prepared_async_call

    def wrong_add(self, grid, block, stream, *arguments):
        real_call(self, grid, block, stream, *arguments)
        if self.name.startswith("stream_add"):
            c = np.ctypeslib.as_array(
                (np.ctypeslib.as_ctypes_type(np.float64) * 1024).from_address(int(arguments[2]))
            )
            c[7] += 1

    monkeypatch.setattr(FakeFunction, "prepared_async_call", wrong_add)
    _, _, checks, _ = run_device(monkeypatch, power=10, dtype="float64")
    assert [(check.name, check.passed) for check in checks][:3] == [
        ("copy c = a", True),
        ("mul b = s*c", True),
        ("add c = a + b", False),
    ]


def test_a_not_finite_after_the_timed_runs_fails_its_check(monkeypatch):
    real_round = device._Stream.round

    def round_to_nan(self) -> None:
        real_round(self)
        self.session.cuda.memcpy_htod(self.a.device_pointer, np.full(self.elements, np.inf))

    monkeypatch.setattr(device._Stream, "round", round_to_nan)
    _, _, checks, _ = run_device(monkeypatch, power=10, dtype="float64")
    assert checked(checks)[-1] == ("a after the timed runs", False, 1024)
    assert checks[-1].detail == "NaN or infinity in a"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_close_passes_an_error_at_its_tolerance_and_fails_one_past_it(dtype):
    expected = np.array([1.0, 2.0, 4.0], dtype)
    tolerance = 4 * float(np.finfo(dtype).eps)
    at = expected.copy()
    at[1] = expected[1] * (1 + tolerance)  # exactly representable: 2 + 8 ulp(1)
    check = device._close("triad", at, expected, tolerance)
    assert (check.name, check.passed, check.elements) == ("triad", True, 3)
    assert check.detail == f"largest relative error {tolerance:.1e} (limit {tolerance:.1e})"
    past = at.copy()
    past[2] = np.nextafter(expected[2] * (1 + tolerance), np.inf, dtype=dtype)
    assert not device._close("triad", past, expected, tolerance).passed
    below = at.copy()
    below[0] = expected[0] * (1 - tolerance)  # the error's size, whichever its sign
    assert device._close("triad", below, expected, tolerance).passed
    below[0] = np.nextafter(below[0], -np.inf, dtype=dtype)
    assert not device._close("triad", below, expected, tolerance).passed
    for bad in (np.nan, np.inf):
        broken = expected.copy()
        broken[2] = bad
        check = device._close("triad", broken, expected, tolerance)
        assert (check.name, check.passed, check.elements, check.detail) == (
            "triad",
            False,
            3,
            "NaN or infinity in the result",
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_arrays_and_dots_partial_sums_are_of_the_dtype(dtype, monkeypatch):
    allocated: list[tuple] = []
    real = memory.allocate

    def allocate(session, kind, count, *dtypes):
        allocated.append((kind, count, *map(np.dtype, dtypes)))
        return real(session, kind, count, *dtypes)

    monkeypatch.setattr(memory, "allocate", allocate)
    run_device(monkeypatch, power=10, dtype=dtype)
    element = np.dtype(dtype)
    assert allocated == [("device", 1024, element)] * 3 + [("device", MULTIPROCESSORS * 8, element)]


def test_the_verified_arrays_hold_no_value_near_zero(monkeypatch):
    """Random values from 0.5 to 1.5: a relative error is measured against no zero."""
    sent: list[np.ndarray] = []
    real = FakeSession.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        htod = self.cuda.memcpy_htod
        self.cuda.memcpy_htod = lambda to, source: sent.append(source.copy()) or htod(to, source)

    monkeypatch.setattr(FakeSession, "__init__", init)
    run_device(monkeypatch, power=10, dtype="float64")
    assert len(sent) == 3 and all(array.size == 1024 for array in sent)
    assert all(array.min() >= 0.5 and array.max() < 1.5 for array in sent)
    assert len({array.tobytes() for array in sent}) == 3


@pytest.mark.parametrize(
    ("dtype", "ulps", "passed"),
    [("float32", 1, True), ("float64", 3, True), ("float64", 5, False)],
)
def test_triad_is_held_to_4_epsilons_of_its_dtype(dtype, ulps, passed, monkeypatch):
    """triad's result moved `ulps` units in the last place at a value from 1.05 to 1.2: a
    relative error of ulps x eps / value (5 ulps: 4.2 to 4.8 eps)."""
    real_call = FakeFunction.prepared_async_call
    moved: list[int] = []

    def off(self, grid, block, stream, *arguments):
        real_call(self, grid, block, stream, *arguments)
        if self.name.startswith("stream_triad") and not moved:  # the verifying round's
            a = np.ctypeslib.as_array(
                (np.ctypeslib.as_ctypes_type(np.dtype(dtype)) * 1024).from_address(
                    int(arguments[0])
                )
            )
            index = int(np.flatnonzero((a >= 1.05) & (a < 1.2))[0])
            for _ in range(ulps):
                a[index] = np.nextafter(a[index], np.inf)
            moved.append(index)

    monkeypatch.setattr(FakeFunction, "prepared_async_call", off)
    _, _, checks, _ = run_device(monkeypatch, power=10, dtype=dtype)
    triad = checks[3]
    assert (triad.name, triad.passed) == ("triad a = b + s*c", passed), triad.detail
    limit = 4 * np.finfo(dtype).eps
    assert triad.detail.endswith(f"(limit {limit:.1e})")


def test_dots_partial_sums_are_added_in_float64(monkeypatch):
    """float32 partial sums, one of them beside 2^25 and its negative: added in float32 the
    sum would keep dot's whole part alone (an error near 1e-3, over the limit)."""
    real_call = FakeFunction.prepared_async_call

    def spread(self, grid, block, stream, *arguments):
        real_call(self, grid, block, stream, *arguments)
        if self.name.startswith("stream_dot"):
            sums = np.ctypeslib.as_array((ctypes.c_float * grid[0]).from_address(int(arguments[2])))
            sums[:3] = (2.0**25, sums[0], -(2.0**25))

    monkeypatch.setattr(FakeFunction, "prepared_async_call", spread)
    _, _, checks, _ = run_device(monkeypatch, power=10, dtype="float32")
    dot = checks[4]
    assert dot.passed, dot.detail
    assert float(dot.detail.split()[2]) < 1e-6, dot.detail  # float32's rounding of the sum
