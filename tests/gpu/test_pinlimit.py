"""On the GPU: memprof pinlimit end to end, small, its Result loaded back; the default run's
length; a cap beyond the margin refused before anything is allocated."""

from __future__ import annotations

import pytest

from memprof import api
from memprof.core import hostlimits
from memprof.experiments import load, parse, pinlimit, summarize
from tests.gpu.test_commands import memprof

pytestmark = pytest.mark.gpu


def test_a_small_climb_pins_frees_and_loads_back():
    result = api.run("pinlimit", cap=4, step=2, copy_power=24, repeat=3)
    assert result.passed, [c.detail for c in result.checks if not c.passed]
    extra = result.extra
    assert extra.stopped == "cap" and extra.held_bytes == [2 << 30, 4 << 30]
    again = parse(result.to_json())
    assert summarize(again).conclusions == summarize(result).conclusions
    climb = pinlimit.climb_of(result)
    # times, not asserted (which is cheaper varies run to run: touch+Register took 937 ms per
    # GiB against HostAlloc+touch's 663 on the H200 once, less on others): both were measured
    assert climb.alloc[0].median_ms > 0 and climb.register[0].median_ms > 0
    (register,) = pinlimit.base.find_all(result, pinlimit.REGISTER)  # one sample per step
    assert register.kind == "registered" and len(register.samples_ms) == 2
    assert pinlimit.base.find_all(result, pinlimit.WHOLE)[0].bytes == 2 << 30


def test_the_default_run_pins_at_most_32_gib_and_loads(tmp_path):
    """Its time is a budget in benchmarks/budgets.py (30 s on the H200), not asserted here."""
    done = memprof("pinlimit", "--json", str(tmp_path / "p.json"), timeout=120)
    assert done.returncode == 0, done.stderr
    result = load(tmp_path / "p.json")
    assert 0 < max(result.extra.held_bytes) <= 32 << 30
    print(done.stdout)  # the tables, for the lead to read with -s


def test_a_cap_beyond_the_margin_is_refused_with_exit_4_in_one_line():
    limits = hostlimits.read_limits()
    too_much = limits.available_bytes // (1 << 30) + 1
    done = memprof("pinlimit", "--cap", str(too_much))
    assert done.returncode == 4, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--cap" in done.stderr
