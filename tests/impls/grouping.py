"""A reference whose padding pruning groups candidates without the prefill row.

The reference prunes a candidate only by one of its own group: the same kind, cohort *and*
prefill row (a candidate that carries a waiting prompt's prefill chunk is compared only with
others that carry it). Grouping by (kind, cohort) alone lets a decode-only candidate, which
is shorter, prune the prefill candidate of the same shape: a waiting prompt is then never
prefilled alongside the lanes it could join. The first divergence is a *decision* (the
pruned set). It needs only a decoding lane and one prompt waiting to be prefilled.
"""

from __future__ import annotations

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler


class PrefillBlindGroupScheduler(ReferenceScheduler):
    name = "prefill-blind-group"

    def prune(self, candidates: list[Candidate]) -> dict[int, int]:
        pruned: dict[int, int] = {}
        for x in candidates:
            for y in candidates:
                if y is x or (y.kind, y.cohort) != (x.kind, x.cohort):  # the bug: no prefill
                    continue
                if F.dominates(
                    y.expected, y.duration, y.shape(), x.expected, x.duration, x.shape()
                ):
                    pruned[x.id] = y.id
                    break
        return pruned
