"""Every command's fresh Result, saved and loaded with the checks `memprof report` applies.

The declarations in each experiment (Params, Extra, measures) and the types in results.py
must accept what run() really writes on a GPU, with either timing source.
"""

import pytest

from memprof import api
from memprof.experiments import load as load_result
from tests.conftest import render_text

pytestmark = pytest.mark.gpu

SMALL = {
    "info": {},
    "pinned": {"power": 13, "repeat": 2, "warmup": 1},
    "zerocopy": {"powers": (10, 13), "repeat": 2, "warmup": 1},
    "uva": {"power": 13, "repeat": 2, "warmup": 1},
    "managed": {"power": 14, "repeat": 2, "warmup": 1},
    "writecombined": {"power": 13, "repeat": 2, "warmup": 1},
    "register": {"power": 14, "repeat": 2, "warmup": 1},
    "alloc": {"powers": (10, 13), "repeat": 2, "warmup": 0},
    "streams": {"power": 18, "streams": 2, "repeat": 2, "warmup": 1},
    "device": {"power": 16, "repeat": 2, "warmup": 1},
    "compare": {"power": 13, "repeat": 2, "warmup": 1},
    "sweep": {"powers": (0, 10), "repeat": 2, "warmup": 1},
    "check": {"power": 13, "device_power": 12, "repeat": 2},
    "smallcopies": {"powers": (2, 10), "copies": 8, "repeat": 2, "warmup": 1},
}


@pytest.mark.parametrize("timing", ["auto", "events"])  # auto: CUPTI where present
@pytest.mark.parametrize("command", sorted(SMALL))  # peer and trace have tests of their own
def test_a_fresh_result_loads_back_equal(tmp_path, command, timing):
    result = api.run(command, timing=timing, **SMALL[command])
    path = tmp_path / f"{command}.json"
    result.save(path)
    loaded = load_result(path)  # InvalidArgument names the field a declaration gets wrong
    assert loaded.to_json() == result.to_json()
    assert render_text(loaded) == render_text(result)  # the summary, charts drawn
