"""The numbers of a request trace, read exactly: counts, and times as integer microseconds.

Times are parsed from their decimal text, never through a float, so that 0.1 s is 100000 µs
on every machine, and a value past what a trace header holds (2**53) is refused.
"""

from __future__ import annotations

import re
from typing import Any

LIMIT = 2**53 - 1  # what a msgpack/JSON integer of a trace header holds exactly
_DECIMAL = re.compile(r"(\d+)(?:\.(\d*))?")


def count(value: Any, what: str) -> int:
    """A non-negative integer (JSON gives ints; CSV cells are parsed by :func:`cell_count`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is {value!r:.40}, expected a non-negative integer")
    if not 0 <= value <= LIMIT:
        raise ValueError(f"{what} is {value}, outside 0..2**53-1")
    return value


def cell_count(text: str, what: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ValueError(f"{what} is {text!r:.40}, expected a non-negative integer")
    return count(int(text[:20]), what)


def decimal_us(value: Any, unit_us: int, what: str) -> int:
    """A time of ``unit_us`` microseconds per unit (1000: ms, 1_000_000: s), from an
    integer or a plain decimal; the digits below a microsecond are cut."""
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, expected a number")
    if isinstance(value, int):
        return count(value * unit_us, what)
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} is {value!r:.40}, expected a number")
    match = _DECIMAL.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{what} is {value.strip()!r:.40}, expected a non-negative decimal")
    whole, fraction = match.group(1)[:20], (match.group(2) or "")
    digits = len(str(unit_us)) - 1  # fraction digits that are whole microseconds
    fraction = (fraction + "0" * digits)[:digits]
    return count(int(whole) * unit_us + (int(fraction) if fraction else 0), what)
