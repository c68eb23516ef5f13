"""`memprof check --thresholds FILE`: per-model floors kept in the user's repository.

A JSON object per GPU model (as `memprof info` names it) setting some of check's floors, in
percent of their ceiling, as --h2d-floor... do; validated before the GPU is opened (exit 2).
The GPU's entry is kept in the Result, so `memprof report` judges a saved run by the floors
that judged it. docs/check.md shows a file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Annotated

from memprof.errors import InvalidArgument
from memprof.model.params import Range

Percent = Annotated[int, Range(1, 100)]
LINES = ("h2d", "d2h", "at_once", "d2d")  # check's throughput lines, in their order
KEYS = tuple(f"{line}_floor_pct" for line in LINES)  # a model's keys in the file
MAX_FILE_BYTES = 1 << 20  # a file of floors is a few lines; a larger one is not one
Models = dict[str, dict[str, int]]  # model -> {key: percent}, as the file says


@dataclass(frozen=True)
class CheckThresholds:
    """What --thresholds decided for the GPU checked: the file (as given), the entry that
    matched its name (None: no entry did, so the run's own floors judged every line), and
    the floors that entry sets; a line it leaves out keeps the run's floor."""

    file: str
    model: str | None = None
    h2d_floor_pct: Percent | None = None
    d2h_floor_pct: Percent | None = None
    at_once_floor_pct: Percent | None = None
    d2d_floor_pct: Percent | None = None

    def floors_pct(self) -> dict[str, int]:
        """The floors the entry sets, by line ("h2d": 90)."""
        found = {line: getattr(self, f"{line}_floor_pct") for line in LINES}
        return {line: pct for line, pct in found.items() if pct is not None}


assert tuple(f.name for f in fields(CheckThresholds))[2:] == KEYS


def matches(model: str, gpu: str) -> bool:
    """A file's model names a GPU when it is the driver's whole name, in any case
    ("nvidia h200" is an NVIDIA H200; "NVIDIA H200" is not an NVIDIA H200 NVL)."""
    return model.casefold() == gpu.casefold()


def read_thresholds(path: str | None) -> Models | None:
    """The floors of every model in the file at `path`, read and checked before any GPU work:
    refused in one line (exit 2) naming the file and the first bad key or value."""
    if path is None:
        return None

    def refuse(why: str) -> InvalidArgument:
        return InvalidArgument(f"--thresholds {path}: {why}")

    if not path:
        raise InvalidArgument("--thresholds: the file name is empty")
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the name
        raise refuse(f"cannot be read ({getattr(error, 'strerror', None) or error})") from None
    if len(data) > MAX_FILE_BYTES:
        raise refuse(f"is over {MAX_FILE_BYTES} bytes: not a file of floors")
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_once)
    except UnicodeDecodeError:
        raise refuse("is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise refuse(f"is not JSON: {error}") from None
    except _Twice as twice:
        raise refuse(f"names {_quoted(twice.args[0])} twice") from None
    if not isinstance(document, dict) or not document:
        raise refuse('holds no GPU model: write {"NVIDIA H200": {"h2d_floor_pct": 85}}')
    seen: dict[str, str] = {}  # casefolded -> as written
    for model, entry in document.items():
        name = _quoted(model)
        if model.casefold() in seen:
            raise refuse(f"{name} and {_quoted(seen[model.casefold()])} name the same GPU model")
        seen[model.casefold()] = model
        if not isinstance(entry, dict) or not entry:
            raise refuse(f"{name} is not an object of floors ({', '.join(KEYS)})")
        for key, value in entry.items():
            if key not in KEYS:
                raise refuse(f"{name} has {_quoted(key)}: the floors are {', '.join(KEYS)}")
            if type(value) is not int or not 1 <= value <= 100:
                raise refuse(
                    f"{name} {key} is {json.dumps(value)}: a whole percentage of its ceiling, "
                    "1 to 100"
                )
    return document  # each entry checked: {key: percent}


class _Twice(Exception):
    """A key an object of the file holds twice (json would keep the last silently)."""


def _once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise _Twice(key)
        found[key] = value
    return found


def _quoted(text: str) -> str:
    """A string of the file as JSON spells it: quoted, its control characters escaped."""
    return json.dumps(text, ensure_ascii=False)


def thresholds_for(path: str | None, models: Models | None, gpu: str) -> CheckThresholds | None:
    """What the file at `path` sets for the GPU named `gpu`, to keep in the run's Extra."""
    if path is None or models is None:
        return None
    for model, entry in models.items():
        if matches(model, gpu):
            return CheckThresholds(file=path, model=model, **entry)
    return CheckThresholds(file=path)


def note(kept: CheckThresholds, gpu: str) -> str:
    """What check says of the file's floors for this GPU: a note under the table, or, where no
    entry names it, the warning above."""
    if kept.model is None:
        return (
            f"Thresholds: {kept.file} (--thresholds) has no entry for {gpu}: the run's own "
            "floors judged every line."
        )
    set_here = ", ".join(f"{line}_floor_pct {pct}" for line, pct in kept.floors_pct().items())
    return (
        f"Thresholds: {kept.file} (--thresholds), its entry {_quoted(kept.model)}: "
        f"{set_here}; the lines marked with the file's name are judged by it, the others by "
        "the run's own floors."
    )
