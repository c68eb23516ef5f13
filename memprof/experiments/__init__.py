"""One module per command; each has run(session, params, progress) -> Result and summarize(Result).

The registry maps a Result's command to its module, so `memprof report` can render any
saved Result without a GPU.
"""

from __future__ import annotations

from types import ModuleType

from memprof.experiments import (
    alloc,
    compare,
    device,
    info,
    managed,
    pinned,
    register,
    streams,
    sweep,
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
}
