"""One module per command; each has run(session, params, progress) -> Result and summarize(Result).

The registry maps a Result's command to its module, so `memprof report` can render any
saved Result without a GPU.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from memprof.experiments import (
    alloc,
    compare,
    device,
    hostlink,
    info,
    managed,
    peer,
    pinned,
    portable,
    register,
    streams,
    sweep,
    trace,
    uva,
    writecombined,
    zerocopy,
)

EXPERIMENTS: dict[str, ModuleType] = {
    "info": info,
    "pinned": pinned,
    "zerocopy": zerocopy,
    "uva": uva,
    "managed": managed,
    "writecombined": writecombined,
    "register": register,
    "alloc": alloc,
    "streams": streams,
    "device": device,
    "compare": compare,
    "sweep": sweep,
    "trace": trace,
    "peer": peer,
    "hostlink": hostlink,
    "portable": portable,
}


def run_experiment(
    command: str, session: Any, params: Any, progress: Any = None, affinity: bool = True
) -> Any:
    """Run one command's experiment and record in its Result where the figures came from.

    The host thread runs on the GPU's local CPUs (unless `affinity` is False) before the
    experiment allocates anything, so host memory lands on the GPU's NUMA node.
    """
    from memprof.core.affinity import near_gpu

    module = EXPERIMENTS[command]
    with near_gpu(session.device.pci_bus_id(), affinity) as placed:
        result = (
            module.run(session, params)
            if progress is None
            else module.run(session, params, progress)
        )
    result.timing = session.profiler.timing_info()
    result.timing.host_affinity = placed
    return result
