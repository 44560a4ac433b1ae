"""Counter-based randomness keyed by what a draw is about.

Every random draw in tracediff is a pure function of a key (scenario seed, a purpose tag,
then whatever the draw is about: request, round, depth...). There is no shared stream, so
a difference early in a run never reshuffles the draws after it, and the same key gives
the same number on any machine and Python version (blake2b over a fixed byte layout).
"""

from __future__ import annotations

import hashlib
import struct

_SCALE = 1.0 / float(1 << 64)


def _digest(seed: int, tag: str, parts: tuple[int, ...]) -> int:
    payload = struct.pack(f">q{len(parts)}q", seed, *parts) + tag.encode("ascii")
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "big")


def uniform(seed: int, tag: str, *parts: int) -> float:
    """A float in [0, 1) determined by (seed, tag, parts)."""
    return _digest(seed, tag, parts) * _SCALE


def randint(seed: int, tag: str, low: int, high: int, *parts: int) -> int:
    """An integer in [low, high] (inclusive) determined by (seed, tag, parts)."""
    if high < low:
        raise ValueError(f"empty range [{low}, {high}]")
    return low + _digest(seed, tag, parts) % (high - low + 1)


def chance(seed: int, tag: str, probability: float, *parts: int) -> bool:
    """True with the given probability, determined by (seed, tag, parts)."""
    return uniform(seed, tag, *parts) < probability
