"""Closing a GPU session: what a reference cycle made during it holds is freed while the
context lives, and the objects frozen for the session's collection are let go again where
nothing was frozen before it. Where something was (Python 3.12 freezes its own at start), a
library session freezes nothing, and the command line's, whose process ends, for good."""

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

    def pop(self=None):  # Context.pop() too, as Devices pops the current one
        EVENTS.append("pop")

    def push(self):
        EVENTS.append("push")

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


class Freezer:
    """Stands in for gc's freeze, unfreeze and freeze count: the frozen count it starts with
    (375 as Python 3.12 starts, 0 as 3.10, 3.11 and 3.13 do), and every call made."""

    def __init__(self, frozen: int) -> None:
        self.frozen, self.calls = frozen, []

    def freeze(self) -> None:
        self.calls.append("freeze")
        self.frozen += 1000

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")
        self.frozen = 0

    def get_freeze_count(self) -> int:
        return self.frozen


@pytest.fixture
def frozen_at_start(monkeypatch):
    """frozen_at_start(n): gc as if n objects were frozen before the session. What the test
    process holds is frozen for real meanwhile, as a session freezes it, so the session's
    gc.collect goes through what the test made, not the whole suite's heap (seconds late in
    a worker); what the test makes in the session is collected as before."""
    unfreeze = None
    if gc.get_freeze_count() == 0:  # else Python's own are frozen (3.12): left as they are
        gc.freeze()
        unfreeze = gc.unfreeze

    def make(frozen: int) -> Freezer:
        freezer = Freezer(frozen)
        for name in ("freeze", "unfreeze", "get_freeze_count"):
            monkeypatch.setattr(gc, name, getattr(freezer, name))
        return freezer

    yield make
    if unfreeze is not None:
        unfreeze()


@pytest.mark.skipif(
    gc.get_freeze_count() != 0, reason="this Python freezes objects of its own at start (3.12)"
)
def test_a_cycle_made_in_the_session_is_freed_before_the_context_is_popped(driver):
    older = GpuMemoryInACycle([])  # made before the session: frozen during it
    with GpuSession(0, timing="events"):
        assert gc.get_freeze_count() > 0
        GpuMemoryInACycle(driver.EVENTS)  # garbage at once, kept only by its cycle
    assert driver.EVENTS == ["freed", "pop", "detach"]
    assert gc.get_freeze_count() == 0
    del older


def test_where_nothing_was_frozen_the_session_lets_go_of_what_it_froze(driver, frozen_at_start):
    freezer = frozen_at_start(0)
    with GpuSession(0, timing="events"):
        assert freezer.calls == ["freeze"]
        GpuMemoryInACycle(driver.EVENTS)
    assert freezer.calls == ["freeze", "unfreeze"]
    assert driver.EVENTS == ["freed", "pop", "detach"]


@pytest.mark.parametrize("frozen", [375, 1])  # Python 3.12's own at start; a caller's one
def test_where_something_was_frozen_a_library_session_freezes_nothing(
    driver, frozen_at_start, frozen
):
    freezer = frozen_at_start(frozen)
    with GpuSession(0, timing="events"):
        GpuMemoryInACycle(driver.EVENTS)
    assert freezer.calls == []  # what it froze would stay frozen in a process that goes on
    assert driver.EVENTS == ["freed", "pop", "detach"]


def test_where_something_was_frozen_the_command_lines_session_freezes_for_good(
    driver, frozen_at_start
):
    freezer = frozen_at_start(375)
    with GpuSession(0, timing="events", ends_process=True):
        GpuMemoryInACycle(driver.EVENTS)
    assert freezer.calls == ["freeze"]  # unfreeze would let go of Python's own too
    assert driver.EVENTS == ["freed", "pop", "detach"]


def test_every_session_of_several_gpus_freezes_as_the_process_ends(driver, frozen_at_start):
    from memprof.core.session import Devices

    driver.Device.count = staticmethod(lambda: 2)
    for ends_process, calls in ((False, []), (True, ["freeze", "freeze"])):
        freezer = frozen_at_start(375)
        with Devices([0, 1], timing="events", ends_process=ends_process):
            pass
        assert freezer.calls == calls


def test_the_command_line_runs_each_session_as_the_processs_last(monkeypatch):
    from memprof import api, cli

    seen = []

    def run_experiment(experiment, params, options, progress):
        seen.append(options.ends_process)
        raise KeyboardInterrupt

    def run_each_gpu(*arguments, **settings):
        seen.append(settings.get("ends_process"))
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run_experiment", run_experiment)
    monkeypatch.setattr(api, "run_each_gpu", run_each_gpu)
    cli.app(["pinned", "--power", "10", "--quiet"], standalone_mode=False)
    cli.app(["pinned", "--device", "all", "--quiet"], standalone_mode=False)
    assert seen == [True, True]
    assert api.RunOptions().ends_process is False  # memprof.run's: the process goes on


def test_a_session_that_cannot_make_its_context_lets_go_of_what_it_froze(driver, frozen_at_start):
    freezer = frozen_at_start(0)
    driver.FAIL_CONTEXT = True
    with pytest.raises(Exception, match="out of memory"), GpuSession(0, timing="events"):
        pass
    assert freezer.calls == ["freeze", "unfreeze"]


def test_a_close_cut_short_by_ctrl_c_lets_go_of_what_it_froze_once(driver, frozen_at_start):
    freezer = frozen_at_start(0)

    def pressed() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), GpuSession(0, timing="events") as session:
        session.own(pressed)  # the release Ctrl-C lands in
    assert freezer.calls == ["freeze", "unfreeze"]
    session.close()  # closed again (as Devices may): pops its context, unfreezes nothing more
    assert freezer.calls == ["freeze", "unfreeze"]
    assert driver.EVENTS[-2:] == ["pop", "detach"]


def test_the_cupti_log_several_gpus_share_is_stopped_once_after_every_session(driver, monkeypatch):
    """A session stopping the shared log would switch its dropped calls back on while the
    other GPUs still record."""
    from memprof.core import session as session_module

    stops = []
    log = type("Log", (), {"stop": lambda self: stops.append(list(driver.EVENTS))})()
    monkeypatch.setattr(session_module, "start_activity", lambda timing, index: (log, ""))
    driver.Device.count = staticmethod(lambda: 2)
    with session_module.Devices([0, 1]):
        pass
    assert stops == [driver.EVENTS]  # once, after both contexts were popped and detached
    assert driver.EVENTS.count("detach") == 2
