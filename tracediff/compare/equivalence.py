"""Decision equivalence: records that decide the same, with floats within N ULPs.

Byte identity is the default and the claim tracediff exists to make. A port to another
language may still compute a transcendental or a reordered sum one ULP differently from
CPython; ``--equivalence decisions --ulps N`` accepts exactly that and nothing else: every
key, every integer, boolean, string and list length equal, every float within ``N`` ULPs of
the other (NaN never matches). Results say how many floats differed and by how much, and
every report labels the mode, so that nobody mistakes it for byte identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracediff.compare.floats import ulp_distance
from tracediff.errors import UsageError

BYTES, DECISIONS = "bytes", "decisions"
MODES = (BYTES, DECISIONS)


@dataclass(frozen=True)
class Equivalence:
    """How records are compared: ``bytes`` (identity) or ``decisions`` within ``ulps``."""

    mode: str = BYTES
    ulps: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"--equivalence {self.mode!r}: choose one of {', '.join(MODES)}")
        if self.ulps < 0:
            raise UsageError(f"--ulps must be 0 or more, got {self.ulps}")
        if self.mode == BYTES and self.ulps:
            raise UsageError("--ulps needs --equivalence decisions (bytes compare exactly)")

    @property
    def tolerant(self) -> bool:
        return self.mode == DECISIONS

    @property
    def label(self) -> str:
        if self.mode == BYTES:
            return "byte identity"
        unit = "ULP" if self.ulps == 1 else "ULPs"
        return f"decision equivalence (floats within {self.ulps} {unit}; NOT byte identity)"


@dataclass(frozen=True)
class FloatTally:
    """Floats that differed (within the tolerance) and the largest distance among them."""

    floats: int = 0
    max_ulps: int = 0

    def __add__(self, other: FloatTally) -> FloatTally:
        return FloatTally(self.floats + other.floats, max(self.max_ulps, other.max_ulps))


def within(a: Any, b: Any, ulps: int) -> FloatTally | None:
    """The floats by which ``a`` and ``b`` differ, or None if they differ in anything else
    (a type, a key, its order, a length, a non-float value, or a float beyond ``ulps``)."""
    floats = 0
    worst = 0
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return None
        if isinstance(x, float):
            if x == y and math.copysign(1.0, x) == math.copysign(1.0, y):
                continue  # the same double (NaN is never equal, so never matches)
            distance = ulp_distance(x, y)
            if distance is None or distance > ulps:
                return None
            floats += 1  # +0.0 against -0.0 counts, at a distance of 0
            worst = max(worst, distance)
        elif isinstance(x, dict):
            if list(x) != list(y):
                return None
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list | tuple):
            if len(x) != len(y):
                return None
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return None
    return FloatTally(floats, worst)
