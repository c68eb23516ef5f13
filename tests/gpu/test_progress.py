"""On the GPU: each experiment the fake GPU cannot run (tests/test_progress.py runs the others)
reports every step, in order, up to its total, each naming its size."""

from __future__ import annotations

import re

import pytest

from memprof import api

pytestmark = pytest.mark.gpu

ON_THE_GPU = {  # command: small options, so the whole list takes seconds
    "register": {"power": 20},
    "pinlimit": {"cap": 2, "copy_power": 20},
    "managed": {"power": 20},
    "streams": {"power": 20},
    "device": {"power": 20},
    "compare": {"power": 20},
    "sweep": {"powers": (10, 12)},
    "peer": {"power": 20},
    "hostlink": {"power": 20},
    "portable": {"power": 20},
    "check-pairs": {"power": 20},
}
SEVERAL_GPUS = {"peer", "hostlink", "portable", "check-pairs"}
SIZE = re.compile(r"\d+ (B|KiB|MiB|GiB)")


@pytest.mark.parametrize("name", sorted(ON_THE_GPU))
def test_every_step_is_reported_in_order_up_to_the_total(name):
    from memprof.core.session import device_count

    if name in SEVERAL_GPUS and device_count() < 2:
        pytest.skip(f"memprof {name} needs two GPUs")
    seen: list[tuple[str, int, int]] = []
    api.run(name, progress=lambda *step: seen.append(step), **ON_THE_GPU[name])
    assert len(seen) >= 2, seen
    (total,) = {total for _, _, total in seen}
    done = [done for _, done, _ in seen]
    assert done[0] == 0 and done == sorted(done) and seen[-1][1] == total, seen
    for description, _, _ in seen[:-1]:
        assert SIZE.search(description) or "latency" in description, description
