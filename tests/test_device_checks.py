"""device's refusals of a saved run, each in its exact words (test_consistency finds each by a
part of them), and its launch figures: the element-wise kernels' blocks at their edges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.errors import InvalidArgument
from memprof.experiments import parse
from memprof.experiments.device import DeviceParams, elementwise_blocks

FIXTURE = Path(__file__).parent / "fixtures" / "h200_device.json"  # float64, power 25
ONCE = "every device run records each STREAM kernel once"
COPY_F32 = "stream_copy_f32(float*, float*, long long)"


def refused(change) -> str:
    document = json.loads(FIXTURE.read_text())
    change(document)
    with pytest.raises(InvalidArgument) as refusal:
        parse(json.dumps(document), "run.json")
    return str(refusal.value)


def kernel(document: dict, name: str) -> dict:
    return next(m for m in document["measurements"] if m["name"].startswith(f"stream_{name}_"))


def test_a_kernel_recorded_twice_or_never_is_refused_naming_it():
    # mul recorded as a second copy (of the other dtype: not the same record twice)
    twice = refused(lambda d: kernel(d, "mul").update(name=COPY_F32))
    assert twice == f"run.json: measurements has 2 gpu kernels named stream_copy_*: {ONCE}"
    never = refused(lambda d: kernel(d, "triad").update(name="stream_triad"))
    assert never == f"run.json: measurements has 0 gpu kernels named stream_triad_*: {ONCE}"


@pytest.mark.parametrize(
    ("name", "arrays", "index", "recorded"), [("add", 3, 7, 2), ("triad", 3, 8, 2)]
)
def test_a_kernels_bytes_are_its_own_arrays_of_the_power(name, arrays, index, recorded):
    """Two arrays for a kernel of three (a count neither 2 nor 3, or 3 for a kernel of two
    faster than HBM, is refused before, by the measures and the ceiling)."""
    nbytes, wrong = 8 << 25, recorded * (8 << 25)
    words = refused(lambda d: kernel(d, name).update(bytes=wrong))
    assert words == (
        f"run.json: measurements[{index}].bytes is {wrong}, but {name} reads and writes "
        f"{arrays} arrays of parameters.power ({arrays * nbytes})"
    )


@pytest.mark.parametrize("field", ["memory_clock_khz", "memory_bus_width_bits"])
def test_a_device_without_its_memory_figures_is_refused(field):
    words = refused(lambda d: d["device"].update({field: 0}))
    assert words == (
        f"run.json: device.{field} is 0: the summary compares with the theoretical bandwidth"
    )


@pytest.mark.parametrize(
    ("power", "dtype", "blocks"),
    [
        (0, "float32", 1), (0, "float64", 1),
        (10, "float32", 1), (11, "float32", 2), (10, "float64", 2),
        # 2^N + 1 threads never arise (powers of two); a partial block still counts as one
        (13, "float32", 8), (13, "float64", 16), (30, "float64", 1 << 21),
    ],
)  # fmt: skip
def test_the_elementwise_kernels_take_one_16_byte_pack_a_thread_256_a_block(power, dtype, blocks):
    found = elementwise_blocks(DeviceParams(power=power, dtype=dtype))
    assert found == blocks and type(found) is int
