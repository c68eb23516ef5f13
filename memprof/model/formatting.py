"""Number formatting shared by every renderer: nvprof's time style, bytes, bandwidth."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import TypeVar

_TIME_UNITS = (("us", 1e3), ("ms", 1e6), ("s", 1e9))

K = TypeVar("K")  # what a sentence is said of: a GPU's index, a pair of them


def format_nvprof_time(nanoseconds: float) -> str:
    """A duration as nvprof prints it: 666ns, 41.022us, 5.7688ms, 127.27ms (under 1 us whole
    nanoseconds; above, five significant digits in the unit keeping the integer under 1000)."""
    if not math.isfinite(nanoseconds) or nanoseconds < 0:
        raise ValueError(f"not a duration: {nanoseconds!r}")
    if round(nanoseconds) < 1000:
        return f"{round(nanoseconds)}ns"
    for unit, scale in _TIME_UNITS:
        # 999.6ns rounds up into the next unit: print it as 1.0000us, not 0.9996us.
        value = max(nanoseconds / scale, 1.0)
        text = _five_significant(value)
        if float(text) < 1000 or unit == "s":
            return f"{text}{unit}"
    raise AssertionError("unreachable")


def _five_significant(value: float) -> str:
    integer_digits = len(str(int(value)))  # 1 for values under 1, as for 1 to 9
    decimals = max(0, 5 - integer_digits)
    text = f"{value:.{decimals}f}"
    # Rounding can add a digit (9.99995 -> 10.0000): keep five significant digits.
    if len(text.replace(".", "")) > 5 and decimals > 0:
        text = f"{value:.{decimals - 1}f}"
    return text


def format_ms(milliseconds: float) -> str:
    """A duration in milliseconds, in nvprof's style."""
    return format_nvprof_time(milliseconds * 1e6)


TIME_UNITS_NS = {"ns": 1, "us": 1000, "ms": 1_000_000, "s": 1_000_000_000}


def nvprof_unit(nanoseconds: float) -> str:
    """The unit nvprof would print a duration in: ns, us, ms or s."""
    return format_nvprof_time(nanoseconds).lstrip("0123456789.")


def in_unit(time_text: str, unit: str) -> str:
    """A time as nvprof printed it, in `unit`, the same digits: "16.720us" -> "0.016720" (ms)."""
    digits = time_text.rstrip("nsmu")
    shift = round(math.log10(TIME_UNITS_NS[time_text[len(digits) :]] / TIME_UNITS_NS[unit]))
    scaled = Decimal(digits).scaleb(shift)
    return f"{scaled:f}"


def format_percent(fraction: float) -> str:
    """A fraction as nvprof's Time(%) column: two decimals."""
    return f"{fraction * 100:.2f}%"


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(count: int | float) -> str:
    """Binary units, as sizes are chosen in powers of two: 16 MiB, 1.5 GiB, 4 KiB."""
    value = float(count)
    for unit in _BYTE_UNITS[:-1]:
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.4g} {unit}"
        value /= 1024
    return f"{value:.4g} {_BYTE_UNITS[-1]}"


def bandwidth_gb_per_s(byte_count: float, milliseconds: float) -> float:
    """Decimal GB/s (10^9 bytes per second), as NVIDIA quotes link and memory bandwidth."""
    if milliseconds <= 0:
        return math.inf
    return byte_count / (milliseconds * 1e-3) / 1e9


def format_gb_per_s(value: float) -> str:
    """Bandwidth with three significant digits, more for large values: 0.512, 25.3, 3012."""
    if not math.isfinite(value):
        return "-"
    shown = float(f"{value:.3g}")  # 9.996 shows as 10.0, not 10.00: the decade it rounds into
    if shown >= 100:
        return f"{value:.0f}"
    if shown >= 10:
        return f"{value:.1f}"
    if shown >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_ratio(value: float) -> str:
    """A speed-up or slow-down factor: 2.31x, 0.47x."""
    if not math.isfinite(value):
        return "-"
    return f"{value:.2f}x"


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`count` with its noun agreeing: "1 copy", "2 copies", "0 GPU page-fault groups"."""
    return f"{count} {singular if count == 1 else plural_form or singular + 's'}"


def gpu_names(indices: Iterable[int]) -> str:
    """GPUs by index, runs of three or more as a range: "GPU 2", "GPUs 0-3, 5", "GPUs 0, 1"."""
    found = sorted(set(indices))
    parts, start = [], 0
    for end in range(len(found)):
        if end + 1 == len(found) or found[end + 1] != found[end] + 1:
            run = found[start : end + 1]
            parts += [f"{run[0]}-{run[-1]}"] if len(run) > 2 else [str(i) for i in run]
            start = end + 1
    return f"GPU{'s' if len(found) > 1 else ''} {', '.join(parts)}"


def said_once(
    said: Sequence[tuple[K, str]],
    named: Callable[[list[K]], str],
    every: str = "",
    others: str = "",
) -> list[str]:
    """A line per distinct sentence, after what it is said of ("GPUs 0-3: ..."). `every`: a
    sentence said of all is said of it; `others`: one said of most comes last, of "the other N"."""
    groups: dict[str, list[K]] = {}
    for key, text in said:
        groups.setdefault(text, []).append(key)
    if every and len(groups) == 1 and len(said) > 1:
        return [f"{every}: {next(iter(groups))}"]
    most = max(groups, key=lambda text: len(groups[text]), default="")
    folded = bool(others) and len(groups) > 1 and 2 * len(groups.get(most, ())) > len(said)
    lines = [
        f"{named(keys)}: {text}" for text, keys in groups.items() if not folded or text != most
    ]
    if folded:
        lines.append(f"the other {len(groups[most])} {others}: {most}")
    return lines
