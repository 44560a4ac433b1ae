"""A reference whose padding pruning is over-eager: it prunes on >= without the strictness.

The reference's rule: Y dominates X when E_Y >= E_X and d_Y <= d_X and Y is strictly better
somewhere (more E, less time, or a smaller shape). Without the strictness two identical
candidates prune each other. The first divergence is a *decision* (the pruned set).
"""

from __future__ import annotations

from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler


class EagerPruneScheduler(ReferenceScheduler):
    name = "eager-prune"

    def prune(self, candidates: list[Candidate]) -> dict[int, int]:
        pruned: dict[int, int] = {}
        for x in candidates:
            for y in candidates:
                if y is x or (y.kind, y.cohort, y.prefill) != (x.kind, x.cohort, x.prefill):
                    continue
                if (
                    y.expected >= x.expected
                    and y.duration <= x.duration
                    and y.shape() <= x.shape()  # the bug: <= where the reference has <
                ):
                    pruned[x.id] = y.id
                    break
        return pruned
