"""Where memprof keeps what it can make again: compiled kernels, this GPU's reference figures.

$XDG_CACHE_HOME/memprof (~/.cache/memprof by default). Everything here may be deleted at any
time; a file that cannot be read is made again.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_directory() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "memprof"


def store(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed over it), so that
    two memprof processes never read half a file. A cache that cannot be written is skipped."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
