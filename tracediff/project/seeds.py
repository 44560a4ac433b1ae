"""Seed sets: the text every command's ``--seeds`` takes, and how many seeds one may name.

A seed set is model-independent: a model's profiles name theirs in the same syntax
(``"0..1055"``, ``"3,7,9"``, ``"0..9,20..29"``), and every scenario is a pure function of
(profile, seed).
"""

from __future__ import annotations

import re

from tracediff.errors import UsageError

_SEED_PART = re.compile(r"^\s*(\d+)\s*(?:(?:\.\.|-)\s*(\d+)\s*)?$")
MAX_SEED = 2**53 - 1  # seeds go into trace headers, where integers stay within ±2**53
# run, gate, selfcheck... build every scenario of their seed set before they start; more
# than this many would take hours to build and more memory than a machine has, so they are
# refused up front. A campaign builds its scenarios one at a time: it may name more.
MAX_SEEDS = 100_000
MAX_CAMPAIGN_SEEDS = 10_000_000


def parse_seeds(text: str, limit: int = MAX_SEEDS) -> tuple[int, ...]:
    """Seeds from "0..1055", "3,7,9", "0..9,20..29": ascending, without duplicates.

    Each seed is at most MAX_SEED, and the set at most ``limit`` seeds, counted before any
    is built (so a set of ten billion seeds fails at once rather than filling memory).
    """
    ranges: list[tuple[int, int]] = []
    total = 0
    for part in text.split(","):
        match = _SEED_PART.match(part)
        if not match:
            raise UsageError(
                f"bad seed set {text!r:.60} at {part!r:.40}: use N, A..B (inclusive) or a "
                "comma list"
            )
        digits = [g for g in match.groups() if g is not None]
        if any(len(d) > len(str(MAX_SEED)) or int(d) > MAX_SEED for d in digits):
            raise UsageError(
                f"seed {max(digits, key=len)[:30]} in {part.strip()!r:.40} is too large: "
                f"seeds go from 0 to {MAX_SEED} (2**53 - 1)"
            )
        low = int(digits[0])
        high = int(digits[1]) if len(digits) > 1 else low
        if high < low:
            raise UsageError(f"bad seed range {part.strip()!r}: {high} < {low}")
        total += high - low + 1
        if total > limit:
            instead = (
                "split the set across campaigns"
                if limit >= MAX_CAMPAIGN_SEEDS
                else "tracediff campaign streams up to "
                f"{MAX_CAMPAIGN_SEEDS:,}, or split the set (--resume DIR combines runs)"
            )
            raise UsageError(f"seed set {text!r:.60} is too large: over {limit:,} seeds; {instead}")
        ranges.append((low, high))
    seeds: set[int] = set()
    for low, high in ranges:
        seeds.update(range(low, high + 1))
    return tuple(sorted(seeds))
