"""Older Result files brought to today's shape, in one step, before anything is checked.

- 1 -> 2: compare's and streams' extra `bytes` became `bytes_per_array`.
- 2 -> 3: a measurement names its GPUs (`gpus`) instead of writing them into its operation
  ("ce_on 0->1" is operation "ce_on" between GPUs 0 and 1).
- 3 -> 4: `extra` no longer holds what the parameters and measurements determine (an array's
  bytes, the kinds measured...). Such a value is dropped once the rest is checked, and must be
  what today's memprof derives: a file that contradicted itself then is refused now too.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from memprof.model.schema import SchemaError, describe


def to_today(data: Any, today: int) -> Any:
    """A file's JSON object in the shape of schema version `today` (a non-object: as it is)."""
    if not isinstance(data, dict):
        return data
    version = data.get("schema_version")
    extra = data.get("extra")
    if version == 1 and data.get("command") in ("compare", "streams") and isinstance(extra, dict):
        extra = {("bytes_per_array" if k == "bytes" else k): v for k, v in extra.items()}
        data = {**data, "extra": extra}
    if version in (1, 2) and isinstance(data.get("measurements"), list):
        data = {**data, "measurements": [_gpus_apart(m) for m in data["measurements"]]}
    return {**data, "schema_version": today}


# Version 2 wrote the GPUs into the operation: "ce_on 0->1" (peer), "together h2d 1"
# (hostlink), "portable d2h 0" (portable).
_OPERATION_OF_MODE = {"alone": "{direction}", "together": "{direction}_at_once"}
_GPU = re.compile(r"[0-9]{1,2}")  # ASCII digits only: int() takes other scripts' digits too


def _gpus_apart(measurement: Any) -> Any:
    """A version-2 multi-GPU measurement with its GPUs in `gpus`; anything else as it was."""
    if not isinstance(measurement, dict) or not isinstance(measurement.get("operation"), str):
        return measurement
    words = measurement["operation"].split(" ")
    if len(words) == 2 and "->" in words[1]:  # peer: "ce_on 0->1"
        source, _, destination = words[1].partition("->")
        if _GPU.fullmatch(source) and _GPU.fullmatch(destination):
            return {**measurement, "operation": words[0], "gpus": [int(source), int(destination)]}
    if len(words) == 3 and words[1] in ("h2d", "d2h") and _GPU.fullmatch(words[2]):
        mode = _OPERATION_OF_MODE.get(words[0], "{direction}")  # portable: the buffer's kind
        operation = mode.format(direction=words[1])
        return {**measurement, "operation": operation, "gpus": [int(words[2])]}
    return measurement


def without_derived(extra: Any, result: Any, shape: Any) -> Any:
    """An older file's extra without the values today's memprof derives instead."""
    if not isinstance(extra, dict):
        return extra
    derived = shape.derived(result)
    return {key: value for key, value in extra.items() if key not in derived}


def check_derived(extra: Any, result: Any, shape: Any) -> None:
    """Each derived value an older file's extra held must be what memprof derives now."""
    if not isinstance(extra, dict):
        return
    for key, wanted in shape.derived(result).items():
        if key in extra:
            _same(extra[key], msgspec.to_builtins(wanted), f"extra.{key}")


def _same(found: Any, wanted: Any, where: str) -> None:
    """Refuse `found` unless it is `wanted`, naming the innermost field that differs."""
    if isinstance(found, dict) and isinstance(wanted, dict) and found.keys() == wanted.keys():
        for key in wanted:
            _same(found[key], wanted[key], f"{where}.{key}")
    elif _plain(found) != _plain(wanted):
        raise SchemaError(
            where, f"is {_shown(found)}, but the parameters and measurements make {_shown(wanted)}"
        )


def _plain(value: Any) -> Any:
    """Lists and tuples alike, ints and equal floats alike, bools kept apart from numbers."""
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, bool) or value is None:
        return (type(value).__name__, value)
    return value


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, int | list | dict) else describe(value)
