"""Closing a GPU session: what a reference cycle made during it holds is freed while the
context lives, and the objects frozen for the session's collection are let go again."""

import gc

import pytest

from memprof.core.session import GpuSession

DRIVER = """
EVENTS = []
FAIL_CONTEXT = False

class Error(Exception):
    pass

def init():
    pass

class Stream:
    pass

class Context:
    def synchronize(self):
        pass

    def pop(self):
        EVENTS.append("pop")

    def detach(self):
        EVENTS.append("detach")

class Device:
    def __init__(self, index):
        pass

    @staticmethod
    def count():
        return 1

    def make_context(self):
        if FAIL_CONTEXT:
            raise Error("out of memory")
        return Context()
"""


@pytest.fixture
def driver(fake_pycuda):
    """A stand-in pycuda.driver whose contexts record pop and detach in EVENTS."""
    fake_pycuda(DRIVER)
    import pycuda.driver

    return pycuda.driver


class GpuMemoryInACycle:
    """Stands for a PyCUDA allocation that only a reference cycle keeps."""

    def __init__(self, events: list) -> None:
        self.events = events
        self.itself = self

    def __del__(self) -> None:
        self.events.append("freed")


def test_a_cycle_made_in_the_session_is_freed_before_the_context_is_popped(driver):
    assert gc.get_freeze_count() == 0
    older = GpuMemoryInACycle([])  # made before the session: frozen during it
    with GpuSession(0, timing="events"):
        assert gc.get_freeze_count() > 0
        GpuMemoryInACycle(driver.EVENTS)  # garbage at once, kept only by its cycle
    assert driver.EVENTS == ["freed", "pop", "detach"]
    assert gc.get_freeze_count() == 0
    del older


def test_a_session_that_cannot_make_its_context_leaves_nothing_frozen(driver):
    driver.FAIL_CONTEXT = True
    with pytest.raises(Exception, match="out of memory"), GpuSession(0, timing="events"):
        pass
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_as_it_was(driver):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with GpuSession(0, timing="events"):
            GpuMemoryInACycle(driver.EVENTS)
        assert gc.get_freeze_count() == frozen
        assert driver.EVENTS == ["freed", "pop", "detach"]
    finally:
        gc.unfreeze()
