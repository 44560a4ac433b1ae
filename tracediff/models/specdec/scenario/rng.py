"""Counter-based randomness keyed by what a draw is about.

Every random draw in tracediff is a pure function of a key (scenario seed, a purpose tag,
then whatever the draw is about: request, round, depth...). There is no shared stream, so
a difference early in a run never reshuffles the draws after it, and the same key gives
the same number on any machine and Python version (blake2b over a fixed byte layout).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any

_SCALE = 1.0 / float(1 << 64)
# The simulated engine makes several draws per lane per round, so a draw is kept cheap
# without changing its value: the hash of (seed, parts, tag) is taken from a copy of a
# blake2b state that has already absorbed the seed (copying a state costs half of building
# one), the parts are packed by a Struct built once per arity, the tag's bytes are kept.
_PARTS = tuple(struct.Struct(f">{arity}q").pack for arity in range(8))
_SEED = struct.Struct(">q").pack
_U64 = struct.Struct(">Q").unpack
_TAGS: dict[str, bytes] = {}
_SEEDED: dict[int, Any] = {}  # seed -> blake2b state after the seed's 8 bytes


def _seeded(seed: int) -> Any:
    state = _SEEDED.get(seed)
    if state is None:
        if len(_SEEDED) > 4096:  # one per scenario seen: keep the cache bounded
            _SEEDED.clear()
        state = _SEEDED[seed] = hashlib.blake2b(_SEED(seed), digest_size=8)
    return state


def _tag(tag: str) -> bytes:
    key = _TAGS[tag] = tag.encode("ascii")
    return key


def _digest(seed: int, tag: str, parts: tuple[int, ...]) -> int:
    state = _SEEDED.get(seed) or _seeded(seed)
    key = _TAGS.get(tag) or _tag(tag)
    arity = len(parts)
    pack = _PARTS[arity] if arity < len(_PARTS) else struct.Struct(f">{arity}q").pack
    hasher = state.copy()
    hasher.update(pack(*parts) + key)
    value: int = _U64(hasher.digest())[0]
    return value


# uniform repeats _digest's body: a draw is a few C calls, and the simulated engine makes
# several per lane per round, so a call frame less is a fifth less.
def uniform(seed: int, tag: str, *parts: int) -> float:
    """A float in [0, 1) determined by (seed, tag, parts)."""
    state = _SEEDED.get(seed) or _seeded(seed)
    key = _TAGS.get(tag) or _tag(tag)
    arity = len(parts)
    pack = _PARTS[arity] if arity < len(_PARTS) else struct.Struct(f">{arity}q").pack
    hasher = state.copy()
    hasher.update(pack(*parts) + key)
    value: float = _U64(hasher.digest())[0] * _SCALE
    return value


def randint(seed: int, tag: str, low: int, high: int, *parts: int) -> int:
    """An integer in [low, high] (inclusive) determined by (seed, tag, parts)."""
    if high < low:
        raise ValueError(f"empty range [{low}, {high}]")
    return low + _digest(seed, tag, parts) % (high - low + 1)


def chance(seed: int, tag: str, probability: float, *parts: int) -> bool:
    """True with the given probability, determined by (seed, tag, parts)."""
    return uniform(seed, tag, *parts) < probability


def leading_below(
    seed: int, tag: str, first: int, second: int, thresholds: Sequence[float], count: int
) -> int:
    """How many of depths 1..``count`` pass in a row: the largest d such that
    ``uniform(seed, tag, first, second, k) < thresholds[k - 1]`` for every k <= d. The same
    draws as that loop (the simulated engine's acceptance run), with the key's common part
    packed once."""
    state = _SEEDED.get(seed) or _seeded(seed)
    key = _TAGS.get(tag) or _tag(tag)
    prefix = _PARTS[2](first, second)
    depth_of = _PARTS[1]
    for depth in range(1, count + 1):
        hasher = state.copy()
        hasher.update(prefix + depth_of(depth) + key)
        if _U64(hasher.digest())[0] * _SCALE >= thresholds[depth - 1]:
            return depth - 1
    return count
