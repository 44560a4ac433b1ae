"""Signatures: divergences grouped by kind and field path with its indices elided.

Two scenarios that diverge at ``plan 12 › pruned[3]`` and ``plan 80 › pruned[0]`` share the
signature ``decision · plan › pruned[*]``: most likely one bug. Each group names its
smallest scenario (fewest requests, then fewest plans), the one to debug first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from tracediff.compare.model import Divergence, Signature, SignatureGroup


def group_signatures(divergences: Iterable[Divergence]) -> tuple[SignatureGroup, ...]:
    """Groups, the most frequent first (then by signature, for a stable order)."""
    members: dict[Signature, list[Divergence]] = {}
    for divergence in divergences:
        members.setdefault(divergence.signature, []).append(divergence)
    groups = [
        SignatureGroup(
            signature=signature,
            count=len(found),
            smallest=min(found, key=_rank),
            labels=tuple(d.label for d in found),
            causes=_causes(found),
        )
        for signature, found in members.items()
    ]
    groups.sort(key=lambda g: (-g.count, g.signature))
    return tuple(groups)


def _causes(found: list[Divergence]) -> tuple[str, ...]:
    """Where the states first differed, most frequent first; a cause that not every scenario
    of the group shares says in how many it does, so that the table and the smallest
    scenario's panel (which may be one whose states agreed) tell one story."""
    counts = Counter(d.state.cause for d in found if d.state is not None)
    ordered = sorted(counts.items(), key=lambda c: (-c[1], c[0]))
    return tuple(
        cause if n == len(found) else f"{cause} (in {n} of {len(found)} scenarios)"
        for cause, n in ordered
    )


SLIM_CHANGES = 10
SLIM_NOTE = "context omitted: it is kept for the smallest scenario of this signature"


def slim(divergence: Divergence) -> Divergence:
    """The divergence without its context and timeline (its headline and changes stay)."""
    return replace(
        divergence,
        changes=divergence.changes[:SLIM_CHANGES],
        context=(),
        timeline_a=(),
        timeline_b=(),
        notes=(*divergence.notes, SLIM_NOTE),
    )


class Condenser:
    """Collects divergences, keeping the full explanation only for each signature's smallest.

    A run with thousands of findings would otherwise hold thousands of contexts (tens of kB
    each); this keeps memory bounded by the number of signatures. Order is preserved.
    """

    def __init__(self) -> None:
        self.items: list[Divergence] = []
        self._smallest: dict[Signature, int] = {}

    def add(self, divergence: Divergence) -> None:
        signature = divergence.signature
        best = self._smallest.get(signature)
        if best is None or _rank(divergence) < _rank(self.items[best]):
            if best is not None:
                self.items[best] = slim(self.items[best])
            self._smallest[signature] = len(self.items)
            self.items.append(divergence)
        else:
            self.items.append(slim(divergence))


def _rank(divergence: Divergence) -> tuple[tuple[int, int], str, int]:
    return (divergence.size, divergence.profile, divergence.seed)
