"""How far apart two float64 values are: ULP distance and relative error.

The ULP distance is the number of representable doubles between the two, computed from
their bit patterns: the patterns are mapped onto a line of integers that is monotone in the
value (negative floats mirrored below zero), so adjacent doubles are one apart, even across
zero and across binades.
"""

from __future__ import annotations

import math
import struct

_SIGN = 1 << 63
_DOUBLE = struct.Struct("<q")


def _ordinal(x: float) -> int:
    bits: int = _DOUBLE.unpack(struct.pack("<d", x))[0]
    # Signed view of the pattern: negative floats have the sign bit set (bits < 0); mirror
    # their magnitude below zero so the integer order is the float order (-0.0 maps to 0).
    return bits if bits >= 0 else -(bits & (_SIGN - 1))


def ulp_distance(a: float, b: float) -> int | None:
    """Doubles between ``a`` and ``b`` (0 when equal, +0.0 vs -0.0 included); None for NaN."""
    if math.isnan(a) or math.isnan(b):
        return None
    return abs(_ordinal(a) - _ordinal(b))


def relative_error(a: float, b: float) -> float | None:
    """``|a - b| / max(|a|, |b|)``; 0 for two zeros; None when it is undefined (NaN, inf)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0.0 else abs(a - b) / scale
