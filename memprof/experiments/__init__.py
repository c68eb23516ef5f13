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
    info,
    managed,
    peer,
    pinned,
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
}


def run_experiment(command: str, session: Any, params: Any, progress: Any = None) -> Any:
    """Run one command's experiment and record in its Result where the figures came from."""
    module = EXPERIMENTS[command]
    result = (
        module.run(session, params) if progress is None else module.run(session, params, progress)
    )
    result.timing = session.profiler.timing_info()
    return result
