"""Shared test set-up: GPU tests skip with the reason where no GPU or no PyCUDA is present."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    try:
        import pycuda.driver as cuda
    except ImportError as error:
        return f"PyCUDA is not importable here ({error})"
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            return "the CUDA driver sees no GPU"
    except cuda.Error as error:
        return f"no usable CUDA device ({error})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and (reason := gpu_unavailable_reason()):
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


@pytest.fixture
def fixture_path() -> callable:
    return lambda name: FIXTURES / name


def load_fixture(name: str):
    """A Result recorded on the GPU machine, by its name without h200_ and .json."""
    from memprof.experiments import load

    return load(FIXTURES / f"h200_{name}.json")


def load_legacy(name: str):
    """A Result an older memprof recorded on the H200 (schema 2: before NVML's GPU state, the
    host side of pageable copies and the allocators), by its name without legacy_v2_."""
    from memprof.experiments import load

    return load(FIXTURES / f"legacy_v2_{name}.json")


def render_text(result, width: int = 200) -> str:
    """What `memprof report` prints for a Result, without colours."""
    from rich.console import Console

    from memprof.experiments import summarize
    from memprof.output.render import render_result

    console = Console(width=width, record=True, color_system=None)
    render_result(result, summarize(result), console)
    return console.export_text()
