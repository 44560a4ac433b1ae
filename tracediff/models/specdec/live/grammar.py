"""The grammar of grammar lanes, applied on the host: which bytes may come next.

A deliberately small deterministic grammar: lowercase words separated by single spaces.
After a lowercase letter a letter or a space may follow; after anything else (a space, or a
prompt byte outside the grammar) only a letter. It depends on the previous byte only, so the
mask for every verified position is known on the host before the forward runs, and plain
greedy decoding applies exactly the same rule.
"""

from __future__ import annotations

LETTERS = frozenset(range(ord("a"), ord("z") + 1))
SPACE = ord(" ")
AFTER_LETTER = 0  # mask rows: what may follow a letter,
AFTER_OTHER = 1  # and what may follow anything else


def mask_row(previous: int) -> int:
    """Which of the two masks applies after byte ``previous``."""
    return AFTER_LETTER if previous in LETTERS else AFTER_OTHER


def allowed(previous: int) -> frozenset[int]:
    """The bytes that may follow ``previous``."""
    return LETTERS | {SPACE} if previous in LETTERS else LETTERS


def masks(vocab: int) -> list[list[bool]]:
    """Both mask rows over a ``vocab``-byte vocabulary, indexed by :func:`mask_row`."""
    return [
        [byte in allowed(ord("a")) for byte in range(vocab)],
        [byte in allowed(SPACE) for byte in range(vocab)],
    ]


def conforming_prefix(previous: int, tokens: list[int]) -> list[int]:
    """The longest prefix of ``tokens`` the grammar allows after ``previous``."""
    kept: list[int] = []
    for token in tokens:
        if token not in allowed(previous):
            break
        kept.append(token)
        previous = token
    return kept
